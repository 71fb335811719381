// SPDX-License-Identifier: Apache-2.0
//
// libFuzzer target for hwyattn_sdpa, hwyattn_mha_forward,
// hwyattn_merge_states (FuzzMerge below), hwyattn_kv_cache_write and
// hwyattn_kv_attention (FuzzKv, in fuzz_kv.cc) (built with
// -DHWYATTN_BUILD_FUZZ=ON and clang, run by scripts/test.sh --sanitizers
// under AddressSanitizer + UndefinedBehaviorSanitizer).
//
// The input bytes choose a problem (sizes, GQA, dtypes, layouts: permuted,
// padded and broadcast strides, ranks), options (causal, scale, masks,
// kv_len, weights, lse) and the data, then optionally corrupt one field of
// one argument with an arbitrary value. Every tensor gets its own heap
// block of exactly the bytes its descriptor spans, so any read or write out
// of bounds is an AddressSanitizer report.
//
//  - The library accepts the call: the outputs must match the double
//    reference (tests/reference.h) within 1e-5 of max|reference| when the
//    inputs are finite (and nothing outside the outputs may change).
//  - It rejects the call: status != OK, a non-empty hwyattn_last_error(),
//    and every output byte unchanged.
// A descriptor that is certainly invalid (rank, negative size or stride,
// span overflow) must be rejected. Requests too large to run quickly are
// skipped, not called.
//
// FUZZ_POOL_WORKERS=n (n >= 1) in the environment: every call also passes
// opts->parallel, an inline pool announcing n workers that runs each task on
// the calling thread, and holds the library to the pool contract (every
// parallel_for has 1 <= tasks <= n and is never made from inside a task);
// scripts/test.sh --sanitizers runs a share of the fuzzing time that way.

#include <fuzzer/FuzzedDataProvider.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "hwyattn.h"
#include "tests/fuzz/fuzz_args.h"
#include "tests/reference.h"

namespace {

using namespace hwyattn_fuzz;  // NOLINT: the shared argument helpers

// Checks an output against the reference, element by element through
// the descriptor (dense reference [shape]).
// The tolerance is 1e-5 of max(max|reference|, floor): `floor` is the size
// of the terms the result is made of (max|v| for an attention output, a
// convex combination of v; the absolute-value product for a projection), so
// that a result small by cancellation is not held to a tighter bound than
// float arithmetic gives.
// What an F16 / BF16 output adds to the tolerance: its rounding, at most an
// ulp of |out| <= the floor (2^-11, 2^-8), relative; and below 2^-14, where
// F16's subnormals are 2^-24 apart, half of that spacing, absolute
// (StoreAbsolute: an MHA output's floor can be that small). From the dtype
// the call was given (Corrupt may have changed the one drawn).
double StoreRounding(const hwyattn_tensor& out) {
  return out.dtype == HWYATTN_F16 ? 1.0 / 2048 : out.dtype == HWYATTN_BF16 ? 1.0 / 256 : 0.0;
}
double StoreAbsolute(const hwyattn_tensor& out) {
  return out.dtype == HWYATTN_F16 ? std::ldexp(1.0, -25) : 0.0;
}

HWYATTN_FUZZ_NO_COVERAGE void Compare(const char* what, const hwyattn_tensor& t,
                                      const std::vector<double>& want, double floor = 0.0,
                                      double tol = 1e-5, double abs_tol = 0.0) {
  int64_t shape[4], stride[4];
  if (!hwyattn_test::LogicalDims(t, shape, stride)) Die(what, "bad dims");
  double max_ref = 0, max_err = 0;
  int64_t n = 0;
  for (int64_t a = 0; a < shape[0]; ++a)
    for (int64_t b = 0; b < shape[1]; ++b)
      for (int64_t c = 0; c < shape[2]; ++c)
        for (int64_t d = 0; d < shape[3]; ++d, ++n) {
          const int64_t idx[4] = {a, b, c, d};
          const double got = hwyattn_test::ReadElement(t, idx), w = want[static_cast<size_t>(n)];
          if (std::isinf(w) && std::isinf(got) && (w < 0) == (got < 0)) continue;  // lse -inf
          if (!std::isfinite(got)) Die(what, "non-finite output for finite inputs");
          max_ref = std::max(max_ref, std::fabs(w));
          max_err = std::max(max_err, std::fabs(got - w));
        }
  if (max_err > tol * std::max({max_ref, floor, 1e-30}) + abs_tol && max_err > 1e-30) {
    char buf[160];
    snprintf(buf, sizeof(buf), "max|err| %g vs max|ref| %g, floor %g", max_err, max_ref, floor);
    Die(what, buf);
  }
}

// Rewrites every element of a (finite, |x| <= 1) F32 / F16 block as its
// value rounded to bf16, in its own dtype (exact: a bf16-rounded f16 of
// magnitude <= 1 is an f16): the operands precision = BF16 multiplies, for
// the reference.
void RoundOperandsToBf16(Arg* a) {
  const size_t elem = ElemSize(a->t.dtype);
  for (size_t i = 0; i + elem <= a->bytes; i += elem) {
    unsigned char* at = a->block.get() + i;
    if (a->t.dtype == HWYATTN_F32) {
      float f;
      memcpy(&f, at, 4);
      f = static_cast<float>(hwyattn_test::Bf16ToDouble(hwyattn_test::FloatToBf16(f)));
      memcpy(at, &f, 4);
    } else if (a->t.dtype == HWYATTN_F16) {
      uint16_t h;
      memcpy(&h, at, 2);
      const double r = hwyattn_test::Bf16ToDouble(
          hwyattn_test::FloatToBf16(static_cast<float>(hwyattn_test::F16ToDouble(h))));
      h = hwyattn_test::FloatToF16(static_cast<float>(r));
      memcpy(at, &h, 2);
    }
  }
}

// Problems larger than this (multiply-adds of the reference) are not
// compared with it (see FuzzSdpa).
constexpr double kReferenceBudget = 1.5e6;

// Every element of an F32 output is finite (minus_inf_ok: or -inf, as the
// lse of a row that sees no key).
HWYATTN_FUZZ_NO_COVERAGE void ExpectFinite(const char* what, const hwyattn_tensor& t,
                                           bool minus_inf_ok) {
  int64_t shape[4], stride[4];
  if (!hwyattn_test::LogicalDims(t, shape, stride)) Die(what, "bad dims");
  for (int64_t a = 0; a < shape[0]; ++a)
    for (int64_t b = 0; b < shape[1]; ++b)
      for (int64_t c = 0; c < shape[2]; ++c)
        for (int64_t d = 0; d < shape[3]; ++d) {
          const int64_t idx[4] = {a, b, c, d};
          const double x = hwyattn_test::ReadElement(t, idx);
          if (!std::isfinite(x) && !(minus_inf_ok && x == -INFINITY)) {
            Die(what, "non-finite output for finite inputs");
          }
        }
}

// The inline pool of FUZZ_POOL_WORKERS (see the top), or null.
thread_local bool t_in_task = false;

void InlineParallelFor(void* pool, int64_t n, hwyattn_task_fn task, void* ctx) {
  const int32_t workers = static_cast<const hwyattn_parallel*>(pool)->num_workers;
  if (t_in_task) Die("pool", "parallel_for called from inside a task");
  if (n < 1 || n > workers) {
    Die("pool",
        "parallel_for with n = " + std::to_string(n) + ", num_workers " + std::to_string(workers));
  }
  t_in_task = true;
  for (int64_t i = 0; i < n; ++i) task(ctx, i);
  t_in_task = false;
}

const hwyattn_parallel* FuzzPool() {
  static const hwyattn_parallel* const pool = [] {
    const char* env = getenv("FUZZ_POOL_WORKERS");
    const int workers = env != nullptr ? atoi(env) : 0;
    if (workers < 1) return static_cast<hwyattn_parallel*>(nullptr);
    static hwyattn_parallel p;
    hwyattn_parallel_init(&p);
    p.num_workers = workers;
    p.pool = &p;
    p.parallel_for = &InlineParallelFor;
    fprintf(stderr, "fuzz_sdpa: every call on an inline pool of %d workers\n", workers);
    return &p;
  }();
  return pool;
}

// Sets this thread's last error to a marker, so that a failing call's own
// message can be told from an older one.
constexpr int kMarkerThreads = -424242;
void MarkLastError() { hwyattn_set_num_threads(kMarkerThreads); }

void ExpectCleanError(hwyattn_status s,
                      const std::vector<std::pair<const Arg*, std::string>>& outs) {
  if (s != HWYATTN_INVALID_ARGUMENT && s != HWYATTN_UNSUPPORTED && s != HWYATTN_OUT_OF_MEMORY) {
    Die("status", hwyattn_status_string(s));
  }
  const std::string msg = hwyattn_last_error();
  if (msg.empty() || msg.rfind("n: -424242 threads", 0) == 0) {
    Die("last_error", "not set by the failing call: \"" + msg + "\"");
  }
  for (const auto& o : outs) {
    if (o.first->bytes != o.second.size() ||
        (o.first->bytes != 0 &&
         memcmp(o.first->block.get(), o.second.data(), o.second.size()) != 0)) {
      Die("output written by a failing call", hwyattn_last_error());
    }
  }
}

int FuzzSdpa(FuzzedDataProvider& in) {
  const int64_t B = in.ConsumeIntegralInRange(1, 3), Hkv = in.ConsumeIntegralInRange(1, 3);
  const int64_t Hq = Hkv * in.ConsumeIntegralInRange(1, 3);
  // Small shapes first: the long ranges one time in four.
  const int64_t Lq = in.ConsumeIntegralInRange(1, in.ConsumeIntegralInRange(0, 3) != 0 ? 4 : 70);
  const int64_t Lk = in.ConsumeIntegralInRange(1, in.ConsumeIntegralInRange(0, 3) != 0 ? 40 : 600);
  int64_t D = in.ConsumeIntegralInRange(1, 40), Dv = in.ConsumeIntegralInRange(1, 40);
  const int64_t kv_batch = in.ConsumeIntegralInRange(0, 3) == 0 ? 1 : B;
  const hwyattn_dtype kTypes[3] = {HWYATTN_F32, HWYATTN_F16, HWYATTN_BF16};
  const hwyattn_dtype qt = in.ConsumeBool() ? HWYATTN_F32 : kTypes[in.ConsumeIntegralInRange(0, 2)];
  hwyattn_dtype kt = in.ConsumeBool() ? HWYATTN_F32 : kTypes[in.ConsumeIntegralInRange(0, 2)];
  hwyattn_dtype vt = in.ConsumeBool() ? HWYATTN_F32 : kTypes[in.ConsumeIntegralInRange(0, 2)];
  // ggml's block formats as k and/or v, one draw in eight each: D (Dv) 32 or 64.
  const hwyattn_dtype kBlocks[6] = {HWYATTN_Q8_0, HWYATTN_Q4_0, HWYATTN_Q4_1,
                                    HWYATTN_Q5_0, HWYATTN_Q5_1, HWYATTN_IQ4_NL};
  if (in.ConsumeIntegralInRange(0, 7) == 0) {
    kt = kBlocks[in.ConsumeIntegralInRange(0, 5)];
    D = 32 * in.ConsumeIntegralInRange(1, 2);
  }
  if (in.ConsumeIntegralInRange(0, 7) == 0) {
    vt = kBlocks[in.ConsumeIntegralInRange(0, 5)];
    Dv = 32 * in.ConsumeIntegralInRange(1, 2);
  }
  const bool blocks = IsBlockFormat(kt) || IsBlockFormat(vt);
  // The output: F32, or rounded to F16 / BF16 at the store.
  const hwyattn_dtype ot = in.ConsumeBool() ? HWYATTN_F32 : kTypes[in.ConsumeIntegralInRange(0, 2)];

  Arg q, k, v, out, mask, weights, lse;
  const int64_t qs[4] = {B, Hq, Lq, D}, ks[4] = {kv_batch, Hkv, Lk, D},
                vs[4] = {kv_batch, Hkv, Lk, Dv};
  const int64_t os[4] = {B, Hq, Lq, Dv}, ws[4] = {B, Hq, Lq, Lk}, ls[4] = {1, B, Hq, Lq};
  Describe(&q, in, qs, qt, false);
  Describe(&k, in, ks, kt, false);
  Describe(&v, in, vs, vt, false);
  Describe(&out, in, os, ot, true);
  OptionsStorage storage;
  memset(&storage, 0, sizeof(storage));
  hwyattn_sdpa_options& opts = storage.opts;
  hwyattn_sdpa_options_init(&opts);
  const float kScales[4] = {0.0f, 1.0f, 0.125f, -0.7f};
  opts.scale = kScales[in.ConsumeIntegralInRange(0, 3)];
  opts.causal = static_cast<hwyattn_causal>(in.ConsumeIntegralInRange(0, 2));
  std::vector<Arg*> args = {&q, &k, &v, &out};
  const bool has_mask = in.ConsumeBool(), has_w = in.ConsumeBool(), has_lse = in.ConsumeBool();
  if (has_mask) {
    int64_t ms[4] = {B, Hq, Lq, Lk};
    for (int i = 0; i < 4; ++i) {
      if (in.ConsumeBool()) ms[i] = 1;
    }
    // BOOL, F32 or F16 (ggml's KQ mask).
    const hwyattn_dtype kMaskTypes[3] = {HWYATTN_BOOL, HWYATTN_F32, HWYATTN_F16};
    Describe(&mask, in, ms, kMaskTypes[in.ConsumeIntegralInRange(0, 2)], false);
    args.push_back(&mask);
  }
  if (has_w) {
    Describe(&weights, in, ws, HWYATTN_F32, true);
    args.push_back(&weights);
  }
  if (has_lse) {
    Describe(&lse, in, ls, HWYATTN_F32, true, 3);
    args.push_back(&lse);
  }
  std::vector<int32_t> kv_len;
  if (in.ConsumeBool()) {
    for (int64_t b = 0; b < B; ++b)
      kv_len.push_back(in.ConsumeIntegralInRange<int32_t>(0, static_cast<int32_t>(Lk)));
  }
  // Score modifiers, within the ranges where fp32 scores stay accurate to
  // the tolerance below (|ALiBi bias| <= 0.05 * 600 = 30).
  std::vector<float> slopes, sinks;
  if (in.ConsumeBool()) {
    opts.window_left = in.ConsumeBool() ? in.ConsumeIntegralInRange<int64_t>(0, Lk + Lq + 2)
                                        : in.ConsumeIntegral<int64_t>();
    opts.window_right = in.ConsumeBool() ? in.ConsumeIntegralInRange<int64_t>(0, Lk + Lq + 2) : 0;
  }
  if (in.ConsumeBool()) opts.softcap = in.ConsumeFloatingPointInRange<float>(0.25f, 30.0f);
  if (in.ConsumeBool()) {
    for (int64_t h = 0; h < Hq; ++h)
      slopes.push_back(in.ConsumeFloatingPointInRange<float>(-0.05f, 0.05f));
    opts.alibi_slopes = slopes.data();
  }
  if (in.ConsumeBool()) {
    for (int64_t h = 0; h < Hq; ++h) {
      sinks.push_back(in.ConsumeIntegralInRange(0, 4) == 0
                          ? -INFINITY
                          : in.ConsumeFloatingPointInRange<float>(-3.0f, 3.0f));
    }
    opts.sinks = sinks.data();
  }
  // bf16 products in one call of four (any other value is invalid); not
  // over block formats, whose bf16 operands the reference cannot hold in
  // their own dtype (RoundOperandsToBf16): blocks_test's Bf16Products cases.
  if (in.ConsumeIntegralInRange(0, 3) == 0 && !blocks) opts.precision = HWYATTN_PRECISION_BF16;
  // Integer products over block-format K in one call of three.
  if (blocks && in.ConsumeIntegralInRange(0, 2) == 0) opts.precision = HWYATTN_PRECISION_INT8;
  if (in.ConsumeIntegralInRange(0, 2) == 0) Corrupt(in, args, &opts, &kv_len);
  if (!slopes.empty() && in.ConsumeIntegralInRange(0, 7) == 0) slopes[0] = NAN;  // invalid
  if (!sinks.empty() && in.ConsumeIntegralInRange(0, 7) == 0)
    sinks.back() = in.ConsumeBool() ? NAN : INFINITY;
  if (!kv_len.empty()) opts.kv_len = kv_len.data();

  bool certainly_invalid = false;
  for (Arg* a : args) {
    if (!Allocate(a)) return 0;  // too large to hold: skip
    certainly_invalid |= a->certainly_invalid;
  }
  Fill(&q, in, 1.0f);
  Fill(&k, in, 1.0f);
  Fill(&v, in, 1.0f);
  if (has_mask) {
    Fill(&mask, in, 2.0f);
    if (mask.t.dtype == HWYATTN_F32 && in.ConsumeBool()) {
      float* m = reinterpret_cast<float*>(mask.block.get());
      for (size_t i = 0; i < mask.bytes / 4; i += 3) m[i] = -INFINITY;
    }
    if (mask.t.dtype == HWYATTN_F16 && in.ConsumeBool()) {
      uint16_t* m = reinterpret_cast<uint16_t*>(mask.block.get());
      for (size_t i = 0; i < mask.bytes / 2; i += 3) m[i] = 0xFC00;  // -inf
    }
    opts.mask = &mask.t;
  }
  if (has_w) opts.weights = &weights.t;
  if (has_lse) opts.lse = &lse.t;
  for (Arg* a : {&out, &weights, &lse}) {
    if (a->block) memset(a->block.get(), 0xC3, a->bytes);
  }
  // Work bound: the element counts of q and k decide it; skip huge ones.
  if (!certainly_invalid) {
    double work = 1;
    for (int i = 0; i < q.t.rank && i < 4; ++i) work *= static_cast<double>(q.t.shape[i]);
    for (int i = 0; i < k.t.rank && i < 4; ++i) work *= static_cast<double>(k.t.shape[i]);
    if (work > 5e7) return 0;
  }
  const std::vector<std::pair<const Arg*, std::string>> before = {
      {&out, Bytes(out)}, {&weights, Bytes(weights)}, {&lse, Bytes(lse)}};
  if (in.ConsumeBool()) hwyattn_set_num_threads(in.ConsumeIntegralInRange(1, 3));
  opts.parallel = FuzzPool();
  MarkLastError();
  const hwyattn_status s = hwyattn_sdpa(&q.t, &k.t, &v.t, &out.t, &opts);
  if (s != HWYATTN_OK) {
    ExpectCleanError(s, before);
    return 0;
  }
  if (certainly_invalid) Die("status", "a certainly invalid call returned OK");
  bool finite = AllFinite(q) && AllFinite(k) && AllFinite(v);
  if (!finite) return 0;
  // The double reference costs B Hq Lq Lk (D + Dv) multiply-adds read
  // through descriptors: most of an execution's time for large draws. Above
  // kReferenceBudget only the outputs' finiteness is checked (the call
  // itself still ran under the sanitizers, with every other check).
  int64_t qd[4], kd[4], vd[4], unused[4];
  if (!hwyattn_test::LogicalDims(q.t, qd, unused) || !hwyattn_test::LogicalDims(k.t, kd, unused) ||
      !hwyattn_test::LogicalDims(v.t, vd, unused)) {
    Die("dims", "an accepted call with a rank outside 1..4");
  }
  const double cost = static_cast<double>(qd[0]) * qd[1] * qd[2] * kd[2] * (qd[3] + vd[3]);
  if (cost > kReferenceBudget) {
    ExpectFinite("out", out.t, false);
    if (has_w) ExpectFinite("weights", weights.t, false);
    if (has_lse) ExpectFinite("lse", lse.t, true);
    return 0;
  }
  // bf16 products: the oracle on the rounded operands; out also carries P's
  // rounding (each weight within 2^-9 of itself: 2^-9 max|v| at most). Only
  // when the caller's struct reaches the field: a struct_size from an older
  // header (Corrupt may set one) makes the library read precision as F32.
  const bool bf16 =
      opts.struct_size >= offsetof(hwyattn_sdpa_options, precision) + sizeof(opts.precision) &&
      opts.precision == HWYATTN_PRECISION_BF16;
  if (bf16) {
    for (Arg* a : {&q, &k, &v}) RoundOperandsToBf16(a);
  }
  hwyattn_test::RefResult ref;
  std::string error;
  if (!hwyattn_test::ReferenceSdpa(q.t, k.t, v.t, &opts, &ref, &error)) {
    Die("reference refused a call the library accepted", error);
  }
  // Integer products against the unquantized oracle: each score within e =
  // |scale| sum_b max_b|q| / 254 sum_b |k| (the header), bounded by max|q|
  // (<= 1) and the largest key row's sum; weights move by factors within
  // exp(+-2e), lse by e.
  const bool int8 =
      opts.struct_size >= offsetof(hwyattn_sdpa_options, precision) + sizeof(opts.precision) &&
      opts.precision == HWYATTN_PRECISION_INT8;
  double int8_e = 0.0;
  if (int8) {
    int64_t ks[4], unused[4];
    hwyattn_test::LogicalDims(k.t, ks, unused);
    double k_sum = 0.0;
    for (int64_t b = 0; b < ks[0]; ++b)
      for (int64_t h = 0; h < ks[1]; ++h)
        for (int64_t j = 0; j < ks[2]; ++j) {
          double sum = 0.0;
          for (int64_t d = 0; d < ks[3]; ++d) {
            const int64_t idx[4] = {b, h, j, d};
            sum += std::fabs(hwyattn_test::ReadElement(k.t, idx));
          }
          k_sum = std::max(k_sum, sum);
        }
    const double scale = opts.scale != 0.0f ? std::fabs(static_cast<double>(opts.scale))
                                            : 1.0 / std::sqrt(static_cast<double>(qd[3]));
    int8_e = scale / 254.0 * k_sum;
  }
  const double int8_tol = std::expm1(2.0 * int8_e);
  const double store = StoreRounding(out.t);
  // Scores reach |scale| D = 40 (every product aligned by a broadcast
  // stride): their float32 roundings reach the outputs (ScoreTolerance).
  const double score_tol = hwyattn_test::ScoreTolerance(ref.score_magnitude, qd[3]);
  Compare("out", out.t, ref.out, /*floor=*/1.0,
          (bf16 ? 1.01 / 512 + 1e-5 : 1e-5) + store + score_tol + int8_tol);  // |v| <= 1
  // Probabilities in [0, 1]: absolute.
  if (has_w) Compare("weights", weights.t, ref.weights, /*floor=*/1.0, 1e-5 + score_tol + int8_tol);
  if (has_lse)  // as sdpa_test: 1e-5 * max(1, |lse|), and the scores' roundings
    Compare("lse", lse.t, ref.lse, /*floor=*/1.0, 1e-5, score_tol / 2 + int8_e);
  return 0;
}

// y = x W^T + b in double, W [n, k].
HWYATTN_FUZZ_NO_COVERAGE std::vector<double> Linear(const std::vector<double>& x, int64_t rows,
                                                    int64_t k, const float* w, int64_t n,
                                                    const float* b) {
  std::vector<double> y(static_cast<size_t>(rows * n));
  for (int64_t m = 0; m < rows; ++m)
    for (int64_t j = 0; j < n; ++j) {
      double acc = b ? b[j] : 0.0;
      for (int64_t i = 0; i < k; ++i) acc += x[static_cast<size_t>(m * k + i)] * w[j * k + i];
      y[static_cast<size_t>(m * n + j)] = acc;
    }
  return y;
}

int FuzzMha(FuzzedDataProvider& in) {
  const int64_t H = in.ConsumeIntegralInRange(1, 4), hd = in.ConsumeIntegralInRange(1, 9);
  const int64_t E = in.ConsumeBool() ? H * hd : in.ConsumeIntegralInRange(1, 24);
  int64_t hkv = H;
  while (in.ConsumeBool() && hkv > 1) {
    --hkv;
    while (H % hkv != 0) --hkv;
  }
  const bool self = in.ConsumeBool();
  const int64_t kdim = self ? E : in.ConsumeIntegralInRange(1, 20);
  const int64_t vdim = self ? E : in.ConsumeIntegralInRange(1, 20);
  const bool bias = in.ConsumeBool();
  const int64_t qw = H * hd, kw = hkv * hd;
  std::vector<float> wq(static_cast<size_t>(qw * E)), wk(static_cast<size_t>(kw * kdim)),
      wv(static_cast<size_t>(kw * vdim)), wo(static_cast<size_t>(E * qw)),
      bs(static_cast<size_t>(2 * qw + 2 * kw + E));
  uint32_t x = in.ConsumeIntegral<uint32_t>() | 1;
  for (auto* vec : {&wq, &wk, &wv, &wo, &bs}) {
    for (float& f : *vec) {
      x ^= x << 13, x ^= x >> 17, x ^= x << 5;
      f = (static_cast<float>(x % 20001) / 10000.0f - 1.0f) * 0.4f;
    }
  }
  hwyattn_mha_config cfg;
  hwyattn_mha_config_init(&cfg);
  cfg.embed_dim = E;
  cfg.num_heads = H;
  cfg.head_dim = (E == H * hd && in.ConsumeBool()) ? 0 : hd;
  cfg.num_kv_heads = hkv;
  cfg.kdim = kdim;
  cfg.vdim = vdim;
  cfg.has_bias = bias;
  const float* b = bs.data();
  const hwyattn_mha_weights w = {wq.data(),
                                 wk.data(),
                                 wv.data(),
                                 wo.data(),
                                 bias ? b : nullptr,
                                 bias ? b + qw : nullptr,
                                 bias ? b + qw + kw : nullptr,
                                 bias ? b + qw + 2 * kw : nullptr};
  // bf16 weights in one module of four; now and then a weight_dtype that is
  // neither F32 nor BF16, which must be refused naming the field.
  const int weight_kind = in.ConsumeIntegralInRange(0, 7);
  const bool bf16_weights = weight_kind < 2;
  cfg.weight_dtype = bf16_weights ? HWYATTN_BF16 : HWYATTN_F32;
  hwyattn_mha* m = nullptr;
  if (weight_kind == 7) {
    const int bad = in.ConsumeIntegralInRange(-3, 9);
    if (bad != HWYATTN_F32 && bad != HWYATTN_BF16) {
      cfg.weight_dtype = static_cast<hwyattn_dtype>(bad);
      if (hwyattn_mha_create(&cfg, &w, &m) != HWYATTN_INVALID_ARGUMENT || m != nullptr ||
          strstr(hwyattn_last_error(), "cfg: weight_dtype") == nullptr) {
        Die("mha_create", "a bad weight_dtype was not refused naming the field");
      }
      return 0;
    }
  }
  if (hwyattn_mha_create(&cfg, &w, &m) != HWYATTN_OK) Die("mha_create", hwyattn_last_error());
  std::unique_ptr<hwyattn_mha, void (*)(hwyattn_mha*)> guard(m, hwyattn_mha_destroy);
  // The reference multiplies what the module holds: the weights rounded to
  // bf16 (the products stay fp32: the same tolerance).
  if (bf16_weights) {
    for (auto* vec : {&wq, &wk, &wv, &wo}) {
      for (float& f : *vec) {
        f = static_cast<float>(hwyattn_test::Bf16ToDouble(hwyattn_test::FloatToBf16(f)));
      }
    }
  }

  const int64_t B = in.ConsumeIntegralInRange(1, 3), Lq = in.ConsumeIntegralInRange(1, 40);
  const int64_t Lk = self ? Lq : in.ConsumeIntegralInRange(1, 50);
  Arg query, key, value, out, mask, weights;
  const int64_t qs[4] = {1, B, Lq, E}, ks[4] = {1, B, Lk, kdim}, vs[4] = {1, B, Lk, vdim};
  Describe(&query, in, qs, HWYATTN_F32, false, 3);
  const hwyattn_dtype kTypes[3] = {HWYATTN_F32, HWYATTN_F16, HWYATTN_BF16};
  const hwyattn_dtype ot = in.ConsumeBool() ? HWYATTN_F32 : kTypes[in.ConsumeIntegralInRange(0, 2)];
  Describe(&out, in, qs, ot, true, 3);
  if (!self) {
    Describe(&key, in, ks, HWYATTN_F32, false, 3);
    Describe(&value, in, vs, HWYATTN_F32, false, 3);
  }
  OptionsStorage storage;
  memset(&storage, 0, sizeof(storage));
  hwyattn_sdpa_options& opts = storage.opts;
  hwyattn_sdpa_options_init(&opts);
  opts.causal = static_cast<hwyattn_causal>(in.ConsumeIntegralInRange(0, 2));
  std::vector<Arg*> args = {&query, &out};
  if (!self) args.push_back(&key), args.push_back(&value);
  const bool has_mask = in.ConsumeBool(), has_w = in.ConsumeBool();
  if (has_mask) {
    const int64_t ms[4] = {1, 1, Lq, Lk};
    Describe(&mask, in, ms, HWYATTN_BOOL, false, 2);
    args.push_back(&mask);
  }
  if (has_w) {
    const int64_t ws[4] = {B, H, Lq, Lk};
    Describe(&weights, in, ws, HWYATTN_F32, true);
    args.push_back(&weights);
  }
  std::vector<int32_t> kv_len;
  if (in.ConsumeBool()) {
    for (int64_t i = 0; i < B; ++i)
      kv_len.push_back(in.ConsumeIntegralInRange<int32_t>(0, static_cast<int32_t>(Lk)));
  }
  if (in.ConsumeIntegralInRange(0, 2) == 0) Corrupt(in, args, &opts, &kv_len);
  if (!kv_len.empty()) opts.kv_len = kv_len.data();
  bool certainly_invalid = false;
  for (Arg* a : args) {
    if (!Allocate(a)) return 0;
    certainly_invalid |= a->certainly_invalid;
  }
  for (Arg* a : {&query, &key, &value}) {
    if (a->block) Fill(a, in, 1.0f);
  }
  if (has_mask) {
    Fill(&mask, in, 1.0f);
    opts.mask = &mask.t;
  }
  if (has_w) opts.weights = &weights.t;
  for (Arg* a : {&out, &weights}) {
    if (a->block) memset(a->block.get(), 0xC3, a->bytes);
  }
  if (!certainly_invalid) {
    double work = 1;
    for (const Arg* a : {&query, &key}) {
      for (int i = 0; a->block && i < a->t.rank && i < 4; ++i)
        work *= static_cast<double>(a->t.shape[i]);
    }
    if (work > 5e7) return 0;
  }
  const std::vector<std::pair<const Arg*, std::string>> before = {{&out, Bytes(out)},
                                                                  {&weights, Bytes(weights)}};
  opts.parallel = FuzzPool();
  MarkLastError();
  const hwyattn_status s = hwyattn_mha_forward(m, &query.t, self ? nullptr : &key.t,
                                               self ? nullptr : &value.t, &out.t, &opts);
  if (s != HWYATTN_OK) {
    ExpectCleanError(s, before);
    return 0;
  }
  if (certainly_invalid) Die("status", "a certainly invalid call returned OK");
  // Reference: projections in double, rounded to float (as the library
  // stores them), the sdpa oracle, the output projection in double.
  auto dense = [](const Arg& a, int64_t rows_b, int64_t rows_l, int64_t width) {
    std::vector<double> d(static_cast<size_t>(rows_b * rows_l * width));
    for (int64_t i = 0; i < rows_b; ++i)
      for (int64_t j = 0; j < rows_l; ++j)
        for (int64_t c = 0; c < width; ++c) {
          const int64_t idx[4] = {0, i, j, c};
          d[static_cast<size_t>((i * rows_l + j) * width + c)] =
              hwyattn_test::ReadElement(a.t, idx);
        }
    return d;
  };
  const std::vector<double> xq = dense(query, B, Lq, E);
  const std::vector<double> xk = self ? xq : dense(key, B, Lk, kdim);
  const std::vector<double> xv = self ? xq : dense(value, B, Lk, vdim);
  const std::vector<double> pq = Linear(xq, B * Lq, E, wq.data(), qw, w.b_q);
  const std::vector<double> pk = Linear(xk, B * Lk, kdim, wk.data(), kw, w.b_k);
  const std::vector<double> pv = Linear(xv, B * Lk, vdim, wv.data(), kw, w.b_v);
  std::vector<float> fq(pq.begin(), pq.end()), fk(pk.begin(), pk.end()), fv(pv.begin(), pv.end());
  auto heads = [&](float* data, int64_t h, int64_t len) {
    hwyattn_tensor t{};
    t.data = data;
    t.dtype = HWYATTN_F32;
    t.rank = 4;
    const int64_t shape[4] = {B, h, len, hd}, stride[4] = {len * h * hd, hd, h * hd, 1};
    memcpy(t.shape, shape, sizeof(shape));
    memcpy(t.stride, stride, sizeof(stride));
    return t;
  };
  const hwyattn_tensor tq = heads(fq.data(), H, Lq), tk = heads(fk.data(), hkv, Lk),
                       tv = heads(fv.data(), hkv, Lk);
  hwyattn_test::RefResult ref;
  std::string error;
  if (!hwyattn_test::ReferenceSdpa(tq, tk, tv, &opts, &ref, &error)) Die("reference", error);
  std::vector<double> attended(static_cast<size_t>(B * Lq * qw));
  for (int64_t bb = 0; bb < B; ++bb)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < Lq; ++i)
        for (int64_t d = 0; d < hd; ++d)
          attended[static_cast<size_t>((bb * Lq + i) * qw + h * hd + d)] =
              ref.out[static_cast<size_t>(ref.RowIndex(bb, h, i) * hd + d)];
  const std::vector<double> want = Linear(attended, B * Lq, qw, wo.data(), E, w.b_o);
  // Size of the terms every output is made of, through the whole layer:
  // |x_v| |W_v|^T + |b_v| averaged by the attention weights, then times
  // |W_o|^T plus |b_o| (rounding errors scale with these, not with the
  // possibly cancelling result).
  auto absolute = [](std::vector<double> v) {
    for (double& x : v) x = std::fabs(x);
    return v;
  };
  auto absolute_f = [](std::vector<float> v) {
    for (float& x : v) x = std::fabs(x);
    return v;
  };
  const std::vector<float> abs_wv = absolute_f(wv), abs_wo = absolute_f(wo), abs_b = absolute_f(bs);
  const std::vector<double> v_terms = Linear(absolute(xv), B * Lk, vdim, abs_wv.data(), kw,
                                             bias ? abs_b.data() + qw + kw : nullptr);
  std::vector<double> attended_terms(attended.size(), 0.0);
  for (int64_t bb = 0; bb < B; ++bb)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < Lq; ++i)
        for (int64_t j = 0; j < Lk; ++j) {
          const double pw = ref.weights[static_cast<size_t>(ref.RowIndex(bb, h, i) * Lk + j)];
          for (int64_t d = 0; d < hd; ++d) {
            attended_terms[static_cast<size_t>((bb * Lq + i) * qw + h * hd + d)] +=
                pw * v_terms[static_cast<size_t>((bb * Lk + j) * kw + (h / (H / hkv)) * hd + d)];
          }
        }
  const std::vector<double> terms = Linear(attended_terms, B * Lq, qw, abs_wo.data(), E,
                                           bias ? abs_b.data() + qw + 2 * kw : nullptr);
  double floor = 0.0;
  for (double x : terms) floor = std::max(floor, x);
  Compare("mha out", out.t, want, floor, 1e-5 + StoreRounding(out.t), StoreAbsolute(out.t));
  if (has_w) Compare("mha weights", weights.t, ref.weights, /*floor=*/1.0);
  return 0;
}

// hwyattn_merge_states: 1..5 partials of a random [B, H, L, Dv] in random
// layouts (permuted, padded, broadcast), lses with -inf rows, optional sinks
// (some -inf) and lse_out, sometimes in place (out = outs[0], lse_out =
// lses[0]), sometimes a NULL element or a bad n, and optionally one field of
// one descriptor corrupted. Accepted: out and lse_out match the merge
// computed in double from the inputs as they were, and no input changed
// (but the in-place ones). Rejected: a clean error, nothing written.
int FuzzMerge(FuzzedDataProvider& in) {
  const int64_t B = in.ConsumeIntegralInRange(1, 3), H = in.ConsumeIntegralInRange(1, 4);
  const int64_t L = in.ConsumeIntegralInRange(1, 40), Dv = in.ConsumeIntegralInRange(1, 70);
  const int n = in.ConsumeIntegralInRange(1, 5);
  const bool in_place = in.ConsumeIntegralInRange(0, 3) == 0;
  const bool has_lse = in.ConsumeBool(), has_sinks = in.ConsumeBool();
  const int64_t os[4] = {B, H, L, Dv}, ls[4] = {1, B, H, L};
  std::vector<Arg> outs(static_cast<size_t>(n)), lses(static_cast<size_t>(n));
  Arg out, lse;
  std::vector<Arg*> args;
  for (int i = 0; i < n; ++i) {
    Describe(&outs[static_cast<size_t>(i)], in, os, HWYATTN_F32, false);
    Describe(&lses[static_cast<size_t>(i)], in, ls, HWYATTN_F32, false, 3);
    args.push_back(&outs[static_cast<size_t>(i)]);
    args.push_back(&lses[static_cast<size_t>(i)]);
  }
  if (!in_place) {
    Describe(&out, in, os, HWYATTN_F32, true);
    args.push_back(&out);
    if (has_lse) {
      Describe(&lse, in, ls, HWYATTN_F32, true, 3);
      args.push_back(&lse);
    }
  }
  OptionsStorage unused;
  memset(&unused, 0, sizeof(unused));
  std::vector<int32_t> no_kv_len;
  if (in.ConsumeIntegralInRange(0, 2) == 0) Corrupt(in, args, &unused.opts, &no_kv_len);
  bool certainly_invalid = false;
  for (Arg* a : args) {
    if (!Allocate(a)) return 0;
    certainly_invalid |= a->certainly_invalid;
  }
  for (int i = 0; i < n; ++i) {
    Fill(&outs[static_cast<size_t>(i)], in, 1.0f);
    Arg& l = lses[static_cast<size_t>(i)];
    Fill(&l, in, 3.0f);
    if (l.t.dtype == HWYATTN_F32) {
      const int every = in.ConsumeIntegralInRange(1, 6);
      float* f = reinterpret_cast<float*>(l.block.get());
      for (size_t j = 0; j < l.bytes / 4; j += static_cast<size_t>(every)) {
        if (every != 6) f[j] = -INFINITY;
      }
    }
  }
  std::vector<float> sinks;
  if (has_sinks) {
    for (int64_t h = 0; h < H; ++h) {
      sinks.push_back(in.ConsumeIntegralInRange(0, 3) == 0
                          ? -INFINITY
                          : in.ConsumeFloatingPointInRange(-2.0f, 4.0f));
    }
    if (in.ConsumeIntegralInRange(0, 7) == 0) {  // an invalid sink
      sinks[static_cast<size_t>(in.ConsumeIntegralInRange<int64_t>(0, H - 1))] =
          in.ConsumeBool() ? NAN : INFINITY;
      certainly_invalid = true;
    }
  }
  Arg* const out_arg = in_place ? &outs[0] : &out;
  Arg* const lse_arg = in_place ? (has_lse ? &lses[0] : nullptr) : (has_lse ? &lse : nullptr);
  if (!in_place) memset(out.block.get(), 0xC3, out.bytes);
  if (!in_place && has_lse) memset(lse.block.get(), 0xC3, lse.bytes);
  std::vector<const hwyattn_tensor*> out_ptrs, lse_ptrs;
  for (int i = 0; i < n; ++i) {
    out_ptrs.push_back(&outs[static_cast<size_t>(i)].t);
    lse_ptrs.push_back(&lses[static_cast<size_t>(i)].t);
  }
  int32_t count = n;
  switch (in.ConsumeIntegralInRange(0, 15)) {
    case 0:
      count = in.ConsumeBool() ? 0 : -n;
      certainly_invalid = true;
      break;
    case 1:
      out_ptrs[static_cast<size_t>(n - 1)] = nullptr;
      certainly_invalid = true;
      break;
    case 2:
      lse_ptrs[0] = nullptr;
      certainly_invalid = true;
      break;
    default: break;
  }
  // Every input as it was (the in-place ones are overwritten by a success).
  std::vector<std::string> inputs_before;
  for (const Arg* a : args) inputs_before.push_back(Bytes(*a));
  std::vector<std::pair<const Arg*, std::string>> before = {{out_arg, Bytes(*out_arg)}};
  if (lse_arg != nullptr) before.push_back({lse_arg, Bytes(*lse_arg)});
  if (in.ConsumeBool()) hwyattn_set_num_threads(in.ConsumeIntegralInRange(1, 3));
  MarkLastError();
  const hwyattn_status s = hwyattn_merge_states(count, out_ptrs.data(), lse_ptrs.data(),
                                                has_sinks ? sinks.data() : nullptr, &out_arg->t,
                                                lse_arg != nullptr ? &lse_arg->t : nullptr);
  if (s != HWYATTN_OK) {
    ExpectCleanError(s, before);
    return 0;
  }
  if (certainly_invalid) Die("merge status", "a certainly invalid call returned OK");
  // The inputs as they were: descriptors over copies of their blocks.
  auto as_before = [&](const Arg& a) {
    hwyattn_tensor t = a.t;
    for (size_t j = 0; j < args.size(); ++j) {
      if (args[j] == &a) t.data = const_cast<char*>(inputs_before[j].data());
    }
    return t;
  };
  for (size_t j = 0; j < args.size(); ++j) {
    const Arg* a = args[j];
    if (a == out_arg || a == lse_arg) continue;
    if (Bytes(*a) != inputs_before[j]) Die("merge", "an input changed");
  }
  int64_t shape[4], stride[4];
  if (!hwyattn_test::LogicalDims(outs[0].t, shape, stride)) Die("merge", "bad dims");
  const int64_t b_n = shape[0], h_n = shape[1], l_n = shape[2], d_n = shape[3];
  std::vector<hwyattn_tensor> o_was, l_was;
  for (int i = 0; i < n; ++i) {
    o_was.push_back(as_before(outs[static_cast<size_t>(i)]));
    l_was.push_back(as_before(lses[static_cast<size_t>(i)]));
  }
  std::vector<double> want(static_cast<size_t>(b_n * h_n * l_n * d_n), 0.0),
      want_lse(static_cast<size_t>(b_n * h_n * l_n));
  for (int64_t b = 0; b < b_n; ++b)
    for (int64_t h = 0; h < h_n; ++h)
      for (int64_t l = 0; l < l_n; ++l) {
        const size_t row = static_cast<size_t>((b * h_n + h) * l_n + l);
        const double sink = has_sinks ? sinks[static_cast<size_t>(h)] : -INFINITY;
        std::vector<double> x;
        double top = sink;
        for (int i = 0; i < n; ++i) {
          const int64_t idx[4] = {0, b, h, l};
          x.push_back(hwyattn_test::ReadElement(l_was[static_cast<size_t>(i)], idx));
          top = std::max(top, x.back());
        }
        if (top == -INFINITY) {
          want_lse[row] = -INFINITY;
          continue;
        }
        double sum = std::exp(sink - top);
        for (double xi : x) sum += std::exp(xi - top);
        want_lse[row] = top + std::log(sum);
        for (int i = 0; i < n; ++i) {
          if (x[static_cast<size_t>(i)] == -INFINITY) continue;
          const double w = std::exp(x[static_cast<size_t>(i)] - want_lse[row]);
          for (int64_t d = 0; d < d_n; ++d) {
            const int64_t idx[4] = {b, h, l, d};
            want[row * static_cast<size_t>(d_n) + static_cast<size_t>(d)] +=
                w * hwyattn_test::ReadElement(o_was[static_cast<size_t>(i)], idx);
          }
        }
      }
  Compare("merge out", out_arg->t, want, /*floor=*/1.0);  // |outs| <= 1
  if (lse_arg != nullptr) Compare("merge lse", lse_arg->t, want_lse, /*floor=*/1.0);
  return 0;
}

}  // namespace

// hwyattn_kv_cache_write and hwyattn_kv_attention (fuzz_kv.cc).
int FuzzKv(FuzzedDataProvider& in, const hwyattn_parallel* pool);

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  if (in.ConsumeBool()) return FuzzMha(in);
  switch (in.ConsumeIntegralInRange(0, 3)) {
    case 0: return FuzzMerge(in);
    case 3: return FuzzKv(in, FuzzPool());
    default: return FuzzSdpa(in);
  }
}
