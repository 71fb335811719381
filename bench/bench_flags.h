// SPDX-License-Identifier: Apache-2.0
//
// Command-line flags shared by the benchmark binaries, parsed (and removed
// from argv) before Google Benchmark sees the rest: it rejects flags it does
// not know.
#ifndef HWYATTN_BENCH_BENCH_FLAGS_H_
#define HWYATTN_BENCH_BENCH_FLAGS_H_

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <string>

#include "bench/machine_peak.h"
#include "benchmark/benchmark.h"

namespace hwyattn_bench {

struct BenchFlags {
  double peak_seconds = 0.2;  // --peak_seconds=S: time per FMA-peak measurement
  double bw_mib = 1024;       // --bw_mib=M (or HWYATTN_BENCH_BW_MIB): bandwidth buffer
  bool skip_peaks = false;    // --skip_peaks: no machine-limit measurements
  bool listing = false;       // --benchmark_list_tests given: nothing will run
  bool interleaved = false;   // --benchmark_enable_random_interleaving given (it is
                              // left in argv for Google Benchmark)
};

inline BenchFlags ParseBenchFlags(int& argc, char** argv) {
  BenchFlags flags;
  if (const char* env = getenv("HWYATTN_BENCH_BW_MIB")) flags.bw_mib = atof(env);
  const auto drop = [&](int i) {
    for (int j = i; j + 1 < argc; ++j) argv[j] = argv[j + 1];
    --argc;
  };
  for (int i = 1; i < argc;) {
    if (strncmp(argv[i], "--bw_mib=", 9) == 0) {
      flags.bw_mib = atof(argv[i] + 9);
      drop(i);
    } else if (strncmp(argv[i], "--peak_seconds=", 15) == 0) {
      flags.peak_seconds = atof(argv[i] + 15);
      drop(i);
    } else if (strcmp(argv[i], "--skip_peaks") == 0) {
      flags.skip_peaks = true;
      drop(i);
    } else {
      if (strncmp(argv[i], "--benchmark_list_tests", 22) == 0 &&
          strcmp(argv[i], "--benchmark_list_tests=false") != 0) {
        flags.listing = true;
      }
      if (strncmp(argv[i], "--benchmark_enable_random_interleaving", 38) == 0 &&
          strcmp(argv[i], "--benchmark_enable_random_interleaving=false") != 0) {
        flags.interleaved = true;
      }
      ++i;
    }
  }
  return flags;
}

// printf-formats one number, for benchmark::AddCustomContext.
inline std::string Format(const char* fmt, double v) {
  char buf[64];
  snprintf(buf, sizeof(buf), fmt, v);
  return buf;
}

// Measures the FMA peak at 1 and 2 threads into gflops[1], gflops[2] (unless
// --skip_peaks or a listing), warns if the second core is busy, and records
// the figures in the benchmark's context (the JSON report.py reads).
inline void MeasureFmaPeaks(const BenchFlags& flags, double (&gflops)[3]) {
  if (flags.skip_peaks || flags.listing) return;
  fprintf(stderr, "measuring the FMA peak...\n");
  for (int n = 1; n <= 2; ++n) gflops[n] = MeasureFmaPeakGflops(n, flags.peak_seconds, 5);
  if (gflops[2] < 1.6 * gflops[1]) {
    fprintf(stderr,
            "WARNING: 2 threads reach only %.2fx the FMA rate of 1: the second core is busy.\n",
            gflops[2] / gflops[1]);
  }
  benchmark::AddCustomContext("peak_target", PeakTargetName());
  for (int n = 1; n <= 2; ++n) {
    benchmark::AddCustomContext("fma_peak_gflops_" + std::to_string(n) + "t",
                                Format("%.1f", gflops[n]));
  }
}

}  // namespace hwyattn_bench

#endif  // HWYATTN_BENCH_BENCH_FLAGS_H_
