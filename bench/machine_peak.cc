// SPDX-License-Identifier: Apache-2.0
//
// machine_peak.cc: fp32 FMA peak and streaming read bandwidth (see
// machine_peak.h), compiled for every Highway target and dispatched at run
// time (hwy/examples/skeleton.cc pattern).
//
// FMA model: a Zen 5 core issues two 512-bit FMAs per cycle with a 4-cycle
// latency, so 8 independent chains keep it busy; 24 chains (AVX3, 32 zmm
// registers: 24 accumulators + 2 constants) leave a margin, 12 on 16-register
// targets (AVX2). Per iteration: kAcc vector FMAs = kAcc * Lanes * 2 FLOPs.
// The constants keep every accumulator bounded (a -> a*m + c converges to
// c/(1-m) = 1), so no denormals or infinities slow the loop down.
//
// Bandwidth model: each thread streams its own contiguous slice once per
// pass, 8 vector accumulators hide the load-to-add latency, no stores.

#include <stddef.h>
#include <stdint.h>

#include <algorithm>
#include <chrono>
#include <vector>

#include <omp.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#include <immintrin.h>
#endif

#include "bench/machine_peak.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "bench/machine_peak.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/cache_control.h"
#include "hwy/highway.h"
// After highway.h
#include "hwy/aligned_allocator.h"
#include "src/ops/registers-inl.h"
#include "src/ops/vectors-inl.h"

HWY_BEFORE_NAMESPACE();
namespace hwyattn_bench {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Independent accumulators: 24 with 32 vector registers, 12 with 16 (the
// kernels' count, src/ops/vectors-inl.h).
constexpr int kAcc = hwyattn::HWY_NAMESPACE::kVectorRegisters >= 32 ? 24 : 12;

// Returns the FLOPs one iteration of FmaLoop performs.
HWY_NOINLINE size_t FmaFlopsPerIteration() {
  const hn::ScalableTag<float> d;
  return static_cast<size_t>(kAcc) * hn::Lanes(d) * 2;
}

// Runs `iters` iterations of kAcc independent FMA chains and returns a value
// that depends on all of them (so the compiler keeps every FMA).
HWY_NOINLINE float FmaLoop(size_t iters, float seed) {
  const hn::ScalableTag<float> d;
  using V = hn::Vec<decltype(d)>;
  const V m = hn::Set(d, 0.999f);
  const V c = hn::Set(d, 1e-3f);
  // The accumulators as a pack of registers (src/ops/registers-inl.h: SVE's
  // vectors cannot be array elements).
  using hwyattn::HWY_NAMESPACE::Nth;
  using hwyattn::HWY_NAMESPACE::Unroll;
  return hwyattn::HWY_NAMESPACE::WithRegistersFrom<kAcc>(
      [&](auto i)
          HWYATTN_INLINE_LAMBDA { return hn::Set(d, seed + 0.01f * static_cast<float>(i)); },
      [&](auto&... acc) HWYATTN_INLINE_LAMBDA {
        for (size_t it = 0; it < iters; ++it) ((acc = hn::MulAdd(acc, m, c)), ...);
        V sum = Nth<0>(acc...);
        Unroll<kAcc - 1>([&](auto i)
                             HWYATTN_INLINE_LAMBDA { sum = hn::Add(sum, Nth<i + 1>(acc...)); });
        return hn::GetLane(hn::SumOfLanes(d, sum));
      });
}

// Sums `n` floats (n a multiple of 8 vectors, p vector-aligned) with 8
// accumulators.
HWY_NOINLINE float SumStream(const float* HWY_RESTRICT p, size_t n) {
  const hn::ScalableTag<float> d;
  const size_t N = hn::Lanes(d);
  auto a0 = hn::Zero(d), a1 = hn::Zero(d), a2 = hn::Zero(d), a3 = hn::Zero(d);
  auto a4 = hn::Zero(d), a5 = hn::Zero(d), a6 = hn::Zero(d), a7 = hn::Zero(d);
  for (size_t i = 0; i + 8 * N <= n; i += 8 * N) {
    a0 = hn::Add(a0, hn::Load(d, p + i + 0 * N));
    a1 = hn::Add(a1, hn::Load(d, p + i + 1 * N));
    a2 = hn::Add(a2, hn::Load(d, p + i + 2 * N));
    a3 = hn::Add(a3, hn::Load(d, p + i + 3 * N));
    a4 = hn::Add(a4, hn::Load(d, p + i + 4 * N));
    a5 = hn::Add(a5, hn::Load(d, p + i + 5 * N));
    a6 = hn::Add(a6, hn::Load(d, p + i + 6 * N));
    a7 = hn::Add(a7, hn::Load(d, p + i + 7 * N));
  }
  a0 =
      hn::Add(hn::Add(hn::Add(a0, a1), hn::Add(a2, a3)), hn::Add(hn::Add(a4, a5), hn::Add(a6, a7)));
  return hn::GetLane(hn::SumOfLanes(d, a0));
}

// Prefetches p's line into L1 (prefetcht0 on x86), or with l2 into L2
// (prefetcht1).
HWY_INLINE void PrefetchFor(const float* p, bool l2) {
  if (l2) {
    __builtin_prefetch(p, 0, 2);
  } else {
    __builtin_prefetch(p, 0, 3);
  }
}

// Sums the `n` floats of p (n a multiple of 2 vectors, p vector-aligned) with
// 2 accumulators, prefetching `next`'s n floats (nullptr: none) a line per
// vector pair, into L1 or (l2) L2: one span of a paged cache while a later
// one comes in.
HWY_NOINLINE float SumSpan(const float* HWY_RESTRICT p, size_t n, const float* next, bool l2) {
  const hn::ScalableTag<float> d;
  const size_t N = hn::Lanes(d);
  auto a0 = hn::Zero(d), a1 = hn::Zero(d);
  for (size_t i = 0; i + 2 * N <= n; i += 2 * N) {
    if (next != nullptr) {
      PrefetchFor(next + i, l2);
      PrefetchFor(next + i + N, l2);
    }
    a0 = hn::Add(a0, hn::Load(d, p + i));
    a1 = hn::Add(a1, hn::Load(d, p + i + N));
  }
  return hn::GetLane(hn::SumOfLanes(d, hn::Add(a0, a1)));
}

// Bytes of one vector, for slicing the stream buffer.
HWY_NOINLINE size_t VectorBytes() {
  const hn::ScalableTag<float> d;
  return hn::Lanes(d) * sizeof(float);
}

HWY_NOINLINE const char* TargetNameHere() { return hwy::TargetName(HWY_TARGET); }

// NOLINTNEXTLINE(google-readability-namespace-comments)
}  // namespace HWY_NAMESPACE
}  // namespace hwyattn_bench
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace hwyattn_bench {

HWY_EXPORT(FmaFlopsPerIteration);
HWY_EXPORT(FmaLoop);
HWY_EXPORT(SumStream);
HWY_EXPORT(SumSpan);
HWY_EXPORT(VectorBytes);
HWY_EXPORT(TargetNameHere);

namespace {

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Sink for results, so no loop is optimised away.
volatile float g_sink;

// The AVX512_BF16 dot-product loop: 24 independent vdpbf16ps chains (each
// 16 lanes x 2 bf16 products = 64 FLOPs), the same register budget as the
// fp32 FmaLoop on AVX3. The operands (2^-10 each) keep every sum far from
// denormals and overflow.
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
constexpr int kDotAcc = 24;
constexpr double kDotFlopsPerIteration = kDotAcc * 16 * 2 * 2;
__attribute__((target("avx512f,avx512bw,avx512bf16"), noinline)) float DotLoop(size_t iters,
                                                                               float seed) {
  __m512 acc[kDotAcc];
  for (int i = 0; i < kDotAcc; ++i) acc[i] = _mm512_set1_ps(seed + 0.01f * static_cast<float>(i));
  const __m512bh a = (__m512bh)_mm512_set1_epi32(0x3A803A80);  // bf16 pairs of 2^-10
  const __m512bh b = a;
  for (size_t it = 0; it < iters; ++it) {
#pragma GCC unroll 32
    for (int i = 0; i < kDotAcc; ++i) acc[i] = _mm512_dpbf16_ps(acc[i], a, b);
  }
  __m512 sum = acc[0];
  for (int i = 1; i < kDotAcc; ++i) sum = _mm512_add_ps(sum, acc[i]);
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, sum);
  float total = 0.0f;
  for (float x : lanes) total += x;
  return total;
}
bool CpuHasBf16Dot() {
  unsigned eax, ebx, ecx, edx;
  if (__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) == 0 || !((ebx >> 16) & 1u)) return false;
  if (__get_cpuid_count(7, 1, &eax, &ebx, &ecx, &edx) == 0) return false;
  return (eax >> 5) & 1u;
}
#else
constexpr double kDotFlopsPerIteration = 1;
float DotLoop(size_t, float) { return 0.0f; }
bool CpuHasBf16Dot() { return false; }
#endif

// Runs FmaLoop(iters) (or DotLoop) on `threads` threads at once; returns the
// wall time from the common start to the last thread's end.
double TimeFmaLoop(int threads, size_t iters, bool dot = false) {
  double start = 0, end = 0;
  float total = 0;
#pragma omp parallel num_threads(threads) reduction(+ : total)
  {
#pragma omp barrier
#pragma omp master
    start = Now();
    const float seed = 1.0f + 0.1f * omp_get_thread_num();
    total += dot ? DotLoop(iters, seed) : HWY_DYNAMIC_DISPATCH(FmaLoop)(iters, seed);
#pragma omp barrier
#pragma omp master
    end = Now();
  }
  g_sink = total;
  return end - start;
}

}  // namespace

const char* PeakTargetName() { return HWY_DYNAMIC_DISPATCH(TargetNameHere)(); }

namespace {

double MeasurePeak(int threads, double seconds, int repeats, bool dot) {
  threads = std::max(threads, 1);
  const double flops_per_iter =
      dot ? kDotFlopsPerIteration
          : static_cast<double>(HWY_DYNAMIC_DISPATCH(FmaFlopsPerIteration)());
  // Calibrate: grow the iteration count until one run takes >= 20 ms.
  size_t iters = 1 << 16;
  double t = TimeFmaLoop(threads, iters, dot);
  while (t < 0.02) {
    iters *= 2;
    t = TimeFmaLoop(threads, iters, dot);
  }
  const size_t timed_iters = std::max<size_t>(1, static_cast<size_t>(iters * seconds / t));
  // Warm-up: at least `seconds` of full load, so the clock has ramped up.
  TimeFmaLoop(threads, timed_iters, dot);
  double best = 0;
  for (int r = 0; r < std::max(repeats, 1); ++r) {
    const double s = TimeFmaLoop(threads, timed_iters, dot);
    const double gflops = flops_per_iter * static_cast<double>(timed_iters) * threads / s * 1e-9;
    best = std::max(best, gflops);
  }
  return best;
}

}  // namespace

double MeasureFmaPeakGflops(int threads, double seconds, int repeats) {
  return MeasurePeak(threads, seconds, repeats, false);
}

double MeasureBf16DotPeakGflops(int threads, double seconds, int repeats) {
  return CpuHasBf16Dot() ? MeasurePeak(threads, seconds, repeats, true) : 0.0;
}

double MeasureReadBandwidthGBps(int threads, size_t bytes, int passes, ReadStat stat) {
  threads = std::max(threads, 1);
  const size_t vec_bytes = HWY_DYNAMIC_DISPATCH(VectorBytes)();
  // Each thread's slice is a multiple of 8 vectors (and of 4 KiB pages).
  const size_t granule = std::max<size_t>(8 * vec_bytes, 4096);
  const size_t slice_bytes = std::max<size_t>(granule, bytes / threads / granule * granule);
  const size_t slice_floats = slice_bytes / sizeof(float);
  const size_t total_floats = slice_floats * threads;
  hwy::AlignedFreeUniquePtr<float[]> buf = hwy::AllocateAligned<float>(total_floats);
  if (!buf) return 0.0;
  float* data = buf.get();

  std::vector<double> rates;
#pragma omp parallel num_threads(threads)
  {
    const int tid = omp_get_thread_num();
    float* mine = data + static_cast<size_t>(tid) * slice_floats;
    // First touch by the reading thread; small values keep the sums finite.
    for (size_t i = 0; i < slice_floats; ++i) mine[i] = static_cast<float>(i & 7) * 0.125f;
  }
  for (int pass = -1; pass < std::max(passes, 1); ++pass) {  // pass -1: untimed warm-up
    double start = 0, end = 0;
    float total = 0;
#pragma omp parallel num_threads(threads) reduction(+ : total)
    {
      const int tid = omp_get_thread_num();
      const float* mine = data + static_cast<size_t>(tid) * slice_floats;
#pragma omp barrier
#pragma omp master
      start = Now();
      total += HWY_DYNAMIC_DISPATCH(SumStream)(mine, slice_floats);
#pragma omp barrier
#pragma omp master
      end = Now();
    }
    g_sink = total;
    if (pass >= 0)
      rates.push_back(static_cast<double>(total_floats * sizeof(float)) / (end - start) * 1e-9);
  }
  std::sort(rates.begin(), rates.end());
  return stat == ReadStat::kBest ? rates.back() : rates[rates.size() / 2];
}

double MeasureSpanReadGBps(int threads, const std::vector<std::vector<const float*>>& units,
                           size_t span_bytes, size_t ahead, int passes) {
  threads = std::max(threads, 1);
  size_t spans = 0;
  for (const auto& u : units) spans += u.size();
  const size_t floats = span_bytes / sizeof(float);
  double best = 0;
  // Each pass twice, prefetching into L1 and into L2 (which the CPU streams
  // such spans faster with differs: Zen 5 L1, Zen 4 L2; src/targets.h).
  for (int run = -2; run < 2 * std::max(passes, 1); ++run) {  // -2, -1: untimed warm-up
    const bool l2 = (run & 1) != 0;
    float total = 0;
    const double start = Now();
#pragma omp parallel for num_threads(threads) schedule(dynamic, 1) reduction(+ : total)
    for (int64_t i = 0; i < static_cast<int64_t>(units.size()); ++i) {
      const std::vector<const float*>& u = units[static_cast<size_t>(i)];
      for (size_t j = 0; j < u.size(); ++j) {
        const float* next = j + ahead < u.size() ? u[j + ahead] : nullptr;
        total += HWY_DYNAMIC_DISPATCH(SumSpan)(u[j], floats, next, l2);
      }
    }
    const double seconds = Now() - start;
    g_sink = total;
    if (run >= 0) best = std::max(best, static_cast<double>(spans * span_bytes) / seconds * 1e-9);
  }
  return best;
}

}  // namespace hwyattn_bench
#endif  // HWY_ONCE
