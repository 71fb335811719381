// SPDX-License-Identifier: Apache-2.0

#include "tests/test_util.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <sstream>

namespace hwyattn_test {

namespace {

// Elements of guard zone before and after every tensor's described span.
constexpr int64_t kGuardElements = 16;

std::string IndexString(const int64_t idx[4]) {
  std::ostringstream os;
  os << "[" << idx[0] << "," << idx[1] << "," << idx[2] << "," << idx[3] << "]";
  return os.str();
}

}  // namespace

TensorBuf::TensorBuf(hwyattn_dtype dtype, const Shape4& shape, const Layout& layout)
    : dtype_(dtype), shape_(shape), layout_(layout) {
  const int64_t elem = static_cast<int64_t>(DtypeSize(dtype));
  // Strides from the innermost memory dimension outwards. Row padding goes
  // after the innermost stored dimension only.
  int64_t running = layout.elem_step;
  bool innermost = true;
  for (int pos = 3; pos >= 0; --pos) {
    const int d = layout.order[pos];
    if (layout.broadcast[d]) {
      strides_[d] = 0;
      continue;
    }
    strides_[d] = running;
    running *= shape[d];
    if (innermost) {
      running += layout.row_pad;
      innermost = false;
    }
  }
  int64_t span = 1;
  for (int d = 0; d < 4; ++d) span += (shape[d] - 1) * strides_[d];
  const int64_t total = kGuardElements + layout.offset + span + kGuardElements;
  storage_.assign(static_cast<size_t>(total * elem), 0);
  base_ = static_cast<size_t>((kGuardElements + layout.offset) * elem);

  desc_.data = storage_.data() + base_;
  desc_.dtype = dtype;
  desc_.rank = layout.rank;
  const int lead = 4 - layout.rank;
  for (int d = 0; d < lead; ++d) {
    if (shape[d] != 1)
      ADD_FAILURE() << "a rank-" << layout.rank << " tensor needs size 1 in dim " << d;
  }
  for (int d = 0; d < 4; ++d) {
    desc_.shape[d] = 0;
    desc_.stride[d] = 0;
  }
  for (int d = 0; d < layout.rank; ++d) {
    desc_.shape[d] = shape[lead + d];
    desc_.stride[d] = strides_[lead + d];
  }
}

size_t TensorBuf::ByteOffset(const int64_t idx[4]) const {
  int64_t offset = 0;
  for (int d = 0; d < 4; ++d) offset += idx[d] * strides_[d];
  return base_ + static_cast<size_t>(offset) * DtypeSize(dtype_);
}

void TensorBuf::FillRandom(std::mt19937* rng, float lo, float hi) {
  std::uniform_real_distribution<float> dist(lo, hi);
  const size_t elem = DtypeSize(dtype_);
  for (size_t pos = 0; pos + elem <= storage_.size(); pos += elem) {
    const float f = dist(*rng);
    if (dtype_ == HWYATTN_F32) {
      std::memcpy(&storage_[pos], &f, 4);
    } else if (dtype_ == HWYATTN_F16) {
      const uint16_t h = FloatToF16(f);
      std::memcpy(&storage_[pos], &h, 2);
    } else if (dtype_ == HWYATTN_BF16) {
      const uint16_t b = FloatToBf16(f);
      std::memcpy(&storage_[pos], &b, 2);
    } else {
      storage_[pos] = static_cast<unsigned char>((*rng)() & 0xFF);
    }
  }
}

void TensorBuf::FillPattern(uint32_t pattern) {
  for (size_t pos = 0; pos < storage_.size(); ++pos) {
    storage_[pos] = static_cast<unsigned char>(pattern >> (8 * (pos % 4)));
  }
}

float TensorBuf::GetF32(const int64_t idx[4]) const {
  float f;
  std::memcpy(&f, &storage_[ByteOffset(idx)], sizeof(f));
  return f;
}

void TensorBuf::SetF32(const int64_t idx[4], float value) {
  std::memcpy(&storage_[ByteOffset(idx)], &value, sizeof(value));
}

void TensorBuf::SetF16Bits(const int64_t idx[4], uint16_t bits) {
  std::memcpy(&storage_[ByteOffset(idx)], &bits, sizeof(bits));
}

void TensorBuf::SetValue(const int64_t idx[4], float value) {
  switch (desc_.dtype) {
    case HWYATTN_F16: SetF16Bits(idx, FloatToF16(value)); break;
    case HWYATTN_BF16: SetF16Bits(idx, FloatToBf16(value)); break;
    default:
      ASSERT_EQ(desc_.dtype, HWYATTN_F32) << "SetValue: F32, F16 or BF16 tensors";
      SetF32(idx, value);
  }
}

void TensorBuf::SetU8(const int64_t idx[4], uint8_t value) { storage_[ByteOffset(idx)] = value; }

void TensorBuf::ForEach(const std::function<void(const int64_t*, int64_t)>& fn) const {
  int64_t idx[4];
  int64_t linear = 0;
  for (idx[0] = 0; idx[0] < shape_[0]; ++idx[0]) {
    for (idx[1] = 0; idx[1] < shape_[1]; ++idx[1]) {
      for (idx[2] = 0; idx[2] < shape_[2]; ++idx[2]) {
        for (idx[3] = 0; idx[3] < shape_[3]; ++idx[3]) fn(idx, linear++);
      }
    }
  }
}

void TensorBuf::ForEachStored(const std::function<void(const int64_t*)>& fn) const {
  int64_t end[4];
  for (int d = 0; d < 4; ++d) end[d] = layout_.broadcast[d] ? 1 : shape_[d];
  int64_t idx[4];
  for (idx[0] = 0; idx[0] < end[0]; ++idx[0]) {
    for (idx[1] = 0; idx[1] < end[1]; ++idx[1]) {
      for (idx[2] = 0; idx[2] < end[2]; ++idx[2]) {
        for (idx[3] = 0; idx[3] < end[3]; ++idx[3]) fn(idx);
      }
    }
  }
}

bool TensorBuf::UntouchedOutside(const std::vector<unsigned char>& before,
                                 std::string* detail) const {
  std::vector<bool> covered(storage_.size(), false);
  const size_t elem = DtypeSize(dtype_);
  ForEach([&](const int64_t* idx, int64_t) {
    const size_t at = ByteOffset(idx);
    for (size_t b = 0; b < elem; ++b) covered[at + b] = true;
  });
  for (size_t pos = 0; pos < storage_.size(); ++pos) {
    if (!covered[pos] && storage_[pos] != before[pos]) {
      std::ostringstream os;
      os << "byte " << pos << " of the storage (data starts at byte " << base_
         << ") is not part of the tensor but changed from " << int{before[pos]} << " to "
         << int{storage_[pos]};
      *detail = os.str();
      return false;
    }
  }
  return true;
}

Call::Call(const Problem& p) : problem(p) {
  std::mt19937 rng(p.seed);
  q = TensorBuf(p.q_dtype, {p.batch, p.q_heads, p.q_len, p.dim}, p.q_layout);
  const int64_t kv_batch = p.kv_batch == 0 ? p.batch : p.kv_batch;
  k = TensorBuf(p.k_dtype, {kv_batch, p.kv_heads, p.k_len, p.dim}, p.k_layout);
  v = TensorBuf(p.v_dtype, {kv_batch, p.kv_heads, p.k_len, p.v_dim}, p.v_layout);
  q.FillRandom(&rng, -p.q_amp, p.q_amp);
  k.FillRandom(&rng, -p.k_amp, p.k_amp);
  v.FillRandom(&rng, -1.0f, 1.0f);
  out = TensorBuf(HWYATTN_F32, {p.batch, p.q_heads, p.q_len, p.v_dim}, p.out_layout);
  out.FillPattern(kOutputSentinel);

  hwyattn_sdpa_options_init(&opts);
  opts.scale = p.scale;
  opts.causal = p.causal;
  if (p.has_mask) {
    const MaskSpec& ms = p.mask;
    mask = TensorBuf(ms.dtype, ms.shape, ms.layout);
    if (ms.dtype == HWYATTN_F32 || ms.dtype == HWYATTN_F16) {
      mask.FillRandom(&rng, -2.0f, 2.0f);
    } else {
      mask.FillRandom(&rng, 0.0f, 0.0f);  // Random bytes in the gaps.
    }
    std::uniform_real_distribution<double> unit(0.0, 1.0);
    std::uniform_real_distribution<float> additive(-2.0f, 2.0f);
    mask.ForEachStored([&](const int64_t* idx) {
      bool blocked = unit(rng) < ms.block_prob;
      if (ms.block_rows && (idx[0] + idx[1] + idx[2]) % 4 == 1) blocked = true;
      if (ms.band > 0) {
        const int64_t diagonal = idx[2] + p.k_len - p.q_len;
        const int64_t position = (idx[3] + ms.band_shift) % p.k_len;
        if (position > diagonal || position <= diagonal - ms.band) blocked = true;
      }
      if (ms.dtype == HWYATTN_BOOL) {
        // Any nonzero byte means "attend", not only 1.
        mask.SetU8(idx, blocked ? 0 : static_cast<uint8_t>(1 + rng() % 255));
      } else if (ms.dtype == HWYATTN_F16) {
        // 0xFC00 is -inf; finite values rounded to the nearest F16.
        mask.SetF16Bits(idx, blocked ? uint16_t{0xFC00} : FloatToF16(additive(rng)));
      } else {
        mask.SetF32(idx, blocked ? -std::numeric_limits<float>::infinity() : additive(rng));
      }
    });
    opts.mask = mask.desc();
  }
  if (!p.kv_len.empty()) {
    kv_len = p.kv_len;
    opts.kv_len = kv_len.data();
  }
  opts.window_left = p.window_left;
  opts.window_right = p.window_right;
  opts.softcap = p.softcap;
  if (!p.alibi_slopes.empty()) {
    if (static_cast<int64_t>(p.alibi_slopes.size()) != p.q_heads) {
      ADD_FAILURE() << "Problem::alibi_slopes has " << p.alibi_slopes.size() << " entries for "
                    << p.q_heads << " query heads";
    }
    alibi_slopes = p.alibi_slopes;
    opts.alibi_slopes = alibi_slopes.data();
  }
  if (!p.sinks.empty()) {
    if (static_cast<int64_t>(p.sinks.size()) != p.q_heads) {
      ADD_FAILURE() << "Problem::sinks has " << p.sinks.size() << " entries for " << p.q_heads
                    << " query heads";
    }
    sinks = p.sinks;
    opts.sinks = sinks.data();
  }
  if (p.want_weights) {
    weights = TensorBuf(HWYATTN_F32, {p.batch, p.q_heads, p.q_len, p.k_len}, p.weights_layout);
    weights.FillPattern(kOutputSentinel);
    opts.weights = weights.desc();
    weights_before = weights.Snapshot();
  }
  if (p.want_lse) {
    lse = TensorBuf(HWYATTN_F32, {1, p.batch, p.q_heads, p.q_len}, p.lse_layout);
    lse.FillPattern(kOutputSentinel);
    opts.lse = lse.desc();
    lse_before = lse.Snapshot();
  }
  out_before = out.Snapshot();
}

hwyattn_status Call::Run() {
  return hwyattn_sdpa(q.desc(), k.desc(), v.desc(), out.desc(),
                      problem.null_opts ? nullptr : &opts);
}

::testing::AssertionResult CompareRelative(const char* what, const TensorBuf& got,
                                           const std::vector<double>& want, double tol) {
  if (static_cast<int64_t>(want.size()) != got.NumElements()) {
    return ::testing::AssertionFailure() << what << ": reference has " << want.size()
                                         << " elements, tensor " << got.NumElements();
  }
  double max_want = 0.0, max_err = -1.0;
  int64_t worst[4] = {0, 0, 0, 0};
  float worst_got = 0.0f;
  double worst_want = 0.0;
  std::string bad;
  got.ForEach([&](const int64_t* idx, int64_t linear) {
    const float g = got.GetF32(idx);
    const double w = want[static_cast<size_t>(linear)];
    max_want = std::max(max_want, std::fabs(w));
    if (!std::isfinite(g)) {
      if (bad.empty()) {
        std::ostringstream os;
        os << what << IndexString(idx) << " is " << g << " (want " << w << ")";
        bad = os.str();
      }
      return;
    }
    const double err = std::fabs(static_cast<double>(g) - w);
    if (err > max_err) {
      max_err = err;
      std::copy(idx, idx + 4, worst);
      worst_got = g;
      worst_want = w;
    }
  });
  if (!bad.empty()) return ::testing::AssertionFailure() << bad;
  if (max_err <= tol * max_want) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << what << ": max|err| / max|ref| = " << max_err << " / " << max_want << " = "
         << (max_want > 0 ? max_err / max_want : std::numeric_limits<double>::infinity()) << " > "
         << tol << "; worst at " << IndexString(worst) << ": got " << worst_got << ", want "
         << worst_want;
}

void CheckAgainstReference(Call& call) {
  const Problem& p = call.problem;
  RefResult ref;
  std::string error;
  ASSERT_TRUE(ReferenceSdpa(call.q.tensor(), call.k.tensor(), call.v.tensor(),
                            p.null_opts ? nullptr : &call.opts, &ref, &error))
      << "the oracle refused the problem: " << error;

  EXPECT_TRUE(CompareRelative("out", call.out, ref.out, 1e-5));
  // A fully blocked row's output is exactly zero, not merely small.
  int64_t nonzero_blocked = 0;
  std::string first_nonzero;
  call.out.ForEach([&](const int64_t* idx, int64_t linear) {
    const size_t row = static_cast<size_t>(linear / p.v_dim);
    if (ref.row_blocked[row] && call.out.GetF32(idx) != 0.0f) {
      if (nonzero_blocked++ == 0) {
        std::ostringstream os;
        os << "out" << IndexString(idx) << " = " << call.out.GetF32(idx);
        first_nonzero = os.str();
      }
    }
  });
  EXPECT_EQ(nonzero_blocked, 0) << "fully blocked rows must give zeros; first: " << first_nonzero;
  std::string detail;
  EXPECT_TRUE(call.out.UntouchedOutside(call.out_before, &detail)) << "out: " << detail;

  if (p.want_weights) {
    EXPECT_TRUE(CompareRelative("weights", call.weights, ref.weights, 1e-5));
    int64_t nonzero = 0;
    std::string first_blocked;
    call.weights.ForEach([&](const int64_t* idx, int64_t linear) {
      // Every blocked key (a fully blocked row's, one outside a window, ...)
      // has a weight of exactly zero.
      if (!ref.key_allowed[static_cast<size_t>(linear)] && call.weights.GetF32(idx) != 0.0f) {
        if (nonzero++ == 0) {
          std::ostringstream os;
          os << "weights" << IndexString(idx) << " = " << call.weights.GetF32(idx);
          first_blocked = os.str();
        }
      }
    });
    EXPECT_EQ(nonzero, 0) << "weights of blocked keys must be zeros; first: " << first_blocked;
    EXPECT_TRUE(call.weights.UntouchedOutside(call.weights_before, &detail))
        << "weights: " << detail;
  }
  if (p.want_lse) {
    int64_t failures = 0;
    std::string first;
    call.lse.ForEach([&](const int64_t* idx, int64_t linear) {
      const float g = call.lse.GetF32(idx);
      const double w = ref.lse[static_cast<size_t>(linear)];
      bool ok;
      if (std::isinf(w)) {
        ok = std::isinf(g) && g < 0;  // Exactly -INFINITY.
      } else {
        ok = std::isfinite(g) &&
             std::fabs(static_cast<double>(g) - w) <= 1e-5 * std::max(1.0, std::fabs(w));
      }
      if (!ok && failures++ == 0) {
        std::ostringstream os;
        os << "lse" << IndexString(idx) << ": got " << g << ", want " << w;
        first = os.str();
      }
    });
    EXPECT_EQ(failures, 0) << first;
    EXPECT_TRUE(call.lse.UntouchedOutside(call.lse_before, &detail)) << "lse: " << detail;
  }
}

namespace {

void RunAndCheckOnce(const Problem& p) {
  Call call(p);
  const hwyattn_status status = call.Run();
  ASSERT_EQ(status, HWYATTN_OK) << hwyattn_status_string(status) << ": " << hwyattn_last_error();
  CheckAgainstReference(call);
}

}  // namespace

void RunAndCheck(const Problem& p) {
  RunAndCheckOnce(p);
  if (p.want_weights) {
    // Asking for the weights may route a call to another kernel (the decode
    // kernel never materialises them), so check the same problem without.
    Problem without = p;
    without.want_weights = false;
    SCOPED_TRACE("the same problem without the weights output");
    RunAndCheckOnce(without);
  }
}

std::string ShapeName(const Problem& p) {
  std::ostringstream os;
  os << "B" << p.batch << "_Hq" << p.q_heads << "_Hkv" << p.kv_heads << "_Lq" << p.q_len << "_Lk"
     << p.k_len << "_D" << p.dim << "_Dv" << p.v_dim;
  return os.str();
}

std::string ModifierName(const Problem& p) {
  std::ostringstream os;
  if (p.window_left != 0 || p.window_right != 0) {
    os << "wl" << p.window_left << "_wr" << p.window_right << "_";
  }
  // Test names allow [A-Za-z0-9_] only: 0.5 becomes "0p5".
  if (p.softcap != 0.0f) {
    std::string cap = std::to_string(p.softcap);
    cap.erase(cap.find_last_not_of('0') + 1);
    if (!cap.empty() && cap.back() == '.') cap.pop_back();
    std::replace(cap.begin(), cap.end(), '.', 'p');
    os << "cap" << cap << "_";
  }
  if (!p.alibi_slopes.empty()) os << "alibi_";
  if (!p.sinks.empty()) os << "sinks_";
  std::string name = os.str();
  if (name.empty()) return "nomod";
  name.pop_back();  // The trailing '_'.
  return name;
}

std::vector<float> StandardAlibiSlopes(int64_t heads) {
  int64_t n = 1;
  while (n * 2 <= heads) n *= 2;
  std::vector<float> slopes;
  for (int64_t h = 0; h < heads; ++h) {
    const double exponent =
        h < n ? -8.0 * static_cast<double>(h + 1) / static_cast<double>(n)
              : -4.0 * static_cast<double>(2 * (h - n) + 1) / static_cast<double>(n);
    slopes.push_back(static_cast<float>(std::exp2(exponent)));
  }
  return slopes;
}

}  // namespace hwyattn_test
