// SPDX-License-Identifier: Apache-2.0

#include "mpi/call_checks.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

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
  if (t->dtype != HWYATTN_F32) {
    HWYATTN_MPI_REJECT(HWYATTN_UNSUPPORTED, "%s: dtype is %d; outputs are F32 (%d)", name,
                       static_cast<int>(t->dtype), static_cast<int>(HWYATTN_F32));
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
  if (m->dtype != HWYATTN_BOOL && m->dtype != HWYATTN_F32) {
    HWYATTN_MPI_REJECT(HWYATTN_INVALID_ARGUMENT, "opts->mask: dtype is %d; must be BOOL or F32",
                       static_cast<int>(m->dtype));
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
  if (m->data == nullptr) HWYATTN_MPI_REJECT(HWYATTN_INVALID_ARGUMENT, "opts->mask: data is NULL");
  if (reinterpret_cast<uintptr_t>(m->data) % DtypeSize(m->dtype) != 0) {
    HWYATTN_MPI_REJECT(HWYATTN_INVALID_ARGUMENT, "opts->mask: data %p is not aligned", m->data);
  }
  return HWYATTN_OK;
}

}  // namespace

hwyattn_status Describe(Mode mode, const hwyattn_tensor* q, const hwyattn_tensor* k,
                        const hwyattn_tensor* v, const hwyattn_tensor* out,
                        const hwyattn_sdpa_options* user, CallShape* shape,
                        hwyattn_sdpa_options* opts, Sizes* sizes) {
  hwyattn_sdpa_options_init(opts);
  if (user != nullptr) {
    const size_t size = user->struct_size, known = sizeof(hwyattn_sdpa_options);
    if (size < offsetof(hwyattn_sdpa_options, window_left)) {
      HWYATTN_MPI_REJECT(HWYATTN_INVALID_ARGUMENT,
                         "opts->struct_size is %zu, smaller than any hwyattn_sdpa_options "
                         "(call hwyattn_sdpa_options_init)",
                         size);
    }
    for (size_t i = known; i < size; ++i) {
      if (reinterpret_cast<const unsigned char*>(user)[i] != 0) {
        HWYATTN_MPI_REJECT(HWYATTN_UNSUPPORTED,
                           "opts->struct_size is %zu and byte %zu is set: a field this "
                           "library does not know",
                           size, i);
      }
    }
    memcpy(opts, user, size < known ? size : known);
    opts->struct_size = static_cast<uint32_t>(size < known ? size : known);
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
  if (kd.shape[3] != sizes->head_dim) {
    HWYATTN_MPI_REJECT(HWYATTN_INVALID_ARGUMENT, "k: head_dim is %" PRId64 " but q has %" PRId64,
                       kd.shape[3], sizes->head_dim);
  }
  int64_t rows, floats;
  if (__builtin_mul_overflow(sizes->batch, sizes->q_heads, &rows) ||
      __builtin_mul_overflow(rows, sizes->q_len, &rows) ||
      __builtin_mul_overflow(rows, sizes->value_dim + 1, &floats)) {
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
    if (t->dtype != HWYATTN_F32 && t->dtype != HWYATTN_F16 && t->dtype != HWYATTN_BF16) {
      HWYATTN_MPI_REJECT(HWYATTN_INVALID_ARGUMENT, "%s: dtype is %d; must be F32, F16 or BF16",
                         name, static_cast<int>(t->dtype));
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
  }
  if (!ring && opts->mask != nullptr && sizes->key_len > 0) {
    const int64_t mask_shape[4] = {sizes->batch, sizes->q_heads, sizes->q_len, sizes->key_len};
    HWYATTN_MPI_RETURN_IF_ERROR(CheckMask(shape, opts->mask, mask_shape));
  }
  // What this component itself interprets; hwyattn_sdpa checks the rest on
  // every rank that computes.
  if (opts->causal < HWYATTN_CAUSAL_NONE || opts->causal > HWYATTN_CAUSAL_BOTTOM_RIGHT) {
    HWYATTN_MPI_REJECT(HWYATTN_INVALID_ARGUMENT, "opts->causal is %d; must be 0, 1 or 2",
                       static_cast<int>(opts->causal));
  }
  if (opts->window_left < 0 || opts->window_right < 0) {
    HWYATTN_MPI_REJECT(HWYATTN_INVALID_ARGUMENT,
                       "opts->window_left and window_right are %" PRId64 " and %" PRId64
                       "; must be >= 0",
                       opts->window_left, opts->window_right);
  }

  int64_t* a = shape->agreed;
  a[kFunction] = static_cast<int64_t>(mode);
  a[kBatch] = sizes->batch;
  a[kQueryHeads] = sizes->q_heads;
  a[kKvHeads] = kv_heads;
  a[kQueryLen] = ring ? 0 : sizes->q_len;  // ring: each rank's own slice
  a[kHeadDim] = sizes->head_dim;
  a[kValueDim] = sizes->value_dim;
  a[kQueryDtype] = q->dtype;
  uint32_t bits;
  memcpy(&bits, &opts->scale, sizeof(bits));
  a[kScaleBits] = bits;
  a[kCausal] = opts->causal;
  a[kWindowLeft] = opts->window_left;
  a[kWindowRight] = opts->window_right;
  memcpy(&bits, &opts->softcap, sizeof(bits));
  a[kSoftcapBits] = bits;
  a[kPrecision] = opts->precision;
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
    a[kKeyDtype] = k->dtype;
    a[kValueDtype] = v->dtype;
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
