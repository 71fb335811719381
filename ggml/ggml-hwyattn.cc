// SPDX-License-Identifier: Apache-2.0
//
// libggml-hwyattn.so: hwyattn as a ggml backend. It runs GGML_OP_FLASH_ATTN_EXT
// through hwyattn_sdpa on ggml's tensors in place (byte strides become
// element strides, the permuted result is a strided view: nothing is copied)
// and declines everything else, so ggml's scheduler leaves the rest of a
// graph on the CPU backend, as with ggml's BLAS backend (the model for this
// file: src/ggml-blas/ggml-blas.cpp of ggml). Loaded at run time:
// GGML_BACKEND_PATH=<this library> makes ggml_backend_load_all() register
// the device HWYATTN. See ggml/README.md for what is claimed and declined.
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <chrono>
#include <mutex>
#include <vector>

#include "ggml-backend-impl.h"
#include "ggml-hwyattn.h"
#include "ggml-impl.h"
#include "ggml.h"
#include "hwyattn.h"

#ifdef _OPENMP
#include <omp.h>
#endif

namespace {

constexpr const char* kName = "HWYATTN";
// hwyattn's own default: two threads (the CPUs it is tuned and measured on).
constexpr int kDefaultThreads = 2;
// ALiBi (max_bias > 0) adds slope[h] * mask to the scores: hwyattn reads
// that as an F32 mask built per call, for as many heads at a time as fit in
// this many bytes (at least one head).
constexpr size_t kAlibiMaskBytes = size_t{64} << 20;
// GGML_PREC_BF16 and GGML_PREC_F16 of ggml >= 0.25 (not in older headers).
constexpr int32_t kPrecBf16 = 15, kPrecF16 = 20;

struct Context {
  int n_threads = kDefaultThreads;
  bool use_caller_pool = false;
  hwyattn_parallel caller_pool{};
  std::vector<float> alibi_mask;  // grow-only
  int64_t ops_computed = 0;       // GGML_OP_FLASH_ATTN_EXT nodes run (Stats)
  int64_t graphs_computed = 0;    // graph_compute calls
  double seconds = 0.0;           // in graph_compute, with GGML_HWYATTN_STATS
};

// ---------------------------------------------------------------- stats

// GGML_HWYATTN_STATS (set and not "0"): what the backend did, on stderr, so
// that a user (and the llama.cpp test) can tell attention that ran here from
// attention that stayed on the CPU backend: every distinct reason for which
// supports_op declined a GGML_OP_FLASH_ATTN_EXT, once, when first met, and
// at the backend's free "ggml-hwyattn: N FLASH_ATTN_EXT ops computed in M
// graphs, T ms" (T: the time spent in graph_compute).
bool StatsEnabled() {
  static const bool enabled = [] {
    const char* e = getenv("GGML_HWYATTN_STATS");
    return e != nullptr && *e != '\0' && strcmp(e, "0") != 0;
  }();
  return enabled;
}

// why is one of Plan's string literals: at most a few dozen distinct ones.
void ReportDecline(const ggml_tensor* op, const char* why) {
  static std::mutex mutex;
  static std::vector<const char*> reported;
  std::lock_guard<std::mutex> lock(mutex);
  if (std::find(reported.begin(), reported.end(), why) != reported.end()) return;
  reported.push_back(why);
  fprintf(stderr, "ggml-hwyattn: declined %s (%s): %s\n", ggml_op_desc(op), op->name, why);
}

// ---------------------------------------------------------------- threads

// The backend's own threads: one OpenMP region of n tasks per phase (the
// same runtime and the same waiting policy as hwyattn's own threads, but
// with this backend's thread count rather than a process-wide one).
void OpenMpParallelFor(void* pool, int64_t n, hwyattn_task_fn task, void* task_ctx) {
  (void)pool;
#ifdef _OPENMP
#pragma omp parallel for num_threads(static_cast <int>(n)) schedule(static, 1)
  for (int64_t i = 0; i < n; ++i) task(task_ctx, i);
#else
  for (int64_t i = 0; i < n; ++i) task(task_ctx, i);
#endif
}

hwyattn_parallel PoolOf(const Context& ctx) {
  if (ctx.use_caller_pool) return ctx.caller_pool;
  hwyattn_parallel pool;
  hwyattn_parallel_init(&pool);
  pool.num_workers = std::max(1, ctx.n_threads);
  pool.parallel_for = OpenMpParallelFor;
  return pool;
}

// ---------------------------------------------------------------- layouts

// ggml's types hwyattn reads: the floats and the block formats llama.cpp
// allows for its K/V caches (-ctk / -ctv), hwyattn's dtypes of the same bytes.
bool DtypeOf(ggml_type t, hwyattn_dtype* d) {
  switch (t) {
    case GGML_TYPE_F32: *d = HWYATTN_F32; return true;
    case GGML_TYPE_F16: *d = HWYATTN_F16; return true;
    case GGML_TYPE_BF16: *d = HWYATTN_BF16; return true;
    case GGML_TYPE_Q8_0: *d = HWYATTN_Q8_0; return true;
    case GGML_TYPE_Q4_0: *d = HWYATTN_Q4_0; return true;
    case GGML_TYPE_Q4_1: *d = HWYATTN_Q4_1; return true;
    case GGML_TYPE_Q5_0: *d = HWYATTN_Q5_0; return true;
    case GGML_TYPE_Q5_1: *d = HWYATTN_Q5_1; return true;
    case GGML_TYPE_IQ4_NL: *d = HWYATTN_IQ4_NL; return true;
    default: return false;
  }
}

// A block format's elements per block (ggml's and hwyattn's: 32), or 1.
int64_t BlockElems(hwyattn_dtype d) {
  return d == HWYATTN_F32 || d == HWYATTN_F16 || d == HWYATTN_BF16 ? 1 : 32;
}

// Bytes of one element, or of one block of a block format.
size_t UnitBytes(hwyattn_dtype d) {
  switch (d) {
    case HWYATTN_F32: return 4;
    case HWYATTN_F16:
    case HWYATTN_BF16: return 2;
    case HWYATTN_Q8_0: return 34;
    case HWYATTN_Q4_1: return 20;
    case HWYATTN_Q5_0: return 22;
    case HWYATTN_Q5_1: return 24;
    default: return 18;  // Q4_0, IQ4_NL
  }
}

// Bytes from a tensor's data to element `offset` (of a block format: a
// multiple of 32, a whole number of blocks).
int64_t ByteOffset(hwyattn_dtype d, int64_t offset) {
  return offset / BlockElems(d) * static_cast<int64_t>(UnitBytes(d));
}

// t as an hwyattn tensor, in place: hwyattn dimension i is ggml dimension
// dim[i] of t, of size shape[i] (its first shape[i] elements along it), with
// t's byte stride counted in elements (a block format's: its rows' blocks of
// 32 consecutive elements, ggml's nb[0] the block's bytes, stride 1 for
// hwyattn). False when a byte stride is not a whole number of elements (or
// blocks).
bool Describe(const ggml_tensor* t, hwyattn_dtype dtype, const int dim[4], const int64_t shape[4],
              hwyattn_tensor* out) {
  const size_t size = UnitBytes(dtype);
  const int64_t per = BlockElems(dtype);
  if (per == 1 && t->view_offs % size != 0) return false;
  memset(out, 0, sizeof(*out));
  out->data = t->data;
  out->dtype = dtype;
  out->rank = 4;
  for (int i = 0; i < 4; ++i) {
    const size_t nb = t->nb[dim[i]];
    if (nb % size != 0 || shape[i] < 1 || shape[i] > t->ne[dim[i]]) return false;
    out->shape[i] = shape[i];
    if (per > 1 && dim[i] == 0) {  // along a row of blocks
      if (nb != size) return false;
      out->stride[i] = 1;
    } else {
      out->stride[i] = static_cast<int64_t>(nb / size) * per;
    }
  }
  return true;
}

// One GGML_OP_FLASH_ATTN_EXT as an hwyattn_sdpa call.
struct Call {
  hwyattn_tensor q, k, v, out, mask;
  bool has_mask = false;
  const ggml_tensor* sinks = nullptr;  // F32 [Hq], read at compute time
  float max_bias = 0.0f;               // > 0: ALiBi, slope[h] * mask
  hwyattn_sdpa_options opts;
};

// Fills *c from op, or says in *why what hwyattn cannot compute as ggml
// defines it (supports_op is this returning true). Reads no tensor data.
bool Plan(const ggml_tensor* op, Call* c, const char** why) {
  const ggml_tensor *q = op->src[0], *k = op->src[1], *v = op->src[2], *mask = op->src[3],
                    *sinks = op->src[4];
  if (q == nullptr || k == nullptr || v == nullptr) return *why = "q, k or v missing", false;
  // ggml's CPU backend reads q as F32 whatever its type says.
  if (q->type != GGML_TYPE_F32) return *why = "q is not F32", false;
  hwyattn_dtype kt, vt;
  if (!DtypeOf(k->type, &kt) || !DtypeOf(v->type, &vt)) {
    return *why = "K or V is not F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1 or IQ4_NL", false;
  }
  if (op->type != GGML_TYPE_F32) return *why = "the result is not F32", false;
  const int64_t D = q->ne[0], Lq = q->ne[1], Hq = q->ne[2], B = q->ne[3];
  const int64_t Lk = k->ne[1], Hkv = k->ne[2], Dv = v->ne[0];
  if (D < 1 || Lq < 1 || Hq < 1 || B < 1 || Lk < 1 || Hkv < 1 || Dv < 1) {
    return *why = "an empty dimension", false;
  }
  if (k->ne[0] != D || v->ne[2] != Hkv || v->ne[1] < Lk || k->ne[3] != B || v->ne[3] != B ||
      Hq % Hkv != 0) {
    return *why = "K and V heads or lengths hwyattn cannot pair (V heads != K heads)", false;
  }
  if (op->ne[0] != Dv || op->ne[1] != Hq || op->ne[2] != Lq || op->ne[3] != B) {
    return *why = "the result is not [Dv, n_head, n_batch, ne3]", false;
  }
  // q [D, Lq, Hq, B], k [D, Lk, Hkv, B], v [Dv, Lk, Hkv, B] -> [B, H, L, D].
  static const int kRows[4] = {3, 2, 1, 0};
  const int64_t qs[4] = {B, Hq, Lq, D}, ks[4] = {B, Hkv, Lk, D}, vs[4] = {B, Hkv, Lk, Dv};
  if (!Describe(q, HWYATTN_F32, kRows, qs, &c->q) || !Describe(k, kt, kRows, ks, &c->k) ||
      !Describe(v, vt, kRows, vs, &c->v)) {
    return *why = "a q, k or v stride that is not a whole number of elements", false;
  }
  // The result [Dv, Hq, Lq, B] (permuted) -> out [B, Hq, Lq, Dv].
  static const int kOut[4] = {3, 1, 2, 0};
  const int64_t os[4] = {B, Hq, Lq, Dv};
  if (!Describe(op, HWYATTN_F32, kOut, os, &c->out)) {
    return *why = "a result stride that is not a whole number of floats", false;
  }
  float params[3];
  memcpy(params, op->op_params, sizeof(params));
  const float scale = params[0], max_bias = params[1], softcap = params[2];
  // ggml's precision is the least an op may compute in (default, F32, and
  // since ggml 0.25 BF16 = 15 and F16 = 20 accumulation): hwyattn's fp32
  // products and sums meet every one of them.
  const int32_t prec = ggml_get_op_params_i32(op, 3);
  // hwyattn reads scale 0 as 1/sqrt(D); ggml means 0 (uniform weights).
  if (!isfinite(scale) || scale == 0.0f) return *why = "scale is 0 or not finite", false;
  if (!isfinite(softcap)) return *why = "logit_softcap is not finite", false;
  if (isnan(max_bias)) return *why = "max_bias is NaN", false;
  if (prec != GGML_PREC_DEFAULT && prec != GGML_PREC_F32 && prec != kPrecBf16 && prec != kPrecF16) {
    return *why = "unknown precision", false;
  }
  hwyattn_sdpa_options_init(&c->opts);
  c->opts.scale = scale;
  // c tanh(s / c) is even in c: ggml's s = c tanh(s * (scale / c)).
  c->opts.softcap = fabsf(softcap);
  // Both precisions are fp32 products here (what ggml's CPU backend does).
  c->opts.precision = HWYATTN_PRECISION_F32;
  c->max_bias = max_bias > 0.0f ? max_bias : 0.0f;
  c->has_mask = mask != nullptr;
  if (mask != nullptr) {
    // ggml's mask [>= Lk, >= Lq (padded), ne32, ne33] broadcasts over heads
    // and batches by index modulo its size: hwyattn broadcasts size 1 only.
    if (mask->type != GGML_TYPE_F16) return *why = "the mask is not F16", false;
    if ((mask->ne[2] != 1 && mask->ne[2] != Hq) || (mask->ne[3] != 1 && mask->ne[3] != B)) {
      return *why = "a mask broadcast over heads or batches that is neither 1 nor all", false;
    }
    const int64_t ms[4] = {mask->ne[3], mask->ne[2], Lq, Lk};
    if (!Describe(mask, HWYATTN_F16, kRows, ms, &c->mask)) {
      return *why = "a mask shorter than [n_kv, n_batch] or with odd byte strides", false;
    }
    c->opts.mask = &c->mask;
  } else if (c->max_bias > 0.0f) {
    return *why = "ALiBi (max_bias > 0) without a mask", false;
  }
  c->sinks = sinks;
  if (sinks != nullptr &&
      (sinks->type != GGML_TYPE_F32 || sinks->ne[0] != Hq || sinks->nb[0] != sizeof(float))) {
    return *why = "sinks that are not F32 [n_head], contiguous", false;
  }
  return true;
}

// ggml's ALiBi slope of query head h of n_head (ggml-cpu/ops.cpp).
float AlibiSlope(float max_bias, uint32_t n_head, uint32_t h) {
  const uint32_t n_head_log2 = 1u << static_cast<uint32_t>(floor(log2(n_head)));
  const float m0 = powf(2.0f, -(max_bias) / n_head_log2);
  const float m1 = powf(2.0f, -(max_bias / 2.0f) / n_head_log2);
  return h < n_head_log2 ? powf(m0, h + 1) : powf(m1, 2 * (h - n_head_log2) + 1);
}

// Elements [first, first + count) of dimension d of t (a dimension of size
// 1, broadcast, stays as it is).
hwyattn_tensor Slice(const hwyattn_tensor& t, int d, int64_t first, int64_t count) {
  if (t.shape[d] == 1) return t;
  hwyattn_tensor s = t;
  s.data = static_cast<char*>(t.data) + ByteOffset(t.dtype, first * t.stride[d]);
  s.shape[d] = count;
  return s;
}

// The F32 mask slope[h] * mask of heads [h0, h0 + n) into dst [mb, n, Lq, Lk].
struct AlibiFill {
  const Call* c;
  float* dst;
  int64_t h0, n;
  const float* slopes;
  int64_t rows() const { return c->mask.shape[0] * n * c->mask.shape[2]; }
  static void Task(void* self, int64_t worker) {
    const AlibiFill& f = *static_cast<const AlibiFill*>(self);
    const hwyattn_tensor& m = f.c->mask;
    const int64_t Lq = m.shape[2], Lk = m.shape[3], rows = f.rows();
    const int64_t workers = f.workers;
    for (int64_t r = rows * worker / workers; r < rows * (worker + 1) / workers; ++r) {
      const int64_t i = r % Lq, h = (r / Lq) % f.n, b = r / (Lq * f.n);
      const int64_t mh = m.shape[1] == 1 ? 0 : f.h0 + h;
      const ggml_fp16_t* src = static_cast<const ggml_fp16_t*>(m.data) + b * m.stride[0] +
                               mh * m.stride[1] + i * m.stride[2];
      float* out = f.dst + r * Lk;
      const float slope = f.slopes[h];
      for (int64_t j = 0; j < Lk; ++j) out[j] = slope * ggml_fp16_to_fp32(src[j * m.stride[3]]);
    }
  }
  int64_t workers = 1;
};

// ALiBi: hwyattn_sdpa over groups of heads, each with its scaled mask.
hwyattn_status RunAlibi(Context* ctx, Call* c, const hwyattn_parallel& pool) {
  const int64_t mb = c->mask.shape[0], Hq = c->q.shape[1], Hkv = c->k.shape[1];
  const int64_t Lq = c->q.shape[2], Lk = c->k.shape[2], group = Hq / Hkv;
  const size_t head_bytes = static_cast<size_t>(mb * Lq * Lk) * sizeof(float);
  // Whole GQA groups (K/V read once for the group) when one fits, else
  // single heads.
  int64_t heads = 1;
  if (group * head_bytes <= kAlibiMaskBytes) {
    heads = group *
            std::min<int64_t>(Hkv, static_cast<int64_t>(kAlibiMaskBytes / (group * head_bytes)));
  }
  ctx->alibi_mask.resize(static_cast<size_t>(heads) * head_bytes / sizeof(float));
  std::vector<float> slopes(static_cast<size_t>(heads));
  const float* sinks = c->sinks != nullptr ? static_cast<const float*>(c->sinks->data) : nullptr;
  for (int64_t h0 = 0; h0 < Hq; h0 += heads) {
    const int64_t n = std::min(heads, Hq - h0);
    for (int64_t h = 0; h < n; ++h) {
      slopes[static_cast<size_t>(h)] =
          AlibiSlope(c->max_bias, static_cast<uint32_t>(Hq), static_cast<uint32_t>(h0 + h));
    }
    AlibiFill fill{c, ctx->alibi_mask.data(), h0, n, slopes.data()};
    fill.workers = std::max<int64_t>(1, std::min<int64_t>(pool.num_workers, fill.rows() / 64));
    if (fill.workers > 1) {
      pool.parallel_for(pool.pool, fill.workers, AlibiFill::Task, &fill);
    } else {
      AlibiFill::Task(&fill, 0);
    }
    const int64_t kv0 = h0 / group, kvn = n >= group ? n / group : 1;
    hwyattn_tensor q = Slice(c->q, 1, h0, n), out = Slice(c->out, 1, h0, n);
    hwyattn_tensor k = Slice(c->k, 1, kv0, kvn), v = Slice(c->v, 1, kv0, kvn), mask;
    const int64_t mshape[4] = {mb, n, Lq, Lk};
    hwyattn_tensor_contiguous(&mask, ctx->alibi_mask.data(), HWYATTN_F32, 4, mshape);
    hwyattn_sdpa_options opts = c->opts;
    opts.mask = &mask;
    opts.sinks = sinks != nullptr ? sinks + h0 : nullptr;
    const hwyattn_status s = hwyattn_sdpa(&q, &k, &v, &out, &opts);
    if (s != HWYATTN_OK) return s;
  }
  return HWYATTN_OK;
}

enum ggml_status FlashAttention(Context* ctx, ggml_tensor* op) {
  Call c;
  const char* why = "";
  if (!Plan(op, &c, &why)) {
    GGML_LOG_ERROR("%s: %s (%s): not supported: %s\n", kName, ggml_op_desc(op), op->name, why);
    return GGML_STATUS_FAILED;
  }
  const hwyattn_parallel pool = PoolOf(*ctx);
  c.opts.parallel = &pool;
  if (c.sinks != nullptr) c.opts.sinks = static_cast<const float*>(c.sinks->data);
  const hwyattn_status s =
      c.max_bias > 0.0f ? RunAlibi(ctx, &c, pool) : hwyattn_sdpa(&c.q, &c.k, &c.v, &c.out, &c.opts);
  if (s != HWYATTN_OK) {
    GGML_LOG_ERROR("%s: %s (%s): %s: %s\n", kName, ggml_op_desc(op), op->name,
                   hwyattn_status_string(s), hwyattn_last_error());
    return s == HWYATTN_OUT_OF_MEMORY ? GGML_STATUS_ALLOC_FAILED : GGML_STATUS_FAILED;
  }
  return GGML_STATUS_SUCCESS;
}

bool IsLayoutOnly(const ggml_tensor* t) {
  switch (t->op) {
    case GGML_OP_NONE:
    case GGML_OP_RESHAPE:
    case GGML_OP_VIEW:
    case GGML_OP_PERMUTE:
    case GGML_OP_TRANSPOSE: return true;
    default: return false;
  }
}

// ---------------------------------------------------------------- backend

ggml_guid_t Guid() {
  static ggml_guid guid = {0x68, 0x77, 0x79, 0x61, 0x74, 0x74, 0x6e, 0x2d,
                           0x67, 0x67, 0x6d, 0x6c, 0x2d, 0x66, 0x61, 0x01};
  return &guid;
}

const char* BackendName(ggml_backend_t) { return kName; }

void BackendFree(ggml_backend_t backend) {
  const Context* ctx = static_cast<Context*>(backend->context);
  if (StatsEnabled()) {
    fprintf(stderr, "ggml-hwyattn: %lld FLASH_ATTN_EXT ops computed in %lld graphs, %.1f ms\n",
            static_cast<long long>(ctx->ops_computed), static_cast<long long>(ctx->graphs_computed),
            ctx->seconds * 1e3);
  }
  delete ctx;
  delete backend;
}

enum ggml_status GraphCompute(ggml_backend_t backend, struct ggml_cgraph* graph) {
  Context* ctx = static_cast<Context*>(backend->context);
  const auto start =
      StatsEnabled() ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
  for (int i = 0; i < graph->n_nodes; ++i) {
    ggml_tensor* node = graph->nodes[i];
    if ((node->flags & GGML_TENSOR_FLAG_COMPUTE) == 0 || IsLayoutOnly(node)) continue;
    if (node->op != GGML_OP_FLASH_ATTN_EXT) {
      GGML_LOG_ERROR("%s: %s (%s) is not an op this backend runs\n", kName, ggml_op_desc(node),
                     node->name);
      return GGML_STATUS_FAILED;
    }
    const enum ggml_status s = FlashAttention(ctx, node);
    if (s != GGML_STATUS_SUCCESS) return s;
    ++ctx->ops_computed;
  }
  ++ctx->graphs_computed;
  if (StatsEnabled()) {
    ctx->seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  return GGML_STATUS_SUCCESS;
}

const struct ggml_backend_i kBackendInterface = {
    /* .get_name            = */ BackendName,
    /* .free                = */ BackendFree,
    /* .set_tensor_async    = */ nullptr,
    /* .get_tensor_async    = */ nullptr,
    /* .set_tensor_2d_async = */ nullptr,
    /* .get_tensor_2d_async = */ nullptr,
    /* .cpy_tensor_async    = */ nullptr,
    /* .synchronize         = */ nullptr,
    /* .graph_plan_create   = */ nullptr,
    /* .graph_plan_free     = */ nullptr,
    /* .graph_plan_update   = */ nullptr,
    /* .graph_plan_compute  = */ nullptr,
    /* .graph_compute       = */ GraphCompute,
    /* .event_record        = */ nullptr,
    /* .event_wait          = */ nullptr,
    /* .graph_optimize      = */ nullptr,
};

bool IsHwyattn(ggml_backend_t backend) {
  return backend != nullptr && ggml_guid_matches(backend->guid, Guid());
}

void SetNumThreads(ggml_backend_t backend, int n_threads) {
  if (!IsHwyattn(backend)) return;
  static_cast<Context*>(backend->context)->n_threads = std::max(1, n_threads);
}

void SetParallel(ggml_backend_t backend, const hwyattn_parallel* parallel) {
  if (!IsHwyattn(backend)) return;
  Context* ctx = static_cast<Context*>(backend->context);
  ctx->use_caller_pool = parallel != nullptr;
  if (parallel != nullptr) ctx->caller_pool = *parallel;
}

// ---------------------------------------------------------------- device

ggml_backend_reg_t Reg();

const char* DeviceName(ggml_backend_dev_t) { return kName; }

const char* DeviceDescription(ggml_backend_dev_t) {
  // hwyattn's SIMD target, picked at the first call ("AVX3_BF16", "NEON", ...).
  static char description[64];
  static bool once = [] {
    snprintf(description, sizeof(description), "hwyattn %s flash attention (%s)", hwyattn_version(),
             hwyattn_simd_target());
    return true;
  }();
  (void)once;
  return description;
}

void DeviceMemory(ggml_backend_dev_t, size_t* free, size_t* total) {
  *free = 0;  // host memory: nothing to report, as ggml's BLAS backend
  *total = 0;
}

enum ggml_backend_dev_type DeviceType(ggml_backend_dev_t) { return GGML_BACKEND_DEVICE_TYPE_ACCEL; }

void DeviceProps(ggml_backend_dev_t dev, struct ggml_backend_dev_props* props) {
  props->name = DeviceName(dev);
  props->description = DeviceDescription(dev);
  props->type = DeviceType(dev);
  DeviceMemory(dev, &props->memory_free, &props->memory_total);
  props->caps = {
      /* .async                = */ false,
      /* .host_buffer          = */ false,
      /* .buffer_from_host_ptr = */ true,
      /* .events               = */ false,
      /* .mmap_support         = */ true,
  };
}

ggml_backend_t DeviceInit(ggml_backend_dev_t, const char*) {
  return new ggml_backend{
      /* .guid    = */ Guid(),
      /* .iface   = */ kBackendInterface,
      /* .device  = */ ggml_backend_reg_dev_get(Reg(), 0),
      /* .context = */ new Context,
  };
}

// Host memory: ggml's CPU buffers, so the CPU backend and this one share
// every tensor without copies.
ggml_backend_buffer_type_t DeviceBufferType(ggml_backend_dev_t) {
  return ggml_backend_cpu_buffer_type();
}

ggml_backend_buffer_t DeviceBufferFromHostPtr(ggml_backend_dev_t, void* ptr, size_t size, size_t) {
  return ggml_backend_cpu_buffer_from_ptr(ptr, size);
}

bool DeviceSupportsOp(ggml_backend_dev_t, const struct ggml_tensor* op) {
  if (IsLayoutOnly(op)) return true;
  if (op->op != GGML_OP_FLASH_ATTN_EXT) return false;
  Call c;
  const char* why = "";
  if (Plan(op, &c, &why)) return true;
  if (StatsEnabled()) ReportDecline(op, why);
  return false;
}

bool DeviceSupportsBufferType(ggml_backend_dev_t, ggml_backend_buffer_type_t buft) {
  return ggml_backend_buft_is_host(buft);
}

const struct ggml_backend_device_i kDeviceInterface = {
    /* .get_name             = */ DeviceName,
    /* .get_description      = */ DeviceDescription,
    /* .get_memory           = */ DeviceMemory,
    /* .get_type             = */ DeviceType,
    /* .get_props            = */ DeviceProps,
    /* .init_backend         = */ DeviceInit,
    /* .get_buffer_type      = */ DeviceBufferType,
    /* .get_host_buffer_type = */ nullptr,
    /* .buffer_from_host_ptr = */ DeviceBufferFromHostPtr,
    /* .supports_op          = */ DeviceSupportsOp,
    /* .supports_buft        = */ DeviceSupportsBufferType,
    /* .offload_op           = */ nullptr,
    /* .event_new            = */ nullptr,
    /* .event_free           = */ nullptr,
    /* .event_synchronize    = */ nullptr,
};

// ---------------------------------------------------------------- registry

const char* RegName(ggml_backend_reg_t) { return kName; }

size_t RegDeviceCount(ggml_backend_reg_t) { return 1; }

ggml_backend_dev_t RegDevice(ggml_backend_reg_t reg, size_t index) {
  if (index != 0) return nullptr;
  static ggml_backend_device device = {
      /* .iface   = */ kDeviceInterface,
      /* .reg     = */ reg,
      /* .context = */ nullptr,
  };
  return &device;
}

void* RegProcAddress(ggml_backend_reg_t, const char* name) {
  if (strcmp(name, "ggml_backend_set_n_threads") == 0) {
    return reinterpret_cast<void*>(static_cast<ggml_backend_set_n_threads_t>(SetNumThreads));
  }
  if (strcmp(name, "ggml_backend_hwyattn_set_parallel") == 0) {
    return reinterpret_cast<void*>(static_cast<ggml_backend_hwyattn_set_parallel_t>(SetParallel));
  }
  return nullptr;
}

const struct ggml_backend_reg_i kRegInterface = {
    /* .get_name         = */ RegName,
    /* .get_device_count = */ RegDeviceCount,
    /* .get_device       = */ RegDevice,
    /* .get_proc_address = */ RegProcAddress,
};

ggml_backend_reg_t Reg() {
  static struct ggml_backend_reg reg = {
      /* .api_version = */ GGML_BACKEND_API_VERSION,
      /* .iface       = */ kRegInterface,
      /* .context     = */ nullptr,
  };
  return &reg;
}

}  // namespace

// ggml_backend_init: what ggml_backend_load() (GGML_BACKEND_PATH) looks for.
GGML_BACKEND_DL_IMPL(Reg)
