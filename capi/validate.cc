// SPDX-License-Identifier: Apache-2.0
#include "capi/validate.h"

#include <inttypes.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <type_traits>

#include "capi/abi_sizes.h"
#include "capi/error.h"
#include "src/mha.h"
#include "src/scratch.h"
#include "src/tensor.h"

namespace hwyattn {
namespace {

constexpr hwyattn_status kInvalid = HWYATTN_INVALID_ARGUMENT;

// The integer a C caller stored in an enum field. C lets any int live there,
// but loading a value outside the enumerators into a C++ enum is undefined,
// so the raw bits are copied out before they are compared.
// The value is read as a C int (what a C enum object holds; the C++
// underlying type may be unsigned, which would print -1 as 4294967295).
template <typename Enum>
int64_t RawEnum(const Enum& field) {
  int32_t raw;
  static_assert(sizeof(raw) == sizeof(field), "enum layout");
  memcpy(&raw, &field, sizeof(raw));
  return static_cast<int64_t>(raw);
}

const char* DtypeName(hwyattn_dtype t) {
  switch (t) {
    case HWYATTN_F32: return "F32";
    case HWYATTN_F16: return "F16";
    case HWYATTN_BF16: return "BF16";
    case HWYATTN_BOOL: return "BOOL";
    case HWYATTN_I8: return "I8";
    case HWYATTN_F8E4M3: return "F8E4M3";
    case HWYATTN_F8E5M2: return "F8E5M2";
    case HWYATTN_Q8_0: return "Q8_0";
    case HWYATTN_Q4_0: return "Q4_0";
    case HWYATTN_Q4_1: return "Q4_1";
    case HWYATTN_Q5_0: return "Q5_0";
    case HWYATTN_Q5_1: return "Q5_1";
    case HWYATTN_IQ4_NL: return "IQ4_NL";
    case HWYATTN_I4: return "I4";
  }
  return "unknown";
}

// The engine's enums mirror the header's (a view takes the caller's value).
static_assert(static_cast<int>(Dtype::kF32) == HWYATTN_F32 &&
                  static_cast<int>(Dtype::kF16) == HWYATTN_F16 &&
                  static_cast<int>(Dtype::kBF16) == HWYATTN_BF16 &&
                  static_cast<int>(Dtype::kBool) == HWYATTN_BOOL &&
                  static_cast<int>(Dtype::kI8) == HWYATTN_I8 &&
                  static_cast<int>(Dtype::kF8E4M3) == HWYATTN_F8E4M3 &&
                  static_cast<int>(Dtype::kF8E5M2) == HWYATTN_F8E5M2 &&
                  static_cast<int>(Dtype::kQ8_0) == HWYATTN_Q8_0 &&
                  static_cast<int>(Dtype::kQ4_0) == HWYATTN_Q4_0 &&
                  static_cast<int>(Dtype::kQ4_1) == HWYATTN_Q4_1 &&
                  static_cast<int>(Dtype::kQ5_0) == HWYATTN_Q5_0 &&
                  static_cast<int>(Dtype::kQ5_1) == HWYATTN_Q5_1 &&
                  static_cast<int>(Dtype::kIQ4_NL) == HWYATTN_IQ4_NL &&
                  static_cast<int>(Dtype::kI4) == HWYATTN_I4,
              "Dtype mirrors hwyattn_dtype");
static_assert(static_cast<int>(Causal::kNone) == HWYATTN_CAUSAL_NONE &&
                  static_cast<int>(Causal::kTopLeft) == HWYATTN_CAUSAL_TOP_LEFT &&
                  static_cast<int>(Causal::kBottomRight) == HWYATTN_CAUSAL_BOTTOM_RIGHT,
              "Causal mirrors hwyattn_causal");
static_assert(static_cast<int>(Precision::kF32) == HWYATTN_PRECISION_F32 &&
                  static_cast<int>(Precision::kBF16) == HWYATTN_PRECISION_BF16 &&
                  static_cast<int>(Precision::kInt8) == HWYATTN_PRECISION_INT8,
              "Precision mirrors hwyattn_precision");

constexpr unsigned Bit(hwyattn_dtype t) { return 1u << static_cast<unsigned>(t); }
constexpr unsigned kFloatTypes = Bit(HWYATTN_F32) | Bit(HWYATTN_F16) | Bit(HWYATTN_BF16);
// The element types of quantized caches (numbers times the cache's scales).
constexpr unsigned kQuantizedTypes =
    Bit(HWYATTN_I8) | Bit(HWYATTN_I4) | Bit(HWYATTN_F8E4M3) | Bit(HWYATTN_F8E5M2);
// ggml's block formats (their scales inside): K/V of hwyattn_sdpa and caches.
constexpr unsigned kBlockTypes = Bit(HWYATTN_Q8_0) | Bit(HWYATTN_Q4_0) | Bit(HWYATTN_Q4_1) |
                                 Bit(HWYATTN_Q5_0) | Bit(HWYATTN_Q5_1) | Bit(HWYATTN_IQ4_NL);
// What k and v of hwyattn_sdpa may be.
constexpr unsigned kKvTypes = kFloatTypes | kBlockTypes;

// A validated descriptor: the rank-4 view plus what messages need.
struct Checked {
  const char* name = "";
  const char* const* dim_names = nullptr;  // of the 4 logical dims
  int32_t rank = 0;
  TensorView view;
  uintptr_t first_byte = 0, end_byte = 0;  // the memory the tensor spans

  // "k: head_dim (shape[3])", or "k: batch (implicit, rank 3)" for a leading
  // dimension the caller did not pass.
  const char* Dim(int i, char* buf, size_t size) const {
    const int caller = i - (4 - rank);
    if (caller >= 0) {
      snprintf(buf, size, "%s: %s (shape[%d])", name, dim_names[i], caller);
    } else {
      snprintf(buf, size, "%s: %s (implicit, rank %d)", name, dim_names[i], static_cast<int>(rank));
    }
    return buf;
  }
};

const char* const kQNames[4] = {"batch", "heads", "length", "head_dim"};
const char* const kVNames[4] = {"batch", "heads", "length", "value_dim"};
const char* const kMaskNames[4] = {"batch", "heads", "query length", "key length"};
const char* const kLseNames[4] = {"leading", "batch", "heads", "length"};

// Checks a descriptor and builds its view. `allowed` dtypes are accepted;
// `known` ones that are not allowed are HWYATTN_UNSUPPORTED (a valid request
// this version cannot do); any other dtype is invalid for this argument.
hwyattn_status Check(const char* name, const char* const* dim_names, const hwyattn_tensor* t,
                     unsigned allowed, unsigned known, Checked* out) {
  if (t == nullptr) return Fail(kInvalid, "%s is NULL", name);
  out->name = name;
  out->dim_names = dim_names;
  out->rank = t->rank;
  if (t->rank < 1 || t->rank > 4) {
    return Fail(kInvalid, "%s: rank is %" PRId32 "; must be 1..4", name, t->rank);
  }
  const int64_t dtype = RawEnum(t->dtype);
  if (!IsDtype(dtype)) {
    return Fail(kInvalid, "%s: dtype is %" PRId64 ", which is not an hwyattn_dtype", name, dtype);
  }
  if ((allowed & Bit(t->dtype)) == 0 && (kQuantizedTypes & Bit(t->dtype)) != 0) {
    return Fail(kInvalid,
                "%s: dtype %s is accepted only for the K/V pages of an "
                "hwyattn_kv_cache (where its scales are); use F32, F16 or BF16 here",
                name, DtypeName(t->dtype));
  }
  if ((allowed & Bit(t->dtype)) == 0 && (kBlockTypes & Bit(t->dtype)) != 0) {
    return Fail(kInvalid,
                "%s: dtype %s is a K/V cache format, accepted only for k and v of "
                "hwyattn_sdpa and the K/V pages of an hwyattn_kv_cache",
                name, DtypeName(t->dtype));
  }
  if ((allowed & Bit(t->dtype)) == 0) {
    return Fail((known & Bit(t->dtype)) ? HWYATTN_UNSUPPORTED : kInvalid,
                "%s: dtype %s is not %s for this argument", name, DtypeName(t->dtype),
                (known & Bit(t->dtype)) ? "supported" : "valid");
  }
  TensorView& v = out->view;
  v = TensorView();
  v.dtype = static_cast<Dtype>(t->dtype);
  const int lead = 4 - t->rank;
  int64_t last = 0;  // largest element offset
  for (int i = 0; i < t->rank; ++i) {
    const int64_t n = t->shape[i], s = t->stride[i];
    if (n < 1)
      return Fail(kInvalid, "%s: shape[%d] is %" PRId64 "; sizes must be >= 1", name, i, n);
    if (s < 0) {
      return Fail(kInvalid, "%s: stride[%d] is %" PRId64 "; strides must be >= 0", name, i, s);
    }
    int64_t span;
    if (__builtin_mul_overflow(n - 1, s, &span) || __builtin_add_overflow(last, span, &last)) {
      return Fail(kInvalid,
                  "%s: shape[%d] = %" PRId64 " with stride %" PRId64 " overflows 64-bit offsets",
                  name, i, n, s);
    }
    v.shape[lead + i] = n;
    v.stride[lead + i] = n == 1 ? 0 : s;
  }
  int64_t count = 1;
  for (int i = 0; i < 4; ++i) {
    if (__builtin_mul_overflow(count, v.shape[i], &count)) {
      return Fail(kInvalid,
                  "%s: the element count of shape [%" PRId64 ", %" PRId64 ", %" PRId64 ", %" PRId64
                  "] (as rank 4) overflows 64 bits",
                  name, v.shape[0], v.shape[1], v.shape[2], v.shape[3]);
    }
  }
  // A block format's rows are whole blocks: the last dimension a multiple
  // of kBlockElems with stride 1, every other stride a whole number of blocks.
  const bool blocks = IsBlockDtype(v.dtype);
  if (blocks) {
    char buf[96];
    if (v.shape[3] % kBlockElems != 0) {
      return Fail(kInvalid,
                  "%s is %" PRId64
                  "; dtype %s stores blocks of %d elements along it, so it "
                  "must be a multiple of %d",
                  out->Dim(3, buf, sizeof(buf)), v.shape[3], DtypeName(t->dtype),
                  static_cast<int>(kBlockElems), static_cast<int>(kBlockElems));
    }
    if (v.stride[3] != 1) {
      return Fail(kInvalid, "%s has stride %" PRId64 "; dtype %s needs stride 1 there (its blocks)",
                  out->Dim(3, buf, sizeof(buf)), v.stride[3], DtypeName(t->dtype));
    }
    for (int i = 0; i < 3; ++i) {
      if (v.stride[i] % kBlockElems != 0) {
        return Fail(kInvalid,
                    "%s has stride %" PRId64
                    ", which splits a block of dtype %s: strides "
                    "count elements and must be multiples of %d",
                    out->Dim(i, buf, sizeof(buf)), v.stride[i], DtypeName(t->dtype),
                    static_cast<int>(kBlockElems));
      }
    }
  }
  // I4's rows start on a byte: the last dimension with stride 1, every
  // other stride even (in elements).
  const bool nibbles = v.dtype == Dtype::kI4;
  if (nibbles) {
    char buf[96];
    if (v.shape[3] > 1 && v.stride[3] != 1) {
      return Fail(kInvalid,
                  "%s has stride %" PRId64 "; dtype I4 needs stride 1 there (two per byte)",
                  out->Dim(3, buf, sizeof(buf)), v.stride[3]);
    }
    for (int i = 0; i < 3; ++i) {
      if (v.stride[i] % 2 != 0) {
        return Fail(kInvalid,
                    "%s has stride %" PRId64
                    ", which splits a byte of dtype I4 (two per byte): strides count "
                    "elements and must be even",
                    out->Dim(i, buf, sizeof(buf)), v.stride[i]);
      }
    }
  }
  const size_t size = blocks ? BlockBytes(v.dtype) : DtypeSize(v.dtype);
  const uint64_t units = blocks    ? (static_cast<uint64_t>(last) + 1) / kBlockElems
                         : nibbles ? static_cast<uint64_t>(last) / 2 + 1
                                   : static_cast<uint64_t>(last) + 1;
  uint64_t bytes;
  if (__builtin_mul_overflow(units, size, &bytes)) {
    return Fail(kInvalid,
                "%s: the memory span of %" PRId64
                " + 1 elements of %zu bytes "
                "overflows 64 bits",
                name, last, size);
  }
  if (t->data == nullptr) return Fail(kInvalid, "%s: data is NULL", name);
  const uintptr_t first = reinterpret_cast<uintptr_t>(t->data);
  if (!blocks && first % size != 0) {
    return Fail(kInvalid, "%s: data %p is not aligned to its %zu-byte elements", name, t->data,
                size);
  }
  if (bytes > UINTPTR_MAX - first) {
    return Fail(kInvalid,
                "%s: data %p plus the tensor's span of %" PRIu64
                " bytes wraps around "
                "the address space",
                name, t->data, bytes);
  }
  v.data = t->data;
  out->first_byte = first;
  out->end_byte = first + bytes;
  return HWYATTN_OK;
}

// Outputs must not write one element twice: ordering the dimensions of size
// > 1 by stride, each stride must step over everything the smaller ones span.
hwyattn_status CheckNoSelfOverlap(const Checked& c) {
  // Common case first: in row-major order (innermost dimension last) each
  // stride steps over everything the inner dimensions span; then the order
  // by stride below is this one and the check passes.
  int64_t inner_span = 0;
  int d = 3;
  for (; d >= 0; --d) {
    if (c.view.shape[d] == 1) continue;
    if (c.view.stride[d] <= inner_span) break;
    inner_span += (c.view.shape[d] - 1) * c.view.stride[d];
  }
  if (d < 0) return HWYATTN_OK;
  int dims[4];
  int n = 0;
  for (int i = 0; i < 4; ++i) {
    if (c.view.shape[i] > 1) dims[n++] = i;
  }
  for (int a = 1; a < n; ++a) {  // insertion sort by stride: n <= 4
    for (int b = a; b > 0 && c.view.stride[dims[b]] < c.view.stride[dims[b - 1]]; --b) {
      std::swap(dims[b], dims[b - 1]);
    }
  }
  int64_t span = 0;  // largest offset reachable with the dims so far
  for (int k = 0; k < n; ++k) {
    const int i = dims[k];
    if (c.view.stride[i] <= span) {
      char buf[96];
      return Fail(kInvalid, "%s has stride %" PRId64 ", so two output elements overlap",
                  c.Dim(i, buf, sizeof(buf)), c.view.stride[i]);
    }
    span += (c.view.shape[i] - 1) * c.view.stride[i];
  }
  return HWYATTN_OK;
}

hwyattn_status CheckDisjoint(const Checked& out, const Checked& other) {
  if (out.first_byte < other.end_byte && other.first_byte < out.end_byte) {
    return Fail(kInvalid, "%s overlaps %s in memory; outputs must not alias other arguments",
                out.name, other.name);
  }
  return HWYATTN_OK;
}

__attribute__((noinline, cold)) hwyattn_status DimMismatch(const Checked& c, int i, int64_t want,
                                                           bool broadcast, const char* what) {
  char buf[96];
  return Fail(kInvalid, "%s is %" PRId64 " but %s %" PRId64 "%s", c.Dim(i, buf, sizeof(buf)),
              c.view.shape[i], what, want, broadcast ? " (or 1 to broadcast)" : "");
}

// Dimension i of c must be `want` (or 1 when broadcast is allowed). Inline:
// every call checks about ten of them.
inline hwyattn_status CheckDim(const Checked& c, int i, int64_t want, bool broadcast,
                               const char* what) {
  const int64_t got = c.view.shape[i];
  if (got == want || (broadcast && got == 1)) return HWYATTN_OK;
  return DimMismatch(c, i, want, broadcast, what);
}

// Reads an extensible struct (options, config, parallel) into *local, a
// whole struct of this header's layout. struct_size must be a size that a
// released header produced (`sizes`, oldest first, the last this header's):
// a smaller one comes from an older header, and the fields it lacks read as
// zero (off / the default). A larger size comes from a newer header: fine if
// this library would ignore nothing, i.e. the fields it does not know are
// zero. Reads only the caller's struct_size bytes.
template <typename T, size_t N>
hwyattn_status ReadStruct(const char* arg, const char* type, const char* init, const T* s,
                          const size_t (&sizes)[N], T* local) {
  constexpr size_t kMaxPlausible = 4096;
  uint32_t struct_size;
  memcpy(&struct_size, s, sizeof(struct_size));
  const size_t size = struct_size, known = sizeof(T);
  bool released = size > known;
  for (size_t i = 0; i < N; ++i) released = released || size == sizes[i];
  if (size < sizes[0]) {
    return Fail(kInvalid, "%s: struct_size is %zu but %s has at least %zu bytes (call %s)", arg,
                size, type, sizes[0], init);
  }
  if (size > kMaxPlausible || !released) {
    return Fail(kInvalid, "%s: struct_size is %zu, which is not the size of any %s (call %s)", arg,
                size, type, init);
  }
  const unsigned char* bytes = reinterpret_cast<const unsigned char*>(s);
  for (size_t i = known; i < size; ++i) {
    if (bytes[i] != 0) {
      return Fail(HWYATTN_UNSUPPORTED,
                  "%s: struct_size is %zu and byte %zu is set: a %s "
                  "from a newer hwyattn.h with fields that this library (%zu bytes) does not "
                  "know",
                  arg, size, i, type, known);
    }
  }
  memset(static_cast<void*>(local), 0, sizeof(T));
  memcpy(static_cast<void*>(local), s, std::min(size, known));
  return HWYATTN_OK;
}

// `what` points to `count` elements of `size` bytes; it must be aligned to them.
hwyattn_status CheckAligned(const char* what, const void* p, size_t size) {
  if (reinterpret_cast<uintptr_t>(p) % size != 0) {
    return Fail(kInvalid, "%s: pointer %p is not aligned to its %zu-byte elements", what, p, size);
  }
  return HWYATTN_OK;
}

#define HWYATTN_RETURN_IF_ERROR(expr)          \
  do {                                         \
    const hwyattn_status status_ = (expr);     \
    if (status_ != HWYATTN_OK) return status_; \
  } while (0)

}  // namespace

hwyattn_status ValidateShape(const char* name, int32_t rank, const int64_t* shape, int64_t* count) {
  if (shape == nullptr) return Fail(kInvalid, "%s: shape is NULL", name);
  if (rank < 1 || rank > 4)
    return Fail(kInvalid, "%s: rank is %" PRId32 "; must be 1..4", name, rank);
  int64_t n = 1;
  for (int i = 0; i < rank; ++i) {
    if (shape[i] < 1) {
      return Fail(kInvalid, "%s: shape[%d] is %" PRId64 "; sizes must be >= 1", name, i, shape[i]);
    }
    if (__builtin_mul_overflow(n, shape[i], &n)) {
      return Fail(kInvalid, "%s: the element count overflows 64 bits at shape[%d] = %" PRId64, name,
                  i, shape[i]);
    }
  }
  *count = n;
  return HWYATTN_OK;
}

namespace {

// The per-head array `name` of opts: Hq floats, aligned, each accepted by
// `ok` (else `why` names the rule).
template <typename Ok>
hwyattn_status CheckHeadValues(const char* name, const float* values, int64_t Hq, const Ok& ok,
                               const char* why) {
  char what[32];
  snprintf(what, sizeof(what), "opts: %s", name);
  HWYATTN_RETURN_IF_ERROR(CheckAligned(what, values, sizeof(float)));
  for (int64_t h = 0; h < Hq; ++h) {
    if (!ok(values[h])) {
      return Fail(kInvalid, "opts: %s[%" PRId64 "] is %g; %s", name, h,
                  static_cast<double>(values[h]), why);
    }
  }
  return HWYATTN_OK;
}

// The 0.2 fields of opts: score modifiers, the caller's pool (copied into
// *executor once valid), precision (into *precision).
hwyattn_status CheckModifiers(const hwyattn_sdpa_options* opts, int64_t Hq, Executor* executor,
                              Precision* precision_out) {
  if (opts->window_left < 0) {
    return Fail(kInvalid, "opts: window_left is %" PRId64 "; must be >= 0 (0 = unbounded)",
                opts->window_left);
  }
  if (opts->window_right < 0) {
    return Fail(kInvalid, "opts: window_right is %" PRId64 "; must be >= 0 (0 = unbounded)",
                opts->window_right);
  }
  if (!(opts->softcap >= 0.0f) || isinf(opts->softcap)) {
    return Fail(kInvalid, "opts: softcap is %g; must be finite and >= 0 (0 = off)",
                static_cast<double>(opts->softcap));
  }
  if (opts->alibi_slopes != nullptr) {
    HWYATTN_RETURN_IF_ERROR(CheckHeadValues(
        "alibi_slopes", opts->alibi_slopes, Hq, [](float x) { return isfinite(x) != 0; },
        "slopes must be finite"));
  }
  if (opts->sinks != nullptr) {
    HWYATTN_RETURN_IF_ERROR(CheckHeadValues(
        "sinks", opts->sinks, Hq, [](float x) { return !isnan(x) && x != INFINITY; },
        "sinks must be finite or -INFINITY (off); NaN would make the head's rows NaN"));
  }
  if (opts->parallel != nullptr) {
    hwyattn_parallel pool;
    HWYATTN_RETURN_IF_ERROR(ReadStruct("opts: parallel", "hwyattn_parallel",
                                       "hwyattn_parallel_init", opts->parallel, kParallelSizes,
                                       &pool));
    if (pool.num_workers < 1) {
      return Fail(kInvalid, "opts: parallel: num_workers is %" PRId32 "; must be >= 1",
                  pool.num_workers);
    }
    if (pool.parallel_for == nullptr) {
      return Fail(kInvalid, "opts: parallel: parallel_for is NULL");
    }
    static_assert(std::is_same_v<decltype(pool.parallel_for), ParallelForFn>,
                  "Executor's pool mirrors hwyattn_parallel");
    executor->pool = pool.pool;
    executor->parallel_for = pool.parallel_for;
    executor->pool_workers = pool.num_workers;
  }
  const int64_t precision = RawEnum(opts->precision);
  if (precision < HWYATTN_PRECISION_F32 || precision > HWYATTN_PRECISION_INT8) {
    return Fail(kInvalid,
                "opts: precision is %" PRId64
                "; must be HWYATTN_PRECISION_F32, HWYATTN_PRECISION_BF16 or "
                "HWYATTN_PRECISION_INT8",
                precision);
  }
  *precision_out = static_cast<Precision>(precision);
  return HWYATTN_OK;
}

// A reserved field (the explicit padding of a public struct, room for a later
// field): 0, or HWYATTN_UNSUPPORTED naming it (`name`: "opts: reserved0").
hwyattn_status CheckReserved(const char* name, int32_t value) {
  if (value == 0) return HWYATTN_OK;
  return Fail(HWYATTN_UNSUPPORTED,
              "%s is %" PRId32
              "; must be 0 (a field of a newer hwyattn.h that this library does not know)",
              name, value);
}

// The fields of opts every entry point reads the same way: a finite scale,
// a known causal rule, reserved0 = 0.
// opts->scale, or the default 0 resolved to 1/sqrt(head_dim): the one home
// of that default (hwyattn_sdpa's and the KV entry points').
float ResolvedScale(float scale, int64_t head_dim) {
  return scale != 0.0f ? scale : static_cast<float>(1.0 / sqrt(static_cast<double>(head_dim)));
}

hwyattn_status CheckCommonOptions(const hwyattn_sdpa_options* opts) {
  if (!isfinite(opts->scale)) {
    return Fail(kInvalid, "opts: scale is %g; must be finite (0 = 1/sqrt(head_dim))",
                static_cast<double>(opts->scale));
  }
  const int64_t causal = RawEnum(opts->causal);
  if (causal < HWYATTN_CAUSAL_NONE || causal > HWYATTN_CAUSAL_BOTTOM_RIGHT) {
    return Fail(kInvalid,
                "opts: causal is %" PRId64
                "; must be HWYATTN_CAUSAL_NONE, _TOP_LEFT or "
                "_BOTTOM_RIGHT",
                causal);
  }
  HWYATTN_RETURN_IF_ERROR(CheckReserved("opts: reserved0", opts->reserved0));
  return HWYATTN_OK;
}

// Checks opts (already known to be a plausible struct) against the problem's
// sizes, fills the option fields of *p, and checks that no output (outputs
// come first in `outputs`, which ends at a null) aliases an input or another
// output.
hwyattn_status CheckOptions(const hwyattn_sdpa_options* opts, const Checked* const* inputs,
                            size_t num_inputs, const Checked* const* outputs, size_t num_outputs,
                            SdpaProblem* p) {
  const int64_t B = p->batch, Hq = p->q_heads, Lq = p->q_len, Lk = p->kv_len;
  HWYATTN_RETURN_IF_ERROR(CheckCommonOptions(opts));
  HWYATTN_RETURN_IF_ERROR(CheckModifiers(opts, Hq, &p->executor, &p->precision));
  const Checked* all_inputs[8];
  const Checked* all_outputs[8];
  size_t n_in = 0, n_out = 0;
  for (size_t i = 0; i < num_inputs; ++i) all_inputs[n_in++] = inputs[i];
  for (size_t i = 0; i < num_outputs; ++i) all_outputs[n_out++] = outputs[i];

  Checked cmask, cw, clse, lengths;
  if (opts->mask != nullptr) {
    HWYATTN_RETURN_IF_ERROR(Check("mask", kMaskNames, opts->mask,
                                  Bit(HWYATTN_BOOL) | Bit(HWYATTN_F32) | Bit(HWYATTN_F16),
                                  kFloatTypes, &cmask));
    const int64_t target[4] = {B, Hq, Lq, Lk};
    for (int i = 0; i < 4; ++i) {
      if (cmask.view.shape[i] != 1 && cmask.view.shape[i] != target[i]) {
        char buf[96];
        return Fail(kInvalid,
                    "%s is %" PRId64 "; must be 1 or %" PRId64
                    " to broadcast to "
                    "[B, Hq, Lq, Lk] = [%" PRId64 ", %" PRId64 ", %" PRId64 ", %" PRId64 "]",
                    cmask.Dim(i, buf, sizeof(buf)), cmask.view.shape[i], target[i], B, Hq, Lq, Lk);
      }
    }
    all_inputs[n_in++] = &cmask;
  }
  if (opts->kv_len != nullptr) {
    HWYATTN_RETURN_IF_ERROR(CheckAligned("opts: kv_len", opts->kv_len, sizeof(int32_t)));
    for (int64_t b = 0; b < B; ++b) {
      const int32_t n = opts->kv_len[b];
      if (n < 0 || n > Lk) {
        return Fail(kInvalid,
                    "opts: kv_len[%" PRId64 "] is %" PRId32 "; must be in [0, %" PRId64 "] (Lk)", b,
                    n, Lk);
      }
    }
    lengths.name = "opts->kv_len";
    lengths.first_byte = reinterpret_cast<uintptr_t>(opts->kv_len);
    lengths.end_byte = lengths.first_byte + static_cast<uint64_t>(B) * sizeof(int32_t);
    all_inputs[n_in++] = &lengths;
  }
  if (opts->weights != nullptr) {
    HWYATTN_RETURN_IF_ERROR(
        Check("weights", kMaskNames, opts->weights, Bit(HWYATTN_F32), kFloatTypes, &cw));
    const int64_t want[4] = {B, Hq, Lq, Lk};
    const char* what[4] = {"the batch is", "the number of query heads is", "the query length is",
                           "the key length is"};
    for (int i = 0; i < 4; ++i) HWYATTN_RETURN_IF_ERROR(CheckDim(cw, i, want[i], false, what[i]));
    HWYATTN_RETURN_IF_ERROR(CheckNoSelfOverlap(cw));
    all_outputs[n_out++] = &cw;
  }
  if (opts->lse != nullptr) {
    HWYATTN_RETURN_IF_ERROR(
        Check("lse", kLseNames, opts->lse, Bit(HWYATTN_F32), kFloatTypes, &clse));
    const int64_t want[4] = {1, B, Hq, Lq};
    const char* what[4] = {"[B, Hq, Lq] needs", "the batch is", "the number of query heads is",
                           "the query length is"};
    for (int i = 0; i < 4; ++i) {
      HWYATTN_RETURN_IF_ERROR(CheckDim(clse, i, want[i], false, what[i]));
    }
    HWYATTN_RETURN_IF_ERROR(CheckNoSelfOverlap(clse));
    all_outputs[n_out++] = &clse;
  }
  for (size_t o = 0; o < n_out; ++o) {
    for (size_t i = 0; i < n_in; ++i) {
      HWYATTN_RETURN_IF_ERROR(CheckDisjoint(*all_outputs[o], *all_inputs[i]));
    }
    for (size_t o2 = o + 1; o2 < n_out; ++o2) {
      HWYATTN_RETURN_IF_ERROR(CheckDisjoint(*all_outputs[o], *all_outputs[o2]));
    }
  }

  p->scale = ResolvedScale(opts->scale, p->head_dim);
  p->causal = static_cast<Causal>(opts->causal);
  p->has_mask = opts->mask != nullptr;
  if (p->has_mask) p->mask = cmask.view;
  p->key_lengths = opts->kv_len;
  p->has_weights = opts->weights != nullptr;
  if (p->has_weights) p->weights = cw.view;
  p->has_lse = opts->lse != nullptr;
  if (p->has_lse) p->lse = clse.view;
  p->window_left = opts->window_left;
  p->window_right = opts->window_right;
  p->softcap = opts->softcap;
  p->alibi_slopes = opts->alibi_slopes;
  p->sinks = opts->sinks;
  return HWYATTN_OK;
}

// opts read into *local (the defaults when it is NULL), then *resolved =
// local: later checks see a whole struct of this header's layout.
hwyattn_status ResolveOptions(const hwyattn_sdpa_options* opts, hwyattn_sdpa_options* local,
                              const hwyattn_sdpa_options** resolved) {
  *resolved = local;
  if (opts == nullptr) {
    memset(static_cast<void*>(local), 0, sizeof(*local));
    local->struct_size = sizeof(*local);
    return HWYATTN_OK;
  }
  return ReadStruct("opts", "hwyattn_sdpa_options", "hwyattn_sdpa_options_init", opts,
                    kSdpaOptionsSizes, local);
}

// A [B, L, width] activation as matmul rows: the view is [1, B, L, width].
RowsView ActivationRows(const Checked& c) {
  RowsView r;
  r.data = c.view.AsMutable<float>();
  r.rows = c.view.shape[1] * c.view.shape[2];
  r.cols = c.view.shape[3];
  r.rows_per_group = c.view.shape[2];
  r.group_stride = c.view.stride[1];
  r.row_stride = c.view.stride[2];
  r.col_stride = c.view.stride[3];
  return r;
}

const char* const kActNames[4] = {"leading", "batch", "length", "width"};

}  // namespace

hwyattn_status ReadSdpaOptions(const hwyattn_sdpa_options* src, hwyattn_sdpa_options* dst) {
  if (dst == nullptr) return Fail(kInvalid, "dst is NULL");
  if (src == nullptr) return Fail(kInvalid, "src is NULL");
  hwyattn_sdpa_options local;
  HWYATTN_RETURN_IF_ERROR(ReadStruct("src", "hwyattn_sdpa_options", "hwyattn_sdpa_options_init",
                                     src, kSdpaOptionsSizes, &local));
  local.struct_size = sizeof(local);
  memcpy(static_cast<void*>(dst), &local, sizeof(local));
  return HWYATTN_OK;
}

hwyattn_status ValidateSdpa(const hwyattn_tensor* q, const hwyattn_tensor* k,
                            const hwyattn_tensor* v, const hwyattn_tensor* out,
                            const hwyattn_sdpa_options* opts, SdpaProblem* p) {
  hwyattn_sdpa_options defaults;
  HWYATTN_RETURN_IF_ERROR(ResolveOptions(opts, &defaults, &opts));

  Checked cq, ck, cv, co;
  HWYATTN_RETURN_IF_ERROR(Check("q", kQNames, q, kFloatTypes, kFloatTypes, &cq));
  HWYATTN_RETURN_IF_ERROR(Check("k", kQNames, k, kKvTypes, kKvTypes, &ck));
  HWYATTN_RETURN_IF_ERROR(Check("v", kVNames, v, kKvTypes, kKvTypes, &cv));
  HWYATTN_RETURN_IF_ERROR(Check("out", kVNames, out, kFloatTypes, kFloatTypes, &co));

  const int64_t B = cq.view.shape[0], Hq = cq.view.shape[1], Lq = cq.view.shape[2];
  const int64_t D = cq.view.shape[3];
  const int64_t Hkv = ck.view.shape[1], Lk = ck.view.shape[2], Dv = cv.view.shape[3];
  HWYATTN_RETURN_IF_ERROR(CheckDim(ck, 0, B, true, "q's batch is"));
  if (Hq % Hkv != 0) {
    char buf[96];
    return Fail(kInvalid,
                "%s is %" PRId64 ", which does not divide q's %" PRId64
                " heads (GQA needs Hq to be a multiple of Hkv)",
                ck.Dim(1, buf, sizeof(buf)), Hkv, Hq);
  }
  HWYATTN_RETURN_IF_ERROR(CheckDim(ck, 3, D, false, "q's head_dim is"));
  HWYATTN_RETURN_IF_ERROR(CheckDim(cv, 0, B, true, "q's batch is"));
  HWYATTN_RETURN_IF_ERROR(CheckDim(cv, 1, Hkv, false, "k's heads is"));
  HWYATTN_RETURN_IF_ERROR(CheckDim(cv, 2, Lk, false, "k's length is"));
  HWYATTN_RETURN_IF_ERROR(CheckDim(co, 0, B, false, "q's batch is"));
  HWYATTN_RETURN_IF_ERROR(CheckDim(co, 1, Hq, false, "q's heads is"));
  HWYATTN_RETURN_IF_ERROR(CheckDim(co, 2, Lq, false, "q's length is"));
  HWYATTN_RETURN_IF_ERROR(CheckDim(co, 3, Dv, false, "v's value_dim is"));
  if (Lq > INT32_MAX || Lk > INT32_MAX) {
    return Fail(HWYATTN_UNSUPPORTED,
                "%s: length is %" PRId64
                "; sequences up to 2^31-1 are "
                "supported",
                Lq > INT32_MAX ? "q" : "k", std::max(Lq, Lk));
  }
  HWYATTN_RETURN_IF_ERROR(CheckNoSelfOverlap(co));

  p->q = cq.view;
  p->k = ck.view;
  p->v = cv.view;
  p->out = co.view;
  p->batch = B;
  p->q_heads = Hq;
  p->kv_heads = Hkv;
  p->q_len = Lq;
  p->kv_len = Lk;
  p->head_dim = D;
  p->value_dim = Dv;
  const Checked* inputs[3] = {&cq, &ck, &cv};
  const Checked* outputs[1] = {&co};
  return CheckOptions(opts, inputs, 3, outputs, 1, p);
}

hwyattn_status ValidateMhaConfig(const hwyattn_mha_config* cfg, const hwyattn_mha_weights* w,
                                 MhaConfig* config) {
  if (cfg == nullptr) return Fail(kInvalid, "cfg is NULL");
  hwyattn_mha_config local;
  HWYATTN_RETURN_IF_ERROR(ReadStruct("cfg", "hwyattn_mha_config", "hwyattn_mha_config_init", cfg,
                                     kMhaConfigSizes, &local));
  cfg = &local;
  HWYATTN_RETURN_IF_ERROR(CheckReserved("cfg: reserved0", cfg->reserved0));
  HWYATTN_RETURN_IF_ERROR(CheckReserved("cfg: reserved1", cfg->reserved1));
  const int64_t weight_dtype = RawEnum(cfg->weight_dtype);
  if (weight_dtype != HWYATTN_F32 && weight_dtype != HWYATTN_BF16) {
    return Fail(kInvalid,
                "cfg: weight_dtype is %" PRId64 "; must be HWYATTN_F32 (0) or HWYATTN_BF16 (%d)",
                weight_dtype, static_cast<int>(HWYATTN_BF16));
  }
  if (w == nullptr) return Fail(kInvalid, "w is NULL");
  const int64_t E = cfg->embed_dim, H = cfg->num_heads;
  if (E < 1) return Fail(kInvalid, "cfg: embed_dim is %" PRId64 "; must be >= 1", E);
  if (H < 1) return Fail(kInvalid, "cfg: num_heads is %" PRId64 "; must be >= 1", H);
  int64_t hd = cfg->head_dim;
  if (hd < 0)
    return Fail(kInvalid, "cfg: head_dim is %" PRId64 "; must be >= 0 (0 = embed_dim / num_heads)",
                hd);
  if (hd == 0) {
    if (E % H != 0) {
      return Fail(kInvalid,
                  "cfg: embed_dim %" PRId64 " is not divisible by num_heads %" PRId64
                  "; set head_dim",
                  E, H);
    }
    hd = E / H;
  }
  int64_t hkv = cfg->num_kv_heads;
  if (hkv < 0)
    return Fail(kInvalid, "cfg: num_kv_heads is %" PRId64 "; must be >= 0 (0 = num_heads)", hkv);
  if (hkv == 0) hkv = H;
  if (H % hkv != 0) {
    return Fail(kInvalid, "cfg: num_kv_heads %" PRId64 " does not divide num_heads %" PRId64, hkv,
                H);
  }
  if (cfg->kdim < 0)
    return Fail(kInvalid, "cfg: kdim is %" PRId64 "; must be >= 0 (0 = embed_dim)", cfg->kdim);
  if (cfg->vdim < 0)
    return Fail(kInvalid, "cfg: vdim is %" PRId64 "; must be >= 0 (0 = embed_dim)", cfg->vdim);
  const int64_t kdim = cfg->kdim == 0 ? E : cfg->kdim, vdim = cfg->vdim == 0 ? E : cfg->vdim;
  // Every weight matrix must be addressable: sizes well inside 64 bits.
  int64_t inner, total;
  if (__builtin_mul_overflow(H, hd, &inner)) {
    return Fail(kInvalid, "cfg: num_heads * head_dim = %" PRId64 " * %" PRId64 " overflows 64 bits",
                H, hd);
  }
  const int64_t widths[4] = {E, kdim, vdim, inner};
  for (int64_t width : widths) {
    if (__builtin_mul_overflow(inner, width, &total) || total > (INT64_MAX >> 3)) {
      return Fail(kInvalid, "cfg: a projection of %" PRId64 " x %" PRId64 " floats is too large",
                  inner, width);
    }
  }
  const char* names[4] = {"w_q", "w_k", "w_v", "w_o"};
  const float* mats[4] = {w->w_q, w->w_k, w->w_v, w->w_o};
  char what[16];
  for (int i = 0; i < 4; ++i) {
    if (mats[i] == nullptr) return Fail(kInvalid, "w: %s is NULL", names[i]);
    snprintf(what, sizeof(what), "w: %s", names[i]);
    HWYATTN_RETURN_IF_ERROR(CheckAligned(what, mats[i], sizeof(float)));
  }
  const char* bias_names[4] = {"b_q", "b_k", "b_v", "b_o"};
  const float* biases[4] = {w->b_q, w->b_k, w->b_v, w->b_o};
  for (int i = 0; i < 4; ++i) {
    if (cfg->has_bias && biases[i] == nullptr) {
      return Fail(kInvalid, "w: %s is NULL but cfg->has_bias is set", bias_names[i]);
    }
    if (!cfg->has_bias && biases[i] != nullptr) {
      return Fail(kInvalid, "w: %s is given but cfg->has_bias is 0 (it would be ignored)",
                  bias_names[i]);
    }
    if (biases[i] != nullptr) {
      snprintf(what, sizeof(what), "w: %s", bias_names[i]);
      HWYATTN_RETURN_IF_ERROR(CheckAligned(what, biases[i], sizeof(float)));
    }
  }
  config->embed_dim = E;
  config->num_heads = H;
  config->head_dim = hd;
  config->num_kv_heads = hkv;
  config->kdim = kdim;
  config->vdim = vdim;
  config->has_bias = cfg->has_bias != 0;
  config->bf16_weights = weight_dtype == HWYATTN_BF16;
  return HWYATTN_OK;
}

hwyattn_status ValidateMhaForward(const MhaConfig& cfg, const hwyattn_tensor* query,
                                  const hwyattn_tensor* key, const hwyattn_tensor* value,
                                  const hwyattn_tensor* out, const hwyattn_sdpa_options* opts,
                                  MhaCall* call) {
  hwyattn_sdpa_options defaults;
  HWYATTN_RETURN_IF_ERROR(ResolveOptions(opts, &defaults, &opts));
  if ((key == nullptr) != (value == nullptr)) {
    return Fail(kInvalid,
                "%s is NULL but %s is not: pass both (cross-attention) or neither "
                "(self-attention)",
                key == nullptr ? "key" : "value", key == nullptr ? "value" : "key");
  }
  const unsigned f32 = Bit(HWYATTN_F32);
  Checked cq, ck, cv, co;
  HWYATTN_RETURN_IF_ERROR(Check("query", kActNames, query, f32, kFloatTypes, &cq));
  HWYATTN_RETURN_IF_ERROR(CheckDim(cq, 0, 1, false, "[B, L, embed_dim] needs"));
  HWYATTN_RETURN_IF_ERROR(CheckDim(cq, 3, cfg.embed_dim, false, "embed_dim is"));
  const int64_t B = cq.view.shape[1], Lq = cq.view.shape[2];
  int64_t Lk = Lq;
  const bool self = key == nullptr;
  if (self && (cfg.kdim != cfg.embed_dim || cfg.vdim != cfg.embed_dim)) {
    return Fail(kInvalid,
                "key and value are NULL (self-attention) but the layer's kdim %" PRId64
                " / vdim %" PRId64 " differ from embed_dim %" PRId64 ": pass key and value",
                cfg.kdim, cfg.vdim, cfg.embed_dim);
  }
  if (!self) {
    HWYATTN_RETURN_IF_ERROR(Check("key", kActNames, key, f32, kFloatTypes, &ck));
    HWYATTN_RETURN_IF_ERROR(Check("value", kActNames, value, f32, kFloatTypes, &cv));
    HWYATTN_RETURN_IF_ERROR(CheckDim(ck, 0, 1, false, "[B, L, kdim] needs"));
    HWYATTN_RETURN_IF_ERROR(CheckDim(ck, 1, B, false, "query's batch is"));
    HWYATTN_RETURN_IF_ERROR(CheckDim(ck, 3, cfg.kdim, false, "kdim is"));
    Lk = ck.view.shape[2];
    HWYATTN_RETURN_IF_ERROR(CheckDim(cv, 0, 1, false, "[B, L, vdim] needs"));
    HWYATTN_RETURN_IF_ERROR(CheckDim(cv, 1, B, false, "query's batch is"));
    HWYATTN_RETURN_IF_ERROR(CheckDim(cv, 2, Lk, false, "key's length is"));
    HWYATTN_RETURN_IF_ERROR(CheckDim(cv, 3, cfg.vdim, false, "vdim is"));
  }
  HWYATTN_RETURN_IF_ERROR(Check("out", kActNames, out, kFloatTypes, kFloatTypes, &co));
  HWYATTN_RETURN_IF_ERROR(CheckDim(co, 0, 1, false, "[B, L, embed_dim] needs"));
  HWYATTN_RETURN_IF_ERROR(CheckDim(co, 1, B, false, "query's batch is"));
  HWYATTN_RETURN_IF_ERROR(CheckDim(co, 2, Lq, false, "query's length is"));
  HWYATTN_RETURN_IF_ERROR(CheckDim(co, 3, cfg.embed_dim, false, "embed_dim is"));
  HWYATTN_RETURN_IF_ERROR(CheckNoSelfOverlap(co));
  if (Lq > INT32_MAX || Lk > INT32_MAX) {
    return Fail(HWYATTN_UNSUPPORTED,
                "%s: length is %" PRId64
                "; sequences up to 2^31-1 are "
                "supported",
                Lq > INT32_MAX ? "query" : "key", std::max(Lq, Lk));
  }

  SdpaProblem& p = call->attention;
  p.batch = B;
  p.q_heads = cfg.num_heads;
  p.kv_heads = cfg.num_kv_heads;
  p.q_len = Lq;
  p.kv_len = Lk;
  p.head_dim = cfg.head_dim;
  p.value_dim = cfg.head_dim;
  const Checked* inputs[3] = {&cq, &ck, &cv};
  const Checked* outputs[1] = {&co};
  HWYATTN_RETURN_IF_ERROR(CheckOptions(opts, inputs, self ? 1 : 3, outputs, 1, &p));
  call->self_attention = self;
  call->query = ActivationRows(cq);
  if (!self) {
    call->key = ActivationRows(ck);
    call->value = ActivationRows(cv);
  }
  call->out_tensor = co.view;
  if (co.view.dtype == Dtype::kF32) call->out = ActivationRows(co);
  return HWYATTN_OK;
}

// ---------------------------------------------------------------------------
// hwyattn_merge_states
// ---------------------------------------------------------------------------

namespace {

// Memory that is not a tensor (the sinks, the descriptor arrays and structs)
// as a Checked, for CheckDisjoint: `bytes` from p, saturated at the top of
// the address space.
Checked MemoryOf(const char* name, const void* p, uint64_t bytes) {
  Checked c;
  c.name = name;
  c.first_byte = reinterpret_cast<uintptr_t>(p);
  c.end_byte = bytes > UINTPTR_MAX - c.first_byte ? UINTPTR_MAX : c.first_byte + bytes;
  return c;
}

// Both describe exactly the same elements: the same data and, on the rank-4
// views (size-1 dimensions have stride 0 there), the same shape and strides.
bool SameElements(const Checked& a, const Checked& b) {
  if (a.view.data != b.view.data) return false;
  for (int i = 0; i < 4; ++i) {
    if (a.view.shape[i] != b.view.shape[i] || a.view.stride[i] != b.view.stride[i]) return false;
  }
  return true;
}

// An output against a partial input; `in_place` for index 0, which the
// output may be (the same elements), but not partly overlap.
hwyattn_status CheckMergeAlias(const Checked& output, const Checked& input, bool in_place) {
  if (in_place && SameElements(output, input)) return HWYATTN_OK;
  if (in_place && output.first_byte < input.end_byte && input.first_byte < output.end_byte) {
    return Fail(kInvalid,
                "%s overlaps %s in memory but does not describe the same elements "
                "(in place needs the same data pointer and strides)",
                output.name, input.name);
  }
  return CheckDisjoint(output, input);
}

// A partial's or lse_out's [B, H, L] (view [1, B, H, L]) against outs[0]'s.
hwyattn_status CheckMergeLse(const Checked& c, const Checked& out0) {
  HWYATTN_RETURN_IF_ERROR(CheckDim(c, 0, 1, false, "[B, H, L] needs"));
  for (int i = 1; i < 4; ++i) {
    HWYATTN_RETURN_IF_ERROR(CheckDim(c, i, out0.view.shape[i - 1], false, "outs[0] has"));
  }
  return HWYATTN_OK;
}

// Element i of a merge's array of partial descriptors as a rank-4 view
// (MergeProblem::view): shapes right-aligned, size-1 dimensions with stride
// 0, the rule of Check, which built and checked the same view.
TensorView MergeView(const void* array, int64_t i) {
  const hwyattn_tensor& t = *static_cast<const hwyattn_tensor* const*>(array)[i];
  TensorView v;
  v.data = t.data;
  v.dtype = static_cast<Dtype>(t.dtype);
  const int lead = 4 - t.rank;
  for (int d = 0; d < t.rank; ++d) {
    v.shape[lead + d] = t.shape[d];
    v.stride[lead + d] = t.shape[d] == 1 ? 0 : t.stride[d];
  }
  return v;
}

}  // namespace

hwyattn_status ValidateMerge(int32_t n, const hwyattn_tensor* const* outs,
                             const hwyattn_tensor* const* lses, const float* sinks,
                             const hwyattn_tensor* out, const hwyattn_tensor* lse_out,
                             MergeProblem* p) {
  if (n < 1) {
    return Fail(kInvalid, "n is %" PRId32 "; must be >= 1 (the number of partial states)", n);
  }
  if (outs == nullptr) return Fail(kInvalid, "outs is NULL");
  if (lses == nullptr) return Fail(kInvalid, "lses is NULL");
  const unsigned f32 = Bit(HWYATTN_F32);
  Checked out0, lse0, co, cl;
  HWYATTN_RETURN_IF_ERROR(Check("outs[0]", kVNames, outs[0], f32, kFloatTypes, &out0));
  HWYATTN_RETURN_IF_ERROR(Check("lses[0]", kLseNames, lses[0], f32, kFloatTypes, &lse0));
  HWYATTN_RETURN_IF_ERROR(CheckMergeLse(lse0, out0));
  const int64_t H = out0.view.shape[1];

  HWYATTN_RETURN_IF_ERROR(Check("out", kVNames, out, f32, kFloatTypes, &co));
  for (int i = 0; i < 4; ++i) {
    HWYATTN_RETURN_IF_ERROR(CheckDim(co, i, out0.view.shape[i], false, "outs[0] has"));
  }
  HWYATTN_RETURN_IF_ERROR(CheckNoSelfOverlap(co));
  if (lse_out != nullptr) {
    HWYATTN_RETURN_IF_ERROR(Check("lse_out", kLseNames, lse_out, f32, kFloatTypes, &cl));
    HWYATTN_RETURN_IF_ERROR(CheckMergeLse(cl, out0));
    HWYATTN_RETURN_IF_ERROR(CheckNoSelfOverlap(cl));
    HWYATTN_RETURN_IF_ERROR(CheckDisjoint(co, cl));
  }
  // The outputs (out, then lse_out if given) against every input below.
  const Checked* outputs[2] = {&co, &cl};
  const int num_outputs = lse_out != nullptr ? 2 : 1;
  auto disjoint_from_outputs = [&](const Checked& input) {
    for (int o = 0; o < num_outputs; ++o) {
      HWYATTN_RETURN_IF_ERROR(CheckDisjoint(*outputs[o], input));
    }
    return HWYATTN_OK;
  };

  if (sinks != nullptr) {
    HWYATTN_RETURN_IF_ERROR(CheckAligned("sinks", sinks, sizeof(float)));
    for (int64_t h = 0; h < H; ++h) {
      if (isnan(sinks[h]) || sinks[h] == INFINITY) {
        return Fail(kInvalid, "sinks[%" PRId64 "] is %g; must be finite or -INFINITY (off)", h,
                    static_cast<double>(sinks[h]));
      }
    }
    HWYATTN_RETURN_IF_ERROR(
        disjoint_from_outputs(MemoryOf("sinks", sinks, static_cast<uint64_t>(H) * sizeof(float))));
  }
  // The kernel reads the descriptors while it writes: they must not lie in
  // an output's memory either.
  const uint64_t array_bytes = static_cast<uint64_t>(n) * sizeof(const hwyattn_tensor*);
  HWYATTN_RETURN_IF_ERROR(disjoint_from_outputs(MemoryOf("outs (the array)", outs, array_bytes)));
  HWYATTN_RETURN_IF_ERROR(disjoint_from_outputs(MemoryOf("lses (the array)", lses, array_bytes)));
  for (int32_t i = 0; i < n; ++i) {
    char out_name[40], lse_name[40];
    snprintf(out_name, sizeof(out_name), "outs[%" PRId32 "]", i);
    snprintf(lse_name, sizeof(lse_name), "lses[%" PRId32 "]", i);
    Checked ci = out0, li = lse0;
    if (i > 0) {
      HWYATTN_RETURN_IF_ERROR(Check(out_name, kVNames, outs[i], f32, kFloatTypes, &ci));
      for (int d = 0; d < 4; ++d) {
        HWYATTN_RETURN_IF_ERROR(CheckDim(ci, d, out0.view.shape[d], false, "outs[0] has"));
      }
      HWYATTN_RETURN_IF_ERROR(Check(lse_name, kLseNames, lses[i], f32, kFloatTypes, &li));
      HWYATTN_RETURN_IF_ERROR(CheckMergeLse(li, out0));
    }
    HWYATTN_RETURN_IF_ERROR(CheckMergeAlias(co, ci, i == 0));
    HWYATTN_RETURN_IF_ERROR(CheckDisjoint(co, li));
    if (lse_out != nullptr) {
      HWYATTN_RETURN_IF_ERROR(CheckMergeAlias(cl, li, i == 0));
      HWYATTN_RETURN_IF_ERROR(CheckDisjoint(cl, ci));
    }
    char what[64];
    snprintf(what, sizeof(what), "%s (the descriptor)", out_name);
    HWYATTN_RETURN_IF_ERROR(disjoint_from_outputs(MemoryOf(what, outs[i], sizeof(hwyattn_tensor))));
    snprintf(what, sizeof(what), "%s (the descriptor)", lse_name);
    HWYATTN_RETURN_IF_ERROR(disjoint_from_outputs(MemoryOf(what, lses[i], sizeof(hwyattn_tensor))));
  }

  p->count = n;
  p->outs = outs;
  p->lses = lses;
  p->view = MergeView;
  p->sinks = sinks;
  p->out = co.view;
  p->has_lse = lse_out != nullptr;
  if (p->has_lse) p->lse = cl.view;
  p->batch = out0.view.shape[0];
  p->heads = H;
  p->length = out0.view.shape[2];
  p->value_dim = out0.view.shape[3];
  return HWYATTN_OK;
}

// ---------------------------------------------------------------------------
// hwyattn_kv_attention, hwyattn_kv_cache_write
// ---------------------------------------------------------------------------

namespace {

const char* const kCacheNames[4] = {"num_pages", "kv heads", "page_size", "head_dim"};
const char* const kCacheVNames[4] = {"num_pages", "kv heads", "page_size", "value_dim"};
const char* const kScaleNames[4] = {"num_pages", "kv heads", "page_size", "channels"};
const char* const kPackedNames[4] = {"leading", "tokens", "heads", "head_dim"};
const char* const kPackedVNames[4] = {"leading", "tokens", "heads", "value_dim"};
const char* const kPackedLseNames[4] = {"leading", "leading", "tokens", "heads"};

// An array of `count` elements of `size` bytes as a Checked (for overlap checks).
Checked ArrayMemory(const char* name, const void* p, uint64_t count, size_t size) {
  uint64_t bytes;
  if (__builtin_mul_overflow(count, static_cast<uint64_t>(size), &bytes)) bytes = UINT64_MAX;
  return MemoryOf(name, p, bytes);
}

// One scale tensor of a quantized cache: F32, per token [P, Hkv, S, 1], or
// per channel [1, Hkv, 1, channels], per kv head [1, Hkv, 1, 1] or per
// tensor [1, 1, 1, 1]; the last three are one layout (kPerChannel: its view
// broadcasts, size-1 dimensions having stride 0) whose values, fixed by the
// caller, must be finite and > 0.
hwyattn_status CheckScales(const char* name, const hwyattn_tensor* t, int64_t P, int64_t Hkv,
                           int64_t S, int64_t channels, Checked* c, KvScales* layout) {
  HWYATTN_RETURN_IF_ERROR(Check(name, kScaleNames, t, Bit(HWYATTN_F32), Bit(HWYATTN_F32), c));
  const int64_t* n = c->view.shape;
  if (n[0] == P && n[1] == Hkv && n[2] == S && n[3] == 1) {
    *layout = KvScales::kPerToken;
    return HWYATTN_OK;
  }
  if (!(n[0] == 1 && (n[1] == Hkv || n[1] == 1) && n[2] == 1 && (n[3] == channels || n[3] == 1))) {
    return Fail(kInvalid,
                "%s: shape [%" PRId64 ", %" PRId64 ", %" PRId64 ", %" PRId64
                "] (as rank 4) is none of per token [%" PRId64 ", %" PRId64 ", %" PRId64
                ", 1], per channel [1, %" PRId64 ", 1, %" PRId64 "], per kv head [1, %" PRId64
                ", 1, 1] and per tensor [1, 1, 1, 1]",
                name, n[0], n[1], n[2], n[3], P, Hkv, S, Hkv, channels, Hkv);
  }
  *layout = KvScales::kPerChannel;
  const TensorView& v = c->view;
  for (int64_t h = 0; h < n[1]; ++h) {
    for (int64_t d = 0; d < n[3]; ++d) {
      const float x = v.As<float>()[v.Offset(0, h, 0, d)];
      if (!(x > 0.0f) || isinf(x)) {
        return Fail(kInvalid,
                    "%s[0, %" PRId64 ", 0, %" PRId64
                    "] is %g; per-channel, per-head and per-tensor scales must be finite "
                    "and > 0",
                    name, h, d, static_cast<double>(x));
      }
    }
  }
  return HWYATTN_OK;
}

// Scale 1 for every element: an FP8 cache without scale tensors, as a
// per-tensor scale (a [1, 1, 1, 1] view, strides 0).
constexpr float kUnitScale = 1.0f;
TensorView UnitScale() {
  TensorView v;
  v.data = &kUnitScale;
  v.dtype = Dtype::kF32;
  return v;
}

// The cache's struct and tensors (not the block table's entries, which need
// the batch). Fills *view and the Checked of k, v and the scales.
hwyattn_status CheckCache(const hwyattn_kv_cache* cache_arg, hwyattn_kv_cache* cache,
                          KvCacheView* view, Checked* ck, Checked* cv, Checked* cks, Checked* cvs) {
  if (cache_arg == nullptr) return Fail(kInvalid, "cache is NULL");
  HWYATTN_RETURN_IF_ERROR(ReadStruct("cache", "hwyattn_kv_cache", "hwyattn_kv_cache_init",
                                     cache_arg, kKvCacheSizes, cache));
  HWYATTN_RETURN_IF_ERROR(CheckReserved("cache: reserved0", cache->reserved0));
  const unsigned cache_types = kFloatTypes | kQuantizedTypes | kBlockTypes;
  HWYATTN_RETURN_IF_ERROR(Check("cache: k", kCacheNames, &cache->k, cache_types, cache_types, ck));
  HWYATTN_RETURN_IF_ERROR(Check("cache: v", kCacheVNames, &cache->v, cache_types, cache_types, cv));
  const int64_t P = ck->view.shape[0], Hkv = ck->view.shape[1], S = ck->view.shape[2];
  const int64_t D = ck->view.shape[3], Dv = cv->view.shape[3];
  // I8, I4 and FP8 caches have one dtype (and scales); float and block formats mix.
  if (cache->v.dtype != cache->k.dtype &&
      ((kQuantizedTypes & (Bit(cache->k.dtype) | Bit(cache->v.dtype))) != 0)) {
    return Fail(kInvalid,
                "cache: v has dtype %s but k has %s; an I8, I4 or FP8 cache has one dtype for "
                "K and V",
                DtypeName(cache->v.dtype), DtypeName(cache->k.dtype));
  }
  HWYATTN_RETURN_IF_ERROR(CheckDim(*cv, 0, P, false, "k's num_pages is"));
  HWYATTN_RETURN_IF_ERROR(CheckDim(*cv, 1, Hkv, false, "k's kv heads is"));
  HWYATTN_RETURN_IF_ERROR(CheckDim(*cv, 2, S, false, "k's page_size is"));
  const bool quantized = (kQuantizedTypes & Bit(cache->k.dtype)) != 0;
  const bool fp8 = quantized && cache->k.dtype != HWYATTN_I8 && cache->k.dtype != HWYATTN_I4;
  if (fp8 && cache->k_scale == nullptr && cache->v_scale == nullptr) {
    view->k_scales = view->v_scales = KvScales::kPerChannel;
    view->k_scale = view->v_scale = UnitScale();
  } else if (quantized) {
    if (cache->k_scale == nullptr || cache->v_scale == nullptr) {
      const char* missing = cache->k_scale == nullptr ? "k_scale" : "v_scale";
      if (fp8) {
        return Fail(kInvalid,
                    "cache: %s is NULL but %s is not; an FP8 cache takes both scale tensors "
                    "or neither (scale 1)",
                    missing, cache->k_scale == nullptr ? "v_scale" : "k_scale");
      }
      return Fail(kInvalid,
                  "cache: %s is NULL but the cache is %s, which needs both scale tensors "
                  "(per token, per channel, per kv head or per tensor)",
                  missing, DtypeName(cache->k.dtype));
    }
    HWYATTN_RETURN_IF_ERROR(
        CheckScales("cache: k_scale", cache->k_scale, P, Hkv, S, D, cks, &view->k_scales));
    HWYATTN_RETURN_IF_ERROR(
        CheckScales("cache: v_scale", cache->v_scale, P, Hkv, S, Dv, cvs, &view->v_scales));
    view->k_scale = cks->view;
    view->v_scale = cvs->view;
  } else if (cache->k_scale != nullptr || cache->v_scale != nullptr) {
    const bool blocks = (kBlockTypes & (Bit(cache->k.dtype) | Bit(cache->v.dtype))) != 0;
    return Fail(kInvalid,
                blocks ? "cache: %s is given but the cache is %s, a block format whose scales "
                         "are inside its blocks; scales are for I8, I4 and FP8 caches only"
                       : "cache: %s is given but the cache is %s; scales are for I8, I4 and FP8 "
                         "caches only",
                cache->k_scale != nullptr ? "k_scale" : "v_scale",
                DtypeName((kBlockTypes & Bit(cache->k.dtype)) ? cache->k.dtype : cache->v.dtype));
  }
  if (cache->block_table != nullptr) {
    HWYATTN_RETURN_IF_ERROR(
        CheckAligned("cache: block_table", cache->block_table, sizeof(int32_t)));
    if (cache->block_table_stride < 0) {
      return Fail(kInvalid, "cache: block_table_stride is %" PRId64 "; must be >= 0",
                  cache->block_table_stride);
    }
  }
  view->k = ck->view;
  view->v = cv->view;
  view->block_table = cache->block_table;
  view->block_table_stride = cache->block_table != nullptr ? cache->block_table_stride : 0;
  view->num_pages = P;
  view->page_size = S;
  view->kv_heads = Hkv;
  view->head_dim = D;
  view->value_dim = Dv;
  return HWYATTN_OK;
}

// opts of the KV entry points: the fields that apply, read into *rules.
hwyattn_status CheckKvOptions(const hwyattn_sdpa_options* opts, int64_t Hq, int64_t D,
                              SdpaProblem* rules) {
  HWYATTN_RETURN_IF_ERROR(CheckCommonOptions(opts));
  if (opts->mask != nullptr) {
    return Fail(kInvalid,
                "opts: mask is given; hwyattn_kv_attention takes no mask (use causal, "
                "windows and the batch's kv_len)");
  }
  if (opts->kv_len != nullptr) {
    return Fail(kInvalid,
                "opts: kv_len is given; hwyattn_kv_attention takes the lengths from "
                "batch->kv_len");
  }
  if (opts->weights != nullptr) {
    return Fail(kInvalid, "opts: weights is given; hwyattn_kv_attention does not output weights");
  }
  HWYATTN_RETURN_IF_ERROR(CheckModifiers(opts, Hq, &rules->executor, &rules->precision));
  rules->scale = ResolvedScale(opts->scale, D);
  // Positions are explicit: any causal rule keeps keys at positions <= the query's.
  rules->causal =
      RawEnum(opts->causal) == HWYATTN_CAUSAL_NONE ? Causal::kNone : Causal::kBottomRight;
  rules->window_left = opts->window_left;
  rules->window_right = opts->window_right;
  rules->softcap = opts->softcap;
  rules->alibi_slopes = opts->alibi_slopes;
  rules->sinks = opts->sinks;
  return HWYATTN_OK;
}

// The batch against T tokens and the cache's pages.
hwyattn_status CheckBatch(const hwyattn_kv_batch* batch_arg, int64_t T, bool causal,
                          const KvCacheView& cache, hwyattn_kv_batch* batch) {
  if (batch_arg == nullptr) return Fail(kInvalid, "batch is NULL");
  HWYATTN_RETURN_IF_ERROR(ReadStruct("batch", "hwyattn_kv_batch", "hwyattn_kv_batch_init",
                                     batch_arg, kKvBatchSizes, batch));
  const int32_t n = batch->num_seqs;
  if (n < 1) return Fail(kInvalid, "batch: num_seqs is %" PRId32 "; must be >= 1", n);
  if (batch->q_start == nullptr) return Fail(kInvalid, "batch: q_start is NULL");
  if (batch->kv_len == nullptr) return Fail(kInvalid, "batch: kv_len is NULL");
  HWYATTN_RETURN_IF_ERROR(CheckAligned("batch: q_start", batch->q_start, sizeof(int32_t)));
  HWYATTN_RETURN_IF_ERROR(CheckAligned("batch: kv_len", batch->kv_len, sizeof(int32_t)));
  if (batch->q_pos != nullptr) {
    HWYATTN_RETURN_IF_ERROR(CheckAligned("batch: q_pos", batch->q_pos, sizeof(int32_t)));
  }
  if (batch->q_start[0] != 0) {
    return Fail(kInvalid, "batch: q_start[0] is %" PRId32 "; must be 0", batch->q_start[0]);
  }
  if (cache.block_table != nullptr && cache.block_table_stride > 0) {
    int64_t entries;
    if (__builtin_mul_overflow(static_cast<int64_t>(n), cache.block_table_stride, &entries) ||
        entries > INT64_MAX / 4) {
      return Fail(kInvalid,
                  "cache: block_table_stride %" PRId64 " times %" PRId32
                  " sequences "
                  "overflows 64-bit offsets",
                  cache.block_table_stride, n);
    }
  }
  const int64_t S = cache.page_size, P = cache.num_pages;
  for (int32_t s = 0; s < n; ++s) {
    const int32_t q0 = batch->q_start[s], q1 = batch->q_start[s + 1];
    if (q1 < q0) {
      return Fail(kInvalid,
                  "batch: q_start[%" PRId32 "] is %" PRId32 " but q_start[%" PRId32 "] is %" PRId32
                  "; q_start must not decrease",
                  s + 1, q1, s, q0);
    }
    if (q1 > T) {
      return Fail(kInvalid,
                  "batch: q_start[%" PRId32 "] is %" PRId32 ", past q's %" PRId64 " tokens", s + 1,
                  q1, T);
    }
    const int32_t len = batch->kv_len[s];
    if (len < 0) {
      return Fail(kInvalid,
                  "batch: kv_len[%" PRId32 "] (sequence %" PRId32 ") is %" PRId32 "; must be >= 0",
                  s, s, len);
    }
    const int64_t q_len = q1 - q0;
    int64_t pos = len - q_len;
    if (batch->q_pos != nullptr) {
      pos = batch->q_pos[s];
      if (pos < 0) {
        return Fail(kInvalid,
                    "batch: q_pos[%" PRId32 "] (sequence %" PRId32 ") is %" PRId64 "; must be >= 0",
                    s, s, pos);
      }
    }
    // Causal: every query needs its own key in the cache (positions in
    // [0, kv_len)); without a rule, default positions may be negative.
    if (causal && q_len > 0 && (pos < 0 || pos + q_len > len)) {
      return Fail(kInvalid,
                  "batch: sequence %" PRId32 " has queries at positions [%" PRId64 ", %" PRId64
                  ") but kv_len %" PRId32
                  ": with a causal rule they must lie in "
                  "[0, kv_len) (write this step's keys first)",
                  s, pos, pos + q_len, len);
    }
    const int64_t pages = (len + S - 1) / S;
    if (cache.block_table == nullptr) {
      if (len > S) {
        return Fail(kInvalid,
                    "batch: kv_len[%" PRId32 "] (sequence %" PRId32 ") is %" PRId32
                    " but the cache has no block_table, so the sequence is one page of "
                    "page_size %" PRId64,
                    s, s, len, S);
      }
      if (len > 0 && s >= P) {
        return Fail(kInvalid,
                    "batch: sequence %" PRId32 " has kv_len %" PRId32
                    " but the cache "
                    "has no block_table and only %" PRId64 " pages (sequence s is page s)",
                    s, len, P);
      }
      continue;
    }
    if (pages > cache.block_table_stride) {
      return Fail(kInvalid,
                  "batch: kv_len[%" PRId32 "] (sequence %" PRId32 ") is %" PRId32
                  ", which needs %" PRId64 " pages of %" PRId64
                  ", but block_table_stride is %" PRId64,
                  s, s, len, pages, S, cache.block_table_stride);
    }
    const int32_t* row = cache.block_table + s * cache.block_table_stride;
    for (int64_t i = 0; i < pages; ++i) {
      if (row[i] < 0 || row[i] >= P) {
        return Fail(kInvalid,
                    "cache: block_table[%" PRId32 "][%" PRId64 "] (sequence %" PRId32
                    ", keys from %" PRId64 ") is page %" PRId32 "; must be in [0, %" PRId64 ")",
                    s, i, s, i * S, row[i], P);
      }
    }
  }
  if (batch->q_start[n] != T) {
    return Fail(kInvalid,
                "batch: q_start[%" PRId32 "] is %" PRId32 " but q has %" PRId64
                " tokens; the last entry must be T",
                n, batch->q_start[n], T);
  }
  return HWYATTN_OK;
}

}  // namespace

hwyattn_status ValidateKvAttention(const hwyattn_tensor* q, const hwyattn_kv_cache* cache_arg,
                                   const hwyattn_kv_batch* batch_arg, const hwyattn_tensor* out,
                                   const hwyattn_sdpa_options* opts, KvAttentionProblem* p) {
  hwyattn_sdpa_options defaults;
  HWYATTN_RETURN_IF_ERROR(ResolveOptions(opts, &defaults, &opts));
  Checked cq, co, ck, cv, cks, cvs, clse;
  HWYATTN_RETURN_IF_ERROR(Check("q", kPackedNames, q, kFloatTypes, kFloatTypes, &cq));
  HWYATTN_RETURN_IF_ERROR(CheckDim(cq, 0, 1, false, "[T, Hq, D] needs"));
  hwyattn_kv_cache cache;
  HWYATTN_RETURN_IF_ERROR(CheckCache(cache_arg, &cache, &p->cache, &ck, &cv, &cks, &cvs));
  const KvCacheView& kv = p->cache;
  const int64_t T = cq.view.shape[1], Hq = cq.view.shape[2], D = cq.view.shape[3];
  const int64_t Hkv = kv.kv_heads, Dv = kv.value_dim;
  if (Hq % Hkv != 0) {
    return Fail(kInvalid,
                "cache: k has %" PRId64 " kv heads, which does not divide q's %" PRId64
                " heads (GQA needs Hq to be a multiple of Hkv)",
                Hkv, Hq);
  }
  HWYATTN_RETURN_IF_ERROR(CheckDim(ck, 3, D, false, "q's head_dim is"));
  HWYATTN_RETURN_IF_ERROR(Check("out", kPackedVNames, out, kFloatTypes, kFloatTypes, &co));
  HWYATTN_RETURN_IF_ERROR(CheckDim(co, 0, 1, false, "[T, Hq, Dv] needs"));
  HWYATTN_RETURN_IF_ERROR(CheckDim(co, 1, T, false, "q's tokens is"));
  HWYATTN_RETURN_IF_ERROR(CheckDim(co, 2, Hq, false, "q's heads is"));
  HWYATTN_RETURN_IF_ERROR(CheckDim(co, 3, Dv, false, "the cache's value_dim is"));
  HWYATTN_RETURN_IF_ERROR(CheckNoSelfOverlap(co));
  if (T > INT32_MAX) {
    return Fail(HWYATTN_UNSUPPORTED, "q: %" PRId64 " tokens; up to 2^31-1 are supported", T);
  }
  HWYATTN_RETURN_IF_ERROR(CheckKvOptions(opts, Hq, D, &p->rules));
  if (opts->lse != nullptr) {
    HWYATTN_RETURN_IF_ERROR(
        Check("lse", kPackedLseNames, opts->lse, Bit(HWYATTN_F32), kFloatTypes, &clse));
    HWYATTN_RETURN_IF_ERROR(CheckDim(clse, 0, 1, false, "[T, Hq] needs"));
    HWYATTN_RETURN_IF_ERROR(CheckDim(clse, 1, 1, false, "[T, Hq] needs"));
    HWYATTN_RETURN_IF_ERROR(CheckDim(clse, 2, T, false, "q's tokens is"));
    HWYATTN_RETURN_IF_ERROR(CheckDim(clse, 3, Hq, false, "q's heads is"));
    HWYATTN_RETURN_IF_ERROR(CheckNoSelfOverlap(clse));
  }
  hwyattn_kv_batch batch;
  HWYATTN_RETURN_IF_ERROR(CheckBatch(batch_arg, T, p->rules.causal != Causal::kNone, kv, &batch));

  // Outputs against every input and each other.
  const int32_t n = batch.num_seqs;
  Checked inputs[9] = {cq, ck, cv};
  int num_inputs = 3;
  if (kv.k_scales != KvScales::kNone) {
    inputs[num_inputs++] = cks;
    inputs[num_inputs++] = cvs;
  }
  inputs[num_inputs++] = ArrayMemory("batch: q_start", batch.q_start, n + 1u, sizeof(int32_t));
  inputs[num_inputs++] = ArrayMemory("batch: kv_len", batch.kv_len, n, sizeof(int32_t));
  if (batch.q_pos != nullptr) {
    inputs[num_inputs++] = ArrayMemory("batch: q_pos", batch.q_pos, n, sizeof(int32_t));
  }
  if (kv.block_table != nullptr) {
    inputs[num_inputs++] = ArrayMemory(
        "cache: block_table", kv.block_table,
        static_cast<uint64_t>(n) * static_cast<uint64_t>(kv.block_table_stride), sizeof(int32_t));
  }
  for (int i = 0; i < num_inputs; ++i) {
    HWYATTN_RETURN_IF_ERROR(CheckDisjoint(co, inputs[i]));
    if (opts->lse != nullptr) HWYATTN_RETURN_IF_ERROR(CheckDisjoint(clse, inputs[i]));
  }
  if (opts->lse != nullptr) HWYATTN_RETURN_IF_ERROR(CheckDisjoint(co, clse));

  p->q = cq.view;
  p->out = co.view;
  p->has_lse = opts->lse != nullptr;
  if (p->has_lse) p->lse = clse.view;
  p->tokens = T;
  p->q_heads = Hq;
  p->num_seqs = n;
  p->q_start = batch.q_start;
  p->kv_len = batch.kv_len;
  p->q_pos = batch.q_pos;
  return HWYATTN_OK;
}

hwyattn_status ValidateKvWrite(const hwyattn_kv_cache* cache_arg, const hwyattn_tensor* k_new,
                               const hwyattn_tensor* v_new, const int64_t* slot,
                               const hwyattn_sdpa_options* opts, KvWriteProblem* p) {
  hwyattn_sdpa_options defaults;
  HWYATTN_RETURN_IF_ERROR(ResolveOptions(opts, &defaults, &opts));
  Checked ck, cv, cks, cvs, ckn, cvn;
  hwyattn_kv_cache cache;
  HWYATTN_RETURN_IF_ERROR(CheckCache(cache_arg, &cache, &p->cache, &ck, &cv, &cks, &cvs));
  const KvCacheView& kv = p->cache;
  HWYATTN_RETURN_IF_ERROR(Check("k_new", kPackedNames, k_new, kFloatTypes, kFloatTypes, &ckn));
  HWYATTN_RETURN_IF_ERROR(Check("v_new", kPackedVNames, v_new, kFloatTypes, kFloatTypes, &cvn));
  HWYATTN_RETURN_IF_ERROR(CheckDim(ckn, 0, 1, false, "[T, Hkv, D] needs"));
  HWYATTN_RETURN_IF_ERROR(CheckDim(ckn, 2, kv.kv_heads, false, "the cache's kv heads is"));
  HWYATTN_RETURN_IF_ERROR(CheckDim(ckn, 3, kv.head_dim, false, "the cache's head_dim is"));
  const int64_t T = ckn.view.shape[1];
  HWYATTN_RETURN_IF_ERROR(CheckDim(cvn, 0, 1, false, "[T, Hkv, Dv] needs"));
  HWYATTN_RETURN_IF_ERROR(CheckDim(cvn, 1, T, false, "k_new's tokens is"));
  HWYATTN_RETURN_IF_ERROR(CheckDim(cvn, 2, kv.kv_heads, false, "the cache's kv heads is"));
  HWYATTN_RETURN_IF_ERROR(CheckDim(cvn, 3, kv.value_dim, false, "the cache's value_dim is"));
  if (slot == nullptr) return Fail(kInvalid, "slot is NULL");
  HWYATTN_RETURN_IF_ERROR(CheckAligned("slot", slot, sizeof(int64_t)));
  if (opts->parallel != nullptr) {
    hwyattn_sdpa_options only_pool;
    memset(static_cast<void*>(&only_pool), 0, sizeof(only_pool));
    only_pool.parallel = opts->parallel;
    Precision unused;
    HWYATTN_RETURN_IF_ERROR(CheckModifiers(&only_pool, 0, &p->executor, &unused));
  }
  const KvScales layouts[2] = {kv.k_scales, kv.v_scales};
  // Outputs: k, v and the per-token scales (each without self-overlap).
  Checked outputs[4] = {ck, cv};
  int num_outputs = 2;
  Checked inputs[5] = {ckn, cvn,
                       ArrayMemory("slot", slot, static_cast<uint64_t>(T), sizeof(int64_t))};
  int num_inputs = 3;
  const Checked* scale_checked[2] = {&cks, &cvs};
  for (int i = 0; i < 2; ++i) {
    if (layouts[i] == KvScales::kPerToken) outputs[num_outputs++] = *scale_checked[i];
    if (layouts[i] == KvScales::kPerChannel) inputs[num_inputs++] = *scale_checked[i];
  }
  for (int o = 0; o < num_outputs; ++o) {
    HWYATTN_RETURN_IF_ERROR(CheckNoSelfOverlap(outputs[o]));
    for (int i = 0; i < num_inputs; ++i) {
      HWYATTN_RETURN_IF_ERROR(CheckDisjoint(outputs[o], inputs[i]));
    }
  }
  // Slots: inside the pool (or negative), none twice. The duplicates are
  // found by sorting a copy (slot, index): O(T log T).
  const int64_t pool = kv.num_pages * kv.page_size;  // no overflow: k's element count
  int64_t written = 0;
  for (int64_t t = 0; t < T; ++t) {
    if (slot[t] >= pool) {
      return Fail(kInvalid,
                  "slot[%" PRId64 "] is %" PRId64
                  "; must be < num_pages * page_size = "
                  "%" PRId64 " (or negative to skip the token)",
                  t, slot[t], pool);
    }
    written += slot[t] >= 0;
  }
  if (written > 1) {
    struct Entry {
      int64_t slot, index;
    };
    Entry* sorted = static_cast<Entry*>(AlignedAlloc(static_cast<size_t>(written) * sizeof(Entry)));
    if (sorted == nullptr) {
      return Fail(HWYATTN_OUT_OF_MEMORY,
                  "hwyattn_kv_cache_write: could not allocate %" PRId64
                  " entries to check the slots for duplicates",
                  written);
    }
    int64_t m = 0;
    for (int64_t t = 0; t < T; ++t) {
      if (slot[t] >= 0) sorted[m++] = {slot[t], t};
    }
    std::sort(sorted, sorted + m, [](const Entry& a, const Entry& b) {
      return a.slot != b.slot ? a.slot < b.slot : a.index < b.index;
    });
    for (int64_t i = 1; i < m; ++i) {
      if (sorted[i].slot == sorted[i - 1].slot) {
        const Entry a = sorted[i - 1], b = sorted[i];
        FreeAligned(sorted);
        return Fail(kInvalid,
                    "slot[%" PRId64 "] and slot[%" PRId64 "] are both %" PRId64
                    "; a "
                    "slot may be written once per call",
                    a.index, b.index, a.slot);
      }
    }
    FreeAligned(sorted);
  }
  p->k_new = ckn.view;
  p->v_new = cvn.view;
  p->slot = slot;
  p->tokens = T;
  return HWYATTN_OK;
}

}  // namespace hwyattn
