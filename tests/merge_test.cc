// SPDX-License-Identifier: Apache-2.0
//
// hwyattn_merge_states through the C ABI, per SIMD target (ctest runs the
// binary once per target with HWYATTN_TARGET).
//
//  - SplitAndMerge: random problems (causal top-left and bottom-right,
//    sliding windows, BOOL and additive masks, GQA, kv_len, Lq != Lk, F16
//    keys, permuted and padded layouts) whose keys are cut into 2..7 shards
//    at random points.
//    Each shard is an hwyattn_sdpa call on strided views of K and V (no
//    copy) that reproduces the whole problem's mask: causal and kv_len
//    and windows become a BOOL (or additive) mask slice, or kv_len a
//    per-shard kv_len, or, for the last shard of a bottom-right problem, its
//    own causal rule and windows (its positions are the whole problem's). The merge must give the
//    unsplit call within 2e-6 relative (or 4 fp32 ulps of the largest |lse|), and the oracle within
//    1e-5. With random sinks it must give the definition computed in double from the partials, the
//    oracle's unsplit problem with those sinks, and the library's unsplit call with them (2e-6).
//  - Edges: a hand-computed merge, in place, n = 1, all partials -inf (with
//    and without sinks), -inf partials holding garbage, huge lses, NaN and
//    +inf confinement, sinks along the head axis of a [T, H, Dv] view, and
//    the same bits for every call, thread count and layout.

#include <float.h>
#include <stdint.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "hwyattn.h"
#include "tests/reference.h"
#include "tests/test_util.h"

namespace hwyattn_test {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// One fp32 ulp at |x|.
double Ulp(double x) {
  x = std::fabs(x);
  if (x < FLT_MIN) return std::ldexp(1.0, -149);
  int e;
  std::frexp(x, &e);
  return std::ldexp(1.0, e - 24);
}

// The contract's tolerance for a split-and-merge: 2e-6 relative, or 4 fp32
// ulps of the largest |lse| when that is larger.
double SplitTolerance(double max_abs_lse) { return std::max(2e-6, 4.0 * Ulp(max_abs_lse)); }

std::vector<double> Dense(const TensorBuf& t) {
  std::vector<double> d(static_cast<size_t>(t.NumElements()));
  t.ForEach(
      [&](const int64_t* idx, int64_t linear) { d[static_cast<size_t>(linear)] = t.GetF32(idx); });
  return d;
}

// A random layout for a [B, H, L, Dv] tensor (rank 4) or a [1, B, H, L] lse
// (rank 3): dims permuted in memory, padded rows, gaps between elements.
Layout RandomLayout(std::mt19937& rng, bool lse) {
  Layout l;
  l.rank = lse ? 3 : 4;
  switch (rng() % 4) {
    case 0: break;
    case 1: l.order = {0, 2, 1, 3}; break;  // [B, L, H, Dv] / [H, B, L]
    case 2:
      l.order = lse ? std::array<int, 4>{0, 1, 3, 2}   // [B, L, H]: kv_attention's [T, Hq]
                    : std::array<int, 4>{2, 0, 1, 3};  // [L, B, H, Dv]
      break;
    default: l.order = {1, 0, 2, 3}; break;
  }
  if (rng() % 4 == 0) l.row_pad = 1 + static_cast<int64_t>(rng() % 3);
  if (rng() % 6 == 0) l.elem_step = 2;
  return l;
}

// The merge's partials: n outputs [B, H, L, Dv] and lses [B, H, L].
struct Partials {
  std::vector<TensorBuf> outs, lses;
  std::vector<const hwyattn_tensor*> out_ptrs, lse_ptrs;

  void Add(TensorBuf out, TensorBuf lse) {
    outs.push_back(std::move(out));
    lses.push_back(std::move(lse));
    out_ptrs.clear();
    lse_ptrs.clear();
    for (size_t i = 0; i < outs.size(); ++i) {  // descriptors move with their TensorBuf
      out_ptrs.push_back(outs[i].desc());
      lse_ptrs.push_back(lses[i].desc());
    }
  }
  int32_t n() const { return static_cast<int32_t>(outs.size()); }
};

hwyattn_status Merge(const Partials& p, const float* sinks, TensorBuf* out, TensorBuf* lse) {
  return hwyattn_merge_states(p.n(), p.out_ptrs.data(), p.lse_ptrs.data(), sinks, out->desc(),
                              lse != nullptr ? lse->desc() : nullptr);
}

// The definition, in double, from the partials as stored:
// L = log(sum_i exp(lse_i) + exp(sink)), out = sum_i exp(lse_i - L) out_i
// over the partials whose lse is not -inf.
struct Merged {
  std::vector<double> out, lse;
};
Merged MergeInDouble(const Partials& p, const Shape4& shape, const float* sinks) {
  const int64_t B = shape[0], H = shape[1], L = shape[2], Dv = shape[3];
  Merged m;
  m.out.assign(static_cast<size_t>(B * H * L * Dv), 0.0);
  m.lse.assign(static_cast<size_t>(B * H * L), 0.0);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t l = 0; l < L; ++l) {
        std::vector<double> terms;
        for (const TensorBuf& t : p.lses) {
          const int64_t idx[4] = {0, b, h, l};
          terms.push_back(t.GetF32(idx));
        }
        const double sink = sinks != nullptr ? sinks[h] : -INFINITY;
        double top = sink;
        for (double x : terms) top = std::max(top, x);
        const size_t row = static_cast<size_t>((b * H + h) * L + l);
        if (top == -INFINITY) {
          m.lse[row] = -INFINITY;
          continue;
        }
        double sum = std::exp(sink - top);
        for (double x : terms) sum += std::exp(x - top);
        const double total = top + std::log(sum);
        m.lse[row] = total;
        for (size_t i = 0; i < terms.size(); ++i) {
          if (terms[i] == -INFINITY) continue;
          const double w = std::exp(terms[i] - total);
          for (int64_t d = 0; d < Dv; ++d) {
            const int64_t idx[4] = {b, h, l, d};
            m.out[row * static_cast<size_t>(Dv) + static_cast<size_t>(d)] +=
                w * p.outs[i].GetF32(idx);
          }
        }
      }
  return m;
}

// lse element by element: -inf exactly where `want` is -inf, else within
// max(rel * max(1, |want|), abs_tol).
::testing::AssertionResult CompareLse(const char* what, const TensorBuf& got,
                                      const std::vector<double>& want, double rel, double abs_tol) {
  std::string bad;
  got.ForEach([&](const int64_t* idx, int64_t linear) {
    if (!bad.empty()) return;
    const double g = got.GetF32(idx), w = want[static_cast<size_t>(linear)];
    const bool ok = std::isinf(w) ? g == w
                                  : std::isfinite(g) &&
                                        std::fabs(g - w) <=
                                            std::max(rel * std::max(1.0, std::fabs(w)), abs_tol);
    if (!ok) {
      std::ostringstream os;
      os << what << "[" << idx[1] << "," << idx[2] << "," << idx[3] << "]: got " << g << ", want "
         << w;
      bad = os.str();
    }
  });
  if (bad.empty()) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << bad;
}

// Rows whose lse is -inf in `lse` have an exactly zero output row.
::testing::AssertionResult BlockedRowsAreZero(const TensorBuf& out,
                                              const std::vector<double>& lse) {
  int64_t bad = 0;
  const int64_t Dv = out.shape()[3];
  out.ForEach([&](const int64_t* idx, int64_t linear) {
    if (std::isinf(lse[static_cast<size_t>(linear / Dv)]) && out.GetF32(idx) != 0.0f) ++bad;
  });
  if (bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << bad << " elements of rows with lse -inf are not zero";
}

// ---------------------------------------------------------------------------
// Split and merge
// ---------------------------------------------------------------------------

struct SplitCase {
  uint32_t seed;
};
void PrintTo(const SplitCase& c, std::ostream* os) { *os << "seed" << c.seed; }

// A random whole problem (always with its lse).
Problem RandomProblem(std::mt19937& rng) {
  auto pick = [&](int64_t lo, int64_t hi) {
    return lo + static_cast<int64_t>(rng() % static_cast<uint32_t>(hi - lo + 1));
  };
  Problem p;
  p.batch = pick(1, 3);
  p.kv_heads = pick(1, 3);
  p.q_heads = p.kv_heads * pick(1, 3);
  p.q_len = rng() % 3 == 0 ? pick(1, 4) : pick(1, 48);
  p.k_len = rng() % 3 == 0 ? pick(7, 40) : pick(7, 300);
  p.dim = pick(1, 40);
  p.v_dim = pick(1, 40);
  if (rng() % 4 == 0) p.kv_batch = 1;
  if (rng() % 5 == 0) p.k_dtype = p.v_dtype = HWYATTN_F16;
  p.causal = static_cast<hwyattn_causal>(rng() % 3);
  if (rng() % 3 == 0) p.window_left = pick(1, p.k_len + 2);
  if (rng() % 5 == 0) p.window_right = pick(1, 20);
  p.q_amp = p.k_amp = rng() % 3 == 0 ? 3.0f : 1.0f;
  if (rng() % 3 == 0) p.scale = 0.5f;
  if (rng() % 2 == 0) p.q_layout.order = {0, 2, 1, 3};
  if (rng() % 2 == 0) p.k_layout.order = {0, 2, 1, 3};
  if (rng() % 3 == 0) p.v_layout.row_pad = 3;
  if (rng() % 3 != 0) {
    p.has_mask = true;
    p.mask.dtype = rng() % 2 == 0 ? HWYATTN_BOOL : HWYATTN_F32;
    p.mask.shape = {rng() % 2 ? p.batch : 1, rng() % 2 ? p.q_heads : 1, rng() % 4 ? p.q_len : 1,
                    p.k_len};
    p.mask.block_prob = rng() % 2 == 0 ? 0.25 : 0.7;
    p.mask.block_rows = rng() % 4 == 0;
  }
  if (rng() % 2 == 0) {
    for (int64_t b = 0; b < p.batch; ++b)
      p.kv_len.push_back(static_cast<int32_t>(pick(0, p.k_len)));
  }
  p.want_lse = true;
  p.lse_layout = RandomLayout(rng, true);
  p.seed = rng();
  return p;
}

// Key j of row (b, h, i) is allowed by the whole problem's causal rule and
// windows (positions: query i at i + Lk - Lq under bottom-right, else i).
bool CausalAllows(const Problem& p, int64_t i, int64_t j) {
  const int64_t pos = p.causal == HWYATTN_CAUSAL_BOTTOM_RIGHT ? i + p.k_len - p.q_len : i;
  if (p.causal != HWYATTN_CAUSAL_NONE && j > pos) return false;
  if (p.window_left > 0 && j <= pos - p.window_left) return false;
  if (p.window_right > 0 && j >= pos + p.window_right) return false;
  return true;
}

// The whole problem's mask over [B, Hq, Lq, Lk] as one dense tensor of the
// user mask's dtype (BOOL without one), with causal and/or kv_len folded in:
// the source of every shard's mask slice.
struct DenseMask {
  hwyattn_dtype dtype = HWYATTN_BOOL;
  std::vector<uint8_t> allowed;
  std::vector<float> additive;
  int64_t lk = 0;

  DenseMask(const Call& call, bool fold_causal, bool fold_kv_len) {
    const Problem& p = call.problem;
    lk = p.k_len;
    dtype = p.has_mask ? p.mask.dtype : HWYATTN_BOOL;
    const size_t n = static_cast<size_t>(p.batch * p.q_heads * p.q_len * p.k_len);
    if (dtype == HWYATTN_BOOL)
      allowed.resize(n);
    else
      additive.resize(n);
    size_t at = 0;
    for (int64_t b = 0; b < p.batch; ++b)
      for (int64_t h = 0; h < p.q_heads; ++h)
        for (int64_t i = 0; i < p.q_len; ++i)
          for (int64_t j = 0; j < p.k_len; ++j, ++at) {
            bool ok = !fold_causal || CausalAllows(p, i, j);
            if (fold_kv_len && !p.kv_len.empty()) ok = ok && j < p.kv_len[static_cast<size_t>(b)];
            double m = dtype == HWYATTN_BOOL ? 1.0 : 0.0;
            if (p.has_mask) {
              const Shape4& ms = p.mask.shape;
              const int64_t idx[4] = {ms[0] == 1 ? 0 : b, ms[1] == 1 ? 0 : h, ms[2] == 1 ? 0 : i,
                                      j};
              m = ReadElement(call.mask.tensor(), idx);
            }
            if (dtype == HWYATTN_BOOL) {
              allowed[at] = ok && m != 0.0 ? 1 : 0;
            } else {
              additive[at] = ok ? static_cast<float>(m) : -kInf;
            }
          }
  }
  // Keys [first, first + len) of every row, as a [B, Hq, Lq, len] view.
  hwyattn_tensor Slice(const Problem& p, int64_t first, int64_t len) {
    hwyattn_tensor t{};
    t.dtype = dtype;
    t.rank = 4;
    t.data = dtype == HWYATTN_BOOL ? static_cast<void*>(allowed.data() + first)
                                   : static_cast<void*>(additive.data() + first);
    const int64_t shape[4] = {p.batch, p.q_heads, p.q_len, len};
    const int64_t stride[4] = {p.q_heads * p.q_len * lk, p.q_len * lk, lk, 1};
    std::memcpy(t.shape, shape, sizeof(shape));
    std::memcpy(t.stride, stride, sizeof(stride));
    return t;
  }
};

// Keys [first, first + len) of a K or V descriptor (rank 4, length dim 2).
hwyattn_tensor KeySlice(const hwyattn_tensor& whole, int64_t first, int64_t len) {
  hwyattn_tensor t = whole;
  t.data = static_cast<unsigned char*>(whole.data) +
           first * whole.stride[2] * static_cast<int64_t>(DtypeSize(whole.dtype));
  t.shape[2] = len;
  return t;
}

class SplitAndMergeTest : public ::testing::TestWithParam<SplitCase> {};

TEST_P(SplitAndMergeTest, MatchesUnsplitCallAndOracle) {
  std::mt19937 rng(GetParam().seed);
  const Problem p = RandomProblem(rng);
  SCOPED_TRACE(ShapeName(p));
  Call whole(p);
  ASSERT_EQ(whole.Run(), HWYATTN_OK) << hwyattn_last_error();

  // Cut points: 2..7 shards of >= 1 key each.
  const int64_t shards = std::min<int64_t>(2 + rng() % 6, p.k_len);
  std::vector<int64_t> cuts = {0, p.k_len};
  while (static_cast<int64_t>(cuts.size()) < shards + 1) {
    const int64_t c = 1 + static_cast<int64_t>(rng() % static_cast<uint32_t>(p.k_len - 1));
    if (std::find(cuts.begin(), cuts.end(), c) == cuts.end()) cuts.push_back(c);
  }
  std::sort(cuts.begin(), cuts.end());

  // How each shard reproduces the whole problem's mask.
  const bool kv_len_per_shard = !p.kv_len.empty() && rng() % 2 == 0;
  const bool last_own_causal = p.causal == HWYATTN_CAUSAL_BOTTOM_RIGHT && rng() % 2 == 0;
  const bool needs_mask = p.has_mask || p.causal != HWYATTN_CAUSAL_NONE || p.window_left != 0 ||
                          p.window_right != 0 || (!p.kv_len.empty() && !kv_len_per_shard);
  DenseMask folded(whole, /*fold_causal=*/true, !kv_len_per_shard);
  DenseMask unfolded(whole, /*fold_causal=*/false, !kv_len_per_shard);
  const bool last_needs_mask = p.has_mask || (!p.kv_len.empty() && !kv_len_per_shard);

  Partials parts;
  int64_t empty_rows = 0;
  for (int64_t s = 0; s < shards; ++s) {
    const int64_t first = cuts[static_cast<size_t>(s)],
                  len = cuts[static_cast<size_t>(s) + 1] - first;
    const bool last = s + 1 == shards;
    hwyattn_sdpa_options opts;
    hwyattn_sdpa_options_init(&opts);
    opts.scale = p.scale;
    hwyattn_tensor mask{};
    if (last && last_own_causal) {
      // The whole problem's diagonal and windows: the last shard ends at Lk,
      // so its own bottom-right positions are the whole problem's minus
      // `first`, as are its keys.
      opts.causal = HWYATTN_CAUSAL_BOTTOM_RIGHT;
      opts.window_left = p.window_left;
      opts.window_right = p.window_right;
      if (last_needs_mask) mask = unfolded.Slice(p, first, len);
    } else if (needs_mask) {
      mask = folded.Slice(p, first, len);
    }
    if (mask.data != nullptr) opts.mask = &mask;
    std::vector<int32_t> kv_len;
    if (kv_len_per_shard) {
      for (int32_t n : p.kv_len) {
        kv_len.push_back(static_cast<int32_t>(std::clamp<int64_t>(n - first, 0, len)));
      }
      opts.kv_len = kv_len.data();
    }
    TensorBuf out(HWYATTN_F32, {p.batch, p.q_heads, p.q_len, p.v_dim}, RandomLayout(rng, false));
    TensorBuf lse(HWYATTN_F32, {1, p.batch, p.q_heads, p.q_len}, RandomLayout(rng, true));
    out.FillPattern(kOutputSentinel);
    lse.FillPattern(kOutputSentinel);
    opts.lse = lse.desc();
    const hwyattn_tensor k = KeySlice(whole.k.tensor(), first, len);
    const hwyattn_tensor v = KeySlice(whole.v.tensor(), first, len);
    ASSERT_EQ(hwyattn_sdpa(whole.q.desc(), &k, &v, out.desc(), &opts), HWYATTN_OK)
        << "shard " << s << ": " << hwyattn_last_error();
    lse.ForEach([&](const int64_t* idx, int64_t) { empty_rows += lse.GetF32(idx) == -kInf; });
    parts.Add(std::move(out), std::move(lse));
  }
  RecordProperty("shard_rows_with_no_key", static_cast<int>(empty_rows));

  const Shape4 shape = {p.batch, p.q_heads, p.q_len, p.v_dim};
  TensorBuf merged(HWYATTN_F32, shape, RandomLayout(rng, false));
  TensorBuf merged_lse(HWYATTN_F32, {1, p.batch, p.q_heads, p.q_len}, RandomLayout(rng, true));
  merged.FillPattern(kOutputSentinel);
  merged_lse.FillPattern(kOutputSentinel);
  const std::vector<unsigned char> out_before = merged.Snapshot(),
                                   lse_before = merged_lse.Snapshot();
  ASSERT_EQ(Merge(parts, nullptr, &merged, &merged_lse), HWYATTN_OK) << hwyattn_last_error();

  // Against the unsplit call.
  const std::vector<double> want = Dense(whole.out), want_lse = Dense(whole.lse);
  double max_lse = 0.0;
  for (double x : want_lse) {
    if (std::isfinite(x)) max_lse = std::max(max_lse, std::fabs(x));
  }
  const double tol = SplitTolerance(max_lse);
  EXPECT_TRUE(CompareRelative("merged out vs unsplit", merged, want, tol));
  EXPECT_TRUE(CompareLse("merged lse vs unsplit", merged_lse, want_lse, 2e-6, 4.0 * Ulp(max_lse)));
  EXPECT_TRUE(BlockedRowsAreZero(merged, want_lse));
  std::string detail;
  EXPECT_TRUE(merged.UntouchedOutside(out_before, &detail)) << "out: " << detail;
  EXPECT_TRUE(merged_lse.UntouchedOutside(lse_before, &detail)) << "lse_out: " << detail;

  // Against the oracle.
  RefResult ref;
  std::string error;
  ASSERT_TRUE(ReferenceSdpa(whole.q.tensor(), whole.k.tensor(), whole.v.tensor(), &whole.opts, &ref,
                            &error))
      << error;
  EXPECT_TRUE(CompareRelative("merged out vs oracle", merged, ref.out, 1e-5));

  // With sinks (some off): the definition from the partials, and the
  // oracle's unsplit problem with the sinks.
  std::vector<float> sinks(static_cast<size_t>(p.q_heads));
  std::uniform_real_distribution<float> logit(-3.0f, 6.0f);
  for (float& z : sinks) z = rng() % 4 == 0 ? -kInf : logit(rng);
  TensorBuf sunk(HWYATTN_F32, shape, RandomLayout(rng, false));
  TensorBuf sunk_lse(HWYATTN_F32, {1, p.batch, p.q_heads, p.q_len}, RandomLayout(rng, true));
  ASSERT_EQ(Merge(parts, sinks.data(), &sunk, &sunk_lse), HWYATTN_OK) << hwyattn_last_error();
  const Merged def = MergeInDouble(parts, shape, sinks.data());
  EXPECT_TRUE(CompareRelative("merged out with sinks vs double merge", sunk, def.out, 1e-6));
  EXPECT_TRUE(CompareLse("merged lse with sinks vs double merge", sunk_lse, def.lse, 2e-7, 0.0));
  hwyattn_sdpa_options with_sinks = whole.opts;
  with_sinks.sinks = sinks.data();
  RefResult ref_sinks;
  ASSERT_TRUE(ReferenceSdpa(whole.q.tensor(), whole.k.tensor(), whole.v.tensor(), &with_sinks,
                            &ref_sinks, &error))
      << error;
  EXPECT_TRUE(CompareRelative("merged out with sinks vs oracle", sunk, ref_sinks.out, 1e-5));
  EXPECT_TRUE(CompareLse("merged lse with sinks vs oracle", sunk_lse, ref_sinks.lse, 1e-5, 0.0));
  // And the library's own unsplit call with the sinks (hwyattn.h: shards
  // computed without sinks, merged with them, give the unsplit result).
  Problem with = p;
  with.sinks = sinks;
  Call whole_sinks(with);
  ASSERT_EQ(whole_sinks.Run(), HWYATTN_OK) << hwyattn_last_error();
  const std::vector<double> want_sinks_lse = Dense(whole_sinks.lse);
  double max_sink_lse = 0.0;
  for (double x : want_sinks_lse) {
    if (std::isfinite(x)) max_sink_lse = std::max(max_sink_lse, std::fabs(x));
  }
  EXPECT_TRUE(CompareRelative("merged out with sinks vs unsplit with sinks", sunk,
                              Dense(whole_sinks.out), SplitTolerance(max_sink_lse)));
  EXPECT_TRUE(CompareLse("merged lse with sinks vs unsplit with sinks", sunk_lse, want_sinks_lse,
                         2e-6, 4.0 * Ulp(max_sink_lse)));
}

std::vector<SplitCase> SplitCases() {
  std::vector<SplitCase> c;
  for (uint32_t s = 1; s <= 300; ++s) c.push_back({s});
  return c;
}

INSTANTIATE_TEST_SUITE_P(Merge, SplitAndMergeTest, ::testing::ValuesIn(SplitCases()),
                         [](const ::testing::TestParamInfo<SplitCase>& info) {
                           return "seed" + std::to_string(info.param.seed);
                         });

// ---------------------------------------------------------------------------
// Edges
// ---------------------------------------------------------------------------

TensorBuf Dense4(const Shape4& shape, const std::vector<float>& values) {
  TensorBuf t(HWYATTN_F32, shape, Layout{});
  t.ForEach([&](const int64_t* idx, int64_t linear) {
    t.SetF32(idx, values[static_cast<size_t>(linear)]);
  });
  return t;
}
TensorBuf DenseLse(const Shape4& shape, const std::vector<float>& values) {
  TensorBuf t(HWYATTN_F32, {1, shape[0], shape[1], shape[2]}, Layout{3, {0, 1, 2, 3}, {}, 1, 0, 0});
  t.ForEach([&](const int64_t* idx, int64_t linear) {
    t.SetF32(idx, values[static_cast<size_t>(linear)]);
  });
  return t;
}

// Random partials of `shape`: outputs in [-1, 1], lses in [lo, hi] with
// some -inf rows (a shard that saw no key of the row).
Partials RandomPartials(std::mt19937& rng, const Shape4& shape, int n, float lo, float hi,
                        bool random_layouts) {
  Partials parts;
  std::uniform_real_distribution<float> value(-1.0f, 1.0f), lse(lo, hi);
  for (int i = 0; i < n; ++i) {
    TensorBuf o(HWYATTN_F32, shape, random_layouts ? RandomLayout(rng, false) : Layout{});
    TensorBuf l(HWYATTN_F32, {1, shape[0], shape[1], shape[2]},
                random_layouts ? RandomLayout(rng, true) : Layout{3, {0, 1, 2, 3}, {}, 1, 0, 0});
    o.FillRandom(&rng, -1.0f, 1.0f);
    l.ForEach(
        [&](const int64_t* idx, int64_t) { l.SetF32(idx, rng() % 5 == 0 ? -kInf : lse(rng)); });
    parts.Add(std::move(o), std::move(l));
  }
  return parts;
}

std::vector<unsigned char> Bits(const TensorBuf& t) {
  std::vector<unsigned char> b;
  t.ForEach([&](const int64_t* idx, int64_t) {
    const float f = t.GetF32(idx);
    const unsigned char* c = reinterpret_cast<const unsigned char*>(&f);
    b.insert(b.end(), c, c + sizeof(f));
  });
  return b;
}

TEST(MergeEdges, HandComputed) {
  // Row 0: lses 0 and log 3: weights 1/4 and 3/4, L = log 4.
  // Row 1: lses -inf and 2: the second alone, L = 2.
  // Row 2: both -inf: zeros, L = -inf.
  const Shape4 shape = {1, 1, 3, 2};
  Partials parts;
  parts.Add(Dense4(shape, {4, 8, kNaN, kInf, 1, 1}), DenseLse(shape, {0.0f, -kInf, -kInf}));
  parts.Add(Dense4(shape, {0, -4, 5, 6, 2, 2}),
            DenseLse(shape, {static_cast<float>(std::log(3.0)), 2.0f, -kInf}));
  TensorBuf out(HWYATTN_F32, shape, Layout{}), lse = DenseLse(shape, {0, 0, 0});
  ASSERT_EQ(Merge(parts, nullptr, &out, &lse), HWYATTN_OK) << hwyattn_last_error();
  const std::vector<double> got = Dense(out), got_lse = Dense(lse);
  EXPECT_NEAR(got[0], 1.0, 1e-6);
  EXPECT_NEAR(got[1], 2.0 - 3.0, 1e-6);
  EXPECT_EQ(got[2], 5.0);
  EXPECT_EQ(got[3], 6.0);
  EXPECT_EQ(got[4], 0.0);
  EXPECT_EQ(got[5], 0.0);
  EXPECT_NEAR(got_lse[0], std::log(4.0), 1e-6);
  EXPECT_EQ(got_lse[1], 2.0);
  EXPECT_EQ(got_lse[2], -INFINITY);

  // A sink of log 4 on that row 0 doubles the denominator: weights 1/8 and
  // 3/8, L = log 8; row 2 (no partial) gets zeros and L = the sink.
  const float sink = static_cast<float>(std::log(4.0));
  ASSERT_EQ(Merge(parts, &sink, &out, &lse), HWYATTN_OK) << hwyattn_last_error();
  const std::vector<double> s = Dense(out), s_lse = Dense(lse);
  EXPECT_NEAR(s[0], 0.5, 1e-6);
  EXPECT_NEAR(s[1], (8.0 - 12.0) / 8.0, 1e-6);
  // Row 1: the partial's e^2 against the sink's 4.
  const double e2 = std::exp(2.0);
  EXPECT_NEAR(s[2], 5.0 * e2 / (e2 + 4.0), 1e-6);
  EXPECT_NEAR(s[3], 6.0 * e2 / (e2 + 4.0), 1e-6);
  EXPECT_EQ(s[4], 0.0);
  EXPECT_EQ(s[5], 0.0);
  EXPECT_NEAR(s_lse[0], std::log(8.0), 1e-6);
  EXPECT_NEAR(s_lse[1], std::log(e2 + 4.0), 1e-6);
  EXPECT_EQ(s_lse[2], sink);
}

// Copies the values (all logical elements) of `from` into `to`.
void CopyValues(const TensorBuf& from, TensorBuf* to) {
  to->ForEach([&](const int64_t* idx, int64_t) { to->SetF32(idx, from.GetF32(idx)); });
}

// The same partials in other layouts (values copied).
Partials Relayout(const Partials& p, std::mt19937& rng) {
  Partials q;
  for (int i = 0; i < p.n(); ++i) {
    TensorBuf o(HWYATTN_F32, p.outs[static_cast<size_t>(i)].shape(), RandomLayout(rng, false));
    TensorBuf l(HWYATTN_F32, p.lses[static_cast<size_t>(i)].shape(), RandomLayout(rng, true));
    o.FillPattern(kOutputSentinel);
    l.FillPattern(kOutputSentinel);
    CopyValues(p.outs[static_cast<size_t>(i)], &o);
    CopyValues(p.lses[static_cast<size_t>(i)], &l);
    q.Add(std::move(o), std::move(l));
  }
  return q;
}

TEST(MergeEdges, InPlaceGivesTheSameBits) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 20; ++trial) {
    const Shape4 shape = {1 + trial % 2, 1 + trial % 3, 1 + trial % 7, 1 + (trial * 5) % 37};
    const Partials parts = RandomPartials(rng, shape, 1 + trial % 5, -5.0f, 5.0f, true);
    std::vector<float> sinks(static_cast<size_t>(shape[1]), 0.5f);
    const float* s = trial % 2 ? sinks.data() : nullptr;
    TensorBuf out(HWYATTN_F32, shape, RandomLayout(rng, false));
    TensorBuf lse(HWYATTN_F32, {1, shape[0], shape[1], shape[2]}, RandomLayout(rng, true));
    ASSERT_EQ(Merge(parts, s, &out, &lse), HWYATTN_OK) << hwyattn_last_error();

    Partials in_place = Relayout(parts, rng);
    const std::vector<unsigned char> before0 = in_place.outs[0].Snapshot();
    const std::vector<unsigned char> lse_before0 = in_place.lses[0].Snapshot();
    ASSERT_EQ(Merge(in_place, s, &in_place.outs[0], &in_place.lses[0]), HWYATTN_OK)
        << hwyattn_last_error();
    EXPECT_EQ(Bits(in_place.outs[0]), Bits(out)) << "trial " << trial;
    EXPECT_EQ(Bits(in_place.lses[0]), Bits(lse)) << "trial " << trial;
    std::string detail;
    EXPECT_TRUE(in_place.outs[0].UntouchedOutside(before0, &detail)) << detail;
    EXPECT_TRUE(in_place.lses[0].UntouchedOutside(lse_before0, &detail)) << detail;
  }
}

TEST(MergeEdges, SinglePartialIsACopy) {
  std::mt19937 rng(11);
  for (int trial = 0; trial < 10; ++trial) {
    const Shape4 shape = {2, 3, 1 + trial, 1 + trial * 7};
    const Partials parts = RandomPartials(rng, shape, 1, -20.0f, 20.0f, true);
    TensorBuf out(HWYATTN_F32, shape, RandomLayout(rng, false));
    TensorBuf lse(HWYATTN_F32, {1, 2, 3, shape[2]}, RandomLayout(rng, true));
    ASSERT_EQ(Merge(parts, nullptr, &out, &lse), HWYATTN_OK) << hwyattn_last_error();
    EXPECT_EQ(Bits(lse), Bits(parts.lses[0]));
    // The output rows of finite lses exactly; the -inf rows are zeros.
    const std::vector<double> lses = Dense(parts.lses[0]);
    int64_t differ = 0;
    out.ForEach([&](const int64_t* idx, int64_t linear) {
      const bool blocked = std::isinf(lses[static_cast<size_t>(linear / shape[3])]);
      const float want = blocked ? 0.0f : parts.outs[0].GetF32(idx), got = out.GetF32(idx);
      uint32_t a, b;
      std::memcpy(&a, &want, sizeof(a));
      std::memcpy(&b, &got, sizeof(b));
      differ += a != b;
    });
    EXPECT_EQ(differ, 0) << "trial " << trial;
    // lse_out may be NULL.
    TensorBuf alone(HWYATTN_F32, shape, Layout{});
    ASSERT_EQ(Merge(parts, nullptr, &alone, nullptr), HWYATTN_OK) << hwyattn_last_error();
    EXPECT_EQ(Bits(alone), Bits(out));
  }
}

TEST(MergeEdges, AllMinusInfinityGivesZeros) {
  const Shape4 shape = {2, 3, 4, 9};
  Partials parts;
  for (int i = 0; i < 3; ++i) {
    TensorBuf o(HWYATTN_F32, shape, Layout{});
    o.FillPattern(kOutputSentinel);  // NaN: must not reach the result
    TensorBuf l(HWYATTN_F32, {1, 2, 3, 4}, Layout{3, {0, 1, 2, 3}, {}, 1, 0, 0});
    l.ForEach([&](const int64_t* idx, int64_t) { l.SetF32(idx, -kInf); });
    parts.Add(std::move(o), std::move(l));
  }
  TensorBuf out(HWYATTN_F32, shape, Layout{}),
      lse(HWYATTN_F32, {1, 2, 3, 4}, Layout{3, {0, 1, 2, 3}, {}, 1, 0, 0});
  out.FillPattern(kOutputSentinel);
  ASSERT_EQ(Merge(parts, nullptr, &out, &lse), HWYATTN_OK) << hwyattn_last_error();
  out.ForEach([&](const int64_t* idx, int64_t) { ASSERT_EQ(out.GetF32(idx), 0.0f); });
  lse.ForEach([&](const int64_t* idx, int64_t) { ASSERT_EQ(lse.GetF32(idx), -kInf); });
  // With sinks: zeros, and lse = the sink (-inf where the sink is off).
  const float sinks[3] = {1.5f, -kInf, -40.0f};
  out.FillPattern(kOutputSentinel);
  ASSERT_EQ(Merge(parts, sinks, &out, &lse), HWYATTN_OK) << hwyattn_last_error();
  out.ForEach([&](const int64_t* idx, int64_t) { ASSERT_EQ(out.GetF32(idx), 0.0f); });
  lse.ForEach([&](const int64_t* idx, int64_t) { ASSERT_EQ(lse.GetF32(idx), sinks[idx[2]]); });
}

TEST(MergeEdges, MinusInfinityPartialsContributeNothingWhateverTheyHold) {
  std::mt19937 rng(13);
  const Shape4 shape = {2, 2, 5, 19};
  const Partials parts = RandomPartials(rng, shape, 3, -4.0f, 4.0f, false);
  TensorBuf want(HWYATTN_F32, shape, Layout{}),
      want_lse(HWYATTN_F32, {1, 2, 2, 5}, Layout{3, {0, 1, 2, 3}, {}, 1, 0, 0});
  ASSERT_EQ(Merge(parts, nullptr, &want, &want_lse), HWYATTN_OK) << hwyattn_last_error();
  // The same partials with empty ones (lse -inf, outputs NaN, +inf, -inf)
  // inserted first, between and last.
  for (int where = 0; where <= 3; ++where) {
    Partials with;
    for (int i = 0; i <= 3; ++i) {
      if (i == where) {
        TensorBuf o(HWYATTN_F32, shape, Layout{});
        o.ForEach([&](const int64_t* idx, int64_t linear) {
          o.SetF32(idx, linear % 3 == 0 ? kNaN : linear % 3 == 1 ? kInf : -kInf);
        });
        TensorBuf l(HWYATTN_F32, {1, 2, 2, 5}, Layout{3, {0, 1, 2, 3}, {}, 1, 0, 0});
        l.ForEach([&](const int64_t* idx, int64_t) { l.SetF32(idx, -kInf); });
        with.Add(std::move(o), std::move(l));
      }
      if (i < 3) {
        TensorBuf o(HWYATTN_F32, shape, Layout{});
        TensorBuf l(HWYATTN_F32, {1, 2, 2, 5}, Layout{3, {0, 1, 2, 3}, {}, 1, 0, 0});
        CopyValues(parts.outs[static_cast<size_t>(i)], &o);
        CopyValues(parts.lses[static_cast<size_t>(i)], &l);
        with.Add(std::move(o), std::move(l));
      }
    }
    TensorBuf got(HWYATTN_F32, shape, Layout{}),
        got_lse(HWYATTN_F32, {1, 2, 2, 5}, Layout{3, {0, 1, 2, 3}, {}, 1, 0, 0});
    ASSERT_EQ(Merge(with, nullptr, &got, &got_lse), HWYATTN_OK) << hwyattn_last_error();
    EXPECT_EQ(Bits(got), Bits(want)) << "empty partial at " << where;
    EXPECT_EQ(Bits(got_lse), Bits(want_lse)) << "empty partial at " << where;
  }
}

TEST(MergeEdges, HugeAndTinyLses) {
  std::mt19937 rng(17);
  const Shape4 shape = {1, 2, 6, 33};
  const std::pair<float, float> ranges[] = {{1e4f, 1e4f + 3.0f},
                                            {-1e4f - 3.0f, -1e4f},
                                            {-1e30f, 1e30f},
                                            {-1.5e38f, 1.5e38f},
                                            {80.0f, 120.0f}};
  for (const auto& r : ranges) {
    Partials parts = RandomPartials(rng, shape, 4, r.first, r.second, false);
    if (r.first < -1e38f) {  // and the extremes
      const int64_t a[4] = {0, 0, 0, 1}, b[4] = {0, 0, 1, 2};
      parts.lses[1].SetF32(a, FLT_MAX);
      parts.lses[2].SetF32(a, -FLT_MAX);
      parts.lses[0].SetF32(b, -FLT_MAX);
    }
    const float sinks[2] = {r.first, -kInf};
    for (const float* s : {static_cast<const float*>(nullptr), sinks}) {
      TensorBuf out(HWYATTN_F32, shape, Layout{});
      TensorBuf lse(HWYATTN_F32, {1, 1, 2, 6}, Layout{3, {0, 1, 2, 3}, {}, 1, 0, 0});
      ASSERT_EQ(Merge(parts, s, &out, &lse), HWYATTN_OK) << hwyattn_last_error();
      const Merged want = MergeInDouble(parts, shape, s);
      EXPECT_TRUE(CompareRelative("out", out, want.out, 1e-6))
          << "lses in [" << r.first << ", " << r.second << "]";
      EXPECT_TRUE(CompareLse("lse", lse, want.lse, 2e-7, 0.0))
          << "lses in [" << r.first << ", " << r.second << "]";
    }
  }
}

TEST(MergeEdges, NaNAndInfinityStayInTheirRow) {
  std::mt19937 rng(19);
  const Shape4 shape = {2, 2, 4, 21};
  const int64_t Dv = shape[3];
  Partials parts = RandomPartials(rng, shape, 3, -3.0f, 3.0f, false);
  // Every lse finite, so that each poisoned value below is seen.
  for (TensorBuf& l : parts.lses) {
    l.ForEach([&](const int64_t* idx, int64_t linear) {
      l.SetF32(idx, 0.1f * static_cast<float>(linear % 7));
    });
  }
  TensorBuf clean(HWYATTN_F32, shape, Layout{}),
      clean_lse(HWYATTN_F32, {1, 2, 2, 4}, Layout{3, {0, 1, 2, 3}, {}, 1, 0, 0});
  ASSERT_EQ(Merge(parts, nullptr, &clean, &clean_lse), HWYATTN_OK);
  const std::vector<double> base = Dense(clean), base_lse = Dense(clean_lse);

  // Row 1 (b 0, h 0, l 1): a NaN lse in partial 1. Row 6: +inf in partial 2.
  // Row 11, element 5: NaN in partial 0's output; row 12, element 0: +inf in
  // partial 2's output.
  const int64_t r_nan = 1, r_inf = 6, r_val = 11, r_big = 12;
  auto at = [&](int64_t row, int64_t d) {
    return std::array<int64_t, 4>{row / (shape[1] * shape[2]), row / shape[2] % shape[1],
                                  row % shape[2], d};
  };
  parts.lses[1].SetF32(
      std::array<int64_t, 4>{0, at(r_nan, 0)[0], at(r_nan, 0)[1], at(r_nan, 0)[2]}.data(), kNaN);
  parts.lses[2].SetF32(
      std::array<int64_t, 4>{0, at(r_inf, 0)[0], at(r_inf, 0)[1], at(r_inf, 0)[2]}.data(), kInf);
  parts.outs[0].SetF32(at(r_val, 5).data(), kNaN);
  parts.outs[2].SetF32(at(r_big, 0).data(), kInf);
  TensorBuf out(HWYATTN_F32, shape, Layout{}),
      lse(HWYATTN_F32, {1, 2, 2, 4}, Layout{3, {0, 1, 2, 3}, {}, 1, 0, 0});
  ASSERT_EQ(Merge(parts, nullptr, &out, &lse), HWYATTN_OK) << hwyattn_last_error();
  const std::vector<double> got = Dense(out), got_lse = Dense(lse);
  for (int64_t row = 0; row < 16; ++row) {
    for (int64_t d = 0; d < Dv; ++d) {
      const double g = got[static_cast<size_t>(row * Dv + d)],
                   w = base[static_cast<size_t>(row * Dv + d)];
      if (row == r_nan || row == r_inf) {
        EXPECT_TRUE(std::isnan(g)) << "row " << row << " element " << d;
      } else if (row == r_val && d == 5) {
        EXPECT_TRUE(std::isnan(g));
      } else if (row == r_big && d == 0) {
        EXPECT_EQ(g, INFINITY);
      } else {
        EXPECT_EQ(g, w) << "row " << row << " element " << d << " changed";
      }
    }
    if (row == r_nan || row == r_inf) {
      EXPECT_TRUE(std::isnan(got_lse[static_cast<size_t>(row)])) << "row " << row;
    } else {
      EXPECT_EQ(got_lse[static_cast<size_t>(row)], base_lse[static_cast<size_t>(row)])
          << "row " << row;
    }
  }
}

// hwyattn_kv_attention's out [T, H, Dv] and lse [T, H] merge as the views
// [1, H, T, Dv] and [1, H, T]: the sinks follow dimension H.
TEST(MergeEdges, SinksFollowTheHeadAxisOfATokenMajorView) {
  const int64_t T = 5, H = 3, Dv = 4;
  const float sinks[H] = {-kInf, 0.0f, 2.5f};
  std::mt19937 rng(23);
  std::uniform_real_distribution<float> u(-2.0f, 2.0f);
  std::vector<float> o[2], l[2];
  for (int i = 0; i < 2; ++i) {
    o[i].resize(static_cast<size_t>(T * H * Dv));
    l[i].resize(static_cast<size_t>(T * H));
    for (float& x : o[i]) x = u(rng);
    for (float& x : l[i]) x = u(rng);
  }
  auto view = [&](float* data, bool lse) {
    hwyattn_tensor t{};
    t.data = data;
    t.dtype = HWYATTN_F32;
    if (lse) {  // [1, H, T] over [T, H] memory
      t.rank = 3;
      const int64_t shape[3] = {1, H, T}, stride[3] = {T * H, 1, H};
      std::memcpy(t.shape, shape, sizeof(shape));
      std::memcpy(t.stride, stride, sizeof(stride));
    } else {  // [1, H, T, Dv] over [T, H, Dv] memory
      t.rank = 4;
      const int64_t shape[4] = {1, H, T, Dv}, stride[4] = {T * H * Dv, Dv, H * Dv, 1};
      std::memcpy(t.shape, shape, sizeof(shape));
      std::memcpy(t.stride, stride, sizeof(stride));
    }
    return t;
  };
  hwyattn_tensor to[2] = {view(o[0].data(), false), view(o[1].data(), false)};
  hwyattn_tensor tl[2] = {view(l[0].data(), true), view(l[1].data(), true)};
  std::vector<float> out(static_cast<size_t>(T * H * Dv)), lse(static_cast<size_t>(T * H));
  hwyattn_tensor tout = view(out.data(), false), tlse = view(lse.data(), true);
  const hwyattn_tensor* outs[2] = {&to[0], &to[1]};
  const hwyattn_tensor* lses[2] = {&tl[0], &tl[1]};
  ASSERT_EQ(hwyattn_merge_states(2, outs, lses, sinks, &tout, &tlse), HWYATTN_OK)
      << hwyattn_last_error();
  for (int64_t t = 0; t < T; ++t)
    for (int64_t h = 0; h < H; ++h) {
      const size_t row = static_cast<size_t>(t * H + h);
      const double a = l[0][row], b = l[1][row], z = sinks[h];
      const double total = std::log(std::exp(a) + std::exp(b) + std::exp(z));
      EXPECT_NEAR(lse[row], total, 1e-6 * std::max(1.0, std::fabs(total)))
          << "t " << t << " h " << h;
      for (int64_t d = 0; d < Dv; ++d) {
        const size_t e = row * static_cast<size_t>(Dv) + static_cast<size_t>(d);
        const double want = std::exp(a - total) * o[0][e] + std::exp(b - total) * o[1][e];
        EXPECT_NEAR(out[e], want, 1e-6) << "t " << t << " h " << h << " d " << d;
      }
    }
}

// The same bits for every call, thread count and layout (the vector and
// the lane-at-a-time paths do the same operations).
TEST(MergeEdges, BitIdenticalForCallsThreadsAndLayouts) {
  std::mt19937 rng(29);
  const Shape4 shape = {2, 3, 17, 67};
  const Partials parts = RandomPartials(rng, shape, 5, -6.0f, 6.0f, false);
  const float sinks[3] = {0.25f, -kInf, 3.0f};
  TensorBuf ref(HWYATTN_F32, shape, Layout{}),
      ref_lse(HWYATTN_F32, {1, 2, 3, 17}, Layout{3, {0, 1, 2, 3}, {}, 1, 0, 0});
  ASSERT_EQ(Merge(parts, sinks, &ref, &ref_lse), HWYATTN_OK);
  const int saved = hwyattn_get_num_threads();
  for (int threads : {1, 2, 3, 0}) {
    ASSERT_EQ(hwyattn_set_num_threads(threads), HWYATTN_OK);
    for (int rep = 0; rep < 3; ++rep) {
      const Partials other = Relayout(parts, rng);
      TensorBuf out(HWYATTN_F32, shape, RandomLayout(rng, false));
      TensorBuf lse(HWYATTN_F32, {1, 2, 3, 17}, RandomLayout(rng, true));
      ASSERT_EQ(Merge(other, sinks, &out, &lse), HWYATTN_OK);
      EXPECT_EQ(Bits(out), Bits(ref)) << threads << " threads, repetition " << rep;
      EXPECT_EQ(Bits(lse), Bits(ref_lse)) << threads << " threads, repetition " << rep;
    }
  }
  hwyattn_set_num_threads(saved);
}

// Shards whose keys are all blocked (hwyattn_sdpa needs Lk >= 1, so an empty
// shard is kv_len 0 or an all-false mask): lse -inf, and they change nothing.
TEST(MergeEdges, EmptyShardsContributeNothing) {
  Problem p;
  p.batch = 2;
  p.q_heads = 4;
  p.kv_heads = 2;
  p.q_len = 3;
  p.k_len = 24;
  p.dim = 16;
  p.v_dim = 8;
  p.kv_len = {10, 24};  // batch 0 has no key in [10, 24)
  p.has_mask = true;    // keys [12, 18) blocked everywhere
  p.mask.dtype = HWYATTN_BOOL;
  p.mask.shape = {1, 1, 1, 24};
  p.mask.block_prob = 0.0;
  p.want_lse = true;
  Call whole(p);
  for (int64_t j = 12; j < 18; ++j) {
    const int64_t idx[4] = {0, 0, 0, j};
    whole.mask.SetU8(idx, 0);
  }
  ASSERT_EQ(whole.Run(), HWYATTN_OK) << hwyattn_last_error();

  const int64_t cuts[4] = {0, 12, 18, 24};
  Partials parts;
  for (int s = 0; s < 3; ++s) {
    const int64_t first = cuts[s], len = cuts[s + 1] - first;
    hwyattn_sdpa_options opts;
    hwyattn_sdpa_options_init(&opts);
    hwyattn_tensor mask = whole.mask.tensor();
    mask.data = static_cast<uint8_t*>(mask.data) + first * mask.stride[mask.rank - 1];
    mask.shape[mask.rank - 1] = len;
    opts.mask = &mask;
    std::vector<int32_t> kv_len;
    for (int32_t n : p.kv_len)
      kv_len.push_back(static_cast<int32_t>(std::clamp<int64_t>(n - first, 0, len)));
    opts.kv_len = kv_len.data();
    TensorBuf out(HWYATTN_F32, {2, 4, 3, 8}, Layout{});
    TensorBuf lse(HWYATTN_F32, {1, 2, 4, 3}, Layout{3, {0, 1, 2, 3}, {}, 1, 0, 0});
    opts.lse = lse.desc();
    const hwyattn_tensor k = KeySlice(whole.k.tensor(), first, len),
                         v = KeySlice(whole.v.tensor(), first, len);
    ASSERT_EQ(hwyattn_sdpa(whole.q.desc(), &k, &v, out.desc(), &opts), HWYATTN_OK)
        << hwyattn_last_error();
    parts.Add(std::move(out), std::move(lse));
  }
  // The premise: shard 1 is empty for every row, shard 2 for batch 0.
  parts.lses[1].ForEach(
      [&](const int64_t* idx, int64_t) { ASSERT_EQ(parts.lses[1].GetF32(idx), -kInf); });
  parts.lses[2].ForEach([&](const int64_t* idx, int64_t) {
    if (idx[1] == 0) {
      ASSERT_EQ(parts.lses[2].GetF32(idx), -kInf);
    }
  });
  TensorBuf out(HWYATTN_F32, {2, 4, 3, 8}, Layout{});
  TensorBuf lse(HWYATTN_F32, {1, 2, 4, 3}, Layout{3, {0, 1, 2, 3}, {}, 1, 0, 0});
  ASSERT_EQ(Merge(parts, nullptr, &out, &lse), HWYATTN_OK) << hwyattn_last_error();
  const std::vector<double> want_lse = Dense(whole.lse);
  double max_lse = 0.0;
  for (double x : want_lse) max_lse = std::max(max_lse, std::fabs(x));
  EXPECT_TRUE(CompareRelative("out", out, Dense(whole.out), SplitTolerance(max_lse)));
  EXPECT_TRUE(CompareLse("lse", lse, want_lse, 2e-6, 4.0 * Ulp(max_lse)));
  // Batch 0 has one contributing shard: a copy of it, to the bit.
  out.ForEach([&](const int64_t* idx, int64_t) {
    if (idx[0] == 0) {
      ASSERT_EQ(out.GetF32(idx), parts.outs[0].GetF32(idx));
    }
  });
}

// More partials than the kernel folds per pass over a row (8): the later
// groups resume from the stored row. Some rows start contributing only in a
// later group, some have no contribution at all; in place too.
TEST(MergeEdges, ManyPartials) {
  std::mt19937 rng(31);
  const Shape4 shape = {1, 3, 11, 45};
  for (int n : {9, 16, 19, 40}) {
    Partials parts = RandomPartials(rng, shape, n, -8.0f, 8.0f, true);
    for (int i = 0; i < n; ++i) {
      const int64_t late[4] = {0, 0, 1, 3}, none[4] = {0, 0, 2, 7};
      if (i < n - 2) parts.lses[static_cast<size_t>(i)].SetF32(late, -kInf);
      parts.lses[static_cast<size_t>(i)].SetF32(none, -kInf);
    }
    const float sinks[3] = {-kInf, 1.0f, 7.5f};
    for (const float* s : {static_cast<const float*>(nullptr), sinks}) {
      TensorBuf out(HWYATTN_F32, shape, RandomLayout(rng, false));
      TensorBuf lse(HWYATTN_F32, {1, 1, 3, 11}, RandomLayout(rng, true));
      ASSERT_EQ(Merge(parts, s, &out, &lse), HWYATTN_OK) << hwyattn_last_error();
      const Merged want = MergeInDouble(parts, shape, s);
      EXPECT_TRUE(CompareRelative("out", out, want.out, 1e-6)) << "n = " << n;
      EXPECT_TRUE(CompareLse("lse", lse, want.lse, 2e-7, 0.0)) << "n = " << n;
      Partials in_place = Relayout(parts, rng);
      ASSERT_EQ(Merge(in_place, s, &in_place.outs[0], &in_place.lses[0]), HWYATTN_OK);
      EXPECT_EQ(Bits(in_place.outs[0]), Bits(out)) << "in place, n = " << n;
      EXPECT_EQ(Bits(in_place.lses[0]), Bits(lse)) << "in place, n = " << n;
    }
  }
}
}  // namespace
}  // namespace hwyattn_test
