// SPDX-License-Identifier: Apache-2.0
//
// bench_tiles.cc: the prefill's AVX512_BF16 register tiles alone
// (src/ops/flash_bf16.h), on one thread, against the vdpbf16ps peak this
// process measures at start-up: what the tiles reach before the kernel
// around them (packing, the online softmax, the pairing of P, the edges)
// takes its share. bench/README.md ("The register tiles alone") defines the
// rows:
//
//   BM_Bf16Tile/score/panels:<n>   S^T = K . Q^T: n panels of 8 keys against a
//                                  48-query tile at D = 64 (32 pairs); n = 1
//                                  repeats one panel (everything in L1), n = 16
//                                  is one 128-key step of the kernel
//   BM_Bf16Tile/value/blocks:<n>   O^T = O^T * alpha + V^T . P^T: n blocks of 8
//                                  value dims over 128 keys (64 pairs) for the
//                                  same 48 queries; n = 8 is one step at Dv = 64
//
// Counters: GFLOPS (2 per multiply-add) and pct_bf16_peak. Without
// AVX512_BF16 every row is skipped with a message. Own flags (before Google
// Benchmark's): --peak_seconds=S, --skip_peaks.

#include <hwyattn.h>
#include <stdint.h>
#include <stdlib.h>

#include <memory>
#include <random>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>

#include "bench/bench_flags.h"
#include "bench/machine_peak.h"
#include "src/ops/flash_bf16.h"
#include "src/targets.h"

namespace {

// The tiles of this architecture's bf16 target whose lane count is known at
// compile time (arm64: NEON's BFDOT tiles, measured against no peak: the
// machine peak is x86's).
#if defined(__x86_64__)
namespace tiles = hwyattn::avx512_bf16;
constexpr int64_t kTileTarget = HWY_AVX3;
#elif defined(__aarch64__)
namespace tiles = hwyattn::neon_bf16;
constexpr int64_t kTileTarget = HWY_NEON;
#else
#error "bf16 dot-product tiles exist on x86-64 and arm64 only (bench/CMakeLists.txt)"
#endif
using hwyattn::kBf16TileVectors;
using tiles::kLanes;
using tiles::kTileRows;

constexpr size_t kQueries = kBf16TileVectors * kLanes;  // 48 on x86-64
constexpr size_t kDimPairs = 32;                        // D = 64
constexpr size_t kKeyPairs = 64;                        // 128 keys

double g_bf16_peak = 0;  // 1 thread, GFLOP/s

struct FreeDeleter {
  void operator()(void* p) const { free(p); }
};

// A 64-byte aligned array of `n` words filled with bf16 pairs of values in
// [-1, 1) (finite, normal: the tiles' speed does not depend on them).
std::unique_ptr<uint32_t, FreeDeleter> Pairs(size_t n, std::mt19937* rng) {
  std::unique_ptr<uint32_t, FreeDeleter> p(
      static_cast<uint32_t*>(aligned_alloc(64, (n * sizeof(uint32_t) + 63) / 64 * 64)));
  std::uniform_int_distribution<uint32_t> mantissa(0, 127);
  for (size_t i = 0; i < n; ++i) {
    // 0x3F00..0x3F7F: 0.5 to 1, either sign, in each half.
    const uint32_t lo = 0x3F00u | mantissa(*rng) | ((*rng)() & 1 ? 0x8000u : 0u);
    const uint32_t hi = 0x3F00u | mantissa(*rng) | ((*rng)() & 1 ? 0x8000u : 0u);
    p.get()[i] = lo | (hi << 16);
  }
  return p;
}

std::unique_ptr<float, FreeDeleter> Floats(size_t n, float value) {
  std::unique_ptr<float, FreeDeleter> p(
      static_cast<float*>(aligned_alloc(64, (n * sizeof(float) + 63) / 64 * 64)));
  for (size_t i = 0; i < n; ++i) p.get()[i] = value;
  return p;
}

bool SkipWithoutBf16(benchmark::State& state) {
  if (hwyattn::Bf16DotFor(kTileTarget, hwyattn::Bf16DotKernel::kPrefill)) return false;
  state.SkipWithError("no bf16 dot products on this CPU (or HWYATTN_TARGET caps them)");
  return true;
}

void SetCounters(benchmark::State& state, double flops_per_iteration) {
  const double gflop = flops_per_iteration * static_cast<double>(state.iterations()) * 1e-9;
  state.counters["GFLOPS"] = benchmark::Counter(gflop, benchmark::Counter::kIsRate);
  state.counters["bf16_peak_GFLOPS"] = benchmark::Counter(g_bf16_peak);
  state.counters["pct_bf16_peak"] = benchmark::Counter(
      g_bf16_peak > 0 ? gflop / g_bf16_peak * 100.0 : 0.0, benchmark::Counter::kIsRate);
}

void BM_ScoreTile(benchmark::State& state) {
  if (SkipWithoutBf16(state)) return;
  const size_t panels = static_cast<size_t>(state.range(0));
  std::mt19937 rng(7);
  const auto k = Pairs(panels * kDimPairs * kTileRows, &rng);
  const auto q = Pairs(kDimPairs * kQueries, &rng);
  const auto s = Floats(panels * kTileRows * kQueries, 0.0f);
  for (auto _ : state) {
    for (size_t panel = 0; panel < panels; ++panel) {
      tiles::ScoreTile(kBf16TileVectors, kDimPairs, k.get() + panel * kDimPairs * kTileRows,
                       q.get(), kQueries, 0.125f, s.get() + panel * kTileRows * kQueries, kQueries);
    }
    benchmark::ClobberMemory();
  }
  SetCounters(state, 4.0 * static_cast<double>(panels * kTileRows * kQueries * kDimPairs));
}

void BM_ValueTile(benchmark::State& state) {
  if (SkipWithoutBf16(state)) return;
  const size_t blocks = static_cast<size_t>(state.range(0));
  const size_t value_dim = blocks * kTileRows;
  std::mt19937 rng(8);
  const auto v = Pairs(kKeyPairs * value_dim, &rng);
  const auto p = Pairs(kKeyPairs * kQueries, &rng);
  // alpha = 1 and O^T from 0: the sums stay finite however long it runs.
  const auto alpha = Floats(kQueries, 1.0f);
  const auto o = Floats(value_dim * kQueries, 0.0f);
  for (auto _ : state) {
    for (size_t d0 = 0; d0 < value_dim; d0 += kTileRows) {
      tiles::ValueTile(kTileRows, kBf16TileVectors, kKeyPairs, v.get() + d0, value_dim, p.get(),
                       kQueries, alpha.get(), o.get() + d0 * kQueries, kQueries);
    }
    benchmark::ClobberMemory();
  }
  SetCounters(state, 4.0 * static_cast<double>(value_dim * kQueries * kKeyPairs));
}

}  // namespace

int main(int argc, char** argv) {
  const hwyattn_bench::BenchFlags flags = hwyattn_bench::ParseBenchFlags(argc, argv);
  benchmark::RegisterBenchmark("BM_Bf16Tile/score", BM_ScoreTile)
      ->ArgName("panels")
      ->Arg(1)
      ->Arg(16)
      ->MinTime(0.2);
  benchmark::RegisterBenchmark("BM_Bf16Tile/value", BM_ValueTile)
      ->ArgName("blocks")
      ->Arg(1)
      ->Arg(8)
      ->MinTime(0.2);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::AddCustomContext("hwyattn_version", hwyattn_version());
  benchmark::AddCustomContext("simd_target", hwyattn_simd_target());
  if (!flags.skip_peaks && !flags.listing) {
    g_bf16_peak = hwyattn_bench::MeasureBf16DotPeakGflops(1, flags.peak_seconds, 5);
    benchmark::AddCustomContext("bf16_peak_gflops_1t", hwyattn_bench::Format("%.1f", g_bf16_peak));
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
