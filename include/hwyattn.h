/* SPDX-License-Identifier: Apache-2.0
 *
 * hwyattn.h: the stable C interface of hwyattn, a portable SIMD CPU library
 * for transformer attention at inference time.
 *
 * This header is plain C99 (it compiles with -std=c99 -Wall -Wextra -pedantic
 * -Werror) and is the library's only ABI. Python (ctypes), Rust, Go and every
 * other FFI reach the library through it.
 *
 * Conventions
 * -----------
 * - Every function that can fail returns an hwyattn_status. It validates every
 *   argument before touching memory; on failure it writes nothing to any
 *   output and hwyattn_last_error() names the argument and the value.
 * - Tensors are described by hwyattn_tensor: a data pointer, a dtype, a rank
 *   and per-dimension sizes and strides counted in ELEMENTS (not bytes).
 *   A stride of 0 broadcasts that dimension. Shapes are right-aligned: a
 *   tensor of rank r < 4 describes the last r of the four logical dimensions,
 *   the leading ones having size 1 (numpy broadcasting). `data` must be
 *   aligned to its element size (4 bytes for F32); no other alignment is
 *   needed. Outputs must not overlap themselves, each other, or any input.
 * - Extensible structs (hwyattn_sdpa_options, hwyattn_mha_config,
 *   hwyattn_parallel, hwyattn_kv_cache, hwyattn_kv_batch) start with
 *   struct_size, the size the caller compiled. Initialise them with their
 *   *_init macro, which zeroes exactly the caller's sizeof and sets
 *   struct_size. Every field appended in a later version means "off" or "the
 *   default" when it is zero, so:
 *     - a struct from an older header (a smaller struct_size, one of the sizes
 *       a released header had) is accepted: the fields it lacks count as 0;
 *     - a struct from a newer header is accepted if the fields this library
 *       does not know are zero, else HWYATTN_UNSUPPORTED;
 *     - any other struct_size is HWYATTN_INVALID_ARGUMENT.
 *   Structs end on an 8-byte boundary with explicit reservedN fields, never
 *   tail padding; a reserved field must be 0 (else HWYATTN_UNSUPPORTED) and
 *   becomes a real field in a later version.
 * - HWYATTN_UNSUPPORTED means a meaningful request this version cannot do
 *   (e.g. a BF16 mask); HWYATTN_INVALID_ARGUMENT a request that is wrong.
 * - The library keeps no pointer to caller memory after a call returns.
 *
 * Quick start
 * -----------
 *   float q[1*2*3*4], k[1*2*5*4], v[1*2*5*4], o[1*2*3*4];
 *   int64_t qs[4] = {1, 2, 3, 4}, ks[4] = {1, 2, 5, 4};
 *   hwyattn_tensor tq, tk, tv, to;
 *   hwyattn_tensor_contiguous(&tq, q, HWYATTN_F32, 4, qs);
 *   hwyattn_tensor_contiguous(&tk, k, HWYATTN_F32, 4, ks);
 *   hwyattn_tensor_contiguous(&tv, v, HWYATTN_F32, 4, ks);
 *   hwyattn_tensor_contiguous(&to, o, HWYATTN_F32, 4, qs);
 *   if (hwyattn_sdpa(&tq, &tk, &tv, &to, NULL) != HWYATTN_OK)
 *     fprintf(stderr, "%s\n", hwyattn_last_error());
 */
#ifndef HWYATTN_H_
#define HWYATTN_H_

#include <stddef.h>
#include <stdint.h>

#if defined(_WIN32) || defined(__CYGWIN__)
#if defined(HWYATTN_BUILDING_SHARED)
#define HWYATTN_API __declspec(dllexport)
#elif defined(HWYATTN_SHARED)
#define HWYATTN_API __declspec(dllimport)
#else
#define HWYATTN_API
#endif
#elif defined(__GNUC__) || defined(__clang__)
#define HWYATTN_API __attribute__((visibility("default")))
#else
#define HWYATTN_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------ */
/* Version and errors                                                        */
/* ------------------------------------------------------------------------ */

/* The version follows the API's steps: 0.2 the engine interface (KV caches,
 * varlen batches, score modifiers, merge_states, caller pools), 0.3 fp8
 * caches and F16/BF16 outputs, 0.4 ggml's block formats and I4 as caches and
 * HWYATTN_PRECISION_INT8. Each step only appends (enum values, struct fields
 * behind struct_size), so HWYATTN_ABI_VERSION, the SONAME's number, is
 * unchanged since 0.1: a program built against an older header runs on this
 * library as before. */
#define HWYATTN_VERSION_MAJOR 0
#define HWYATTN_VERSION_MINOR 4
#define HWYATTN_VERSION_PATCH 0
/** Bumped on any incompatible change to this header (struct layouts, enum
 *  values, function signatures). Compare with hwyattn_abi_version() at start-up
 *  to catch a header/library mismatch. */
#define HWYATTN_ABI_VERSION 1

/** The library's HWYATTN_ABI_VERSION. */
HWYATTN_API uint32_t hwyattn_abi_version(void);
/** The library's version as "MAJOR.MINOR.PATCH", e.g. "0.4.0". Static storage. */
HWYATTN_API const char* hwyattn_version(void);

/** Status codes. The values are stable forever; new ones are only appended. */
typedef enum hwyattn_status {
  /** Success. */
  HWYATTN_OK = 0,
  /** Null pointer, bad rank/shape/stride/dtype, inconsistent sizes, size overflow. */
  HWYATTN_INVALID_ARGUMENT = 1,
  /** A valid request that this build cannot do (e.g. a dtype combination). */
  HWYATTN_UNSUPPORTED = 2,
  /** Scratch or packed buffers could not be allocated. */
  HWYATTN_OUT_OF_MEMORY = 3,
  /** A bug in hwyattn: please report it with hwyattn_last_error(). */
  HWYATTN_INTERNAL_ERROR = 4
} hwyattn_status;

/** A static, human-readable name for a status ("HWYATTN_OK: success", ...).
 *  Unknown values give "unknown hwyattn_status". Never NULL. */
HWYATTN_API const char* hwyattn_status_string(hwyattn_status s);

/** Detail of the calling thread's last failure, naming the argument and the
 *  value, e.g. "k: shape[3] (head_dim) is 48 but q has 64". Thread-local: a
 *  failure on another thread does not change it. The text stays valid until
 *  this thread's next hwyattn call. Empty ("") if this thread has not failed.
 *  A successful call does not clear it. Never NULL. */
HWYATTN_API const char* hwyattn_last_error(void);

/* ------------------------------------------------------------------------ */
/* Runtime                                                                   */
/* ------------------------------------------------------------------------ */

/** The SIMD target the kernels run on, picked at the first call from what this
 *  CPU supports among the targets the library was built with:
 *  - x86-64: "AVX3_BF16" (AVX-512 with the AVX512_BF16 dot products, used
 *    under HWYATTN_PRECISION_BF16; decode's dot-product loops also need
 *    AVX512_VBMI, which every CPU with AVX512_BF16 but Intel's Cooper Lake
 *    has: there decode keeps the portable bf16 rule), "AVX3", "AVX2", "SSE4";
 *  - arm64: "SVE_256" (256-bit SVE), "SVE2_128" (128-bit SVE2), "SVE2" or
 *    "SVE" (512-bit vectors only: other lengths run NEON), "NEON"; each with
 *    "_BF16" ("SVE_256_BF16", ..., "NEON_BF16") where the CPU has Armv8.6's
 *    BF16 dot products (BFDOT; for the SVE targets SVE's BFDOT), which the
 *    prefill kernel uses under HWYATTN_PRECISION_BF16;
 *  - every architecture (ppc64el and s390x have nothing else with Highway
 *    1.0.3): the portable fallback, "EMU128", or "SCALAR" when the library
 *    was built with a compiler on which Highway disables EMU128 (GCC < 12.3,
 *    e.g. Debian 12's).
 *  The environment variable HWYATTN_TARGET (read once, at the first call) caps
 *  it for this library only: HWYATTN_TARGET=AVX2 on an AVX-512 machine runs
 *  the AVX2 kernels. A Highway name caps below the dot-product extensions
 *  (HWYATTN_TARGET=AVX3, NEON or SVE_256 runs bf16 products as fp32 FMAs of
 *  rounded operands, and AVX3's integer products without AVX512_VNNI's
 *  vpdpbusd); a "_BF16" name caps at its target with them
 *  (HWYATTN_TARGET=NEON_BF16 on an SVE machine: NEON's BFDOT tiles).
 *  HWYATTN_TARGET=EMU128 or SCALAR (either name, on any architecture) runs
 *  the fallback. A name that is not a target of this build (a typo, or
 *  another architecture's target, such as NEON on x86) is ignored, no cap,
 *  rather than failing every later call; the library then prints one line
 *  to stderr naming the accepted values, as libgomp does for an invalid
 *  OMP_* variable. Static storage; never NULL.
 *
 *  Choices that depend on the microarchitecture rather than the target are
 *  made once from the CPU's identity; the environment variable
 *  HWYATTN_TUNING (read once) overrides them, to time or test either path on
 *  one machine (results stay within the documented accuracy either way).
 *  HWYATTN_TUNING=zen4, the choice on AMD family 19h (Zen 3, Zen 4): decode
 *  streams K/V with L2 prefetches, and under HWYATTN_PRECISION_BF16 decode
 *  rows over an I8 cache run on the AVX512_BF16 dot products where the CPU
 *  has them. HWYATTN_TUNING=default, every other CPU's: L1 prefetches, I8
 *  caches on fp32 multiply-adds. Another name is ignored, with one line on
 *  stderr. */
HWYATTN_API const char* hwyattn_simd_target(void);

/** Sets the number of threads later calls may use: 1 = run on the calling
 *  thread only; 0 = all available cores (the OpenMP default, which honours
 *  OMP_NUM_THREADS). Negative: HWYATTN_INVALID_ARGUMENT; more than 4096:
 *  HWYATTN_UNSUPPORTED (the OpenMP runtime aborts the process when it cannot
 *  start that many threads). Process-wide and
 *  thread-safe. Results never depend on it (they are bit-identical for any
 *  thread count); a call too small to gain from threads runs on one thread.
 *  It does not apply to calls with opts->parallel (they use the caller's
 *  pool, sized by its num_workers), nor to a library built with
 *  HWYATTN_OPENMP=OFF, where calls without a pool run on the calling thread
 *  (the value is still kept and reported by hwyattn_get_num_threads). */
HWYATTN_API hwyattn_status hwyattn_set_num_threads(int n);
/** The number of threads later calls may use (0 resolved to the core count). */
HWYATTN_API int hwyattn_get_num_threads(void);

/** A task of a parallel phase: runs work item `index` of the phase. */
typedef void (*hwyattn_task_fn)(void* task_ctx, int64_t index);

/** The caller's thread pool, for embedders that must not start a second set
 *  of threads (opts->parallel): an engine with its own pool passes it, and
 *  the call then starts no thread of its own (no OpenMP team), so the cores
 *  are not oversubscribed and no second OpenMP runtime is involved.
 *
 *  How a call uses it: each parallel phase of the call (packing K/V, the
 *  query tiles of a prefill, the key chunks of a decode and then their merge,
 *  the projections of hwyattn_mha_forward) is one parallel_for of n tasks,
 *  1 <= n <= num_workers; task i is worker i of the phase and runs its own
 *  share of the phase's work items (in most phases it then helps with the
 *  shares of workers that have not started yet). The phases of a call run
 *  one after the other, all from the calling thread. A phase too small to
 *  gain from threads runs on the calling thread without calling
 *  parallel_for, and a call on a tiny problem may never call it at all.
 *
 *  Correctness never depends on the pool's timing: the tasks of a phase
 *  never wait for each other, so a pool may run them all at once, one at a
 *  time, in any order, or inline on the calling thread. The work items are
 *  fixed by the problem alone, never by num_workers or by which task runs
 *  what, so results are bit-identical whatever pool runs them and whatever
 *  num_workers says (the same promise as for thread counts). num_workers
 *  only bounds n (and the per-worker scratch the call sizes): a pool that
 *  claims more workers than a phase has work items (e.g. 16 workers for
 *  the 4 K/V heads of a packing phase) gets fewer tasks, never empty ones;
 *  a pool that claims fewer than it has just gets less parallelism.
 *
 *  Speed: a call makes a few parallel_for calls back to back (a decode
 *  step 2, a prefill 1 or 2, hwyattn_mha_forward up to 4 more for its
 *  projections), so for sub-millisecond calls the pool's own start and end
 *  latency counts: a pool whose threads sleep between jobs pays an OS
 *  wake-up for each, where OpenMP's threads poll for a while first. On 2
 *  cores (bench_attention TP1), a sleeping pool ran a 1024-token prefill at
 *  98% of OpenMP's speed but a 0.66 ms decode step at 86-90%; the same pool
 *  polling for 100 us before sleeping, task i on worker i, at 100% and 97-99%.
 *
 *  The pool is read during the call only (validated and copied when the
 *  call starts); hwyattn_set_num_threads does not apply to calls with a
 *  pool. A library built with HWYATTN_OPENMP=OFF (no OpenMP runtime linked:
 *  pkg-config --variable=openmp hwyattn says OFF) runs calls without a pool
 *  on the calling thread and calls with one on the pool, as any build does. */
typedef struct hwyattn_parallel {
  uint32_t struct_size; /* sizeof(hwyattn_parallel); hwyattn_parallel_init sets it */
  /** >= 1: how many tasks the pool runs at once (usually its thread count,
   *  counting the caller's thread if the pool runs tasks on it). Every
   *  parallel_for gets n <= num_workers, and the library sizes its per-worker
   *  scratch by it; it never changes a result. */
  int32_t num_workers;
  /** The caller's context, passed back to parallel_for. */
  void* pool;
  /** Runs task(task_ctx, i) exactly once for every i in [0, n), on any
   *  threads, concurrently or not, and returns when all have finished, with
   *  their writes visible to the calling thread (as any pool's wait on a
   *  mutex, condition variable or join gives). n >= 1. The library never
   *  calls parallel_for from inside a task, so a pool need not support
   *  nesting; tasks do not block on each other, so a pool may also run them
   *  on the calling thread. Several threads may call the library with the
   *  same pool at once: parallel_for must then be thread-safe. Required. */
  void (*parallel_for)(void* pool, int64_t n, hwyattn_task_fn task, void* task_ctx);
} hwyattn_parallel;

/** Zeroes the caller's `size` bytes of *p, sets struct_size = size and
 *  num_workers = 1. NULL is a no-op. Call it through the macro
 *  hwyattn_parallel_init(p), which passes sizeof(*p). */
HWYATTN_API void hwyattn_parallel_init_sized(hwyattn_parallel* p, size_t size);
#define hwyattn_parallel_init(p) hwyattn_parallel_init_sized((p), sizeof(*(p)))

/* ------------------------------------------------------------------------ */
/* Tensors                                                                   */
/* ------------------------------------------------------------------------ */

typedef enum hwyattn_dtype {
  HWYATTN_F32 = 0,
  HWYATTN_F16 = 1,  /* IEEE binary16, stored as uint16_t */
  HWYATTN_BF16 = 2, /* bfloat16, stored as uint16_t */
  HWYATTN_BOOL = 3, /* uint8_t, nonzero = true */
  /* int8_t, symmetric: the value is x * scale, the scale coming from the
   * cache's scale tensors (hwyattn_kv_cache). Accepted only as the K/V of an
   * hwyattn_kv_cache; anywhere else HWYATTN_INVALID_ARGUMENT. */
  HWYATTN_I8 = 4,
  /* OCP 8-bit floating point, stored as uint8_t, sign in the top bit. Like
   * I8, accepted only as the K/V of an hwyattn_kv_cache, where the value is
   * the fp8 number times the cache's scale (1 without scale tensors).
   * E4M3 is the "fn" variant (PyTorch's float8_e4m3fn, vLLM's "fp8" and
   * "fp8_e4m3"): exponent bias 7, no infinities, S.1111.111 is NaN, largest
   * finite value 448, smallest subnormal 2^-9. E5M2 (float8_e5m2, vLLM's
   * "fp8_e5m2") is IEEE-like: bias 15, infinities and NaNs at exponent 31,
   * largest finite value 57344, smallest subnormal 2^-16; its bits are the
   * top byte of the IEEE binary16 of the same value. */
  HWYATTN_F8E4M3 = 5,
  HWYATTN_F8E5M2 = 6,
  /* ggml's block formats, byte for byte (ggml-common.h; llama.cpp's -ctk /
   * -ctv cache types): blocks of 32 consecutive elements of the last
   * dimension, each block an fp16 scale d (and for Q4_1 / Q5_1 an fp16
   * offset m), in the machine's byte order, then the numbers. In the 4- and
   * 5-bit formats element j < 16 of a block is the low nibble of qs[j] and
   * element j + 16 its high nibble; Q5's fifth bit of element j is bit j of
   * the 32-bit little-endian qh (on a big-endian machine ggml's own C stores
   * qh in the machine's order: there Q5 blocks from ggml differ in those 4
   * bytes).
   *
   *   HWYATTN_Q8_0    d, int8 qs[32]            d * q                34 bytes
   *   HWYATTN_Q4_0    d, uint8 qs[16]           d * (nibble - 8)     18 bytes
   *   HWYATTN_Q4_1    d, m, uint8 qs[16]        d * nibble + m       20 bytes
   *   HWYATTN_Q5_0    d, qh[4], qs[16]          d * (q5 - 16)        22 bytes
   *   HWYATTN_Q5_1    d, m, qh[4], qs[16]       d * q5 + m           24 bytes
   *   HWYATTN_IQ4_NL  d, uint8 qs[16]           d * level[nibble]    18 bytes
   *     (IQ4_NL's levels: -127 -104 -83 -65 -49 -35 -22 -10 1 13 25 38 53
   *     69 89 113)
   *
   * Accepted as k and v of hwyattn_sdpa and as the K/V pages of an
   * hwyattn_kv_cache (no scale tensors: the scales are in the blocks); k and
   * v may have different dtypes (a block format and a float one too). Their
   * last dimension (D or Dv) must be a multiple of 32 with stride 1; the
   * other strides still count elements and must be multiples of 32 (a row
   * of D elements is D / 32 blocks, D / 32 * 34 bytes for Q8_0), and data
   * may sit at any byte. Anything else is HWYATTN_INVALID_ARGUMENT naming
   * the tensor and the dimension. The kernels read the blocks in place,
   * dequantized exactly (d * q; d * q + m rounded once to fp32) where a
   * tile is loaded, and multiply fp32 queries by them (more accurate than
   * ggml's CPU backend, which quantizes the query to Q8 first).
   * hwyattn_kv_cache_write quantizes as ggml's reference quantizers do
   * (quantize_row_q8_0_ref etc.: the same bytes). */
  HWYATTN_Q8_0 = 7,
  HWYATTN_Q4_0 = 8,
  HWYATTN_Q4_1 = 9,
  HWYATTN_Q5_0 = 10,
  HWYATTN_Q5_1 = 11,
  HWYATTN_IQ4_NL = 12,
  /* Signed int4 in [-8, 7], two per byte: element 2i of a row is the low
   * nibble of byte i, element 2i + 1 the high nibble (two's complement).
   * Like I8 (and with I8's scale layouts: per token, per channel, per kv
   * head, per tensor; KIVI's choice is per-channel K with per-token V), the
   * value is x * scale, and it is accepted only as the K/V pages of an
   * hwyattn_kv_cache, K and V both I4. Strides count elements: the last
   * dimension (D, Dv) must have stride 1 and every other stride must be
   * even, so that each row starts on a byte (a row of D elements takes
   * (D + 1) / 2 bytes; with an odd D the last high nibble is padding, never
   * read). data may sit at any byte. hwyattn_kv_cache_write quantizes as
   * for I8 with 7 for 127: per token, scale = max |x| / 7; x / scale
   * rounded to nearest even and saturated to [-8, 7], NaN to 0. */
  HWYATTN_I4 = 13
} hwyattn_dtype;

typedef struct hwyattn_tensor {
  void* data;
  hwyattn_dtype dtype;
  int32_t rank;      /* 1..4; shape[rank..3] and stride[rank..3] are ignored */
  int64_t shape[4];  /* sizes, >= 1 */
  int64_t stride[4]; /* in elements, >= 0; 0 broadcasts that dimension */
} hwyattn_tensor;

/** Fills *t as a dense row-major tensor over `data` (the last dimension has
 *  stride 1; strides count elements, so a block format's rows are dense
 *  blocks when its last size is a multiple of 32, and I4's rows dense
 *  bytes when its last size is even). Returns
 *  HWYATTN_INVALID_ARGUMENT for a NULL t/shape, a rank outside 1..4, a size
 *  < 1 or an element count that overflows int64. */
HWYATTN_API hwyattn_status hwyattn_tensor_contiguous(hwyattn_tensor* t, void* data,
                                                     hwyattn_dtype dtype, int32_t rank,
                                                     const int64_t* shape);

/* ------------------------------------------------------------------------ */
/* Scaled dot-product attention                                              */
/* ------------------------------------------------------------------------ */

typedef enum hwyattn_causal {
  HWYATTN_CAUSAL_NONE = 0,
  /** Query i sees keys j <= i (PyTorch is_causal=True). */
  HWYATTN_CAUSAL_TOP_LEFT = 1,
  /** Query i sees keys j <= i + (Lk - Lq): the decode / KV-cache convention
   *  (the last query sees every key). With kv_len, Lk is still the tensor's
   *  length: padding does not shift the diagonal. */
  HWYATTN_CAUSAL_BOTTOM_RIGHT = 2
} hwyattn_causal;

/** Precision of the products Q K^T and P V (the softmax, its sums and the
 *  output are fp32 either way). */
typedef enum hwyattn_precision {
  /** fp32 products; F16/BF16 inputs are widened exactly. The default. */
  HWYATTN_PRECISION_F32 = 0,
  /** bf16 products, fp32 accumulation (oneDNN / PyTorch CPU "bf16
   *  attention"): Q K^T takes q and k rounded to the nearest bf16 (ties to
   *  even; BF16 inputs are used as they are, F32 and F16 inputs are rounded),
   *  the scale is applied to the fp32 product; P V takes the probabilities
   *  rounded to bf16 after the exp, and v rounded. The max, the softmax
   *  denominator (a sum of the unrounded probabilities), lse, weights and out
   *  stay fp32. Every CPU gives the same rounding rule (AVX512_BF16 dot
   *  products where the CPU has them: the prefill kernel, and the decode
   *  kernel on F32/F16/BF16/FP8 K/V, which it multiplies on the cache's own bits
   *  in place); results agree across SIMD targets within fp32
   *  accumulation-order differences (and below 2^-126 per product: the
   *  AVX512_BF16 instructions take subnormal bf16 values as zero), and are
   *  bit-identical for any thread count, as with F32.
   *  Accuracy: lse and weights are within fp32 rounding of exact attention on
   *  the rounded q and k; out is within 2^-9 max|v| of exact attention on the
   *  rounded q, k, v (the rounding of P). Against the unrounded inputs expect
   *  bf16's own error, about 1e-3 to 5e-3 of max|out| for unit-scale data.
   *  Values beyond bf16's range (|x| > 3.39e38) round to infinities.
   *  An I8 or FP8 cache (hwyattn_kv_attention) under BF16: decode rows
   *  (q_len * Hq / Hkv <= 8) multiply its numbers (exact in bf16) and apply
   *  the scales in fp32, as with F32 precision, except that with per-token V
   *  scales P V's bf16 operand is the weight of the cache's number, p * the
   *  token's scale, rounded once (so out is within 2^-8 of the largest
   *  dequantized |v| there); FP8 caches run on the AVX512_BF16 dot products
   *  where the CPU has them unless K's scales are per channel, I8 caches too
   *  where that measured faster (HWYATTN_TUNING, see hwyattn_simd_target;
   *  elsewhere I8 caches and per-channel K scales keep fp32 multiply-adds on
   *  the exact bf16 values: the same numbers). Longer rows' prefill rounds
   *  each dequantized element (number * scale) to bf16. */
  HWYATTN_PRECISION_BF16 = 1,
  /** Integer products for a quantized K (ggml's CPU backend, ONNX Runtime's
   *  and OpenVINO's int8 caches): where K is HWYATTN_I8, HWYATTN_I4 or a
   *  block format (HWYATTN_Q8_0 ... HWYATTN_IQ4_NL), Q K^T multiplies a
   *  quantized query by the cache's integers. Each query row (times K's scales
   *  when they are per channel, per kv head or per tensor: s_d, else 1) is
   *  quantized per block of 32 head dims as ggml's quantize_row_q8_0 does:
   *  x_d = q_d s_d, d = max|x| / 127 over the block, q_d = roundf(x_d * (1 /
   *  d)) (round half away from zero; q = 0 where d = 0), the last block of a
   *  head dim that is not a multiple of 32 padded with zeros; d stays fp32
   *  (ggml rounds it to fp16). Then, per key, with k the cache's integers
   *  (I8, I4; Q8_0's int8; Q4_0 nibble - 8; Q5_0 q5 - 16; Q4_1's nibble and
   *  Q5_1's q5 as they are; IQ4_NL's table value), e and m a block's fp16 d
   *  and offset (1 and 0 for I8 and I4) and t the token's scale (per-token
   *  scales; else 1):
   *      score = scale * t * sum over blocks of (d * e * sum_i q_i k_i
   *                                             + m * d * sum_i q_i)
   *  with exact int32 sums of each block and the rest in fp32. P V is fp32
   *  on the exactly dequantized V (any V dtype), as with F32; the softmax,
   *  lse and out are fp32. Decode rows (q_len * Hq / Hkv <= 8, the steps
   *  the cache's bytes bound) run the integer dot products (x86 CPUs with
   *  AVX512_VNNI: vpdpbusd over 16 keys' blocks at once; elsewhere
   *  Highway's widening multiply-adds on int16); prefill rows
   *  multiply the same dequantized query (d * q_d / s_d, 0 where s_d = 0) by
   *  the dequantized cache in fp32 (their time is bound by multiply-adds,
   *  which the fp32 tiles run at the FMA peak): the same scores within fp32
   *  rounding. Results are bit-identical for any thread count.
   *  Accuracy, against exact attention on the unquantized query over the
   *  same cache: each score moves by at most scale * sum over blocks of
   *  (max|x| over the block / 254) * sum over the block of |k'_d|, k' the
   *  dequantized key divided by s_d (the query's rounding: |x - d q| <= d /
   *  2), plus fp32 rounding; lse moves by at most the largest score error e,
   *  and the weights by factors within exp(+-2e). (F32 keeps the query
   *  unquantized.)
   *  On a float K (F32, F16, BF16, FP8) INT8 is F32. hwyattn_mha's
   *  projections (float weights) run fp32 under INT8. */
  HWYATTN_PRECISION_INT8 = 2
} hwyattn_precision;

struct hwyattn_parallel;

typedef struct hwyattn_sdpa_options {
  /** sizeof(hwyattn_sdpa_options) as the caller compiled it: lets the struct
   *  grow. hwyattn_sdpa_options_init sets it. */
  uint32_t struct_size;
  /** Multiplies Q K^T. 0 = 1/sqrt(head_dim); 1 = plain dot-product attention.
   *  Must be finite. */
  float scale;
  hwyattn_causal causal;
  /** Optional, broadcastable to [B, Hq, Lq, Lk] (right-aligned, size-1 or
   *  stride-0 dimensions broadcast). BOOL: true = attend, false = blocked.
   *  F32: added to the scaled scores; -INFINITY blocks. F16 (ggml's
   *  KQ mask, read in place): each element widened exactly to F32, then
   *  the F32 rule (0, finite values and -INFINITY alike). BF16:
   *  HWYATTN_UNSUPPORTED. Combines with causal and kv_len (a key must be
   *  allowed by all of them). */
  const hwyattn_tensor* mask;
  /** Optional [B]: keys at positions >= kv_len[b] are padding, as PyTorch's
   *  key_padding_mask. Each value in [0, Lk]. */
  const int32_t* kv_len;
  /** Optional output, F32 [B, Hq, Lq, Lk]: the attention probabilities (each
   *  row sums to 1, or to less with a sink, or is all zeros if every key of
   *  that row is blocked). */
  hwyattn_tensor* weights;
  /** Optional output, F32 [B, Hq, Lq]: natural log of the softmax denominator
   *  of the scaled, modified, masked scores (logsumexp over the keys, and the
   *  sink when there is one), -INFINITY for a row whose keys are all blocked
   *  (the sink's logit with sinks). Lets callers merge partial results
   *  (hwyattn_merge_states). */
  hwyattn_tensor* lse;

  /* ---- 0.2: score modifiers, threads, precision (zero = off) ----------- */
  /* Positions: query row i has position p = i + (Lk - Lq) under
   * HWYATTN_CAUSAL_BOTTOM_RIGHT, else p = i; key j has position j. */

  /** 0 = unbounded; W > 0: a query at position p sees only keys j > p - W
   *  (Mistral/Gemma sliding_window = W; FlashAttention's window_size = (L, R)
   *  is window_left = L + 1). Whole key tiles left of every row's window are
   *  skipped: a windowed prefill costs in proportion to the keys inside the
   *  windows. Negative: HWYATTN_INVALID_ARGUMENT. */
  int64_t window_left;
  /** 0 = unbounded; W > 0: a query at position p sees only keys j < p + W
   *  (window_right = R + 1; window_right = 1 is a causal mask on positions).
   *  Negative: HWYATTN_INVALID_ARGUMENT. */
  int64_t window_right;
  /** 0 = off; c > 0: every scaled score s becomes c * tanh(s / c), before
   *  the additive mask and ALiBi are added (Gemma 2's attn_logit_softcapping,
   *  ONNX Attention's softcap). NaN, negative or infinite:
   *  HWYATTN_INVALID_ARGUMENT. */
  float softcap;
  /** Optional [Hq], F32: ALiBi. slope[h] * (j - p) is added to the scaled
   *  (and capped) scores of query head h (equal, up to a per-row constant
   *  that the softmax cancels, to BLOOM's slope * j; lse differs by it). Any
   *  sign: the kernels add slope[h] * (j - o), o being the row's visible key
   *  with the largest bias (the last for a slope >= 0, the first for a
   *  negative one), and fold slope[h] * (o - p) into lse and the sink's
   *  comparison, so that a bias of 1e4 (16k keys at slope -0.5, as vLLM's
   *  tests draw them) costs no accuracy: out and lse stay within 2e-6 of
   *  exact attention there. A NaN or infinite slope:
   *  HWYATTN_INVALID_ARGUMENT. */
  const float* alibi_slopes;
  /** Optional [Hq], F32: attention sinks (gpt-oss). A per-head logit, in
   *  scaled-score units, that joins every row's softmax denominator and has
   *  no value: out = sum_j exp(s_j) v_j / (exp(sink[h]) + sum_j exp(s_j)). It
   *  is not capped, not biased and not masked. lse includes it (so out and
   *  lse stay a pair that hwyattn_merge_states can combine), weights are
   *  exp(s - lse) (a row sums to less than 1), and a row whose keys are all
   *  blocked gets zeros and lse = sink[h]. -INFINITY is a sink that is off.
   *  A NaN sink would make every row of its head NaN (as a NaN score makes
   *  its row NaN) and +INFINITY every row zero: both are
   *  HWYATTN_INVALID_ARGUMENT. */
  const float* sinks;
  /** Optional: run the call's parallel phases on the caller's thread pool
   *  instead of OpenMP (see hwyattn_parallel; hwyattn_mha_forward runs its
   *  projections on it too). NULL = the library's own threads
   *  (hwyattn_set_num_threads). A struct_size that is not hwyattn_parallel's,
   *  num_workers < 1 or a NULL parallel_for: HWYATTN_INVALID_ARGUMENT. */
  const struct hwyattn_parallel* parallel;
  /** HWYATTN_PRECISION_F32 (0, the default), HWYATTN_PRECISION_BF16 or
   *  HWYATTN_PRECISION_INT8 (see hwyattn_precision; honoured by hwyattn_sdpa,
   *  hwyattn_kv_attention and the attention of hwyattn_mha_forward). Any
   *  other value: HWYATTN_INVALID_ARGUMENT. */
  hwyattn_precision precision;
  /** Must be 0 (HWYATTN_UNSUPPORTED otherwise): room for a later field. */
  int32_t reserved0;
} hwyattn_sdpa_options;

/** Zeroes the caller's `size` bytes of *opts and sets struct_size = size:
 *  scale 0 (= 1/sqrt(D)), no causal mask, no mask, no kv_len, no extra
 *  outputs, no modifiers, the library's threads, F32 products. Writes nothing
 *  past `size` bytes. NULL is a no-op. Call it through the macro
 *  hwyattn_sdpa_options_init(opts), which passes sizeof(*opts). */
HWYATTN_API void hwyattn_sdpa_options_init_sized(hwyattn_sdpa_options* opts, size_t size);
#define hwyattn_sdpa_options_init(opts) hwyattn_sdpa_options_init_sized((opts), sizeof(*(opts)))
/** The 0.1 entry point, kept for binaries built against the 0.1 header:
 *  zeroes exactly the 48 bytes (LP64) of the 0.1 struct and sets struct_size
 *  to that. New code uses the macro above (the parentheses around the name
 *  call this function instead of the macro). */
HWYATTN_API void(hwyattn_sdpa_options_init)(hwyattn_sdpa_options* opts);

/** Reads a caller's *src as every entry point reads options (by its
 *  struct_size: an older header's struct, its missing fields at their
 *  defaults, or a newer header's larger one whose fields this library does
 *  not know are all zero) into *dst, a struct of this header's size
 *  (dst->struct_size = sizeof(hwyattn_sdpa_options)). For libraries that
 *  forward a caller's options with changes (libhwyattn_mpi does). NULL dst or
 *  src, or a struct_size no header has: HWYATTN_INVALID_ARGUMENT; a newer
 *  header's field set: HWYATTN_UNSUPPORTED; *dst is then untouched. The
 *  values of the fields are not checked here (the entry point that gets
 *  *dst checks them). */
HWYATTN_API hwyattn_status hwyattn_sdpa_options_copy(hwyattn_sdpa_options* dst,
                                                     const hwyattn_sdpa_options* src);

/** out = softmax(q k^T * scale + mask) v, per batch and query head.
 *
 *    q   [B, Hq,  Lq, D ]  F32, F16 or BF16
 *    k   [B, Hkv, Lk, D ]  F32, F16, BF16 or a block format (HWYATTN_Q8_0 ...
 *                          HWYATTN_IQ4_NL: D a multiple of 32, see
 *                          hwyattn_dtype); batch may be 1 (shared by all B)
 *    v   [B, Hkv, Lk, Dv]  the same choice as k (each its own); batch may be 1
 *    out [B, Hq,  Lq, Dv]  F32, F16 or BF16 (written: the fp32 result rounded
 *                          once, to nearest even, at the store: the same bits as
 *                          rounding the F32 output of the same call)
 *
 *  - GQA / MQA: Hq a multiple of Hkv; query head h uses key/value head
 *    h / (Hq / Hkv). Cross-attention is the general case (Lq != Lk, Dv != D).
 *  - A query row whose keys are all blocked (by causal, mask, kv_len or a
 *    window) gets an output of zeros, weights of zeros and lse = -INFINITY
 *    (or its sink's logit). (PyTorch gives NaN there.)
 *  - Order of the rules on a score: scale, softcap, then ALiBi and the
 *    additive mask; then causal, windows, kv_len and a BOOL mask block keys.
 *  - Computation is in fp32 with fused online softmax; the Lq x Lk score
 *    matrix is never materialised unless opts->weights is given.
 *  - Results are bit-identical for any thread count, but may differ in the
 *    last bits between SIMD targets.
 *  - out must not overlap q, k, v or any other output.
 *  opts may be NULL (defaults). Thread-safe: many threads may call at once.
 *  @returns HWYATTN_OK, or a status describing the error (see hwyattn_last_error()). */
HWYATTN_API hwyattn_status hwyattn_sdpa(const hwyattn_tensor* q, const hwyattn_tensor* k,
                                        const hwyattn_tensor* v, hwyattn_tensor* out,
                                        const hwyattn_sdpa_options* opts);

/* ------------------------------------------------------------------------ */
/* Merging partial states                                                    */
/* ------------------------------------------------------------------------ */

/** Merges attention results computed over disjoint shards of the keys (split-
 *  KV decoding, sequence parallelism, a cache in several pieces) into the
 *  result over all of them. Per row (b, h, l), with lse_i = lses[i][b, h, l]:
 *
 *    L   = log(sum_i exp(lse_i) + exp(sinks[h]))   (the sink term only with sinks)
 *    out = sum_i exp(lse_i - L) * outs[i][b, h, l, :]
 *    lse_out = L
 *
 *    outs[i]  [B, H, L, Dv]  F32, i in [0, n): partial outputs
 *    lses[i]  [B, H, L]      F32: their natural-log log-sum-exps, as
 *                            hwyattn_sdpa's opts->lse writes them
 *    sinks    [H]            F32, optional (NULL = none)
 *    out      [B, H, L, Dv]  F32 (written)
 *    lse_out  [B, H, L]      F32, optional output (NULL = not wanted)
 *
 *  - n >= 1. outs and lses are arrays of n descriptor pointers, none NULL.
 *    (In C, declare them as `const hwyattn_tensor* outs[n]`: C does not
 *    convert hwyattn_tensor** to const hwyattn_tensor* const* implicitly.)
 *  - Shapes are right-aligned like every tensor's (rank 1..4; a [L, Dv]
 *    partial is one batch and one head, its lse is [L]). Every outs[i] and out
 *    has exactly the shape of outs[0], and every lses[i] and lse_out exactly
 *    its [B, H, L]: no size-1 broadcasting, since the partials of one problem
 *    all have the same shape. Strides are free (>= 0; an input may repeat one
 *    row with stride 0), so hwyattn_kv_attention's out [T, Hq, Dv] and lse
 *    [T, Hq] merge as the views [1, Hq, T, Dv] and [1, Hq, T] without a copy;
 *    outputs must not write one element twice.
 *  - sinks[h] (gpt-oss attention sinks, as opts->sinks of hwyattn_sdpa)
 *    follows the head axis, dimension H. Compute the shards without sinks and
 *    give them here, once. A NaN or +INFINITY sink is HWYATTN_INVALID_ARGUMENT;
 *    -INFINITY is a sink that is off.
 *  - Order and determinism: the weights of a row are computed in double from
 *    the lses (the maximum first, so nothing overflows), then the outputs are
 *    folded in index order i = 0, 1, ..., n-1 in fp32, a vector at a time.
 *    The result is the same bits on every call, for any thread count and
 *    any strides; it may differ in the last bits between SIMD targets.
 *  - Accuracy: splitting the keys of an hwyattn_sdpa call into shards and
 *    merging their outputs and lses gives the unsplit result within 2e-6
 *    relative (or a few fp32 ulps of the largest |lse|, when that is larger:
 *    the fp32 lses carry that much).
 *  - A partial whose lse is -INFINITY (a shard whose keys are all blocked
 *    for that row) contributes nothing, whatever its output row holds. A row
 *    whose partials are all -INFINITY gets zeros and lse_out = -INFINITY, or
 *    lse_out = sinks[h] with a finite sink (as hwyattn_sdpa gives a fully
 *    blocked row). n = 1 without sinks copies outs[0] and lses[0] exactly
 *    (the rows whose lse is -INFINITY become zeros).
 *  - NaN: a NaN lse_i, or an lse_i of +INFINITY (an overflowed denominator),
 *    makes that row's out and lse_out NaN; a NaN or infinite value in a
 *    contributing outs[i] row reaches the same element of that out row. No
 *    other row is affected.
 *  - Aliasing: in place is allowed, out == outs[0] and lse_out == lses[0],
 *    when they describe the same elements (the same data pointer and
 *    strides). Every other overlap of an output with an input (any outs[i],
 *    lses[i], the sinks, the descriptors themselves) or with the other output
 *    is HWYATTN_INVALID_ARGUMENT. Inputs may overlap each other.
 *  - Runs on the calling thread (hwyattn_set_num_threads does not apply): it
 *    reads each partial once and is bound by memory bandwidth, not
 *    arithmetic. It allocates nothing. Thread-safe.
 *
 *  Example: the keys of a call split in two at key 512 (strided views, no
 *  copies), each half computed with its lse, merged in place into the
 *  first half's buffers:
 *
 *    hwyattn_tensor k0 = k, k1 = k, v0 = v, v1 = v;  // k, v [B, Hkv, 1024, D]
 *    k0.shape[2] = v0.shape[2] = 512;
 *    k1.shape[2] = v1.shape[2] = 512;
 *    k1.data = (float*)k.data + 512 * k.stride[2];
 *    v1.data = (float*)v.data + 512 * v.stride[2];
 *    hwyattn_sdpa_options opts;
 *    hwyattn_sdpa_options_init(&opts);
 *    opts.lse = &lse0;  hwyattn_sdpa(&q, &k0, &v0, &out0, &opts);
 *    opts.lse = &lse1;  hwyattn_sdpa(&q, &k1, &v1, &out1, &opts);
 *    const hwyattn_tensor* outs[2] = {&out0, &out1};
 *    const hwyattn_tensor* lses[2] = {&lse0, &lse1};
 *    hwyattn_merge_states(2, outs, lses, NULL, &out0, &lse0);
 *
 *  out0 is now hwyattn_sdpa of q over all 1024 keys. A mask or kv_len of
 *  the whole problem is cut the same way (the mask's key columns, kv_len[b]
 *  minus the shard's first key, clamped to [0, 512]). A causal mask is not
 *  shard-local: a shard's own bottom-right diagonal is not the whole
 *  problem's (except for the last shard), so pass the whole problem's causal
 *  rule as a BOOL mask slice (or, for decode, nothing: every key is visible).
 *  @returns HWYATTN_OK, or a status describing the error (see hwyattn_last_error()). */
HWYATTN_API hwyattn_status hwyattn_merge_states(int32_t n, const hwyattn_tensor* const* outs,
                                                const hwyattn_tensor* const* lses,
                                                const float* sinks, hwyattn_tensor* out,
                                                hwyattn_tensor* lse_out);

/* ------------------------------------------------------------------------ */
/* KV cache, varlen batches                                                  */
/* ------------------------------------------------------------------------ */

/** A KV cache that the caller owns (an engine's arena, mmap, pages),
 *  described, not allocated, by the library. The cache is a pool of
 *  num_pages pages of page_size token slots each; slot s is offset
 *  s % page_size of page s / page_size. A sequence's keys live in the pages
 *  its row of the block table lists, in order: key t of sequence s is at
 *  offset t % page_size of page block_table[s * block_table_stride +
 *  t / page_size]. Several sequences may share a page (a common prompt
 *  prefix) as long as they read it; hwyattn_kv_cache_write must not write a
 *  slot twice in one call.
 *
 *    k  [num_pages, Hkv, page_size, D]   F32, F16, BF16, I8, I4, F8E4M3,
 *                                        F8E5M2 or a block format (Q8_0 ...
 *                                        IQ4_NL)
 *    v  [num_pages, Hkv, page_size, Dv]  the dtype of k; or, when neither
 *                                        is I8, I4 or FP8, any of F32, F16,
 *                                        BF16 and the block formats
 *
 *  Any element strides (>= 0, no two elements of k, or of v, on one
 *  address): vLLM CPU's [pages, Hkv, page, D] is the dense layout, and
 *  FlashAttention's / FlashInfer's [pages, page, Hkv, D] is the same
 *  tensor with strides {page*Hkv*D, D, Hkv*D, 1}. k and v may be two views
 *  of one buffer (e.g. [pages, 2, page, Hkv, D]) as long as they share no
 *  element. Rank 4 (a lower rank is right-aligned as for every tensor:
 *  num_pages = 1).
 *
 *  Quantized caches: I8 (symmetric int8), I4 (symmetric int4, two per
 *  byte: see hwyattn_dtype) and FP8 (HWYATTN_F8E4M3, HWYATTN_F8E5M2).
 *  Element x stands for x * scale, with the scale from
 *  k_scale (keys) or v_scale (values), F32 tensors each in one of these
 *  layouts:
 *    per token    [num_pages, Hkv, page_size, 1]: one scale per token and
 *                 kv head, at the token's slot; hwyattn_kv_cache_write
 *                 computes and stores it (max |x| / 127 for I8, / 7 for
 *                 I4, / 448 for E4M3, / 57344 for E5M2);
 *    per channel  [1, Hkv, 1, D] (k_scale) or [1, Hkv, 1, Dv] (v_scale):
 *                 one scale per kv head and channel;
 *    per kv head  [1, Hkv, 1, 1];
 *    per tensor   [1, 1, 1, 1] (vLLM's k_scale / v_scale; also [1], any
 *                 rank whose shape right-aligns to these).
 *  The last three are fixed by the caller (calibrated): read by the write
 *  and by the attention, and each value must be finite and > 0 (else
 *  HWYATTN_INVALID_ARGUMENT naming the element). A shape that fits two
 *  layouts (page_size = num_pages = 1) is per token. The two tensors may
 *  use different layouts (KIVI's int4 recipe: per-channel K, per-token V).
 *  I8 and I4 caches need both tensors; FP8 caches take both
 *  or neither (NULL: scale 1, the fp8 numbers are the values). Any other
 *  shape, a dtype other than F32, or scales on an F32/F16/BF16 cache is
 *  HWYATTN_INVALID_ARGUMENT. Strides are free as for k and v.
 *
 *  The kernels dequantize exactly (an int8, int4 or fp8 number times its
 *  scale, fp32) and accumulate in fp32 as for float caches.
 *
 *  block_table: optional int32 [num_seqs, block_table_stride], the pages of
 *  each sequence of the batch in order (vLLM's block_tables). Only the first
 *  ceil(kv_len[s] / page_size) entries of row s are read, and they must be
 *  in [0, num_pages); block_table_stride must be at least that many. NULL:
 *  sequence s is page s, i.e. a padded contiguous cache of num_pages >=
 *  num_seqs sequences with page_size = the capacity of each (kv_len[s] <=
 *  page_size); block_table_stride is then ignored.
 *
 *  Performance: a decode step reads the pages in block-table order, each a
 *  few KiB; with 4 KiB memory pages every cache page is also a TLB miss.
 *  Allocate the pool on a 4 KiB boundary (aligned_alloc, posix_memalign,
 *  mmap): malloc and numpy put large blocks 16 bytes past one, so that each
 *  cache page of a head straddles two memory pages (a 107 MB paged decode
 *  batch, bench row V1, took 8-26% longer that way on an AMD Zen 4 guest).
 *  Backing a large pool with huge pages (Linux: madvise(MADV_HUGEPAGE) on the
 *  allocation before first touch, or transparent huge pages "always") made
 *  the same batch 20% faster (measured on a malloc'ed pool). hwyattn.KVCache
 *  (Python) allocates its pool page-aligned.
 *
 *  Initialise with hwyattn_kv_cache_init (zeroes it and sets struct_size),
 *  then fill the fields. */
typedef struct hwyattn_kv_cache {
  uint32_t struct_size; /* sizeof(hwyattn_kv_cache); hwyattn_kv_cache_init sets it */
  int32_t reserved0;    /* must be 0 (HWYATTN_UNSUPPORTED otherwise): padding made explicit */
  hwyattn_tensor k;     /* [num_pages, Hkv, page_size, D]  F32, F16, BF16, I8, I4,
                           F8E4M3, F8E5M2 or a block format (HWYATTN_Q8_0 ...
                           HWYATTN_IQ4_NL) */
  hwyattn_tensor v;     /* [num_pages, Hkv, page_size, Dv] same dtype as k (I8, I4,
                           FP8), else any float or block format */
  const hwyattn_tensor* k_scale; /* I8, I4 (required) and FP8 (optional) only, F32: per token
                                    [num_pages, Hkv, page_size, 1], per channel
                                    [1, Hkv, 1, D], per kv head [1, Hkv, 1, 1] or per
                                    tensor [1, 1, 1, 1]; NULL for other caches. A
                                    shape that fits two layouts (one page of one
                                    slot) is per token: its values are data, as the
                                    pages' (the others' must be finite and > 0) */
  const hwyattn_tensor* v_scale; /* the same for V ([1, Hkv, 1, Dv] per channel) */
  const int32_t* block_table;    /* optional [num_seqs, block_table_stride]; NULL = sequence
                                    s is page s */
  int64_t block_table_stride;    /* entries between rows of block_table (>= the pages the
                                    longest sequence needs) */
} hwyattn_kv_cache;

/** Zeroes the caller's `size` bytes of *c and sets struct_size = size. NULL
 *  is a no-op. Call it through the macro hwyattn_kv_cache_init(c). */
HWYATTN_API void hwyattn_kv_cache_init_sized(hwyattn_kv_cache* c, size_t size);
#define hwyattn_kv_cache_init(c) hwyattn_kv_cache_init_sized((c), sizeof(*(c)))

/** The sequences of one hwyattn_kv_attention call (continuous batching:
 *  some sequences prefilling, some prefilling a chunk, most decoding one
 *  token, in any order). Their query tokens are packed one after the other
 *  into q [T, Hq, D].
 *
 *  Positions: key t of a sequence has position t (t < kv_len[s]); its query
 *  token i (0 <= i < q_len = q_start[s+1] - q_start[s]) has position
 *  q_pos[s] + i, by default (q_pos NULL) kv_len[s] - q_len: the new tokens
 *  are the last ones of the cache, as after hwyattn_kv_cache_write of this
 *  step's keys (decode: q_len = 1, the query sees every key; chunked
 *  prefill: q_len tokens at the end of kv_len keys; full prefill: q_len =
 *  kv_len). An explicit q_pos lets a query sit before the cache's end (e.g.
 *  speculative tokens, or keys written ahead). The causal rule, windows and
 *  ALiBi compare these positions. */
typedef struct hwyattn_kv_batch {
  uint32_t struct_size; /* sizeof(hwyattn_kv_batch); hwyattn_kv_batch_init sets it */
  int32_t num_seqs;     /* >= 1 */
  /** [num_seqs + 1]: sequence s owns query tokens [q_start[s], q_start[s+1])
   *  (cu_seqlens_q): q_start[0] = 0, non-decreasing (q_len 0 is allowed: the
   *  sequence is skipped), q_start[num_seqs] = T. */
  const int32_t* q_start;
  /** [num_seqs]: cached keys of sequence s, this step's included; >= 0 (0:
   *  its rows see no key: zeros and lse -INFINITY, or the sink's logit). */
  const int32_t* kv_len;
  /** Optional [num_seqs]: position of sequence s's first query token, >= 0;
   *  NULL = kv_len - q_len. With a causal rule every query position must lie
   *  in [0, kv_len): q_pos + q_len <= kv_len, and by default q_len <= kv_len
   *  (each query has its own key in the cache). Without one, default
   *  positions may be negative (q_len > kv_len, as hwyattn_sdpa's
   *  bottom-right rule gives for Lq > Lk). */
  const int32_t* q_pos;
} hwyattn_kv_batch;

/** Zeroes the caller's `size` bytes of *b and sets struct_size = size. NULL
 *  is a no-op. Call it through the macro hwyattn_kv_batch_init(b). */
HWYATTN_API void hwyattn_kv_batch_init_sized(hwyattn_kv_batch* b, size_t size);
#define hwyattn_kv_batch_init(b) hwyattn_kv_batch_init_sized((b), sizeof(*(b)))

/** Attention of packed varlen queries over the cache: prefill, chunked
 *  prefill and decode rows mixed in one call.
 *
 *    q      [T, Hq, D]   F32, F16 or BF16; T = q_start[num_seqs]
 *    cache  K/V pages as described above (F32, F16, BF16, I8 or FP8)
 *    batch  the sequences
 *    out    [T, Hq, Dv]  F32, F16 or BF16 (written; rounded once at the store,
 *                        as hwyattn_sdpa's; lse stays F32)
 *
 *  Per sequence s and query head h (which reads kv head h / (Hq / Hkv)),
 *  query token i of the sequence attends to its keys t < kv_len[s] under
 *  the rules of hwyattn_sdpa, with the positions of hwyattn_kv_batch: score
 *  = scale * q.k, softcap, ALiBi slope[h] * (t - position); a causal rule
 *  keeps keys with position <= the query's position; windows compare the
 *  same positions; sinks join every row's denominator.
 *
 *  opts (NULL = defaults) fields that apply: scale (0 = 1/sqrt(D)), causal
 *  (any value other than HWYATTN_CAUSAL_NONE means "key position <= query
 *  position": with explicit positions, top-left and bottom-right are the
 *  same rule), window_left, window_right, softcap, alibi_slopes [Hq], sinks
 *  [Hq], parallel, precision, and lse: an optional F32 [T, Hq] output (the
 *  natural-log softmax denominator, as hwyattn_sdpa's). mask, kv_len and
 *  weights must be NULL here (HWYATTN_INVALID_ARGUMENT): kv_len is the
 *  batch's, and a mask has no dense shape in a varlen batch.
 *
 *  I8 and FP8 caches are dequantized (number * scale in fp32, exact: an
 *  fp8 or int8 number is a float); the result is within fp32 rounding of
 *  the exact attention over the dequantized cache. The quantization's own
 *  error (against the values before hwyattn_kv_cache_write quantized them)
 *  is about max|x| / 254 per element for I8 with per-token scales (max|x|
 *  / 14 for I4), and
 *  2^-4 (E4M3) or 2^-3 (E5M2) of each element's magnitude for FP8, plus
 *  the flush of values below the format's subnormals (2^-9 * scale, 2^-16
 *  * scale).
 *
 *  Batch invariance and determinism: a sequence's rows are bit-identical
 *  whatever the other sequences of the batch are, its position in the batch,
 *  where its pages are in the pool, and the thread count or pool: each
 *  sequence's keys are split into chunks fixed by its own length. They are
 *  also the same bits as hwyattn_sdpa on that sequence alone ([1, Hq, q_len,
 *  D] over its keys as a dense F32/F16/BF16 tensor) when the positions match
 *  hwyattn_sdpa's (I8 and FP8 caches: within fp32 rounding of it on the dequantized
 *  keys, since the scales are applied to scores and probabilities rather
 *  than to each element). Results may differ in the last bits between SIMD
 *  targets.
 *
 *  Every index is validated before any memory is written: page ids of the
 *  pages each sequence needs against num_pages, the block table's stride
 *  against kv_len, q_start (0 first, non-decreasing, T last), kv_len >= 0,
 *  q_pos >= 0 and, with a causal rule, query positions in [0, kv_len); messages
 *  name the sequence and the value. out and lse must not overlap q, the
 *  cache, the batch's arrays or each other.
 *
 *  How it runs: the pages are read where they are, through the block table
 *  (F32, F16, BF16, I8 and FP8 alike; a quantized cache's per-token K
 *  scales multiply the scores and its V scales the probabilities,
 *  per-channel, per-head and per-tensor K scales fold into the query and V
 *  scales into the output). A sequence with a few
 *  query rows per kv head (q_len * Hq / Hkv <= 8: decode, small chunks)
 *  takes the decode kernel (keys in lanes, its keys split into 512-key
 *  chunks merged by log-sum-exp), one with more takes the prefill kernel
 *  (which packs its keys into panels). The work items of all sequences
 *  (decode chunks, packing, prefill query tiles) share the call's parallel
 *  regions (two at most: one fork/join for a batch of decodes), balanced by
 *  cost across the threads.
 *
 *  Example: one decode step of two sequences, GQA Hq = 8, Hkv = 2, D = 64,
 *  an F16 cache of 16-token pages in vLLM's layout; sequence 0 has 37
 *  tokens (pages 5, 2, 9), sequence 1 has 3 (page 0). Each step writes the
 *  new token's K/V, then attends with its query:
 *
 *    enum { P = 64, S = 16, HKV = 2, HQ = 8, D = 64 };
 *    static uint16_t kpool[P * HKV * S * D], vpool[P * HKV * S * D];
 *    int64_t pool_shape[4] = {P, HKV, S, D};
 *    hwyattn_kv_cache cache;
 *    hwyattn_kv_cache_init(&cache);
 *    hwyattn_tensor_contiguous(&cache.k, kpool, HWYATTN_F16, 4, pool_shape);
 *    hwyattn_tensor_contiguous(&cache.v, vpool, HWYATTN_F16, 4, pool_shape);
 *    int32_t table[2 * 4] = {5, 2, 9, -1,   0, -1, -1, -1};
 *    cache.block_table = table;
 *    cache.block_table_stride = 4;
 *
 *    // This step's keys/values [2, HKV, D] (one token per sequence) go to
 *    // key 36 of sequence 0 (page 9, offset 4) and key 2 of sequence 1
 *    // (page 0, offset 2).
 *    float knew[2 * HKV * D], vnew[2 * HKV * D], q[2 * HQ * D], o[2 * HQ * D];
 *    int64_t new_shape[3] = {2, HKV, D}, q_shape[3] = {2, HQ, D};
 *    hwyattn_tensor tk, tv, tq, to;
 *    hwyattn_tensor_contiguous(&tk, knew, HWYATTN_F32, 3, new_shape);
 *    hwyattn_tensor_contiguous(&tv, vnew, HWYATTN_F32, 3, new_shape);
 *    int64_t slot[2] = {9 * S + 4, 0 * S + 2};
 *    hwyattn_kv_cache_write(&cache, &tk, &tv, slot, NULL);
 *
 *    int32_t q_start[3] = {0, 1, 2}, kv_len[2] = {37, 3};
 *    hwyattn_kv_batch batch;
 *    hwyattn_kv_batch_init(&batch);
 *    batch.num_seqs = 2;
 *    batch.q_start = q_start;
 *    batch.kv_len = kv_len;          // q_pos NULL: positions 36 and 2
 *    hwyattn_tensor_contiguous(&tq, q, HWYATTN_F32, 3, q_shape);
 *    hwyattn_tensor_contiguous(&to, o, HWYATTN_F32, 3, q_shape);
 *    hwyattn_sdpa_options opts;
 *    hwyattn_sdpa_options_init(&opts);
 *    opts.causal = HWYATTN_CAUSAL_BOTTOM_RIGHT;
 *    if (hwyattn_kv_attention(&tq, &cache, &batch, &to, &opts) != HWYATTN_OK)
 *      fprintf(stderr, "%s\n", hwyattn_last_error());
 *
 *  A prompt of 100 tokens prefilled in chunks of 64 is the same call with
 *  q_start {0, 64} and kv_len 64 for the first chunk, then q_start {0, 36},
 *  kv_len 100 for the second (positions 64..99), each after writing the
 *  chunk's keys; it may ride in the same batch as other sequences' decodes.
 *
 *  out [T, Hq, Dv] and lse [T, Hq] merge with hwyattn_merge_states through
 *  the views [1, Hq, T, Dv] and [1, Hq, T] (strides swapped, no copy).
 *  Thread-safe: many threads may call at once (on disjoint outputs).
 *  @returns HWYATTN_OK, or a status describing the error (see hwyattn_last_error()). */
HWYATTN_API hwyattn_status hwyattn_kv_attention(const hwyattn_tensor* q,
                                                const hwyattn_kv_cache* cache,
                                                const hwyattn_kv_batch* batch, hwyattn_tensor* out,
                                                const hwyattn_sdpa_options* opts);

/** Writes new keys and values into cache slots (vLLM's slot_mapping, ggml's
 *  set_rows): token t of k_new/v_new goes to slot slot[t], i.e. page
 *  slot[t] / page_size, offset slot[t] % page_size, for every kv head; a
 *  negative slot skips the token. Only the written slots (and, with
 *  per-token scales, their scales) change.
 *
 *    k_new  [T, Hkv, D]   F32, F16 or BF16
 *    v_new  [T, Hkv, Dv]  F32, F16 or BF16 (may differ from k_new's dtype)
 *    slot   [T] int64: each in [0, num_pages * page_size) or negative;
 *           a slot written twice in one call is HWYATTN_INVALID_ARGUMENT
 *
 *  Conversion to the cache's dtype: F32 exactly; F16 and BF16 round to
 *  nearest, ties to even. I8, per row (one token, one kv head) of D (or Dv)
 *  values x:
 *    per-token scales: scale = max_d |x_d| / 127 (fp32), stored at the
 *      token's slot of k_scale (v_scale); q_d = x_d / scale (fp32 division)
 *      rounded to nearest, ties to even, clamped to [-127, 127]. An all-zero
 *      row stores scale 0 and values 0.
 *    per-channel, per-head or per-tensor scales: scale_d from k_scale
 *      (v_scale), each finite and > 0 (else HWYATTN_INVALID_ARGUMENT); q_d =
 *      x_d / scale_d rounded the same way and clamped to [-127, 127] (values
 *      beyond 127 * scale_d saturate).
 *  I4 likewise with 7 for 127: per-token scale = max_d |x_d| / 7; q_d
 *  rounded to nearest even and clamped to [-8, 7] (NaN to 0), stored as
 *  nibbles (element 2i the low nibble of byte i; an odd D's last high
 *  nibble, padding, is written 0).
 *  FP8 (E4M3, E5M2), per row likewise: per-token scales are max_d |x_d| /
 *  448 (E4M3) or / 57344 (E5M2), stored at the token's slot (an all-zero
 *  row stores scale 0 and values 0); other layouts read scale_d; no scale
 *  tensors: scale 1. Then x_d / scale_d (fp32 division) is rounded to the
 *  nearest fp8 number, ties to even, subnormals included; finite values
 *  beyond the largest finite number saturate to it (448 or 57344, with the
 *  sign); an infinity becomes +-448 in E4M3 and stays infinite in E5M2; a
 *  NaN stays NaN (E4M3 S.1111.111, E5M2 S.11111.10).
 *  Non-finite inputs never fault but give meaningless values in I8: a NaN
 *  element stores 0; an infinite one saturates to +-127 with fixed scales
 *  and makes the token's scale infinite with per-token ones (in FP8 too:
 *  the row then stores NaN where x was infinite and 0 elsewhere). K and V
 *  should be finite for quantized caches.
 *
 *  opts: only `parallel` is read (NULL ok; the other fields are ignored).
 *  The work is split over tokens; the result is the same bits for any
 *  thread count. k_new, v_new and slot must not overlap the cache (k, v and
 *  the per-token scales). batch arrays are not needed: write before
 *  hwyattn_kv_attention, with kv_len counting the written tokens.
 *  @returns HWYATTN_OK, or a status describing the error (see hwyattn_last_error()). */
HWYATTN_API hwyattn_status hwyattn_kv_cache_write(const hwyattn_kv_cache* cache,
                                                  const hwyattn_tensor* k_new,
                                                  const hwyattn_tensor* v_new, const int64_t* slot,
                                                  const hwyattn_sdpa_options* opts);

/* ------------------------------------------------------------------------ */
/* Multi-head attention module                                               */
/* ------------------------------------------------------------------------ */

/** A multi-head attention layer with its weights packed for the library's
 *  matmul: out = (softmax(Q K^T * scale + mask) V) W_o^T + b_o, with
 *  Q = query W_q^T + b_q, K = key W_k^T + b_k, V = value W_v^T + b_v split
 *  into heads of head_dim. Opaque; immutable after creation; safe to use from
 *  many threads at once. */
typedef struct hwyattn_mha hwyattn_mha;

typedef struct hwyattn_mha_config {
  uint32_t struct_size; /* sizeof(hwyattn_mha_config); hwyattn_mha_config_init sets it */
  int64_t embed_dim;    /* width of the query input and of the output (d_model) */
  int64_t num_heads;    /* query heads */
  int64_t head_dim;     /* 0 = embed_dim / num_heads (must divide); may differ from it:
                           the inner width is num_heads * head_dim */
  int64_t num_kv_heads; /* 0 = num_heads; fewer = GQA (must divide num_heads) */
  int64_t kdim, vdim;   /* widths of the key and value inputs; 0 = embed_dim */
  int32_t has_bias;     /* nonzero: the four projections have biases */
  int32_t reserved0;    /* must be 0 (HWYATTN_UNSUPPORTED otherwise): the 0.1 tail padding,
                           made explicit so that no field can hide in it */
  /* 0.2 (a 0.1 library rejects a struct_size of 72, so a nonzero value is
     never silently ignored): */
  /** Storage of the packed projection weights: HWYATTN_F32 (0, the default)
   *  or HWYATTN_BF16, half the memory: hwyattn_mha_create rounds each weight
   *  to the nearest bf16 (ties to even) when it packs them; the biases stay
   *  F32. hwyattn_mha_weights stays F32 either way. With BF16 weights and
   *  opts->precision = HWYATTN_PRECISION_BF16 the projections run bf16 dot
   *  products (AVX512_BF16 where the CPU has it); with F32 precision the
   *  bf16 weights are widened exactly and multiply the unrounded activations
   *  in fp32. Any other value is HWYATTN_INVALID_ARGUMENT. */
  hwyattn_dtype weight_dtype;
  int32_t reserved1; /* must be 0 (HWYATTN_UNSUPPORTED otherwise) */
} hwyattn_mha_config;

/** Weights in the torch nn.Linear layout: row-major [out_features, in_features],
 *  F32, each pointer aligned to 4 bytes. A PyTorch nn.MultiheadAttention with in_proj_weight p
 * ([3E, E]) loads as w_q = p, w_k = p + E*E, w_v = p + 2*E*E, and w_o = out_proj.weight (biases
 * likewise from in_proj_bias and out_proj.bias). */
typedef struct hwyattn_mha_weights {
  const float* w_q; /* [num_heads*head_dim,    embed_dim] */
  const float* w_k; /* [num_kv_heads*head_dim, kdim]      */
  const float* w_v; /* [num_kv_heads*head_dim, vdim]      */
  const float* w_o; /* [embed_dim, num_heads*head_dim]    */
  const float* b_q; /* [num_heads*head_dim]; NULL unless has_bias */
  const float* b_k; /* [num_kv_heads*head_dim] */
  const float* b_v; /* [num_kv_heads*head_dim] */
  const float* b_o; /* [embed_dim] */
} hwyattn_mha_weights;

/** Zeroes the caller's `size` bytes of *cfg and sets struct_size = size;
 *  writes nothing past them. NULL is a no-op. Call it through the macro
 *  hwyattn_mha_config_init(cfg), which passes sizeof(*cfg). */
HWYATTN_API void hwyattn_mha_config_init_sized(hwyattn_mha_config* cfg, size_t size);
#define hwyattn_mha_config_init(cfg) hwyattn_mha_config_init_sized((cfg), sizeof(*(cfg)))
/** The 0.1 entry point, kept for binaries built against the 0.1 header:
 *  zeroes exactly the 64 bytes (LP64) of the 0.1 struct. */
HWYATTN_API void(hwyattn_mha_config_init)(hwyattn_mha_config* cfg);

/** Creates a module: validates cfg, copies and pre-packs the weights (the
 *  caller's arrays are not used after this returns). *out is set on success
 *  only. */
HWYATTN_API hwyattn_status hwyattn_mha_create(const hwyattn_mha_config* cfg,
                                              const hwyattn_mha_weights* w, hwyattn_mha** out);

/** Frees a module. NULL is a no-op. */
HWYATTN_API void hwyattn_mha_destroy(hwyattn_mha* m);

/** Runs the layer (batch_first layout, like nn.MultiheadAttention(batch_first=True)):
 *
 *    query [B, Lq, embed_dim]  F32
 *    key   [B, Lk, kdim]       F32, or NULL: self-attention (key = value = query,
 *                              which needs kdim == vdim == embed_dim)
 *    value [B, Lk, vdim]       F32, or NULL together with key
 *    out   [B, Lq, embed_dim]  F32, F16 or BF16 (written; F16 / BF16: the
 *                              fp32 result rounded once, to nearest even)
 *
 *  opts (NULL = defaults) applies to the attention inside: scale (0 =
 *  1/sqrt(head_dim), as PyTorch), causal (an attn_mask with is_causal), mask
 *  broadcastable to [B, num_heads, Lq, Lk] (attn_mask), kv_len as PyTorch's
 *  key_padding_mask, the optional per-head weights [B, num_heads, Lq, Lk]
 *  (average_attn_weights=False) and lse [B, num_heads, Lq], and the score
 *  modifiers (windows, softcap, alibi_slopes and sinks of [num_heads]).
 *  opts->precision = HWYATTN_PRECISION_BF16 runs the four projections with
 *  bf16 products too: the activations (query, key, value, the attention's
 *  output) are rounded to bf16 when packed, the weights are the bf16 ones
 *  (weight_dtype BF16) or rounded the same way (F32 weights: slower, each
 *  weight rounded at every use), and every sum accumulates in fp32 from the
 *  F32 bias. Expect bf16's own error (about 1e-3 to 5e-3 of max|out|) against
 *  the fp32 layer; against exact arithmetic on the rounded operands each
 *  projection is within fp32 accumulation error.
 *  Thread-safe: many threads may run the same module at once. */
HWYATTN_API hwyattn_status hwyattn_mha_forward(const hwyattn_mha* m, const hwyattn_tensor* query,
                                               const hwyattn_tensor* key,
                                               const hwyattn_tensor* value, hwyattn_tensor* out,
                                               const hwyattn_sdpa_options* opts);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* HWYATTN_H_ */
