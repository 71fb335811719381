// SPDX-License-Identifier: Apache-2.0
//
// machine_peak.h: this machine's limits, measured in the same process as the
// benchmarks they are compared with (bench/README.md: limits "measured in the
// same run"), because frequency, co-tenants and virtualisation make datasheet
// peaks meaningless on shared machines.
//
// Both measurements use Highway's dynamic dispatch and run on the widest
// target this CPU supports (AVX3 = AVX-512 on Zen 5), like the library.

#ifndef HWYATTN_BENCH_MACHINE_PEAK_H_
#define HWYATTN_BENCH_MACHINE_PEAK_H_

#include <stddef.h>

#include <vector>

namespace hwyattn_bench {

// The Highway target the measurements run on, e.g. "AVX3". Static storage.
const char* PeakTargetName();

// fp32 FMA throughput in GFLOP/s (one FMA = 2 FLOPs) of `threads` OpenMP
// threads running at once, each on kAccumulators independent vector FMA
// chains held in registers (24 on 32-register targets, 12 on 16-register
// ones: enough to cover 4-cycle latency x 2 pipes x 2 with room to spare).
// Runs a warm-up of `seconds` first (lets the clock ramp up), then the best of
// `repeats` timed runs of about `seconds` each.
double MeasureFmaPeakGflops(int threads, double seconds, int repeats);

// AVX512_BF16 dot-product throughput in GFLOP/s: vdpbf16ps (16 lanes x 2
// bf16 multiply-adds = 64 FLOPs per instruction) on 24 independent chains per
// thread, measured like MeasureFmaPeakGflops; 0 on a CPU without AVX512_BF16.
double MeasureBf16DotPeakGflops(int threads, double seconds, int repeats);

// Streaming read bandwidth in GB/s (1e9 bytes/s) of `threads` OpenMP threads
// summing disjoint slices of one `bytes`-long buffer (first touched by the
// thread that reads it) with full-vector aligned loads into 8 accumulators.
// The buffer is allocated and filled once per call, one untimed pass warms the
// TLB (and the caches, as far as the buffer fits), then the best or the
// median of `passes` timed passes is returned: the best for the machine's
// limit, the median for what re-reading `bytes` typically costs right now
// (on a shared machine, how much of the L3 other processes leave).
enum class ReadStat { kBest, kMedian };
double MeasureReadBandwidthGBps(int threads, size_t bytes, int passes,
                                ReadStat stat = ReadStat::kBest);

// Read bandwidth in GB/s of `threads` OpenMP threads reading the spans of a
// paged cache as a plain loop would: each unit (a sequence's kv head) is a list
// of spans of `span_bytes` (vector-aligned, a multiple of 2 vectors), read in
// order and summed, while the span `ahead` places later is prefetched (into L1
// in one pass, into L2 in the next: the faster hint differs by CPU); the
// units are handed out one at a time (schedule(dynamic, 1)), in their order.
// Untimed passes with either hint, then the best of `passes` of each (the pattern's limit right
// now, for a kernel that reads the same spans in the same order: bench/README.md's V1).
double MeasureSpanReadGBps(int threads, const std::vector<std::vector<const float*>>& units,
                           size_t span_bytes, size_t ahead, int passes);

}  // namespace hwyattn_bench

#endif  // HWYATTN_BENCH_MACHINE_PEAK_H_
