// SPDX-License-Identifier: Apache-2.0

#include "mpi/call_checks.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <new>
#include <vector>

#include "mpi/error.h"
#include "mpi/state_allreduce.h"
#include "mpi/tensor_view.h"

namespace hwyattn_mpi {
namespace {

// Records the local checks' first failure in the call shape.
hwyattn_status Reject(CallShape* shape, hwyattn_status status, const char* format, ...)
    __attribute__((format(printf, 3, 4)));
hwyattn_status Reject(CallShape* shape, hwyattn_status status, const char* format, ...) {
  va_list args;
  va_start(args, format);
  vsnprintf(shape->message, sizeof(shape->message), format, args);
  va_end(args);
  shape->status = status;
  return status;
}

#define HWYATTN_MPI_REJECT(...) return Reject(shape, __VA_ARGS__)

// An enum field as the caller stored it: any int32 (reading a value outside
// the enum through its type would be undefined).
template <typename E>
int32_t Raw(const E& e) {
  static_assert(sizeof(E) == sizeof(int32_t), "the C API's enums are int32");
  int32_t raw;
  memcpy(&raw, &e, sizeof(raw));
  return raw;
}

hwyattn_status CheckDescriptor(CallShape* shape, const char* name, const hwyattn_tensor* t) {
  if (t == nullptr) HWYATTN_MPI_REJECT(HWYATTN_INVALID_ARGUMENT, "%s is NULL", name);
  if (t->rank < 1 || t->rank > 4) {
    HWYATTN_MPI_REJECT(HWYATTN_INVALID_ARGUMENT, "%s: rank is %d; must be 1..4", name,
                       static_cast<int>(t->rank));
  }
  return HWYATTN_OK;
}

// An F32 output of exactly `want` (logical dims): data, alignment, no
// element written twice (hwyattn_merge_states checks the same when it writes
// it, after the collective, where a failure could no longer be shared).
hwyattn_status CheckOutput(CallShape* shape, const char* name, const hwyattn_tensor* t,
                           const int64_t want[4]) {
  HWYATTN_MPI_RETURN_IF_ERROR(CheckDescriptor(shape, name, t));
  const int32_t dtype = Raw(t->dtype);
  if (dtype != HWYATTN_F32) {
    HWYATTN_MPI_REJECT(HWYATTN_UNSUPPORTED, "%s: dtype is %d; outputs are F32 (%d)", name,
                       static_cast<int>(dtype), static_cast<int>(HWYATTN_F32));
  }
  const Dims4 d(*t);
  for (int i = 0; i < 4; ++i) {
    if (d.shape[i] != want[i]) {
      HWYATTN_MPI_REJECT(HWYATTN_INVALID_ARGUMENT,
                         "%s: logical dimension %d is %" PRId64 " but must be %" PRId64, name, i,
                         d.shape[i], want[i]);
    }
    if (d.stride[i] < 0) {
      HWYATTN_MPI_REJECT(HWYATTN_INVALID_ARGUMENT, "%s: logical stride %d is %" PRId64, name, i,
                         d.stride[i]);
    }
  }
  if (t->data == nullptr) HWYATTN_MPI_REJECT(HWYATTN_INVALID_ARGUMENT, "%s: data is NULL", name);
  if (reinterpret_cast<uintptr_t>(t->data) % 4 != 0) {
    HWYATTN_MPI_REJECT(HWYATTN_INVALID_ARGUMENT, "%s: data %p is not aligned to 4 bytes", name,
                       t->data);
  }
  if (!NoSelfOverlap(d)) {
    HWYATTN_MPI_REJECT(HWYATTN_INVALID_ARGUMENT, "%s: its strides write an element twice", name);
  }
  return HWYATTN_OK;
}

// What ComputeBlock reads of the user's mask itself: dtype, sizes (1 or the
// problem's), strides, data.
hwyattn_status CheckMask(CallShape* shape, const hwyattn_tensor* m, const int64_t want[4]) {
  HWYATTN_MPI_RETURN_IF_ERROR(CheckDescriptor(shape, "opts->mask", m));
  const int32_t dtype = Raw(m->dtype);
  if (dtype != HWYATTN_BOOL && dtype != HWYATTN_F32) {
    HWYATTN_MPI_REJECT(HWYATTN_INVALID_ARGUMENT, "opts->mask: dtype is %d; must be BOOL or F32",
                       static_cast<int>(dtype));
  }
  const Dims4 d(*m);
  for (int i = 0; i < 4; ++i) {
    if (d.shape[i] != 1 && d.shape[i] != want[i]) {
      HWYATTN_MPI_REJECT(HWYATTN_INVALID_ARGUMENT,
                         "opts->mask: logical dimension %d is %" PRId64 " but must be %" PRId64
                         " (this rank's keys for dimension 3) or 1",
                         i, d.shape[i], want[i]);
    }
    if (d.stride[i] < 0) {
      HWYATTN_MPI_REJECT(HWYATTN_INVALID_ARGUMENT, "opts->mask: logical stride %d is %" PRId64, i,
                         d.stride[i]);
    }
  }
  if (!SpanFits(d, DtypeSize(m->dtype))) {
    HWYATTN_MPI_REJECT(HWYATTN_INVALID_ARGUMENT,
                       "opts->mask: its shape and strides span more than int64 bytes");
  }
  if (m->data == nullptr) HWYATTN_MPI_REJECT(HWYATTN_INVALID_ARGUMENT, "opts->mask: data is NULL");
  if (reinterpret_cast<uintptr_t>(m->data) % DtypeSize(m->dtype) != 0) {
    HWYATTN_MPI_REJECT(HWYATTN_INVALID_ARGUMENT, "opts->mask: data %p is not aligned", m->data);
  }
  return HWYATTN_OK;
}

// The rules of the options themselves (scale, causal, windows, softcap,
// ALiBi slopes, sinks, precision, parallel, reserved0), which libhwyattn
// owns: hwyattn_sdpa on a probe problem of q_heads heads of one query, one
// key and head_dim 1, with these options but none of those this component
// checks against the whole problem (mask, kv_len, weights, lse). Its status
// and message (naming the option and the value) become this rank's verdict,
// before any work, instead of a failure on the ranks that compute. Costs a
// tiny hwyattn_sdpa (q, k and v one broadcast float; out q_heads floats).
hwyattn_status ProbeOptions(CallShape* shape, const hwyattn_sdpa_options& opts, int64_t q_heads) {
  hwyattn_sdpa_options probe = opts;
  probe.mask = nullptr;
  probe.kv_len = nullptr;
  probe.weights = nullptr;
  probe.lse = nullptr;
  float one = 1.0f;
  float small_out[64];
  std::vector<float> large_out;
  float* out_data = small_out;
  if (q_heads > 64) {
    try {
      large_out.resize(static_cast<size_t>(q_heads));
    } catch (const std::bad_alloc&) {
      HWYATTN_MPI_REJECT(HWYATTN_OUT_OF_MEMORY, "out of memory for the options' probe");
    }
    out_data = large_out.data();
  }
  const int64_t shape4[4] = {1, q_heads, 1, 1};
  hwyattn_tensor q, kv, out;
  hwyattn_tensor_contiguous(&q, &one, HWYATTN_F32, 4, shape4);
  q.stride[1] = 0;  // every head the same float
  kv = q;
  hwyattn_tensor_contiguous(&out, out_data, HWYATTN_F32, 4, shape4);
  const hwyattn_status s = hwyattn_sdpa(&q, &kv, &kv, &out, &probe);
  if (s != HWYATTN_OK) HWYATTN_MPI_REJECT(s, "%s", hwyattn_last_error());
  return HWYATTN_OK;
}

}  // namespace

hwyattn_status Describe(Mode mode, const hwyattn_tensor* q, const hwyattn_tensor* k,
                        const hwyattn_tensor* v, const hwyattn_tensor* out,
                        const hwyattn_sdpa_options* user, CallShape* shape,
                        hwyattn_sdpa_options* opts, Sizes* sizes) {
  hwyattn_sdpa_options_init(opts);
  if (user != nullptr) {
    // hwyattn.h's rule for extensible structs, libhwyattn's own reading (the
    // fields an older caller's struct lacks keep their defaults).
    const hwyattn_status s = hwyattn_sdpa_options_copy(opts, user);
    if (s != HWYATTN_OK) {
      const char* message = hwyattn_last_error();  // "src: struct_size is ..."
      if (strncmp(message, "src: ", 5) == 0) message += 5;
      HWYATTN_MPI_REJECT(s, "opts->%s", message);
    }
  }
  HWYATTN_MPI_RETURN_IF_ERROR(CheckDescriptor(shape, "q", q));
  HWYATTN_MPI_RETURN_IF_ERROR(CheckDescriptor(shape, "k", k));
  HWYATTN_MPI_RETURN_IF_ERROR(CheckDescriptor(shape, "v", v));
  HWYATTN_MPI_RETURN_IF_ERROR(CheckDescriptor(shape, "out", out));
  const Dims4 qd(*q), kd(*k), vd(*v);
  const char* const kQNames[4] = {"batch", "query heads", "query length", "head_dim"};
  for (int i = 0; i < 4; ++i) {
    if (qd.shape[i] < 1) {
      HWYATTN_MPI_REJECT(HWYATTN_INVALID_ARGUMENT,
                         "q: logical dimension %d (%s) is %" PRId64 "; must be >= 1", i, kQNames[i],
                         qd.shape[i]);
    }
  }
  const int64_t kv_heads = kd.shape[1];
  *sizes = {qd.shape[0], qd.shape[1], kv_heads, qd.shape[2], qd.shape[3], vd.shape[3], kd.shape[2]};
  const bool ring = mode == Mode::kRing;
  const char* const function = ring ? "hwyattn_mpi_ring_sdpa" : "hwyattn_mpi_sharded_sdpa";
  if (ring && (kd.shape[2] != sizes->q_len || vd.shape[2] != sizes->q_len)) {
    HWYATTN_MPI_REJECT(HWYATTN_INVALID_ARGUMENT,
                       "k and v: logical dimension 2 (this rank's tokens) is %" PRId64
                       " and %" PRId64 "; must equal q's %" PRId64
                       " (q, k, v and out hold the same slice of the sequence)",
                       kd.shape[2], vd.shape[2], sizes->q_len);
  }
  if (sizes->key_len < 0 || vd.shape[2] != sizes->key_len) {
    HWYATTN_MPI_REJECT(HWYATTN_INVALID_ARGUMENT,
                       "k and v: key lengths (logical dimension 2) are %" PRId64 " and %" PRId64
                       "; must be equal and >= 0",
                       sizes->key_len, vd.shape[2]);
  }
  for (int i = 0; i < 4; ++i) {
    if (i != 2 && (kd.shape[i] < 1 || vd.shape[i] < 1)) {
      HWYATTN_MPI_REJECT(HWYATTN_INVALID_ARGUMENT,
                         "k, v: logical dimension %d is %" PRId64 " and %" PRId64 "; must be >= 1",
                         i, kd.shape[i], vd.shape[i]);
    }
  }
  if (kv_heads != vd.shape[1] || sizes->q_heads % kv_heads != 0) {
    HWYATTN_MPI_REJECT(HWYATTN_INVALID_ARGUMENT,
                       "k: shape[1] (kv heads) is %" PRId64 ", v's %" PRId64
                       "; must be equal and divide q's %" PRId64 " query heads",
                       kv_heads, vd.shape[1], sizes->q_heads);
  }
  for (int i = 0; i < 2; ++i) {
    const int64_t b = i == 0 ? kd.shape[0] : vd.shape[0];
    if (b != 1 && b != sizes->batch) {
      HWYATTN_MPI_REJECT(HWYATTN_INVALID_ARGUMENT,
                         "%s: shape[0] (batch) is %" PRId64 "; must be q's %" PRId64
                         " or 1 (broadcast)",
                         i == 0 ? "k" : "v", b, sizes->batch);
    }
  }
  if (kd.shape[3] != sizes->head_dim) {
    HWYATTN_MPI_REJECT(HWYATTN_INVALID_ARGUMENT, "k: head_dim is %" PRId64 " but q has %" PRId64,
                       kd.shape[3], sizes->head_dim);
  }
  int64_t rows, floats, per_row;
  if (__builtin_mul_overflow(sizes->batch, sizes->q_heads, &rows) ||
      __builtin_mul_overflow(rows, sizes->q_len, &rows) ||
      __builtin_add_overflow(sizes->value_dim, 1, &per_row) ||
      __builtin_mul_overflow(rows, per_row, &floats)) {
    HWYATTN_MPI_REJECT(HWYATTN_INVALID_ARGUMENT,
                       "out: B * Hq * Lq * (Dv + 1) overflows int64 (B %" PRId64 ", Hq %" PRId64
                       ", Lq %" PRId64 ", Dv %" PRId64 ")",
                       sizes->batch, sizes->q_heads, sizes->q_len, sizes->value_dim);
  }
  if (!ring && !StateBlock::Fits(rows, sizes->value_dim)) {
    HWYATTN_MPI_REJECT(HWYATTN_UNSUPPORTED,
                       "out: B * Hq * Lq * (Dv + 1) floats exceed one MPI message (%d elements)",
                       INT32_MAX);
  }
  const int64_t out_shape[4] = {sizes->batch, sizes->q_heads, sizes->q_len, sizes->value_dim};
  HWYATTN_MPI_RETURN_IF_ERROR(CheckOutput(shape, "out", out, out_shape));
  if (opts->weights != nullptr) {
    HWYATTN_MPI_REJECT(HWYATTN_UNSUPPORTED,
                       "opts->weights: the whole problem's probabilities are spread over the "
                       "ranks; not available from %s",
                       function);
  }
  if (opts->lse != nullptr) {
    const int64_t lse_shape[4] = {1, sizes->batch, sizes->q_heads, sizes->q_len};
    HWYATTN_MPI_RETURN_IF_ERROR(CheckOutput(shape, "opts->lse", opts->lse, lse_shape));
  }
  if (ring && opts->mask != nullptr) {
    HWYATTN_MPI_REJECT(HWYATTN_UNSUPPORTED,
                       "opts->mask: not available from hwyattn_mpi_ring_sdpa (the keys travel "
                       "between ranks); causal, windows and kv_len are");
  }
  // The inputs' dtype, data and strides, which hwyattn_sdpa would check only
  // on the ranks and blocks that compute (a block no row sees is skipped):
  // here, so that every rank hears of them before any work. k and v of an
  // empty shard are not read.
  const hwyattn_tensor* const inputs[3] = {q, k, v};
  for (int i = 0; i < 3; ++i) {
    if (i > 0 && sizes->key_len == 0) break;
    const char* name = i == 0 ? "q" : i == 1 ? "k" : "v";
    const hwyattn_tensor* t = inputs[i];
    const int32_t dtype = Raw(t->dtype);
    if (dtype != HWYATTN_F32 && dtype != HWYATTN_F16 && dtype != HWYATTN_BF16) {
      HWYATTN_MPI_REJECT(HWYATTN_INVALID_ARGUMENT, "%s: dtype is %d; must be F32, F16 or BF16",
                         name, static_cast<int>(dtype));
    }
    const size_t elem = DtypeSize(t->dtype);
    if (t->data == nullptr) HWYATTN_MPI_REJECT(HWYATTN_INVALID_ARGUMENT, "%s: data is NULL", name);
    if (reinterpret_cast<uintptr_t>(t->data) % elem != 0) {
      HWYATTN_MPI_REJECT(HWYATTN_INVALID_ARGUMENT, "%s: data %p is not aligned to %zu bytes", name,
                         t->data, elem);
    }
    const Dims4 d(*t);
    for (int j = 0; j < 4; ++j) {
      if (d.stride[j] < 0) {
        HWYATTN_MPI_REJECT(HWYATTN_INVALID_ARGUMENT, "%s: logical stride %d is %" PRId64, name, j,
                           d.stride[j]);
      }
    }
    if (!SpanFits(d, elem)) {
      HWYATTN_MPI_REJECT(HWYATTN_INVALID_ARGUMENT,
                         "%s: its shape and strides span more than int64 bytes", name);
    }
  }
  if (!ring && opts->mask != nullptr && sizes->key_len > 0) {
    const int64_t mask_shape[4] = {sizes->batch, sizes->q_heads, sizes->q_len, sizes->key_len};
    HWYATTN_MPI_RETURN_IF_ERROR(CheckMask(shape, opts->mask, mask_shape));
  }
  // The options' own rules are libhwyattn's (one home): a probe call.
  HWYATTN_MPI_RETURN_IF_ERROR(ProbeOptions(shape, *opts, sizes->q_heads));
  const int32_t causal = Raw(opts->causal);

  int64_t* a = shape->agreed;
  a[kFunction] = static_cast<int64_t>(mode);
  a[kBatch] = sizes->batch;
  a[kQueryHeads] = sizes->q_heads;
  a[kKvHeads] = kv_heads;
  a[kQueryLen] = ring ? 0 : sizes->q_len;  // ring: each rank's own slice
  a[kHeadDim] = sizes->head_dim;
  a[kValueDim] = sizes->value_dim;
  a[kQueryDtype] = Raw(q->dtype);
  uint32_t bits;
  memcpy(&bits, &opts->scale, sizeof(bits));
  a[kScaleBits] = bits;
  a[kCausal] = causal;
  a[kWindowLeft] = opts->window_left;
  a[kWindowRight] = opts->window_right;
  memcpy(&bits, &opts->softcap, sizeof(bits));
  a[kSoftcapBits] = bits;
  a[kPrecision] = Raw(opts->precision);
  a[kHasMask] = opts->mask != nullptr;
  a[kHasLse] = opts->lse != nullptr;
  const size_t per_head = static_cast<size_t>(sizes->q_heads) * sizeof(float);
  a[kKvLenHash] = opts->kv_len != nullptr
                      ? HashBytes(opts->kv_len, static_cast<size_t>(sizes->batch) * sizeof(int32_t))
                      : 0;
  a[kAlibiHash] = opts->alibi_slopes != nullptr ? HashBytes(opts->alibi_slopes, per_head) : 0;
  a[kSinksHash] = opts->sinks != nullptr ? HashBytes(opts->sinks, per_head) : 0;
  if (ring) {
    a[kKeyBatch] = kd.shape[0];
    a[kValueBatch] = vd.shape[0];
    a[kKeyDtype] = Raw(k->dtype);
    a[kValueDtype] = Raw(v->dtype);
  }
  shape->key_len = sizes->key_len;
  return HWYATTN_OK;
}

#undef HWYATTN_MPI_REJECT

void RecordFailure(CallShape* shape, hwyattn_status status) {
  shape->status = status;
  snprintf(shape->message, sizeof(shape->message), "%s", LastError());
}

hwyattn_status CheckKvLen(const hwyattn_sdpa_options& opts, int64_t batch, int64_t total,
                          const char* whole) {
  if (opts.kv_len == nullptr) return HWYATTN_OK;
  for (int64_t b = 0; b < batch; ++b) {
    if (opts.kv_len[b] < 0 || opts.kv_len[b] > total) {
      return Fail(HWYATTN_INVALID_ARGUMENT,
                  "opts->kv_len[%" PRId64 "] is %" PRId32 "; must be in [0, %" PRId64 "] (%s)", b,
                  opts.kv_len[b], total, whole);
    }
  }
  return HWYATTN_OK;
}

}  // namespace hwyattn_mpi
