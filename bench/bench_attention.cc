// SPDX-License-Identifier: Apache-2.0
//
// bench_attention.cc: the attention rows of bench/README.md through the C ABI only
// (include/hwyattn.h, linked to libhwyattn.so), at 1 and 2 threads:
//
//   BM_Attention/<id>/threads:<n>     id in P1 P2 P3 D1 D2 X1 M1 T1 W1 D2h P1b
//   BM_Attention/<id>cold/threads:<n>  decode rows (D1cold, D2cold) with their K/V
//                                     flushed from every cache level before each
//                                     call (clflush, untimed; x86 only): the time
//                                     is the call's alone (manual timing), the K/V
//                                     stream from memory
//   BM_Attention/TP1/<id>/threads:2   TP1: P1's and D1's shapes on the caller's
//                                     pool (opts->parallel): a plain pthread pool
//                                     of 2 workers (the calling thread and one
//                                     pthread), instead of the library's OpenMP
//                                     threads; compare with <id>/threads:2
//   BM_Attention/TP1spin/<id>/threads:2  the same pool polling for 100 us before
//                                     it sleeps (the worker for the next job, the
//                                     caller for the end of this one), task i
//                                     always on worker i: what OpenMP's threads
//                                     do. The library's side is the same for
//                                     both; the gap between them (D1 is two
//                                     phases of ~0.3 ms) is the pool's wake-ups.
//
// P*, D*, X1 and T1 call hwyattn_sdpa; M1 runs a whole self-attention layer
// (Q/K/V/O projections with biases, as nn.MultiheadAttention) through
// hwyattn_mha_forward, on a module created once with hwyattn_mha_create.
//
// Counters (medians across repetitions when run with --benchmark_repetitions):
//   GFLOPS    attention FLOPs per second (bench/README.md: non-causal 4*B*Hq*Lq*Lk*D,
//             causal with Lq = Lk = L 2*B*Hq*L*(L+1)*D; M1 adds the projections,
//             8*B*L*d_model^2)
//   fma_peak_GFLOPS  the fp32 FMA peak at the row's thread count, measured
//             right before each repetition (bench/machine_peak.cc; RowFmaPeak)
//   pct_peak  GFLOPS as % of fma_peak_GFLOPS
//   pct_startup_peak  GFLOPS as % of the peak measured at start-up (context)
//   bf16_peak_GFLOPS  bf16 rows (P1b, M1b): the AVX512_BF16 dot peak
//             (vdpbf16ps) at the row's thread count, measured right before
//             each repetition like fma_peak_GFLOPS (0 without AVX512_BF16)
//   pct_bf16_peak  bf16 rows: GFLOPS as % of bf16_peak_GFLOPS
//   GBps      decode rows: bytes of K+V read per call / time (1e9 bytes/s)
//   pct_bw    decode rows: GBps as % of the streaming read bandwidth, measured
//             again right before the row (read_bw_GBps; the start-up figure is
//             in the context)
//   same_size_read_GBps  decode rows: re-reading a buffer the size of the
//             row's K/V, measured right before the row (median of 10 passes:
//             what stays in cache between passes is what other processes
//             leave of the L3 at that moment, as for the K/V between calls)
//   pct_warm_bw  decode rows: GBps as % of same_size_read_GBps
// The context block (console header, JSON "context") carries the SIMD target,
// the measured peaks and the bandwidth buffer size.
//
// Inputs are uniform random in [-1, 1), allocated and filled once per row
// (shared by both thread counts) and left warm: every timed call follows an
// untimed one, so D1's K/V sit in L3 as a KV cache would between decode steps
// (D2's K/V are twice the L3 and stream from memory). Each row's output is
// spot-checked once against a double-precision reference on three query rows.
//
// Own flags (before Google Benchmark's):
//   --bw_mib=N          bandwidth buffer in MiB (default 1024, or HWYATTN_BENCH_BW_MIB;
//                       shrunk automatically to a quarter of MemAvailable)
//   --peak_seconds=S    length of each FMA peak run (default 0.2; best of 5 after a warm-up)
//   --skip_peaks        do not measure (pct_* counters are then 0)

#include <hwyattn.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include <pthread.h>

#include <atomic>
#include <chrono>

#include <benchmark/benchmark.h>

#include "bench/bench_flags.h"
#include "bench/machine_peak.h"

namespace {

struct Row {
  const char* id;
  int64_t B, Hq, Hkv, Lq, Lk, D;
  bool causal;
  bool decode;      // also report K/V bandwidth
  int64_t d_model;  // M1 only: the layer's width (0: a plain hwyattn_sdpa row)
  double min_time;  // seconds per repetition
  benchmark::TimeUnit unit;
  int64_t window = 0;  // opts.window_left (0: none)
  // K and V (D2h: BF16, read in place; D1q8_0, D1q4_0, P1q8_0: ggml's
  // blocks, read in place)
  hwyattn_dtype kv_dtype = HWYATTN_F32;
  // bf16 products (P1b, M1b): opts.precision = BF16; attention rows take q,
  // k and v in BF16 (kv_dtype BF16 too), the layer row bf16 weights
  // (weight_dtype BF16). Also reports the AVX512_BF16 dot peak.
  bool bf16 = false;
  // Integer products (D1q8_0i, D1q4_0i): opts.precision = INT8; the spot
  // check's reference takes the query as the header's rule quantizes it.
  bool int8 = false;
};

// The rows of bench/README.md (fp32, Dv = D).
const Row kRows[] = {
    {"P1", 1, 8, 8, 1024, 1024, 64, false, false, 0, 0.4, benchmark::kMillisecond},
    {"P2", 1, 8, 8, 2048, 2048, 64, true, false, 0, 0.4, benchmark::kMillisecond},
    {"P3", 1, 4, 4, 4096, 4096, 128, true, false, 0, 0.5, benchmark::kMillisecond},
    {"D1", 1, 32, 8, 1, 4096, 128, false, true, 0, 0.3, benchmark::kMillisecond},
    {"D2", 8, 8, 8, 1, 2048, 64, false, true, 0, 0.3, benchmark::kMillisecond},
    {"X1", 4, 8, 8, 128, 768, 64, false, false, 0, 0.3, benchmark::kMillisecond},
    {"M1", 4, 8, 8, 512, 512, 64, false, false, 512, 0.4, benchmark::kMillisecond},
    {"T1", 1, 2, 2, 3, 3, 2, false, false, 0, 0.2, benchmark::kNanosecond},
    {"W1", 1, 8, 8, 2048, 2048, 64, true, false, 0, 0.4, benchmark::kMillisecond, 256},
    {"D2h", 8, 8, 8, 1, 2048, 64, false, true, 0, 0.3, benchmark::kMillisecond, 0, HWYATTN_BF16},
    {"P1b", 1, 8, 8, 1024, 1024, 64, false, false, 0, 0.4, benchmark::kMillisecond, 0, HWYATTN_BF16,
     true},
    {"M1b", 4, 8, 8, 512, 512, 64, false, false, 512, 0.4, benchmark::kMillisecond, 0, HWYATTN_F32,
     true},
    {"D1q8_0", 1, 32, 8, 1, 4096, 128, false, true, 0, 0.3, benchmark::kMillisecond, 0,
     HWYATTN_Q8_0},
    {"D1q4_0", 1, 32, 8, 1, 4096, 128, false, true, 0, 0.3, benchmark::kMillisecond, 0,
     HWYATTN_Q4_0},
    {"P1q8_0", 1, 8, 8, 1024, 1024, 64, false, false, 0, 0.4, benchmark::kMillisecond, 0,
     HWYATTN_Q8_0},
    {"D1q8_0i", 1, 32, 8, 1, 4096, 128, false, true, 0, 0.3, benchmark::kMillisecond, 0,
     HWYATTN_Q8_0, false, true},
    {"D1q4_0i", 1, 32, 8, 1, 4096, 128, false, true, 0, 0.3, benchmark::kMillisecond, 0,
     HWYATTN_Q4_0, false, true},
};

// A query row as precision = INT8 multiplies it (hwyattn.h): per block of
// 32, d = max|x| / 127 and q = roundf(x * (1 / d)) in fp32, then d * q.
std::vector<double> Int8RuleQuery(const float* x, int64_t dim) {
  std::vector<double> out(static_cast<size_t>(dim));
  for (int64_t d0 = 0; d0 < dim; d0 += 32) {
    const int64_t n = std::min<int64_t>(32, dim - d0);
    float amax = 0.0f;
    for (int64_t i = 0; i < n; ++i) amax = std::max(amax, std::fabs(x[d0 + i]));
    const float d = amax / 127.0f, inverse = d != 0.0f ? 1.0f / d : 0.0f;
    for (int64_t i = 0; i < n; ++i)
      out[d0 + i] = static_cast<double>(d) * std::round(x[d0 + i] * inverse);
  }
  return out;
}
constexpr int kThreadCounts[] = {1, 2};

// Row i's first visible key under the row's causal mask and window.
int64_t FirstKey(const Row& r, int64_t i) {
  return r.window > 0 ? std::max<int64_t>(0, i - r.window + 1) : 0;
}

double Flops(const Row& r) {
  if (r.causal) {
    // Lq == Lk == L: only the visible keys (row i sees i + 1 keys, at most the
    // window's).
    double keys = 0;
    for (int64_t i = 0; i < r.Lq; ++i) keys += static_cast<double>(i + 1 - FirstKey(r, i));
    return 4.0 * r.B * r.Hq * keys * r.D;
  }
  const double attention = 4.0 * r.B * r.Hq * r.Lq * r.Lk * r.D;
  // M1: Q, K, V and O projections, 2 * B * L * d_model^2 each.
  return attention + 8.0 * r.B * r.Lq * static_cast<double>(r.d_model) * r.d_model;
}

// Bytes of a block of 32 elements of ggml's Q8_0 / Q4_0 (0: not a block format).
size_t BlockBytes(hwyattn_dtype dtype) {
  return dtype == HWYATTN_Q8_0 ? 34 : dtype == HWYATTN_Q4_0 ? 18 : 0;
}

double KvBytes(const Row& r) {
  const double element = r.kv_dtype == HWYATTN_F32    ? 4.0
                         : BlockBytes(r.kv_dtype) > 0 ? BlockBytes(r.kv_dtype) / 32.0
                                                      : 2.0;
  return 2.0 * r.B * r.Hkv * r.Lk * r.D * element;  // K and V, Dv = D
}

// x rounded to the nearest bfloat16 (ties to even), as its 16 bits.
uint16_t ToBf16(float x) {
  uint32_t u;
  memcpy(&u, &x, 4);
  u += 0x7FFF + ((u >> 16) & 1);
  return static_cast<uint16_t>(u >> 16);
}

float FromBf16(uint16_t h) {
  const uint32_t u = static_cast<uint32_t>(h) << 16;
  float x;
  memcpy(&x, &u, 4);
  return x;
}

std::string Shape(const Row& r) {
  char buf[160];
  snprintf(buf, sizeof(buf), "B=%lld Hq=%lld Hkv=%lld Lq=%lld Lk=%lld D=%lld%s",
           static_cast<long long>(r.B), static_cast<long long>(r.Hq), static_cast<long long>(r.Hkv),
           static_cast<long long>(r.Lq), static_cast<long long>(r.Lk), static_cast<long long>(r.D),
           r.causal ? " causal" : "");
  std::string shape = buf;
  if (r.window > 0) shape += " window_left=" + std::to_string(r.window);
  if (r.d_model > 0) shape += " d_model=" + std::to_string(r.d_model);
  if (r.bf16 && r.d_model > 0) {
    shape += " weights=bf16 precision=bf16";
  } else if (r.bf16) {
    shape += " q=bf16 kv=bf16 precision=bf16";
  } else if (r.kv_dtype == HWYATTN_BF16) {
    shape += " kv=bf16";
  } else if (r.kv_dtype == HWYATTN_Q8_0) {
    shape += " kv=q8_0";
  } else if (r.kv_dtype == HWYATTN_Q4_0) {
    shape += " kv=q4_0";
  }
  if (r.int8) shape += " precision=int8";
  return shape;
}

// Measured machine limits, indexed by thread count (1 or 2).
struct Peaks {
  double fma_gflops[3] = {0, 0, 0};
  double bf16_gflops[3] = {0, 0, 0};  // vdpbf16ps (0 without AVX512_BF16)
  double read_gbps[3] = {0, 0, 0};
  // Bytes of the streaming-read buffer (0: no measurements).
  size_t bw_bytes = 0;
};
Peaks g_peaks;

// The FMA peak right before one repetition of a row (best of 3 runs of 50 ms
// after a 50 ms warm-up; 0 without measurements). The clock and the share of
// the core that co-tenants leave drift within minutes (the start-up peak
// moved by up to 5% between runs, as much as the rows' own GFLOP/s), so
// pct_peak compares each repetition with the peak measured
// next to it, and Google Benchmark's median over the repetitions does the
// rest; pct_startup_peak keeps the comparison with the start-up figure.
double RowFmaPeak(int threads) {
  return g_peaks.bw_bytes > 0 ? hwyattn_bench::MeasureFmaPeakGflops(threads, 0.05, 3) : 0.0;
}

// The bf16 dot peak right before one repetition of a bf16 row, measured like
// RowFmaPeak (0 without measurements or without AVX512_BF16).
double RowBf16Peak(int threads) {
  return g_peaks.bw_bytes > 0 ? hwyattn_bench::MeasureBf16DotPeakGflops(threads, 0.05, 3) : 0.0;
}

// bf16 rows: bf16_peak_GFLOPS (this repetition's) and pct_bf16_peak.
void SetBf16Counters(benchmark::State& state, double gflop, double row_bf16_peak) {
  using benchmark::Counter;
  state.counters["bf16_peak_GFLOPS"] = Counter(row_bf16_peak);
  state.counters["pct_bf16_peak"] =
      Counter(row_bf16_peak > 0 ? gflop / row_bf16_peak * 100.0 : 0.0, Counter::kIsRate);
}

// GFLOPS, fma_peak_GFLOPS (this repetition's), pct_peak and pct_startup_peak.
void SetFlopCounters(benchmark::State& state, double gflop, double row_peak, int threads) {
  using benchmark::Counter;
  state.counters["GFLOPS"] = Counter(gflop, Counter::kIsRate);
  state.counters["fma_peak_GFLOPS"] = Counter(row_peak);
  state.counters["pct_peak"] =
      Counter(row_peak > 0 ? gflop / row_peak * 100.0 : 0.0, Counter::kIsRate);
  const double startup = g_peaks.fma_gflops[threads];
  state.counters["pct_startup_peak"] =
      Counter(startup > 0 ? gflop / startup * 100.0 : 0.0, Counter::kIsRate);
}

// `bytes` (rounded up to a multiple of `align`) from aligned_alloc; aborts
// when out of memory. Freed by FreeDeleter.
void* AlignedOrDie(size_t align, size_t bytes) {
  const size_t rounded = (bytes + align - 1) / align * align;
  void* p = aligned_alloc(align, rounded);
  if (p == nullptr) {
    fprintf(stderr, "out of memory (%zu bytes)\n", rounded);
    abort();
  }
  return p;
}

struct FreeDeleter {
  void operator()(void* p) const { free(p); }
};

// 64-byte aligned float buffer.
struct FloatBuffer {
  std::unique_ptr<float, FreeDeleter> ptr;
  size_t size = 0;
  explicit FloatBuffer(size_t n)
      : ptr(static_cast<float*>(AlignedOrDie(64, n * sizeof(float)))), size(n) {}
  float* data() const { return ptr.get(); }
};

// Random blocks of ggml's Q8_0 or Q4_0 (`bytes` of them) in `blocks`, their
// values (the bench's own reading of the layout: an fp16 d in the machine's
// order, then int8 q or nibbles, element j < 16 the low nibble of qs[j]) in
// `values`: d = (1 + m / 1024) 2^-7 (Q8_0) or 2^-3 (Q4_0), |value| <= ~2.
void RandomBlocks(hwyattn_dtype dtype, std::mt19937& rng, size_t count, unsigned char* blocks,
                  float* values) {
  const size_t bytes = BlockBytes(dtype);
  const int exponent = dtype == HWYATTN_Q8_0 ? -7 : -3;
  for (size_t b = 0; b < count; ++b) {
    unsigned char* block = blocks + b * bytes;
    const uint16_t mantissa = static_cast<uint16_t>(rng() % 1024);
    const uint16_t bits = static_cast<uint16_t>((exponent + 15) << 10 | mantissa);
    memcpy(block, &bits, 2);
    const float d = std::ldexp(1.0f + mantissa / 1024.0f, exponent);
    float* x = values + b * 32;
    for (size_t j = 0; j < bytes - 2; ++j) block[2 + j] = static_cast<unsigned char>(rng() % 256);
    if (dtype == HWYATTN_Q8_0) {
      if (block[2] == 0x80) block[2] = 0x81;  // -128: not a value ggml's quantizer writes
      for (int j = 0; j < 32; ++j) x[j] = d * static_cast<float>(static_cast<int8_t>(block[2 + j]));
    } else {
      for (int j = 0; j < 16; ++j) {
        x[j] = d * static_cast<float>((block[2 + j] & 0xF) - 8);
        x[j + 16] = d * static_cast<float>((block[2 + j] >> 4) - 8);
      }
    }
  }
}

struct Tensors {
  FloatBuffer q, k, v, o;
  // BF16 K/V (kv_dtype BF16) and Q (bf16 rows); k, v and q then hold their values
  FloatBuffer k_half, v_half, q_half;
  // Block-format K/V (kv_dtype Q8_0, Q4_0); k and v then hold their values
  std::vector<unsigned char> k_blocks, v_blocks;
  hwyattn_tensor tq, tk, tv, to;
  bool checked = false;
  std::string check_error;
  explicit Tensors(const Row& r)
      : q(r.B * r.Hq * r.Lq * r.D),
        k(r.B * r.Hkv * r.Lk * r.D),
        v(r.B * r.Hkv * r.Lk * r.D),
        o(r.B * r.Hq * r.Lq * r.D),
        k_half(r.kv_dtype == HWYATTN_BF16 ? (k.size + 1) / 2 : 1),
        v_half(r.kv_dtype == HWYATTN_BF16 ? (v.size + 1) / 2 : 1),
        q_half(r.bf16 ? (q.size + 1) / 2 : 1) {
    std::mt19937 rng(12345);
    std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
    for (FloatBuffer* b : {&q, &k, &v}) {
      for (size_t i = 0; i < b->size; ++i) b->data()[i] = uni(rng);
    }
    std::vector<std::pair<FloatBuffer*, FloatBuffer*>> halves;
    if (r.kv_dtype == HWYATTN_BF16) halves = {{&k, &k_half}, {&v, &v_half}};
    if (r.bf16) halves.push_back({&q, &q_half});
    {
      for (auto [f, h] : halves) {
        uint16_t* bits = reinterpret_cast<uint16_t*>(h->data());
        for (size_t i = 0; i < f->size; ++i) {
          bits[i] = ToBf16(f->data()[i]);
          f->data()[i] = FromBf16(bits[i]);  // the reference sees what the library reads
        }
      }
    }
    if (BlockBytes(r.kv_dtype) > 0) {
      for (auto [f, blocks] : {std::make_pair(&k, &k_blocks), std::make_pair(&v, &v_blocks)}) {
        blocks->resize(f->size / 32 * BlockBytes(r.kv_dtype));
        RandomBlocks(r.kv_dtype, rng, f->size / 32, blocks->data(), f->data());
      }
    }
    memset(o.data(), 0, o.size * sizeof(float));
    const int64_t qs[4] = {r.B, r.Hq, r.Lq, r.D}, ks[4] = {r.B, r.Hkv, r.Lk, r.D};
    if (r.bf16) {
      hwyattn_tensor_contiguous(&tq, q_half.data(), HWYATTN_BF16, 4, qs);
    } else {
      hwyattn_tensor_contiguous(&tq, q.data(), HWYATTN_F32, 4, qs);
    }
    const bool half = r.kv_dtype == HWYATTN_BF16, blocks = BlockBytes(r.kv_dtype) > 0;
    void* kd = blocks ? static_cast<void*>(k_blocks.data()) : half ? k_half.data() : k.data();
    void* vd = blocks ? static_cast<void*>(v_blocks.data()) : half ? v_half.data() : v.data();
    hwyattn_tensor_contiguous(&tk, kd, r.kv_dtype, 4, ks);
    hwyattn_tensor_contiguous(&tv, vd, r.kv_dtype, 4, ks);
    hwyattn_tensor_contiguous(&to, o.data(), HWYATTN_F32, 4, qs);
  }
};

// TP1's pool: what an engine's pool looks like, kept plain (spin_us = 0: no
// spinning, no affinity): `threads` pthreads sleep on a condition variable
// between parallel_for calls; the calling thread runs tasks too, so 2
// workers are the caller and one pthread, as OpenMP's team of 2. Tasks are
// claimed from an atomic counter. A worker joins a job (under the mutex)
// only while it has unclaimed tasks and is counted in `active` until it
// leaves it; parallel_for returns only when every task is finished and no
// worker is still in the job, so a late worker never claims tasks of the
// next job. TP1spin (spin_us = 100) polls before sleeping and runs task i
// on worker i (RunTasks). The pool records how late its pthreads join the
// jobs and how long the caller waits at their end (Lateness): a sleeping
// pool's own cost, which no library can avoid, as the TP1 rows'
// worker_late_us, worker_joined_pct and caller_join_us counters.
class PthreadPool {
 public:
  // spin_us > 0: a worker that finished a job polls for the next one that
  // long before it goes to sleep.
  PthreadPool(int threads, int spin_us) : threads_(threads), spin_us_(spin_us) {
    pthread_mutex_init(&mu_, nullptr);
    pthread_cond_init(&wake_, nullptr);
    pthread_cond_init(&done_, nullptr);
    for (int t = 0; t < threads_; ++t) {
      args_[t] = {this, t + 1};
      pthread_create(&ids_[t], nullptr, &PthreadPool::Main, &args_[t]);
    }
    hwyattn_parallel_init(&parallel_);
    parallel_.num_workers = threads_ + 1;
    parallel_.pool = this;
    parallel_.parallel_for = &PthreadPool::ParallelFor;
  }
  ~PthreadPool() {
    pthread_mutex_lock(&mu_);
    stop_ = true;
    pthread_cond_broadcast(&wake_);
    pthread_mutex_unlock(&mu_);
    for (int t = 0; t < threads_; ++t) pthread_join(ids_[t], nullptr);
    pthread_cond_destroy(&done_);
    pthread_cond_destroy(&wake_);
    pthread_mutex_destroy(&mu_);
  }
  const hwyattn_parallel* parallel() const { return &parallel_; }

  // Jobs posted, jobs a pthread joined (it found unclaimed tasks), the sum
  // of the delays from posting a job to a pthread joining it, and the sum of
  // the caller's waits from running out of tasks to the job's end.
  struct Lateness {
    int64_t jobs = 0, joined = 0, late_ns = 0, join_ns = 0;
  };
  Lateness lateness() const {
    return {jobs_.load(), joined_.load(), late_ns_.load(), join_ns_.load()};
  }

 private:
  static void ParallelFor(void* self, int64_t n, hwyattn_task_fn task, void* ctx) {
    PthreadPool* p = static_cast<PthreadPool*>(self);
    pthread_mutex_lock(&p->mu_);
    p->n_ = n;
    p->task_ = task;
    p->ctx_ = ctx;
    p->next_.store(0);
    p->finished_.store(0);
    p->posted_ns_ = NowNs();
    p->jobs_.fetch_add(1);
    ++p->generation_;
    pthread_cond_broadcast(&p->wake_);
    pthread_mutex_unlock(&p->mu_);
    p->RunTasks(0, n, task, ctx);
    const int64_t ran = NowNs();
    if (p->spin_us_ > 0) {  // poll for the other workers before sleeping
      const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(p->spin_us_);
      for (int k = 1; p->finished_.load() < n || p->active_.load() > 0; ++k) {
        __builtin_ia32_pause();
        if (k % 64 == 0 && std::chrono::steady_clock::now() > until) break;
      }
    }
    pthread_mutex_lock(&p->mu_);
    while (p->finished_.load() < n || p->active_ > 0) pthread_cond_wait(&p->done_, &p->mu_);
    pthread_mutex_unlock(&p->mu_);
    p->join_ns_.fetch_add(NowNs() - ran);
  }

  // Participant `me` (0 = the caller, t + 1 = pthread t): tasks from the
  // shared counter, or, when spinning, task i on participant i % workers
  // (OpenMP's static schedule: a worker index keeps its thread, and so its
  // caches, from call to call).
  void RunTasks(int me, int64_t n, hwyattn_task_fn task, void* ctx) {
    if (spin_us_ > 0) {
      for (int64_t i = me; i < n; i += threads_ + 1) {
        task(ctx, i);
        finished_.fetch_add(1);
      }
      return;
    }
    for (int64_t i = next_.fetch_add(1); i < n; i = next_.fetch_add(1)) {
      task(ctx, i);
      finished_.fetch_add(1);
    }
  }

  struct ThreadArg {
    PthreadPool* pool;
    int me;
  };

  static void* Main(void* arg) {
    PthreadPool* p = static_cast<ThreadArg*>(arg)->pool;
    const int me = static_cast<ThreadArg*>(arg)->me;
    uint64_t seen = 0;
    pthread_mutex_lock(&p->mu_);
    for (;;) {
      if (p->spin_us_ > 0 && p->generation_.load() == seen) {
        pthread_mutex_unlock(&p->mu_);
        const auto until =
            std::chrono::steady_clock::now() + std::chrono::microseconds(p->spin_us_);
        for (int k = 1; p->generation_.load(std::memory_order_relaxed) == seen && !p->stop_.load();
             ++k) {
          __builtin_ia32_pause();
          if (k % 64 == 0 && std::chrono::steady_clock::now() > until) break;
        }
        pthread_mutex_lock(&p->mu_);
      }
      while (!p->stop_ && p->generation_ == seen) pthread_cond_wait(&p->wake_, &p->mu_);
      if (p->stop_) break;
      seen = p->generation_;
      // A job whose tasks are all claimed may already have returned (the
      // caller ran them): joining it would claim tasks of the next job.
      if (p->spin_us_ == 0 && p->next_.load() >= p->n_) continue;
      const int64_t n = p->n_;
      hwyattn_task_fn task = p->task_;
      void* ctx = p->ctx_;
      p->joined_.fetch_add(1);
      p->late_ns_.fetch_add(NowNs() - p->posted_ns_);
      ++p->active_;
      pthread_mutex_unlock(&p->mu_);
      p->RunTasks(me, n, task, ctx);
      pthread_mutex_lock(&p->mu_);
      --p->active_;
      pthread_cond_signal(&p->done_);
    }
    pthread_mutex_unlock(&p->mu_);
    return nullptr;
  }

  static int64_t NowNs() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }

  int threads_;
  pthread_t ids_[8];
  ThreadArg args_[8];
  pthread_mutex_t mu_;
  pthread_cond_t wake_, done_;
  int spin_us_;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> active_{0};
  int64_t n_ = 0;
  hwyattn_task_fn task_ = nullptr;
  void* ctx_ = nullptr;
  std::atomic<int64_t> next_{0}, finished_{0};
  int64_t posted_ns_ = 0;  // under mu_
  std::atomic<int64_t> jobs_{0}, joined_{0}, late_ns_{0}, join_ns_{0};
  hwyattn_parallel parallel_;
};

// TP1's pools, started on first use and kept for the run.
PthreadPool* Tp1Pool(bool spin) {
  static PthreadPool* const plain = new PthreadPool(1, 0);
  static PthreadPool* const spinning = new PthreadPool(1, 100);
  return spin ? spinning : plain;
}

// One set of inputs per row, created on first use and kept for the run.
Tensors& GetTensors(const Row& r) {
  static std::map<std::string, std::unique_ptr<Tensors>> cache;
  std::unique_ptr<Tensors>& t = cache[r.id];
  if (!t) t.reset(new Tensors(r));
  return *t;
}

// Compares out rows (b, h, i) for three query rows with a double-precision
// softmax(q k^T / sqrt(D)) v. Returns "" or a description of the mismatch.
// bf16 rows: q, k and v hold the bf16 values the library reads, and the
// tolerance is the header's bound for precision = BF16, 2^-9 max|v| (P is
// rounded to bf16 before P V), plus the fp32 tolerance.
std::string SpotCheck(const Row& r, const Tensors& t) {
  const int64_t picks[3][3] = {
      {0, 0, 0}, {r.B / 2, r.Hq / 2, r.Lq / 2}, {r.B - 1, r.Hq - 1, r.Lq - 1}};
  const double scale = 1.0 / std::sqrt(static_cast<double>(r.D));
  double max_err = 0, max_ref = 0, max_v = 0;
  for (const auto& pick : picks) {
    const int64_t b = pick[0], h = pick[1], i = pick[2];
    const int64_t hk = h / (r.Hq / r.Hkv);
    const float* qi = t.q.data() + ((b * r.Hq + h) * r.Lq + i) * r.D;
    const float* kb = t.k.data() + (b * r.Hkv + hk) * r.Lk * r.D;
    const float* vb = t.v.data() + (b * r.Hkv + hk) * r.Lk * r.D;
    const float* oi = t.o.data() + ((b * r.Hq + h) * r.Lq + i) * r.D;
    const int64_t keys = r.causal ? i + 1 : r.Lk, first = FirstKey(r, i);
    const std::vector<double> qd =
        r.int8 ? Int8RuleQuery(qi, r.D) : std::vector<double>(qi, qi + r.D);
    std::vector<double> s(keys);
    double m = -INFINITY;
    for (int64_t j = first; j < keys; ++j) {
      double dot = 0;
      for (int64_t d = 0; d < r.D; ++d) dot += qd[d] * kb[j * r.D + d];
      s[j] = dot * scale;
      m = std::max(m, s[j]);
    }
    double l = 0;
    for (int64_t j = first; j < keys; ++j) l += (s[j] = std::exp(s[j] - m));
    for (int64_t d = 0; d < r.D; ++d) {
      double acc = 0;
      for (int64_t j = first; j < keys; ++j) {
        acc += s[j] * vb[j * r.D + d];
        max_v = std::max(max_v, std::fabs(static_cast<double>(vb[j * r.D + d])));
      }
      acc /= l;
      max_ref = std::max(max_ref, std::fabs(acc));
      max_err = std::max(max_err, std::fabs(acc - oi[d]));
    }
  }
  const double tolerance = 1e-4 * std::max(max_ref, 1e-30) + (r.bf16 ? std::ldexp(max_v, -9) : 0.0);
  if (!(max_err <= tolerance)) {
    char buf[160];
    snprintf(buf, sizeof(buf),
             "%s: output differs from the reference: max|err| %.3g, max|ref| %.3g", r.id, max_err,
             max_ref);
    return buf;
  }
  return "";
}

// Evicts [p, p + bytes) from every cache level (x86's clflush; the fence
// orders the evictions before the next timed call's loads).
void FlushFromCaches(const void* p, size_t bytes) {
#if defined(__x86_64__) || defined(__i386__)
  const char* c = static_cast<const char*>(p);
  for (size_t i = 0; i < bytes; i += 64) __builtin_ia32_clflush(c + i);
  __builtin_ia32_mfence();
#else
  (void)p;
  (void)bytes;
#endif
}

constexpr bool kCanFlush =
#if defined(__x86_64__) || defined(__i386__)
    true;
#else
    false;
#endif

// on_pool: every call runs on TP1's pool (opts->parallel; 2 workers, the
// row's thread count), else on the library's threads (state.range(0)).
// cold: the K/V are flushed from the caches before each call (manual time).
void BM_Attention(benchmark::State& state, const Row* row, int on_pool, bool cold) {
  const Row& r = *row;
  const int threads = static_cast<int>(state.range(0));
  PthreadPool* const tp1 = on_pool ? Tp1Pool(on_pool == 2) : nullptr;
  const hwyattn_parallel* pool = tp1 != nullptr ? tp1->parallel() : nullptr;
  Tensors& t = GetTensors(r);
  static std::string error;  // SkipWithError keeps the pointer

  const int previous_threads = hwyattn_get_num_threads();
  hwyattn_set_num_threads(threads);
  hwyattn_sdpa_options opts;
  hwyattn_sdpa_options_init(&opts);
  opts.causal = r.causal ? HWYATTN_CAUSAL_TOP_LEFT : HWYATTN_CAUSAL_NONE;
  opts.window_left = r.window;
  opts.parallel = pool;
  opts.precision = r.bf16   ? HWYATTN_PRECISION_BF16
                   : r.int8 ? HWYATTN_PRECISION_INT8
                            : HWYATTN_PRECISION_F32;

  // Decode rows are memory-bound, and on a shared machine the memory bandwidth
  // and the share of the L3 left to this VM change within minutes (the
  // 2-thread streaming read halved within an afternoon): their references
  // are measured again right here, just before the
  // row runs (and before the warm-up call, so that the K/V are in cache
  // again for the timed loop).
  const double row_peak = RowFmaPeak(threads);
  const double row_bf16_peak = r.bf16 ? RowBf16Peak(threads) : 0.0;
  double read_bw = g_peaks.read_gbps[threads];
  double same_size_bw = 0;
  if (r.decode && g_peaks.bw_bytes > 0) {
    read_bw = hwyattn_bench::MeasureReadBandwidthGBps(threads, g_peaks.bw_bytes, 10);
    same_size_bw = hwyattn_bench::MeasureReadBandwidthGBps(threads, static_cast<size_t>(KvBytes(r)),
                                                           10, hwyattn_bench::ReadStat::kMedian);
  }

  // Untimed call: warms K/V and the library's scratch, and checks the status.
  hwyattn_status st = hwyattn_sdpa(&t.tq, &t.tk, &t.tv, &t.to, &opts);
  if (st != HWYATTN_OK) {
    error = std::string(hwyattn_status_string(st)) + ": " + hwyattn_last_error();
    state.SkipWithError(error.c_str());
    hwyattn_set_num_threads(previous_threads);
    return;
  }
  if (!t.checked) {
    t.check_error = SpotCheck(r, t);
    t.checked = true;
  }
  if (!t.check_error.empty()) {
    state.SkipWithError(t.check_error.c_str());
    hwyattn_set_num_threads(previous_threads);
    return;
  }

  const size_t kv_bytes = static_cast<size_t>(KvBytes(r)) / 2;
  const PthreadPool::Lateness before = tp1 != nullptr ? tp1->lateness() : PthreadPool::Lateness{};
  for (auto _ : state) {
    if (cold) {
      FlushFromCaches(t.tk.data, kv_bytes);
      FlushFromCaches(t.tv.data, kv_bytes);
      const auto start = std::chrono::steady_clock::now();
      st = hwyattn_sdpa(&t.tq, &t.tk, &t.tv, &t.to, &opts);
      state.SetIterationTime(
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    } else {
      st = hwyattn_sdpa(&t.tq, &t.tk, &t.tv, &t.to, &opts);
    }
    benchmark::DoNotOptimize(st);
    benchmark::ClobberMemory();
  }
  hwyattn_set_num_threads(previous_threads);
  if (st != HWYATTN_OK) {
    error = std::string("hwyattn_sdpa failed in the timed loop: ") + hwyattn_last_error();
    state.SkipWithError(error.c_str());
    return;
  }

  using benchmark::Counter;
  const double calls = static_cast<double>(state.iterations());
  SetFlopCounters(state, Flops(r) * calls * 1e-9, row_peak, threads);
  if (r.bf16) SetBf16Counters(state, Flops(r) * calls * 1e-9, row_bf16_peak);
  if (r.decode) {
    const double gb = KvBytes(r) * calls * 1e-9;
    state.counters["GBps"] = Counter(gb, Counter::kIsRate);
    state.counters["read_bw_GBps"] = Counter(read_bw);
    state.counters["pct_bw"] = Counter(read_bw > 0 ? gb / read_bw * 100.0 : 0.0, Counter::kIsRate);
    state.counters["same_size_read_GBps"] = Counter(same_size_bw);
    state.counters["pct_warm_bw"] =
        Counter(same_size_bw > 0 ? gb / same_size_bw * 100.0 : 0.0, Counter::kIsRate);
  }
  if (tp1 != nullptr) {
    // How late the pool's pthread joined the timed calls' jobs (the mean over
    // the jobs it joined), in how many of them it took part at all, and how
    // long the caller waited at a job's end (the mean over all jobs).
    const PthreadPool::Lateness after = tp1->lateness();
    const double jobs = static_cast<double>(after.jobs - before.jobs);
    const double joined = static_cast<double>(after.joined - before.joined);
    state.counters["worker_late_us"] = Counter(
        joined > 0 ? static_cast<double>(after.late_ns - before.late_ns) / joined * 1e-3 : 0);
    state.counters["worker_joined_pct"] = Counter(jobs > 0 ? joined / jobs * 100.0 : 0);
    state.counters["caller_join_us"] =
        Counter(jobs > 0 ? static_cast<double>(after.join_ns - before.join_ns) / jobs * 1e-3 : 0);
  }
  state.SetLabel(Shape(r));
}

// M1: a self-attention layer (batch_first, E = d_model, heads of dim D) with
// random weights of nn.Linear's scale, created once and kept for the run.
// M1b: the same with weight_dtype BF16, run with precision BF16.
struct MhaLayer {
  int64_t B, L, E, H, D;
  bool bf16;
  std::vector<float> wq, wk, wv, wo, bq, bk, bv, bo;
  FloatBuffer x, out;
  hwyattn_tensor tx, tout;
  hwyattn_mha* module = nullptr;
  std::string error;
  bool checked = false;
  explicit MhaLayer(const Row& r)
      : B(r.B),
        L(r.Lq),
        E(r.d_model),
        H(r.Hq),
        D(r.D),
        bf16(r.bf16),
        x(r.B * r.Lq * r.d_model),
        out(r.B * r.Lq * r.d_model) {
    std::mt19937 rng(4242);
    const float bound = 1.0f / std::sqrt(static_cast<float>(E));
    std::uniform_real_distribution<float> w(-bound, bound), u(-1.0f, 1.0f);
    const size_t inner = static_cast<size_t>(H * D);
    for (std::vector<float>* m : {&wq, &wk, &wv}) {
      m->resize(inner * E);
      for (float& f : *m) f = w(rng);
    }
    wo.resize(static_cast<size_t>(E) * inner);
    for (float& f : wo) f = w(rng);
    for (std::vector<float>* b : {&bq, &bk, &bv}) {
      b->resize(inner);
      for (float& f : *b) f = w(rng);
    }
    bo.resize(E);
    for (float& f : bo) f = w(rng);
    for (size_t i = 0; i < x.size; ++i) x.data()[i] = u(rng);
    memset(out.data(), 0, out.size * sizeof(float));
    const int64_t shape[3] = {B, L, E};
    hwyattn_tensor_contiguous(&tx, x.data(), HWYATTN_F32, 3, shape);
    hwyattn_tensor_contiguous(&tout, out.data(), HWYATTN_F32, 3, shape);

    hwyattn_mha_config cfg;
    hwyattn_mha_config_init(&cfg);
    cfg.embed_dim = E;
    cfg.num_heads = H;
    cfg.head_dim = D;
    cfg.has_bias = 1;
    cfg.weight_dtype = bf16 ? HWYATTN_BF16 : HWYATTN_F32;
    hwyattn_mha_weights wts = {wq.data(), wk.data(), wv.data(), wo.data(),
                               bq.data(), bk.data(), bv.data(), bo.data()};
    const hwyattn_status st = hwyattn_mha_create(&cfg, &wts, &module);
    if (st != HWYATTN_OK) {
      error = std::string("hwyattn_mha_create: ") + hwyattn_status_string(st) + ": " +
              hwyattn_last_error();
      module = nullptr;
    }
  }
  ~MhaLayer() { hwyattn_mha_destroy(module); }

  // Runs the layer once (precision BF16 for M1b).
  hwyattn_status Forward() {
    hwyattn_sdpa_options opts;
    hwyattn_sdpa_options_init(&opts);
    opts.precision = bf16 ? HWYATTN_PRECISION_BF16 : HWYATTN_PRECISION_F32;
    return hwyattn_mha_forward(module, &tx, nullptr, nullptr, &tout, &opts);
  }

  // Recomputes output rows (b = 0, i = 0) and (b = B - 1, i = L - 1) in double.
  // M1b: on the operands the library multiplies (weights, x, the projections
  // and the attention's output rounded to bf16), with the bound of P's
  // rounding added to the tolerance (2^-9 max|v| per attention output, times
  // the largest row sum of |W_o|).
  std::string SpotCheck() const {
    const size_t inner = static_cast<size_t>(H * D);
    auto round = [&](double v) { return bf16 ? static_cast<double>(FromBf16(ToBf16(v))) : v; };
    auto project = [&](const std::vector<float>& wm, const std::vector<float>& bias,
                       const float* in, size_t rows, size_t in_w, size_t out_w) {
      std::vector<double> y(rows * out_w);
      for (size_t i = 0; i < rows; ++i) {
        for (size_t o = 0; o < out_w; ++o) {
          double acc = bias[o];
          for (size_t c = 0; c < in_w; ++c)
            acc += round(in[i * in_w + c]) * round(wm[o * in_w + c]);
          // The projections are stored in fp32, then rounded as operands.
          y[i * out_w + o] = round(static_cast<float>(acc));
        }
      }
      return y;
    };
    double max_err = 0, max_ref = 0, max_v = 0, max_row = 0;
    const int64_t picks[2][2] = {{0, 0}, {B - 1, L - 1}};
    for (const auto& pick : picks) {
      const int64_t b = pick[0], i = pick[1];
      const float* xb = x.data() + b * L * E;
      const std::vector<double> k = project(wk, bk, xb, L, E, inner);
      const std::vector<double> v = project(wv, bv, xb, L, E, inner);
      for (double x : v) max_v = std::max(max_v, std::fabs(x));
      const std::vector<double> q = project(wq, bq, xb + i * E, 1, E, inner);
      std::vector<double> attn(inner, 0.0), s(L);
      for (int64_t h = 0; h < H; ++h) {
        double m = -INFINITY;
        for (int64_t j = 0; j < L; ++j) {
          double dot = 0;
          for (int64_t d = 0; d < D; ++d) dot += q[h * D + d] * k[j * inner + h * D + d];
          s[j] = dot / std::sqrt(static_cast<double>(D));
          m = std::max(m, s[j]);
        }
        double l = 0;
        for (int64_t j = 0; j < L; ++j) l += (s[j] = std::exp(s[j] - m));
        for (int64_t j = 0; j < L; ++j) {
          for (int64_t d = 0; d < D; ++d) attn[h * D + d] += s[j] / l * v[j * inner + h * D + d];
        }
      }
      const float* got = out.data() + (b * L + i) * E;
      for (int64_t e = 0; e < E; ++e) {
        double acc = bo[e], row = 0;
        for (size_t c = 0; c < inner; ++c) {
          acc += round(static_cast<float>(attn[c])) * round(wo[e * inner + c]);
          row += std::fabs(round(wo[e * inner + c]));
        }
        max_ref = std::max(max_ref, std::fabs(acc));
        max_err = std::max(max_err, std::fabs(acc - got[e]));
        max_row = std::max(max_row, row);
      }
    }
    const double tolerance =
        1e-4 * std::max(max_ref, 1e-30) + (bf16 ? std::ldexp(max_v, -9) * max_row : 0.0);
    if (!(max_err <= tolerance)) {
      char buf[160];
      snprintf(buf, sizeof(buf),
               "%s: output differs from the reference: max|err| %.3g, max|ref| %.3g",
               bf16 ? "M1b" : "M1", max_err, max_ref);
      return buf;
    }
    return "";
  }
};

void BM_Mha(benchmark::State& state, const Row* row) {
  const Row& r = *row;
  const int threads = static_cast<int>(state.range(0));
  static std::map<std::string, std::unique_ptr<MhaLayer>> layers;
  static std::string error;  // SkipWithError keeps the pointer
  std::unique_ptr<MhaLayer>& layer = layers[r.id];
  if (!layer) layer.reset(new MhaLayer(r));
  if (!layer->error.empty()) {
    state.SkipWithError(layer->error.c_str());
    return;
  }
  const double row_peak = RowFmaPeak(threads);
  const double row_bf16_peak = r.bf16 ? RowBf16Peak(threads) : 0.0;
  const int previous_threads = hwyattn_get_num_threads();
  hwyattn_set_num_threads(threads);
  hwyattn_status st = layer->Forward();
  if (st != HWYATTN_OK) {
    error = std::string("hwyattn_mha_forward: ") + hwyattn_status_string(st) + ": " +
            hwyattn_last_error();
    state.SkipWithError(error.c_str());
    hwyattn_set_num_threads(previous_threads);
    return;
  }
  if (!layer->checked) {
    layer->error = layer->SpotCheck();
    layer->checked = true;
    if (!layer->error.empty()) {
      state.SkipWithError(layer->error.c_str());
      hwyattn_set_num_threads(previous_threads);
      return;
    }
  }
  for (auto _ : state) {
    st = layer->Forward();
    benchmark::DoNotOptimize(st);
    benchmark::ClobberMemory();
  }
  hwyattn_set_num_threads(previous_threads);
  if (st != HWYATTN_OK) {
    error = std::string("hwyattn_mha_forward failed in the timed loop: ") + hwyattn_last_error();
    state.SkipWithError(error.c_str());
    return;
  }
  const double gflop = Flops(r) * static_cast<double>(state.iterations()) * 1e-9;
  SetFlopCounters(state, gflop, row_peak, threads);
  if (r.bf16) SetBf16Counters(state, gflop, row_bf16_peak);
  state.SetLabel(Shape(r));
}

// ------------------------------------------------ hwyattn_kv_attention rows

// A batch of sequences over a KV cache (bench/README.md: D1q, D1f8, D1qb, D1f8b, D2q, V1,
// V1b, V2):
// sequence s has kv_len[s] cached keys (this step's included) and q_len[s]
// query tokens at its end.
struct KvRow {
  const char* id;
  int64_t Hq, Hkv, D;
  hwyattn_dtype dtype;  // F32, BF16, I8 with per-token scales, F8E4M3 with per-tensor ones
  int64_t page_size;    // 0: no block table (sequence s is page s of the longest length)
  std::vector<int64_t> kv_len, q_len;
  bool decode;  // report the bandwidth of the K/V bytes
  double min_time;
  // bf16 products (V1b, D1qb, D1f8b): opts.precision = BF16; the spot
  // check's reference takes q rounded to bf16 and adds 2^-9 max|v| to the
  // tolerance (P's rounding, the header's bound; 2^-8 with I8's per-token
  // scales, whose products with P are rounded).
  bool bf16 = false;
  // Integer products (D1qi): opts.precision = INT8; the spot check's
  // reference takes the query as the header's rule quantizes it.
  bool int8 = false;
};

std::vector<int64_t> Repeat(int64_t n, int64_t x) { return std::vector<int64_t>(n, x); }

std::vector<int64_t> Concat(std::vector<int64_t> a, const std::vector<int64_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

const std::vector<KvRow>& KvRows() {
  // V1's and V1b's sequences: 16 cache lengths from 64 to 4096.
  static const std::vector<int64_t> kV1Lens = {64,   128,  200,  333,  512,  777,  901,  1024,
                                               1500, 1777, 2048, 2500, 3000, 3333, 4000, 4096};
  static const std::vector<KvRow> rows = {
      {"D1q", 32, 8, 128, HWYATTN_I8, 0, {4096}, {1}, true, 0.3},
      {"D1f8", 32, 8, 128, HWYATTN_F8E4M3, 0, {4096}, {1}, true, 0.3},
      {"D1qb", 32, 8, 128, HWYATTN_I8, 0, {4096}, {1}, true, 0.3, true},
      {"D1qi", 32, 8, 128, HWYATTN_I8, 0, {4096}, {1}, true, 0.3, false, true},
      {"D1f8b", 32, 8, 128, HWYATTN_F8E4M3, 0, {4096}, {1}, true, 0.3, true},
      {"D2q", 8, 8, 64, HWYATTN_I8, 0, Repeat(8, 2048), Repeat(8, 1), true, 0.3},
      {"V1", 32, 8, 128, HWYATTN_BF16, 16, kV1Lens, Repeat(16, 1), true, 0.3},
      {"V1b", 32, 8, 128, HWYATTN_BF16, 16, kV1Lens, Repeat(16, 1), true, 0.3, true},
      {"V2", 32, 8, 128, HWYATTN_F32, 16, Concat({2048}, Repeat(15, 2048)),
       Concat({512}, Repeat(15, 1)), false, 0.5},
      {"V2chunk", 32, 8, 128, HWYATTN_F32, 16, {2048}, {512}, false, 0.5},
      {"V2decodes", 32, 8, 128, HWYATTN_F32, 16, Repeat(15, 2048), Repeat(15, 1), false, 0.3},
  };
  return rows;
}

size_t KvElementBytes(hwyattn_dtype dtype) {
  return dtype == HWYATTN_F32 ? 4 : dtype == HWYATTN_I8 || dtype == HWYATTN_F8E4M3 ? 1 : 2;
}

// Query i of sequence s attends to keys [0, kv_len - q_len + i] (causal by
// position): 4 D FLOPs per (query head, visible key).
double KvFlops(const KvRow& r) {
  double keys = 0;
  for (size_t s = 0; s < r.kv_len.size(); ++s) {
    for (int64_t i = 0; i < r.q_len[s]; ++i)
      keys += static_cast<double>(r.kv_len[s] - r.q_len[s] + i + 1);
  }
  return 4.0 * static_cast<double>(r.Hq * r.D) * keys;
}

// Bytes a call must read: K and V of every cached key, and an I8 cache's
// per-token scales (one float per key, head and tensor).
double KvCacheBytes(const KvRow& r) {
  double keys = 0;
  for (int64_t len : r.kv_len) keys += static_cast<double>(len);
  const double per_key =
      2.0 * static_cast<double>(r.Hkv) *
      (static_cast<double>(r.D * KvElementBytes(r.dtype)) + (r.dtype == HWYATTN_I8 ? 4.0 : 0.0));
  return keys * per_key;
}

// A KV pool's bytes on a 4 KiB boundary, as hwyattn.h advises: a page of
// a head (4 KiB for V1's) then fills memory pages instead of straddling two
// (malloc puts large blocks 16 bytes past a boundary).
struct PoolBytes {
  std::unique_ptr<unsigned char, FreeDeleter> ptr;
  size_t bytes = 0;
  void resize(size_t n) {
    bytes = n;
    ptr.reset(static_cast<unsigned char*>(AlignedOrDie(4096, n)));
  }
  unsigned char* data() const { return ptr.get(); }
  size_t size() const { return bytes; }
};

struct KvState {
  int64_t pages = 0, page_size = 0, table_stride = 0, tokens = 0;
  PoolBytes k, v;                       // [pages, Hkv, S, D] of the row's dtype
  std::vector<float> k_scale, v_scale;  // I8: [pages, Hkv, S, 1]; F8E4M3: [1]
  std::vector<int32_t> table, q_start, kv_len;
  FloatBuffer q, out;
  hwyattn_tensor tq, tout, tk_scale, tv_scale;
  hwyattn_kv_cache cache;
  hwyattn_kv_batch batch;
  std::string check_error;
  bool checked = false;

  static int64_t Tokens(const KvRow& r) {
    int64_t t = 0;
    for (int64_t n : r.q_len) t += n;
    return t;
  }

  explicit KvState(const KvRow& r)
      : q(static_cast<size_t>(Tokens(r) * r.Hq * r.D)),
        out(static_cast<size_t>(Tokens(r) * r.Hq * r.D)) {
    const int64_t seqs = static_cast<int64_t>(r.kv_len.size());
    const int64_t longest = *std::max_element(r.kv_len.begin(), r.kv_len.end());
    page_size = r.page_size > 0 ? r.page_size : longest;
    for (int64_t len : r.kv_len) {
      const int64_t need = (len + page_size - 1) / page_size;
      table_stride = std::max(table_stride, need);
      pages += r.page_size > 0 ? need : 1;
    }
    if (r.page_size == 0) pages = seqs;
    // Pages placed by a fixed random permutation of the pool.
    std::mt19937 rng(2024);
    std::vector<int32_t> perm(static_cast<size_t>(pages));
    for (int64_t p = 0; p < pages; ++p) perm[p] = static_cast<int32_t>(p);
    std::shuffle(perm.begin(), perm.end(), rng);
    table.assign(static_cast<size_t>(seqs * table_stride), -1);
    int64_t next = 0;
    for (int64_t s = 0; s < seqs && r.page_size > 0; ++s) {
      for (int64_t p = 0; p < (r.kv_len[s] + page_size - 1) / page_size; ++p)
        table[s * table_stride + p] = perm[next++];
    }
    const size_t elements = static_cast<size_t>(pages * r.Hkv * page_size * r.D);
    const size_t bytes = elements * KvElementBytes(r.dtype);
    std::uniform_real_distribution<float> uni(-1.0f, 1.0f), positive(0.5f, 1.5f);
    std::uniform_int_distribution<int> int8(-127, 127);
    for (PoolBytes* t : {&k, &v}) {
      t->resize(bytes);
      for (size_t i = 0; i < elements; ++i) {
        if (r.dtype == HWYATTN_F32) {
          const float x = uni(rng);
          memcpy(t->data() + 4 * i, &x, 4);
        } else if (r.dtype == HWYATTN_BF16) {
          const uint16_t h = ToBf16(uni(rng));
          memcpy(t->data() + 2 * i, &h, 2);
        } else if (r.dtype == HWYATTN_I8) {
          t->data()[i] = static_cast<unsigned char>(static_cast<int8_t>(int8(rng)));
        } else {  // E4M3: any finite number (not S.1111.111, the NaNs)
          const int b = int8(rng) & 0xFF;
          t->data()[i] = static_cast<unsigned char>((b & 0x7F) == 0x7F ? b ^ 1 : b);
        }
      }
    }
    const int64_t pool[4] = {pages, r.Hkv, page_size, r.D};
    hwyattn_kv_cache_init(&cache);
    hwyattn_tensor_contiguous(&cache.k, k.data(), r.dtype, 4, pool);
    hwyattn_tensor_contiguous(&cache.v, v.data(), r.dtype, 4, pool);
    if (r.dtype == HWYATTN_I8) {
      const int64_t scale_shape[4] = {pages, r.Hkv, page_size, 1};
      for (std::vector<float>* t : {&k_scale, &v_scale}) {
        t->resize(static_cast<size_t>(pages * r.Hkv * page_size));
        for (float& x : *t) x = positive(rng) / 127.0f;
      }
      hwyattn_tensor_contiguous(&tk_scale, k_scale.data(), HWYATTN_F32, 4, scale_shape);
      hwyattn_tensor_contiguous(&tv_scale, v_scale.data(), HWYATTN_F32, 4, scale_shape);
      cache.k_scale = &tk_scale;
      cache.v_scale = &tv_scale;
    }
    if (r.dtype == HWYATTN_F8E4M3) {  // vLLM's k_scale and v_scale: one float each
      const int64_t one[1] = {1};
      k_scale = {0.01f};
      v_scale = {0.02f};
      hwyattn_tensor_contiguous(&tk_scale, k_scale.data(), HWYATTN_F32, 1, one);
      hwyattn_tensor_contiguous(&tv_scale, v_scale.data(), HWYATTN_F32, 1, one);
      cache.k_scale = &tk_scale;
      cache.v_scale = &tv_scale;
    }
    if (r.page_size > 0) {
      cache.block_table = table.data();
      cache.block_table_stride = table_stride;
    }
    q_start.push_back(0);
    for (int64_t s = 0; s < seqs; ++s) {
      q_start.push_back(static_cast<int32_t>(q_start.back() + r.q_len[s]));
      kv_len.push_back(static_cast<int32_t>(r.kv_len[s]));
    }
    tokens = q_start.back();
    hwyattn_kv_batch_init(&batch);
    batch.num_seqs = static_cast<int32_t>(seqs);
    batch.q_start = q_start.data();
    batch.kv_len = kv_len.data();
    for (size_t i = 0; i < q.size; ++i) q.data()[i] = uni(rng);
    memset(out.data(), 0, out.size * sizeof(float));
    const int64_t qs[3] = {tokens, r.Hq, r.D};
    hwyattn_tensor_contiguous(&tq, q.data(), HWYATTN_F32, 3, qs);
    hwyattn_tensor_contiguous(&tout, out.data(), HWYATTN_F32, 3, qs);
  }

  // Element d of key t (sequence s, kv head h) of K or V, dequantized.
  double Value(const KvRow& r, bool value, int64_t s, int64_t h, int64_t t, int64_t d) const {
    const int64_t page = r.page_size > 0 ? table[s * table_stride + t / page_size] : s;
    const size_t row = static_cast<size_t>((page * r.Hkv + h) * page_size + t % page_size);
    const size_t i = row * static_cast<size_t>(r.D) + static_cast<size_t>(d);
    const unsigned char* base = (value ? v : k).data();
    if (r.dtype == HWYATTN_F32) {
      float x;
      memcpy(&x, base + 4 * i, 4);
      return x;
    }
    if (r.dtype == HWYATTN_BF16) {
      uint16_t h16;
      memcpy(&h16, base + 2 * i, 2);
      return FromBf16(h16);
    }
    if (r.dtype == HWYATTN_I8) {
      return static_cast<double>(static_cast<int8_t>(base[i])) * (value ? v_scale : k_scale)[row];
    }
    // E4M3 from its fields: (-1)^s 2^(e - 7) (1 + m / 8), subnormal 2^-6 m / 8.
    const int b = base[i], e = (b >> 3) & 15, m = b & 7;
    const double mag = e == 0 ? std::ldexp(m / 8.0, -6) : std::ldexp(1.0 + m / 8.0, e - 7);
    return ((b & 0x80) ? -mag : mag) * (value ? v_scale : k_scale)[0];
  }

  // The last query token of the first and the last sequence, last head,
  // against a double-precision softmax over the dequantized cache.
  std::string SpotCheck(const KvRow& r) const {
    double max_err = 0, max_ref = 0, max_v = 0;
    const double scale = 1.0 / std::sqrt(static_cast<double>(r.D));
    for (int64_t s : {int64_t{0}, static_cast<int64_t>(r.kv_len.size()) - 1}) {
      const int64_t token = q_start[s + 1] - 1, h = r.Hq - 1, kvh = h / (r.Hq / r.Hkv);
      const int64_t keys = r.kv_len[s];  // the last query sees every key
      const float* qi = q.data() + (token * r.Hq + h) * r.D;
      std::vector<double> qd = r.int8 ? Int8RuleQuery(qi, r.D) : std::vector<double>(qi, qi + r.D);
      if (r.bf16) {
        for (double& x : qd) x = FromBf16(ToBf16(static_cast<float>(x)));
      }
      std::vector<double> p(static_cast<size_t>(keys));
      double m = -INFINITY;
      for (int64_t t = 0; t < keys; ++t) {
        double dot = 0;
        for (int64_t d = 0; d < r.D; ++d) dot += qd[d] * Value(r, false, s, kvh, t, d);
        p[t] = dot * scale;
        m = std::max(m, p[t]);
      }
      double l = 0;
      for (double& x : p) l += (x = std::exp(x - m));
      for (int64_t d = 0; d < r.D; ++d) {
        double acc = 0;
        for (int64_t t = 0; t < keys; ++t) {
          acc += p[t] * Value(r, true, s, kvh, t, d);
          max_v = std::max(max_v, std::fabs(Value(r, true, s, kvh, t, d)));
        }
        acc /= l;
        max_ref = std::max(max_ref, std::fabs(acc));
        max_err = std::max(max_err, std::fabs(acc - out.data()[(token * r.Hq + h) * r.D + d]));
      }
    }
    const double rounding = std::ldexp(max_v, r.dtype == HWYATTN_I8 ? -8 : -9);
    if (!(max_err <= 1e-4 * std::max(max_ref, 1e-30) + (r.bf16 ? rounding : 0.0))) {
      char buf[160];
      snprintf(buf, sizeof(buf),
               "%s: output differs from the reference: max|err| %.3g, max|ref| %.3g", r.id, max_err,
               max_ref);
      return buf;
    }
    return "";
  }

  void Flush() const {
    FlushFromCaches(k.data(), k.size());
    FlushFromCaches(v.data(), v.size());
    if (!k_scale.empty()) {
      FlushFromCaches(k_scale.data(), k_scale.size() * sizeof(float));
      FlushFromCaches(v_scale.data(), v_scale.size() * sizeof(float));
    }
  }

  // What a plain loop reads of this paged cache per second right now
  // (MeasureSpanReadGBps): per sequence and kv head, longest first, its
  // pages' K and V spans in the block table's order, the spans two pages
  // ahead prefetched (as the decode kernel does): V1's pct_pages compares
  // the kernel with its own access pattern.
  double PagesReadGBps(const KvRow& r, int threads) const {
    const size_t span = static_cast<size_t>(page_size * r.D) * KvElementBytes(r.dtype);
    std::vector<size_t> order(r.kv_len.size());
    std::iota(order.begin(), order.end(), size_t{0});
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return r.kv_len[a] > r.kv_len[b]; });
    std::vector<std::vector<const float*>> units;
    for (size_t s : order) {
      const int64_t used = (r.kv_len[s] + page_size - 1) / page_size;
      for (int64_t h = 0; h < r.Hkv; ++h) {
        std::vector<const float*> spans;
        for (int64_t i = 0; i < used; ++i) {
          const size_t at = static_cast<size_t>(table[s * table_stride + i] * r.Hkv + h) * span;
          spans.push_back(reinterpret_cast<const float*>(k.data() + at));
          spans.push_back(reinterpret_cast<const float*>(v.data() + at));
        }
        units.push_back(std::move(spans));
      }
    }
    return hwyattn_bench::MeasureSpanReadGBps(threads, units, span, 4, 5);
  }
};

std::string KvShape(const KvRow& r) {
  const char* dtype = r.dtype == HWYATTN_F32    ? "f32"
                      : r.dtype == HWYATTN_BF16 ? "bf16"
                      : r.dtype == HWYATTN_I8   ? "i8"
                                                : "f8e4m3";
  char buf[200];
  snprintf(buf, sizeof(buf), "seqs=%zu Hq=%lld Hkv=%lld D=%lld kv=%s%s pages=%lld", r.kv_len.size(),
           static_cast<long long>(r.Hq), static_cast<long long>(r.Hkv), static_cast<long long>(r.D),
           dtype,
           r.dtype == HWYATTN_I8       ? "(per-token scales)"
           : r.dtype == HWYATTN_F8E4M3 ? "(per-tensor scales)"
                                       : "",
           static_cast<long long>(r.page_size));
  if (r.bf16) return std::string(buf) + " precision=bf16";
  if (r.int8) return std::string(buf) + " precision=int8";
  return buf;
}

// cold: the cache is flushed from every level before each call (manual time).
void BM_KvAttention(benchmark::State& state, const KvRow* row, bool cold) {
  const KvRow& r = *row;
  const int threads = static_cast<int>(state.range(0));
  static std::map<std::string, std::unique_ptr<KvState>> states;
  static std::string error;  // SkipWithError keeps the pointer
  std::unique_ptr<KvState>& kv = states[r.id];
  if (!kv) kv.reset(new KvState(r));
  const int previous_threads = hwyattn_get_num_threads();
  hwyattn_set_num_threads(threads);
  hwyattn_sdpa_options opts;
  hwyattn_sdpa_options_init(&opts);
  opts.causal = HWYATTN_CAUSAL_BOTTOM_RIGHT;
  if (r.bf16) opts.precision = HWYATTN_PRECISION_BF16;
  if (r.int8) opts.precision = HWYATTN_PRECISION_INT8;

  const double row_peak = RowFmaPeak(threads);
  double read_bw = g_peaks.read_gbps[threads];
  if (r.decode && g_peaks.bw_bytes > 0)
    read_bw = hwyattn_bench::MeasureReadBandwidthGBps(threads, g_peaks.bw_bytes, 10);
  const double pages_bw = r.decode && r.page_size > 0 ? kv->PagesReadGBps(r, threads) : 0.0;

  hwyattn_status st = hwyattn_kv_attention(&kv->tq, &kv->cache, &kv->batch, &kv->tout, &opts);
  if (st == HWYATTN_OK && !kv->checked) {
    kv->check_error = kv->SpotCheck(r);
    kv->checked = true;
  }
  if (st != HWYATTN_OK || !kv->check_error.empty()) {
    error = st != HWYATTN_OK ? std::string(hwyattn_status_string(st)) + ": " + hwyattn_last_error()
                             : kv->check_error;
    state.SkipWithError(error.c_str());
    hwyattn_set_num_threads(previous_threads);
    return;
  }
  for (auto _ : state) {
    if (cold) {
      kv->Flush();
      const auto start = std::chrono::steady_clock::now();
      st = hwyattn_kv_attention(&kv->tq, &kv->cache, &kv->batch, &kv->tout, &opts);
      state.SetIterationTime(
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    } else {
      st = hwyattn_kv_attention(&kv->tq, &kv->cache, &kv->batch, &kv->tout, &opts);
    }
    benchmark::DoNotOptimize(st);
    benchmark::ClobberMemory();
  }
  hwyattn_set_num_threads(previous_threads);
  if (st != HWYATTN_OK) {
    error = std::string("hwyattn_kv_attention failed in the timed loop: ") + hwyattn_last_error();
    state.SkipWithError(error.c_str());
    return;
  }
  using benchmark::Counter;
  const double calls = static_cast<double>(state.iterations());
  SetFlopCounters(state, KvFlops(r) * calls * 1e-9, row_peak, threads);
  if (r.decode) {
    const double gb = KvCacheBytes(r) * calls * 1e-9;
    state.counters["GBps"] = Counter(gb, Counter::kIsRate);
    state.counters["read_bw_GBps"] = Counter(read_bw);
    state.counters["pct_bw"] = Counter(read_bw > 0 ? gb / read_bw * 100.0 : 0.0, Counter::kIsRate);
    if (pages_bw > 0) {
      state.counters["pages_read_GBps"] = Counter(pages_bw);
      state.counters["pct_pages"] = Counter(gb / pages_bw * 100.0, Counter::kIsRate);
    }
  }
  state.SetLabel(KvShape(r));
}

// MemAvailable from /proc/meminfo in bytes, or 0 if unknown.
size_t MemAvailableBytes() {
  std::ifstream f("/proc/meminfo");
  std::string key;
  size_t kib;
  std::string unit;
  while (f >> key >> kib >> unit) {
    if (key == "MemAvailable:") return kib * 1024;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // Own flags first; Google Benchmark rejects unknown ones.
  const hwyattn_bench::BenchFlags flags = hwyattn_bench::ParseBenchFlags(argc, argv);

  for (const Row& r : kRows) {
    std::string name = std::string("BM_Attention/") + r.id;
    benchmark::internal::Benchmark* b =
        r.d_model > 0 ? benchmark::RegisterBenchmark(name.c_str(), BM_Mha, &r)
                      : benchmark::RegisterBenchmark(name.c_str(), BM_Attention, &r, 0, false);
    b->ArgName("threads");
    for (int n : kThreadCounts) b->Arg(n);
    b->UseRealTime()->Unit(r.unit)->MinTime(r.min_time);
  }
  // D1cold, D2cold: the decode rows with their K/V flushed before each call.
  for (const Row& r : kRows) {
    if (!r.decode || !kCanFlush) continue;
    const std::string name = std::string("BM_Attention/") + r.id + "cold";
    benchmark::internal::Benchmark* b =
        benchmark::RegisterBenchmark(name.c_str(), BM_Attention, &r, 0, true);
    b->ArgName("threads");
    for (int n : kThreadCounts) b->Arg(n);
    b->UseManualTime()->Unit(r.unit)->MinTime(r.min_time);
  }
  // D1q, D2q, V1, V2: hwyattn_kv_attention over a cache; the decode rows
  // also cold.
  for (const KvRow& r : KvRows()) {
    for (bool cold : {false, true}) {
      if (cold && (!r.decode || !kCanFlush)) continue;
      const std::string name = std::string("BM_Attention/") + r.id + (cold ? "cold" : "");
      benchmark::internal::Benchmark* b =
          benchmark::RegisterBenchmark(name.c_str(), BM_KvAttention, &r, cold);
      b->ArgName("threads");
      for (int n : kThreadCounts) b->Arg(n);
      if (cold) {
        b->UseManualTime();
      } else {
        b->UseRealTime();
      }
      b->Unit(benchmark::kMillisecond)->MinTime(r.min_time);
    }
  }
  // TP1: P1 and D1 on the caller's pool of 2 workers.
  for (const Row& r : kRows) {
    if (strcmp(r.id, "P1") != 0 && strcmp(r.id, "D1") != 0) continue;
    for (int kind : {1, 2}) {
      const std::string name =
          std::string(kind == 1 ? "BM_Attention/TP1/" : "BM_Attention/TP1spin/") + r.id;
      benchmark::RegisterBenchmark(name.c_str(), BM_Attention, &r, kind, false)
          ->ArgName("threads")
          ->Arg(2)
          ->UseRealTime()
          ->Unit(r.unit)
          ->MinTime(r.min_time);
    }
  }

  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;

  benchmark::AddCustomContext("hwyattn_version", hwyattn_version());
  benchmark::AddCustomContext("simd_target", hwyattn_simd_target());
  benchmark::AddCustomContext("random_interleaving", flags.interleaved ? "true" : "false");
  if (!flags.skip_peaks && !flags.listing) {
    size_t bw_bytes = static_cast<size_t>(flags.bw_mib * 1024 * 1024);
    const size_t avail = MemAvailableBytes();
    if (avail != 0 && bw_bytes > avail / 4) {
      fprintf(stderr, "bandwidth buffer shrunk from %.0f MiB to a quarter of MemAvailable\n",
              flags.bw_mib);
      bw_bytes = avail / 4;
    }
    fprintf(stderr,
            "measuring the FMA and bf16 dot peaks and the read bandwidth (%.0f MiB buffer)...\n",
            bw_bytes / 1048576.0);
    for (int n : kThreadCounts) {
      g_peaks.fma_gflops[n] = hwyattn_bench::MeasureFmaPeakGflops(n, flags.peak_seconds, 5);
      g_peaks.bf16_gflops[n] = hwyattn_bench::MeasureBf16DotPeakGflops(n, flags.peak_seconds, 5);
    }
    for (int n : kThreadCounts) {
      g_peaks.read_gbps[n] = hwyattn_bench::MeasureReadBandwidthGBps(n, bw_bytes, 10);
    }
    if (g_peaks.fma_gflops[2] < 1.6 * g_peaks.fma_gflops[1]) {
      fprintf(stderr,
              "WARNING: 2 threads reach only %.2fx the FMA rate of 1: another process is using the "
              "second core, so the 2-thread results will not be reliable.\n",
              g_peaks.fma_gflops[2] / g_peaks.fma_gflops[1]);
    }
    benchmark::AddCustomContext("peak_target", hwyattn_bench::PeakTargetName());
    for (int n : kThreadCounts) {
      const std::string t = std::to_string(n) + "t";
      benchmark::AddCustomContext("fma_peak_gflops_" + t,
                                  hwyattn_bench::Format("%.1f", g_peaks.fma_gflops[n]));
      benchmark::AddCustomContext("bf16_peak_gflops_" + t,
                                  hwyattn_bench::Format("%.1f", g_peaks.bf16_gflops[n]));
      benchmark::AddCustomContext("read_bw_gbps_" + t,
                                  hwyattn_bench::Format("%.1f", g_peaks.read_gbps[n]));
    }
    benchmark::AddCustomContext("bw_buffer_mib",
                                hwyattn_bench::Format("%.0f", bw_bytes / 1048576.0));
    g_peaks.bw_bytes = bw_bytes;
  }

  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
