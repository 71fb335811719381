// SPDX-License-Identifier: Apache-2.0
//
// bench_composition.cc: what fusion buys. Every attention row of bench/README.md (P1-P3,
// D1, D2, X1, T1) and the attention inside M1, each computed two ways in the
// same run, at 1 and 2 threads:
//
//   BM_Composition/<id>/fused/threads:<n>      hwyattn_sdpa (the fused kernel)
//   BM_Composition/<id>/composed/threads:<n>   three steps on the library's own
//                                              matmul, per (batch, kv head),
//                                              the query rows of its GQA group
//                                              together (Hq / Hkv heads x Lq):
//     1. S = Q K^T        K [Lk][D] packed as weights on every call
//                         (PackedWeights::Pack, part of the cost), Linear
//     2. P = softmax(S * scale) row by row over the whole Lq x Lk matrix
//                         (bench/composition_kernels.cc: Highway, three vector
//                         passes; causal rows zero their masked keys)
//     3. O = P V          V transposed to [D][Lk] and packed on every call, Linear
//
//   id   shape (Dv = D, layout [B, H, L, D] contiguous)
//   P1   B=1 H=8 L=1024 D=64
//   P2   B=1 H=8 L=2048 D=64 causal: the composed path computes the full S and
//        P V and masks in the softmax (a plain GEMM cannot skip the triangle)
//   P3   B=1 H=4 L=4096 D=128 causal (likewise)
//   D1   B=1 Hq=32 Hkv=8 Lq=1 Lk=4096 D=128: the composed path packs each K
//        (and V^T) once for the 4 query rows of its group
//   D2   B=8 H=8 Lq=1 Lk=2048 D=64
//   X1   B=4 H=8 Lq=128 Lk=768 D=64
//   M1a  B=4 H=8 L=512 D=64: the attention inside M1's layer,
//        without its projections
//   T1   B=1 H=2 L=3 D=2
//
// Threads: the composed path splits the B*Hkv kv heads over the threads (an OpenMP
// loop; each head's Linear calls then run on their thread, nested regions being
// inactive), the coarsest and cheapest split; with 1 thread it is one loop.
// The fused path uses hwyattn_set_num_threads.
//
// FLOPs for both by bench/README.md's formulas (non-causal 4*B*H*Lq*Lk*D, causal
// 2*B*H*L*(L+1)*D), so GFLOPS compares time only: the composed P2 really
// executes twice its counted FLOPs. Counters: GFLOPS, pct_peak (% of the fp32
// FMA peak measured at start-up). At its first run each row checks the
// composed output against the fused one (max|diff| / max|fused| < 1e-4) and
// prints the difference.
//
// Own flags (before Google Benchmark's): --peak_seconds=S, --skip_peaks.

#include <hwyattn.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>

#include "bench/composition_kernels.h"
#include "bench/bench_flags.h"
#include "bench/machine_peak.h"
#include "src/linear.h"

namespace {

struct Row {
  const char* id;
  int64_t B, H, Hkv, Lq, Lk, D;  // H: query heads
  bool causal;                   // top-left; only with Lq == Lk and H == Hkv
  double min_time;
  benchmark::TimeUnit unit;
};

const Row kRows[] = {
    {"P1", 1, 8, 8, 1024, 1024, 64, false, 0.3, benchmark::kMillisecond},
    {"P2", 1, 8, 8, 2048, 2048, 64, true, 0.4, benchmark::kMillisecond},
    {"P3", 1, 4, 4, 4096, 4096, 128, true, 0.5, benchmark::kMillisecond},
    {"D1", 1, 32, 8, 1, 4096, 128, false, 0.2, benchmark::kMillisecond},
    {"D2", 8, 8, 8, 1, 2048, 64, false, 0.2, benchmark::kMillisecond},
    {"X1", 4, 8, 8, 128, 768, 64, false, 0.3, benchmark::kMillisecond},
    {"M1a", 4, 8, 8, 512, 512, 64, false, 0.3, benchmark::kMillisecond},
    {"T1", 1, 2, 2, 3, 3, 2, false, 0.2, benchmark::kMicrosecond},
};
constexpr int kThreadCounts[] = {1, 2};

double g_peak[3] = {0, 0, 0};

double Flops(const Row& r) {
  if (r.causal) return 2.0 * r.B * r.H * r.Lq * (r.Lq + 1.0) * r.D;
  return 4.0 * r.B * r.H * r.Lq * r.Lk * r.D;
}

std::string Shape(const Row& r) {
  char buf[128];
  char heads[48];
  if (r.Hkv == r.H) {
    snprintf(heads, sizeof(heads), "H=%lld", static_cast<long long>(r.H));
  } else {
    snprintf(heads, sizeof(heads), "Hq=%lld Hkv=%lld", static_cast<long long>(r.H),
             static_cast<long long>(r.Hkv));
  }
  snprintf(buf, sizeof(buf), "B=%lld %s Lq=%lld Lk=%lld D=%lld%s", static_cast<long long>(r.B),
           heads, static_cast<long long>(r.Lq), static_cast<long long>(r.Lk),
           static_cast<long long>(r.D), r.causal ? " causal" : "");
  return buf;
}

struct Tensors {
  int64_t B, H, Hkv, Lq, Lk, D;
  std::vector<float> q, k, v, o_fused, o_composed;
  hwyattn_tensor tq, tk, tv, to;
  bool checked = false;
  std::string error;
  explicit Tensors(const Row& r)
      : B(r.B),
        H(r.H),
        Hkv(r.Hkv),
        Lq(r.Lq),
        Lk(r.Lk),
        D(r.D),
        q(r.B * r.H * r.Lq * r.D),
        k(r.B * r.Hkv * r.Lk * r.D),
        v(k.size()),
        o_fused(q.size(), 0.0f),
        o_composed(q.size(), 0.0f) {
    std::mt19937 rng(12345);
    std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
    for (std::vector<float>* b : {&q, &k, &v}) {
      for (float& f : *b) f = uni(rng);
    }
    const int64_t qs[4] = {B, H, Lq, D}, ks[4] = {B, Hkv, Lk, D};
    hwyattn_tensor_contiguous(&tq, q.data(), HWYATTN_F32, 4, qs);
    hwyattn_tensor_contiguous(&tk, k.data(), HWYATTN_F32, 4, ks);
    hwyattn_tensor_contiguous(&tv, v.data(), HWYATTN_F32, 4, ks);
    hwyattn_tensor_contiguous(&to, o_fused.data(), HWYATTN_F32, 4, qs);
  }
};

Tensors& GetTensors(const Row& r) {
  static std::map<std::string, std::unique_ptr<Tensors>> cache;
  std::unique_ptr<Tensors>& t = cache[r.id];
  if (!t) t.reset(new Tensors(r));
  return *t;
}

// Grow-only 64-byte aligned scratch of the calling thread: S and V^T.
float* ThreadBuffer(int which, size_t floats) {
  static thread_local hwyattn::AlignedFloats buffers[2];
  static thread_local size_t sizes[2] = {0, 0};
  if (sizes[which] < floats) {
    buffers[which] = hwyattn::AllocateFloats(floats);
    sizes[which] = buffers[which] ? floats : 0;
  }
  return buffers[which].get();
}

// The composed attention of all heads into t.o_composed. 0 on success.
int Composed(const Row& r, Tensors& t, int threads) {
  const int64_t kv_heads = r.B * r.Hkv;
  // A kv head's group: the query heads sharing it are consecutive in
  // [B, H, L, D], so their rows are one [group * Lq, D] block of Q and of O.
  const int64_t rows = r.H / r.Hkv * r.Lq;
  const float scale = 1.0f / std::sqrt(static_cast<float>(r.D));
  int failures = 0;
#pragma omp parallel for num_threads(threads) schedule(static) reduction(+ : failures)
  for (int64_t h = 0; h < kv_heads; ++h) {
    const float* q = t.q.data() + h * rows * r.D;
    const float* k = t.k.data() + h * r.Lk * r.D;
    const float* v = t.v.data() + h * r.Lk * r.D;
    float* o = t.o_composed.data() + h * rows * r.D;
    float* s = ThreadBuffer(0, static_cast<size_t>(rows * r.Lk));
    float* vt = ThreadBuffer(1, static_cast<size_t>(r.Lk * r.D));
    hwyattn::PackedWeights kp, vp;
    if (s == nullptr || vt == nullptr || !kp.Pack(k, nullptr, r.Lk, r.D)) {
      ++failures;
      continue;
    }
    // 1. S = Q K^T
    const hwyattn::LinearOutput s_out = {&kp, hwyattn::RowsView::Dense(s, rows, r.Lk, r.Lk)};
    if (hwyattn::Linear(hwyattn::RowsView::Dense(const_cast<float*>(q), rows, r.D, r.D), &s_out,
                        1) != HWYATTN_OK) {
      ++failures;
      continue;
    }
    // 2. P = softmax(S * scale)
    hwyattn_bench::SoftmaxRows(s, rows, r.Lk, r.Lk, scale, r.causal);
    // 3. O = P V
    hwyattn_bench::Transpose(v, r.Lk, r.D, vt);
    if (!vp.Pack(vt, nullptr, r.D, r.Lk)) {
      ++failures;
      continue;
    }
    const hwyattn::LinearOutput o_out = {&vp, hwyattn::RowsView::Dense(o, rows, r.D, r.D)};
    if (hwyattn::Linear(hwyattn::RowsView::Dense(s, rows, r.Lk, r.Lk), &o_out, 1) != HWYATTN_OK)
      ++failures;
  }
  return failures;
}

hwyattn_status Fused(const Row& r, Tensors& t) {
  hwyattn_sdpa_options opts;
  hwyattn_sdpa_options_init(&opts);
  opts.causal = r.causal ? HWYATTN_CAUSAL_TOP_LEFT : HWYATTN_CAUSAL_NONE;
  return hwyattn_sdpa(&t.tq, &t.tk, &t.tv, &t.to, &opts);
}

// Runs both once and compares them. "" or the mismatch.
std::string Check(const Row& r, Tensors& t) {
  hwyattn_set_num_threads(1);
  if (Fused(r, t) != HWYATTN_OK) return std::string("hwyattn_sdpa: ") + hwyattn_last_error();
  if (Composed(r, t, 1) != 0) return "composed attention: out of memory";
  double max_diff = 0, max_ref = 0;
  for (size_t i = 0; i < t.o_fused.size(); ++i) {
    max_ref = std::max(max_ref, static_cast<double>(std::fabs(t.o_fused[i])));
    max_diff = std::max(max_diff, static_cast<double>(std::fabs(t.o_fused[i] - t.o_composed[i])));
  }
  const bool ok = max_diff <= 1e-4 * max_ref;
  fprintf(stderr, "%s: composed vs fused max|diff| / max|fused| = %.2e: %s\n", r.id,
          max_diff / max_ref, ok ? "ok" : "MISMATCH");
  if (!ok) return std::string(r.id) + ": composed and fused outputs differ";
  return "";
}

void SetCounters(benchmark::State& state, const Row& r, int threads) {
  using benchmark::Counter;
  const double gflop = Flops(r) * static_cast<double>(state.iterations()) * 1e-9;
  state.counters["GFLOPS"] = Counter(gflop, Counter::kIsRate);
  const double peak = g_peak[threads];
  state.counters["pct_peak"] = Counter(peak > 0 ? gflop / peak * 100.0 : 0.0, Counter::kIsRate);
  state.SetLabel(Shape(r));
}

bool Prepare(benchmark::State& state, const Row& r, Tensors& t) {
  if (!t.checked) {
    t.error = Check(r, t);
    t.checked = true;
  }
  if (!t.error.empty()) {
    state.SkipWithError(t.error.c_str());
    return false;
  }
  return true;
}

void BM_Fused(benchmark::State& state, const Row* row) {
  const Row& r = *row;
  const int threads = static_cast<int>(state.range(0));
  Tensors& t = GetTensors(r);
  if (!Prepare(state, r, t)) return;
  hwyattn_set_num_threads(threads);
  hwyattn_status st = Fused(r, t);
  for (auto _ : state) {
    st = Fused(r, t);
    benchmark::DoNotOptimize(st);
    benchmark::ClobberMemory();
  }
  if (st != HWYATTN_OK) {
    state.SkipWithError("hwyattn_sdpa failed in the timed loop");
    return;
  }
  SetCounters(state, r, threads);
}

void BM_Composed(benchmark::State& state, const Row* row) {
  const Row& r = *row;
  const int threads = static_cast<int>(state.range(0));
  Tensors& t = GetTensors(r);
  if (!Prepare(state, r, t)) return;
  hwyattn_set_num_threads(threads);
  int failures = Composed(r, t, threads);
  for (auto _ : state) {
    failures += Composed(r, t, threads);
    benchmark::ClobberMemory();
  }
  if (failures != 0) {
    state.SkipWithError("composed attention: out of memory");
    return;
  }
  SetCounters(state, r, threads);
}

}  // namespace

int main(int argc, char** argv) {
  // Own flags first; Google Benchmark rejects unknown ones.
  const hwyattn_bench::BenchFlags flags = hwyattn_bench::ParseBenchFlags(argc, argv);
  // The composed path's Linear calls run inside its head loop: keep nested
  // regions inactive (libgomp's default, made explicit).
  omp_set_max_active_levels(1);

  for (const Row& r : kRows) {
    for (int composed = 0; composed < 2; ++composed) {
      const std::string name =
          std::string("BM_Composition/") + r.id + (composed ? "/composed" : "/fused");
      benchmark::internal::Benchmark* b =
          composed ? benchmark::RegisterBenchmark(name.c_str(), BM_Composed, &r)
                   : benchmark::RegisterBenchmark(name.c_str(), BM_Fused, &r);
      b->ArgName("threads");
      for (int n : kThreadCounts) b->Arg(n);
      b->UseRealTime()->Unit(r.unit)->MinTime(r.min_time);
    }
  }

  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;

  benchmark::AddCustomContext("hwyattn_version", hwyattn_version());
  benchmark::AddCustomContext("simd_target", hwyattn_simd_target());
  benchmark::AddCustomContext("softmax_target", hwyattn_bench::CompositionTargetName());
  hwyattn_bench::MeasureFmaPeaks(flags, g_peak);

  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
