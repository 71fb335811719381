// SPDX-License-Identifier: Apache-2.0
//
// bench_matmul.cc: the library's packed matmul (src/linear.h, the
// projections of the MHA module) against oneDNN's dnnl_sgemm on the same
// problems, in the same process, at 1 and 2 threads:
//
//   BM_Matmul/<impl>/<problem>/threads:<n>
//     impl     hwyattn | onednn
//     problem  sq512 sq1024 sq2048 (M = N = K), m1_qkv (M=2048 K=512 N=1536:
//              M1's fused Q/K/V projection, B*L rows), m1_out (M=2048 K=512
//              N=512: M1's output projection)
//
// Both compute Y[M][N] = X[M][K] W^T with W [N][K] (nn.Linear's layout):
//   hwyattn  W packed once with PackedWeights::Pack outside the timed loop (as
//            hwyattn_mha_create does), X packed inside Linear on every call;
//            a zero bias is added (the MHA's Linear always adds one).
//   onednn   dnnl_sgemm('N', 'T', ...) row-major on the same W: its packing
//            of both operands is inside every call, as for any plain SGEMM.
//
// Threads: hwyattn_set_num_threads(n) and omp_set_num_threads(n) before every
// run; oneDNN is Debian's OpenMP build (libgomp, the same runtime as hwyattn)
// and sizes its parallel regions from omp_get_max_threads(). At start-up a
// sanity check times both at 1 and 2 threads on sq1024 and prints the
// speed-ups, so a build where one of them ignores the thread count shows it.
// It also checks hwyattn against oneDNN (and both against a double-precision
// product) on one odd-sized problem, max|diff| / max|ref| < 1e-5.
//
// Counters: GFLOPS (2*M*N*K per call) and pct_peak (% of the fp32 FMA peak
// this process measures at start-up, bench/machine_peak.cc). Built without
// oneDNN (HWYATTN_BENCH_HAVE_DNNL undefined), only the hwyattn rows exist.
//
// Own flags (before Google Benchmark's): --peak_seconds=S, --skip_peaks.

#include <hwyattn.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>

#include "bench/bench_flags.h"
#include "bench/machine_peak.h"
#include "src/linear.h"

#ifdef HWYATTN_BENCH_HAVE_DNNL
#include <dnnl.h>
#endif

namespace {

struct Problem {
  const char* id;
  int64_t M, N, K;
  double min_time;  // seconds per repetition
};

const Problem kProblems[] = {
    {"sq512", 512, 512, 512, 0.2},     {"sq1024", 1024, 1024, 1024, 0.3},
    {"sq2048", 2048, 2048, 2048, 0.4}, {"m1_qkv", 2048, 1536, 512, 0.3},
    {"m1_out", 2048, 512, 512, 0.2},
};
constexpr int kThreadCounts[] = {1, 2};

double g_peak[3] = {0, 0, 0};  // measured FMA peak by thread count

void SetThreads(int n) {
  hwyattn_set_num_threads(n);
  omp_set_num_threads(n);
}

std::string Shape(const Problem& p) {
  char buf[96];
  snprintf(buf, sizeof(buf), "M=%lld N=%lld K=%lld", static_cast<long long>(p.M),
           static_cast<long long>(p.N), static_cast<long long>(p.K));
  return buf;
}

std::vector<float> RandomFloats(size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& f : v) f = uni(rng);
  return v;
}

// One problem's operands; W packed once for hwyattn.
struct Operands {
  int64_t M, N, K;
  std::vector<float> x, w, y;
  hwyattn::PackedWeights packed;
  bool ok = false;
  Operands(int64_t m, int64_t n, int64_t k)
      : M(m), N(n), K(k), x(RandomFloats(m * k, 11)), w(RandomFloats(n * k, 22)), y(m * n, 0.0f) {
    ok = packed.Pack(w.data(), nullptr, n, k);
  }
  hwyattn_status RunHwyattn() {
    const hwyattn::RowsView xv = hwyattn::RowsView::Dense(x.data(), M, K, K);
    const hwyattn::LinearOutput out = {&packed, hwyattn::RowsView::Dense(y.data(), M, N, N)};
    return hwyattn::Linear(xv, &out, 1);
  }
#ifdef HWYATTN_BENCH_HAVE_DNNL
  dnnl_status_t RunDnnl() {
    return dnnl_sgemm('N', 'T', M, N, K, 1.0f, x.data(), K, w.data(), K, 0.0f, y.data(), N);
  }
#endif
};

Operands& GetOperands(const Problem& p) {
  static std::map<std::string, std::unique_ptr<Operands>> cache;
  std::unique_ptr<Operands>& o = cache[p.id];
  if (!o) o.reset(new Operands(p.M, p.N, p.K));
  return *o;
}

void SetCounters(benchmark::State& state, const Problem& p, int threads) {
  using benchmark::Counter;
  const double gflop = 2.0 * p.M * p.N * p.K * static_cast<double>(state.iterations()) * 1e-9;
  state.counters["GFLOPS"] = Counter(gflop, Counter::kIsRate);
  const double peak = g_peak[threads];
  state.counters["pct_peak"] = Counter(peak > 0 ? gflop / peak * 100.0 : 0.0, Counter::kIsRate);
  state.SetLabel(Shape(p));
}

void BM_Hwyattn(benchmark::State& state, const Problem* problem) {
  const Problem& p = *problem;
  const int threads = static_cast<int>(state.range(0));
  Operands& o = GetOperands(p);
  if (!o.ok) {
    state.SkipWithError("PackedWeights::Pack: out of memory");
    return;
  }
  SetThreads(threads);
  hwyattn_status st = o.RunHwyattn();  // warms the scratch and the caches
  for (auto _ : state) {
    st = o.RunHwyattn();
    benchmark::DoNotOptimize(st);
    benchmark::ClobberMemory();
  }
  if (st != HWYATTN_OK) {
    state.SkipWithError("hwyattn::Linear failed");
    return;
  }
  SetCounters(state, p, threads);
}

#ifdef HWYATTN_BENCH_HAVE_DNNL
void BM_Onednn(benchmark::State& state, const Problem* problem) {
  const Problem& p = *problem;
  const int threads = static_cast<int>(state.range(0));
  Operands& o = GetOperands(p);
  SetThreads(threads);
  dnnl_status_t st = o.RunDnnl();  // JIT-generates its kernels, warms the caches
  for (auto _ : state) {
    st = o.RunDnnl();
    benchmark::DoNotOptimize(st);
    benchmark::ClobberMemory();
  }
  if (st != dnnl_success) {
    state.SkipWithError("dnnl_sgemm failed");
    return;
  }
  SetCounters(state, p, threads);
}

const char* IsaName(dnnl_cpu_isa_t isa) {
  switch (isa) {
    case dnnl_cpu_isa_sse41: return "sse41";
    case dnnl_cpu_isa_avx: return "avx";
    case dnnl_cpu_isa_avx2: return "avx2";
    case dnnl_cpu_isa_avx512_core: return "avx512_core";
    case dnnl_cpu_isa_avx512_core_vnni: return "avx512_core_vnni";
    case dnnl_cpu_isa_avx512_core_bf16: return "avx512_core_bf16";
    case dnnl_cpu_isa_avx512_core_amx: return "avx512_core_amx";
    case dnnl_cpu_isa_avx2_vnni: return "avx2_vnni";
    default: return "other";
  }
}
#endif

// Best-of-5 seconds per call of fn (after one warm-up call).
double TimeCall(const std::function<void()>& fn) {
  fn();
  double best = 1e30;
  for (int r = 0; r < 5; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    fn();
    best = std::min(best,
                    std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return best;
}

// Checks hwyattn against oneDNN (and both against a double-precision
// product) on an odd-sized problem. Returns false on a mismatch.
bool CheckCorrectness() {
  const int64_t M = 67, N = 45, K = 131;
  Operands o(M, N, K);
  if (!o.ok) return false;
  std::vector<double> ref(M * N);
  double max_ref = 0;
  for (int64_t i = 0; i < M; ++i) {
    for (int64_t j = 0; j < N; ++j) {
      double acc = 0;
      for (int64_t k = 0; k < K; ++k) acc += static_cast<double>(o.x[i * K + k]) * o.w[j * K + k];
      ref[i * N + j] = acc;
      max_ref = std::max(max_ref, std::fabs(acc));
    }
  }
  auto max_diff = [&](const std::vector<float>& a, const std::vector<float>& b_or_empty) {
    double d = 0;
    for (int64_t i = 0; i < M * N; ++i) {
      const double b = b_or_empty.empty() ? ref[i] : b_or_empty[i];
      d = std::max(d, std::fabs(a[i] - b));
    }
    return d;
  };
  SetThreads(1);
  if (o.RunHwyattn() != HWYATTN_OK) return false;
  const std::vector<float> yh = o.y;
  const double hw_ref = max_diff(yh, {}) / max_ref;
  bool ok = hw_ref < 1e-5;
#ifdef HWYATTN_BENCH_HAVE_DNNL
  std::fill(o.y.begin(), o.y.end(), 0.0f);
  if (o.RunDnnl() != dnnl_success) return false;
  const std::vector<float> yd = o.y;
  const double dn_ref = max_diff(yd, {}) / max_ref;
  const double hw_dn = max_diff(yh, yd) / max_ref;
  ok = ok && dn_ref < 1e-5 && hw_dn < 1e-5;
  fprintf(stderr,
          "correctness M=%lld N=%lld K=%lld: max|hwyattn - onednn| / max|ref| = %.2e, "
          "hwyattn vs double %.2e, onednn vs double %.2e: %s\n",
          static_cast<long long>(M), static_cast<long long>(N), static_cast<long long>(K), hw_dn,
          hw_ref, dn_ref, ok ? "ok" : "MISMATCH");
#else
  fprintf(stderr,
          "correctness M=%lld N=%lld K=%lld: hwyattn vs double %.2e: %s (built without oneDNN)\n",
          static_cast<long long>(M), static_cast<long long>(N), static_cast<long long>(K), hw_ref,
          ok ? "ok" : "MISMATCH");
#endif
  return ok;
}

// Times sq1024 at 1 and 2 threads for each implementation and prints the
// speed-ups (a thread count that is not honoured shows as ~1.0x).
void CheckThreads() {
  Operands o(1024, 1024, 1024);
  auto run = [&](bool dnnl, int threads) {
    (void)dnnl;  // unused without oneDNN
    SetThreads(threads);
    return TimeCall([&] {
#ifdef HWYATTN_BENCH_HAVE_DNNL
      if (dnnl) {
        o.RunDnnl();
        return;
      }
#endif
      o.RunHwyattn();
    });
  };
  const double h1 = run(false, 1), h2 = run(false, 2);
  std::string line = "threads sq1024: hwyattn " + std::to_string(h1 * 1e3).substr(0, 5) +
                     " ms (1t) / " + std::to_string(h2 * 1e3).substr(0, 5) +
                     " ms (2t) = " + std::to_string(h1 / h2).substr(0, 4) + "x";
#ifdef HWYATTN_BENCH_HAVE_DNNL
  const double d1 = run(true, 1), d2 = run(true, 2);
  line += ", onednn " + std::to_string(d1 * 1e3).substr(0, 5) + " ms (1t) / " +
          std::to_string(d2 * 1e3).substr(0, 5) +
          " ms (2t) = " + std::to_string(d1 / d2).substr(0, 4) + "x";
  if (d1 / d2 < 1.5 || h1 / h2 < 1.5) line += "  WARNING: a 2-thread run is not ~2x faster";
  benchmark::AddCustomContext("threads_check_onednn_2t_speedup",
                              std::to_string(d1 / d2).substr(0, 4));
#endif
  benchmark::AddCustomContext("threads_check_hwyattn_2t_speedup",
                              std::to_string(h1 / h2).substr(0, 4));
  fprintf(stderr, "%s\n", line.c_str());
}

}  // namespace

int main(int argc, char** argv) {
  // Own flags first; Google Benchmark rejects unknown ones.
  const hwyattn_bench::BenchFlags flags = hwyattn_bench::ParseBenchFlags(argc, argv);

  // hwyattn and oneDNN alternate problem by problem (and, with
  // --benchmark_enable_random_interleaving, repetition by repetition).
  for (const Problem& p : kProblems) {
    std::vector<std::pair<std::string, void (*)(benchmark::State&, const Problem*)>> impls = {
        {"hwyattn", BM_Hwyattn}};
#ifdef HWYATTN_BENCH_HAVE_DNNL
    impls.push_back({"onednn", BM_Onednn});
#endif
    for (const auto& impl : impls) {
      const std::string name = "BM_Matmul/" + impl.first + "/" + p.id;
      benchmark::internal::Benchmark* b =
          benchmark::RegisterBenchmark(name.c_str(), impl.second, &p);
      b->ArgName("threads");
      for (int n : kThreadCounts) b->Arg(n);
      b->UseRealTime()->Unit(benchmark::kMillisecond)->MinTime(p.min_time);
    }
  }

  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;

  benchmark::AddCustomContext("hwyattn_version", hwyattn_version());
  benchmark::AddCustomContext("simd_target", hwyattn_simd_target());
#ifdef HWYATTN_BENCH_HAVE_DNNL
  const dnnl_version_t* v = dnnl_version();
  benchmark::AddCustomContext(
      "onednn_version",
      std::to_string(v->major) + "." + std::to_string(v->minor) + "." + std::to_string(v->patch));
  benchmark::AddCustomContext("onednn_isa", IsaName(dnnl_get_effective_cpu_isa()));
#else
  benchmark::AddCustomContext("onednn_version", "none (built without oneDNN)");
#endif
  if (!flags.listing) {
    if (!CheckCorrectness()) {
      fprintf(stderr, "bench_matmul: correctness check failed\n");
      return 1;
    }
    CheckThreads();
  }
  hwyattn_bench::MeasureFmaPeaks(flags, g_peak);

  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
