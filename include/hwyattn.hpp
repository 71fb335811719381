// SPDX-License-Identifier: Apache-2.0
//
// hwyattn.hpp: a header-only C++17 binding of hwyattn over its C interface,
// include/hwyattn.h (read that header for what each call computes; this one
// documents only what the binding adds).
//
// The binding has no ABI of its own: everything here is inline functions and
// classes over the C functions, so it works with any libhwyattn that the C
// header works with. Link hwyattn::hwyattn (CMake) or `pkg-config --libs
// hwyattn` as for C.
//
// What it adds to the C interface
// -------------------------------
// - Errors: a failed call becomes an hwyattn::Error (a std::runtime_error)
//   carrying the hwyattn_status and the text of hwyattn_last_error(), copied
//   at once (the C text is thread-local and valid only until the thread's
//   next call). Every fallible library call comes in two styles:
//   `sdpa(...)` throws the Error; `try_sdpa(...)` returns an
//   hwyattn::Result<void> (an expected-style value-or-Error) and never throws
//   an hwyattn::Error (only std::bad_alloc, if copying a message fails). The
//   one exception is a view's constructor, which throws for a shape it cannot
//   describe (a programming error, like a wrong std::vector size).
// - Tensor views (ConstTensorView for inputs, TensorView for outputs) from a
//   pointer and a shape (dense, row-major), a pointer, a shape and strides,
//   a std::vector<float> of exactly the shape's element count, or a
//   std::vector<uint8_t> of exactly dense_bytes(dtype, shape) bytes (the
//   byte dtypes: FP8, ggml's block formats, I4). A view never owns memory:
//   what it points to must outlive every call that uses it.
// - SdpaOptions: a builder for hwyattn_sdpa_options. The scale is a
//   std::optional<float>: unset means the default 1/sqrt(head_dim); an
//   explicit 0 is rejected (INVALID_ARGUMENT). The C ABI reads scale 0 as
//   "the default", while PyTorch's scale=0.0 means uniform weights; passing
//   a zero through would silently give the default-scale result instead.
// - MultiheadAttention: an RAII, move-only owner of an hwyattn_mha.
// - KvCache and KvBatch: descriptions of a paged KV cache in the caller's
//   memory and of one step's sequences, for kv_cache_write and kv_attention
//   (hwyattn_kv_cache_write, hwyattn_kv_attention).
//
// Thread safety is the C library's: sdpa, merge_states, kv_attention and
// MultiheadAttention::forward may run on many threads at once (a module is
// immutable after creation). Views, options and Results are plain values
// with no shared state; use one object from one thread at a time, or copy it.
//
// Example
// -------
//   std::vector<float> q(1 * 8 * 16 * 64), k(1 * 2 * 16 * 64), v = k, o = q;
//   hwyattn::sdpa(hwyattn::ConstTensorView(q, {1, 8, 16, 64}),
//                 hwyattn::ConstTensorView(k, {1, 2, 16, 64}),
//                 hwyattn::ConstTensorView(v, {1, 2, 16, 64}),
//                 hwyattn::TensorView(o, {1, 8, 16, 64}),
//                 hwyattn::SdpaOptions().causal(hwyattn::Causal::kTopLeft));
#ifndef HWYATTN_HPP_
#define HWYATTN_HPP_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "hwyattn.h"

namespace hwyattn {

// ---------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------

// A failed hwyattn call: the status and a message naming the argument and the
// value (for library calls, the text of hwyattn_last_error() at the failure;
// for the few checks the binding makes itself, e.g. a view over a vector of
// the wrong size or an explicit scale of 0, its own text in the same style).
class Error : public std::runtime_error {
 public:
  Error(hwyattn_status status, const std::string& message)
      : std::runtime_error(message), status_(status) {}

  // The Error of a C call that just returned `status` on this thread: copies
  // hwyattn_last_error() (or the status's name if that is empty).
  static Error FromLastError(hwyattn_status status) {
    const char* detail = hwyattn_last_error();
    return Error(status, (detail != nullptr && detail[0] != '\0')
                             ? std::string(detail)
                             : std::string(hwyattn_status_string(status)));
  }

  // HWYATTN_INVALID_ARGUMENT, HWYATTN_UNSUPPORTED, HWYATTN_OUT_OF_MEMORY or
  // HWYATTN_INTERNAL_ERROR (never HWYATTN_OK).
  hwyattn_status status() const noexcept { return status_; }
  // The status's static name, e.g. "HWYATTN_INVALID_ARGUMENT: ...".
  const char* status_string() const noexcept { return hwyattn_status_string(status_); }

 private:
  hwyattn_status status_;
};

// Either a T or an Error, like C++23's std::expected<T, Error>: what the
// try_* functions return. ok() (or a contextual bool) says which; value()
// returns the T or throws the Error; error() returns the Error. A Result is
// [[nodiscard]]: ignoring one ignores a possible failure.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::in_place_index<0>, std::move(value)) {}      // NOLINT: implicit
  Result(Error error) : v_(std::in_place_index<1>, std::move(error)) {}  // NOLINT: implicit

  bool ok() const noexcept { return v_.index() == 0; }
  explicit operator bool() const noexcept { return ok(); }

  // The value; throws the Error if there is none.
  T& value() & {
    ThrowIfError();
    return std::get<0>(v_);
  }
  const T& value() const& {
    ThrowIfError();
    return std::get<0>(v_);
  }
  T&& value() && {
    ThrowIfError();
    return std::get<0>(std::move(v_));
  }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T&& operator*() && { return std::move(*this).value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  // The value, or `fallback` if there is none.
  template <typename U>
  T value_or(U&& fallback) const& {
    return ok() ? std::get<0>(v_) : static_cast<T>(std::forward<U>(fallback));
  }

  // The Error; throws std::logic_error if the Result holds a value.
  const Error& error() const {
    if (ok()) throw std::logic_error("hwyattn::Result::error(): the Result holds a value");
    return std::get<1>(v_);
  }

 private:
  void ThrowIfError() const {
    if (!ok()) throw std::get<1>(v_);
  }
  std::variant<T, Error> v_;
};

// The Result of a call that returns nothing: success, or an Error.
template <>
class [[nodiscard]] Result<void> {
 public:
  Result() = default;
  Result(Error error) : error_(std::move(error)) {}  // NOLINT: implicit

  bool ok() const noexcept { return !error_.has_value(); }
  explicit operator bool() const noexcept { return ok(); }
  // Throws the Error if there is one (the throwing functions are this).
  void value() const {
    if (error_) throw *error_;
  }
  // The Error; throws std::logic_error on success.
  const Error& error() const {
    if (!error_) throw std::logic_error("hwyattn::Result<void>::error(): the call succeeded");
    return *error_;
  }

 private:
  std::optional<Error> error_;
};

namespace detail {
inline Result<void> Check(hwyattn_status status) {
  if (status == HWYATTN_OK) return Result<void>();
  return Error::FromLastError(status);
}
inline Error Invalid(const std::string& message) {
  return Error(HWYATTN_INVALID_ARGUMENT, message);
}
}  // namespace detail

// ---------------------------------------------------------------------------
// Version and runtime
// ---------------------------------------------------------------------------

// The library's version, "MAJOR.MINOR.PATCH" (static storage).
inline const char* version() { return hwyattn_version(); }
// The library's ABI version (the SONAME's number).
inline uint32_t abi_version() { return hwyattn_abi_version(); }
// True if the library loaded at run time has the ABI this header was compiled
// for; check it once at start-up to catch a header/library mismatch.
inline bool abi_compatible() { return hwyattn_abi_version() == HWYATTN_ABI_VERSION; }
// The SIMD target the kernels run on ("AVX3", "AVX2", "NEON", "EMU128", ...);
// HWYATTN_TARGET caps it (see hwyattn_simd_target). Static storage.
inline const char* simd_target() { return hwyattn_simd_target(); }

// Threads later calls may use: 1 = the calling thread only, 0 = all cores
// (hwyattn_set_num_threads). Process-wide; results never depend on it.
inline Result<void> try_set_num_threads(int n) { return detail::Check(hwyattn_set_num_threads(n)); }
inline void set_num_threads(int n) { try_set_num_threads(n).value(); }
// The number of threads later calls may use (0 resolved to the core count).
inline int num_threads() { return hwyattn_get_num_threads(); }

// ---------------------------------------------------------------------------
// Tensor views
// ---------------------------------------------------------------------------

// Element types, with the values of hwyattn_dtype.
enum class DType : int {
  kF32 = HWYATTN_F32,
  kF16 = HWYATTN_F16,    // IEEE binary16, stored as uint16_t
  kBF16 = HWYATTN_BF16,  // bfloat16, stored as uint16_t
  kBool = HWYATTN_BOOL,  // uint8_t (or bool), nonzero = true
  kI8 = HWYATTN_I8,      // int8_t, symmetric (x * scale): only the pages of a KvCache
  // OCP FP8 (x * scale, scale 1 without scales()), stored as uint8_t: only the
  // pages of a KvCache. E4M3 "fn" (max 448, no infinities), E5M2 (max 57344).
  kF8E4M3 = HWYATTN_F8E4M3,
  kF8E5M2 = HWYATTN_F8E5M2,
  // ggml's block formats, byte for byte (llama.cpp's -ctk / -ctv cache types;
  // layouts in hwyattn.h): blocks of 32 elements of a row, each an fp16 d (and
  // m) then the numbers; k and v of sdpa, pages of a KvCache (no scales()).
  // The last size a multiple of 32; shapes and strides count elements.
  kQ8_0 = HWYATTN_Q8_0,      // 34 bytes per 32 elements: d * q
  kQ4_0 = HWYATTN_Q4_0,      // 18 bytes: d * (nibble - 8)
  kQ4_1 = HWYATTN_Q4_1,      // 20 bytes: d * nibble + m
  kQ5_0 = HWYATTN_Q5_0,      // 22 bytes: d * (q5 - 16)
  kQ5_1 = HWYATTN_Q5_1,      // 24 bytes: d * q5 + m
  kIQ4_NL = HWYATTN_IQ4_NL,  // 18 bytes: d * level[nibble]
  // Signed int4 in [-8, 7], two per byte (element 2i the low nibble of byte
  // i), x * scale with scales() as kI8's: only the pages of a KvCache (K and V
  // both). A row of D elements takes (D + 1) / 2 bytes; strides count elements
  // and must be even (an odd D pads each row: stride D + 1, as dense_strides
  // and the byte-vector views give it).
  kI4 = HWYATTN_I4,
};

// How a dtype stores a row: `elements` consecutive elements take `bytes`
// bytes (1 in 4 for kF32, 1 in 1 for kI8, 32 in 34 for kQ8_0, 2 in 1 for kI4).
// {0, 0} for a value that is not an hwyattn_dtype.
struct DTypeStorage {
  int64_t elements;
  int64_t bytes;
};
constexpr DTypeStorage dtype_storage(DType dtype) noexcept {
  switch (dtype) {
    case DType::kF32: return {1, 4};
    case DType::kF16:
    case DType::kBF16: return {1, 2};
    case DType::kBool:
    case DType::kI8:
    case DType::kF8E4M3:
    case DType::kF8E5M2: return {1, 1};
    case DType::kQ8_0: return {32, 34};
    case DType::kQ4_0:
    case DType::kIQ4_NL: return {32, 18};
    case DType::kQ4_1: return {32, 20};
    case DType::kQ5_0: return {32, 22};
    case DType::kQ5_1: return {32, 24};
    case DType::kI4: return {2, 1};
  }
  return {0, 0};
}

// The bytes of a row of n >= 1 elements: n * 4 (kF32), n * 2 (kF16, kBF16), n
// (the byte dtypes), n / 32 * block bytes (the block formats: n / 32 * 34 for
// kQ8_0), (n + 1) / 2 (kI4). -1 for n < 1, an n that is not a multiple of 32
// in a block format, an unknown dtype or an overflow.
constexpr int64_t row_bytes(DType dtype, int64_t n) noexcept {
  const DTypeStorage s = dtype_storage(dtype);
  if (s.elements == 0 || n < 1 || (s.elements == 32 && n % 32 != 0)) return -1;
  const int64_t units = n / s.elements + (n % s.elements != 0 ? 1 : 0);
  return units > std::numeric_limits<int64_t>::max() / s.bytes ? -1 : units * s.bytes;
}

// A list of sizes or strides, e.g. {2, 8, 128, 64}, or a std::vector<int64_t>.
// hwyattn tensors have 1 to 4 dimensions; a view built from more is an
// INVALID_ARGUMENT Error.
class Dims {
 public:
  Dims(std::initializer_list<int64_t> dims) { Assign(dims.begin(), dims.size()); }  // NOLINT
  Dims(const std::vector<int64_t>& dims) { Assign(dims.data(), dims.size()); }      // NOLINT

  // The number of dimensions given (may exceed 4; only the first 4 are kept).
  size_t size() const noexcept { return size_; }
  const int64_t* data() const noexcept { return dims_; }
  int64_t operator[](size_t i) const { return dims_[i]; }

 private:
  void Assign(const int64_t* dims, size_t n) {
    size_ = n;
    for (size_t i = 0; i < n && i < 4; ++i) dims_[i] = dims[i];
  }
  int64_t dims_[4] = {0, 0, 0, 0};
  size_t size_ = 0;
};

namespace detail {
// The strides (in elements) of dense rows of whole bytes over `shape`: the
// last 1, the one before it the row's elements rounded up to whole storage
// units (kI4's odd D: D + 1); false for a shape or dtype that has none.
inline bool DenseStrides(DType dtype, const Dims& shape, int64_t* strides, int64_t* bytes) {
  const size_t rank = shape.size();
  if (rank < 1 || rank > 4) return false;
  for (size_t i = 0; i < rank; ++i) {
    if (shape[i] < 1) return false;
  }
  const DTypeStorage s = dtype_storage(dtype);
  const int64_t row = row_bytes(dtype, shape[rank - 1]);
  if (row < 0) return false;
  int64_t elements = row / s.bytes * s.elements, total = row;
  strides[rank - 1] = 1;
  for (size_t i = rank - 1; i-- > 0;) {
    strides[i] = elements;
    if (elements > std::numeric_limits<int64_t>::max() / shape[i] ||
        total > std::numeric_limits<int64_t>::max() / shape[i]) {
      return false;
    }
    elements *= shape[i];
    total *= shape[i];
  }
  *bytes = total;
  return true;
}
}  // namespace detail

// The bytes of a dense tensor of `shape` (1 to 4 sizes, each >= 1) in
// `dtype`: the leading sizes times row_bytes(dtype, last size), e.g. a kQ8_0
// pool {P, Hkv, S, 128} takes P * Hkv * S * 136 bytes. -1 where row_bytes is,
// or for a shape of another rank or with a size < 1.
inline int64_t dense_bytes(DType dtype, const Dims& shape) {
  int64_t strides[4], bytes = -1;
  return detail::DenseStrides(dtype, shape, strides, &bytes) ? bytes : -1;
}

// The strides (in elements) of dense rows of whole bytes over `shape`: the
// row-major strides, except that kI4's odd last size pads each row to a
// byte (stride D + 1). Empty where dense_bytes is -1.
inline std::vector<int64_t> dense_strides(DType dtype, const Dims& shape) {
  int64_t strides[4], bytes = -1;
  if (!detail::DenseStrides(dtype, shape, strides, &bytes)) return {};
  return std::vector<int64_t>(strides, strides + shape.size());
}

// A read-only view of caller memory as an hwyattn_tensor: the inputs q, k, v,
// a mask, the merge_states partials. Copying a view copies the descriptor, not
// the data. Shapes right-align as in C: rank r < 4 describes the last r of the
// four logical dimensions. Constructors throw an INVALID_ARGUMENT Error for a
// shape they cannot describe (rank outside 1..4, a size < 1, an element count
// that overflows, a std::vector of a different element count); strides and
// every other rule are checked by the call that uses the view.
class ConstTensorView {
 public:
  // Dense row-major F32 over `data`.
  ConstTensorView(const float* data, Dims shape)
      : ConstTensorView(static_cast<const void*>(data), DType::kF32, shape) {}
  // F32 with explicit per-dimension strides, in elements (0 broadcasts).
  ConstTensorView(const float* data, Dims shape, Dims strides)
      : ConstTensorView(static_cast<const void*>(data), DType::kF32, shape, strides) {}
  // Dense row-major, any dtype (F16/BF16 data as uint16_t, BOOL as uint8_t).
  ConstTensorView(const void* data, DType dtype, Dims shape) {
    if (shape.size() > 4) throw detail::Invalid(RankMessage(shape.size()));
    const hwyattn_status s =
        hwyattn_tensor_contiguous(&t_, const_cast<void*>(data), static_cast<hwyattn_dtype>(dtype),
                                  static_cast<int32_t>(shape.size()), shape.data());
    if (s != HWYATTN_OK) throw Error::FromLastError(s);
  }
  // Any dtype, explicit strides in elements (one per dimension of shape).
  ConstTensorView(const void* data, DType dtype, Dims shape, Dims strides) {
    if (shape.size() < 1 || shape.size() > 4) throw detail::Invalid(RankMessage(shape.size()));
    if (strides.size() != shape.size()) {
      throw detail::Invalid("strides: " + std::to_string(strides.size()) +
                            " strides for a shape of " + std::to_string(shape.size()) +
                            " dimensions");
    }
    Describe(data, dtype, shape, strides);
  }
  // Dense row-major F32 over a vector whose size is exactly the element count
  // of `shape`. The vector must outlive the view (a temporary cannot bind).
  ConstTensorView(const std::vector<float>& data, Dims shape)
      : ConstTensorView(data.data(), shape) {
    CheckCount(data.size());
  }
  ConstTensorView(const std::vector<float>&&, Dims) = delete;
  // Dense rows over a byte vector whose size is exactly dense_bytes(dtype,
  // shape): the pages or k/v of a byte dtype (FP8, BOOL, the block formats,
  // kI4: strides from dense_strides, so kI4's odd D pads each row), or any
  // dtype's bytes. Throws an INVALID_ARGUMENT Error for another size or a
  // shape the dtype cannot store (a block format's last size not a multiple
  // of 32). The vector must outlive the view.
  ConstTensorView(const std::vector<uint8_t>& bytes, DType dtype, Dims shape) {
    InitBytes(bytes.data(), bytes.size(), dtype, shape);
  }
  ConstTensorView(const std::vector<uint8_t>&&, DType, Dims) = delete;

  // The C descriptor, for calls this binding does not wrap.
  const hwyattn_tensor& c_tensor() const noexcept { return t_; }
  const void* data() const noexcept { return t_.data; }
  DType dtype() const noexcept { return static_cast<DType>(t_.dtype); }
  int rank() const noexcept { return t_.rank; }
  // Size and stride of dimension i in [0, rank()).
  int64_t shape(int i) const { return t_.shape[i]; }
  int64_t stride(int i) const { return t_.stride[i]; }
  // The number of elements the shape describes (meaningful for a shape the
  // library accepts: sizes >= 1 whose product fits in int64_t).
  int64_t num_elements() const noexcept {
    uint64_t n = 1;
    for (int i = 0; i < t_.rank; ++i) n *= static_cast<uint64_t>(t_.shape[i]);
    return static_cast<int64_t>(n);
  }

 protected:
  ConstTensorView() = default;  // for TensorView's byte-vector constructor
  void CheckCount(size_t size) const {
    const int64_t n = num_elements();
    if (static_cast<uint64_t>(n) != size) {
      throw detail::Invalid("data: the vector holds " + std::to_string(size) +
                            " elements but the shape describes " + std::to_string(n));
    }
  }
  // The descriptor over `data`: shape.size() sizes and strides (strides[i]
  // in elements), the rest size 1, stride 0.
  template <class Strides>
  void Describe(const void* data, DType dtype, const Dims& shape, const Strides& strides) {
    t_.data = const_cast<void*>(data);
    t_.dtype = static_cast<hwyattn_dtype>(dtype);
    t_.rank = static_cast<int32_t>(shape.size());
    for (size_t i = 0; i < 4; ++i) {
      t_.shape[i] = i < shape.size() ? shape[i] : 1;
      t_.stride[i] = i < shape.size() ? strides[i] : 0;
    }
  }
  static std::string RankMessage(size_t rank) {
    return "shape: rank is " + std::to_string(rank) + "; must be 1..4";
  }
  void InitBytes(const void* data, size_t size, DType dtype, const Dims& shape) {
    if (shape.size() < 1 || shape.size() > 4) throw detail::Invalid(RankMessage(shape.size()));
    int64_t strides[4], bytes = -1;
    const DTypeStorage s = dtype_storage(dtype);
    if (!detail::DenseStrides(dtype, shape, strides, &bytes)) {
      std::string why = "shape: a size < 1, too many elements or an unknown dtype";
      if (s.elements == 32 && shape[shape.size() - 1] % 32 != 0) {
        why = "shape: the last size is " + std::to_string(shape[shape.size() - 1]) +
              "; a block format stores whole blocks of 32 elements";
      }
      throw detail::Invalid(why);
    }
    if (static_cast<uint64_t>(bytes) != size) {
      throw detail::Invalid("data: the vector holds " + std::to_string(size) +
                            " bytes but the shape needs " + std::to_string(bytes) + " (" +
                            std::to_string(s.bytes) + " bytes per " + std::to_string(s.elements) +
                            " elements)");
    }
    Describe(data, dtype, shape, strides);
  }

  hwyattn_tensor t_ = {};
};

// A writable view: outputs (out, weights, lse, lse_out). It converts to a
// ConstTensorView, so it can also be given as an input. The constructors
// mirror ConstTensorView's, over non-const memory.
class TensorView : public ConstTensorView {
 public:
  TensorView(float* data, Dims shape) : ConstTensorView(data, shape) {}
  TensorView(float* data, Dims shape, Dims strides) : ConstTensorView(data, shape, strides) {}
  TensorView(void* data, DType dtype, Dims shape) : ConstTensorView(data, dtype, shape) {}
  TensorView(void* data, DType dtype, Dims shape, Dims strides)
      : ConstTensorView(data, dtype, shape, strides) {}
  TensorView(std::vector<float>& data, Dims shape) : ConstTensorView(data.data(), shape) {
    CheckCount(data.size());
  }
  TensorView(std::vector<float>&&, Dims) = delete;
  // As ConstTensorView's byte-vector constructor, over writable bytes (a
  // KvCache's pages).
  TensorView(std::vector<uint8_t>& bytes, DType dtype, Dims shape) {
    InitBytes(bytes.data(), bytes.size(), dtype, shape);
  }
  TensorView(std::vector<uint8_t>&&, DType, Dims) = delete;

  void* data() const noexcept { return t_.data; }
};

// ---------------------------------------------------------------------------
// Scaled dot-product attention
// ---------------------------------------------------------------------------

// hwyattn_causal.
enum class Causal : int {
  kNone = HWYATTN_CAUSAL_NONE,
  kTopLeft = HWYATTN_CAUSAL_TOP_LEFT,          // query i sees keys j <= i (PyTorch is_causal)
  kBottomRight = HWYATTN_CAUSAL_BOTTOM_RIGHT,  // j <= i + Lk - Lq (decode / KV cache)
};

// hwyattn_precision.
enum class Precision : int {
  kF32 = HWYATTN_PRECISION_F32,
  kBF16 = HWYATTN_PRECISION_BF16,  // bf16 products, fp32 sums (hwyattn.h)
  kInt8 = HWYATTN_PRECISION_INT8,  // int Q K^T on a quantized K (query as q8_0); float K: kF32
};

// The options of sdpa and MultiheadAttention::forward: a builder for
// hwyattn_sdpa_options whose setters return *this, e.g.
//   SdpaOptions().causal(Causal::kBottomRight).window_left(4096).lse(lse_view)
// Every field starts "off", as hwyattn_sdpa_options_init leaves it; each
// setter's meaning is that C field's (see hwyattn.h). Pointers and views are
// stored, not copied: the memory must outlive the calls using the options.
class SdpaOptions {
 public:
  // Multiplies Q K^T. std::nullopt (the default) = 1/sqrt(head_dim). An
  // explicit 0 (or -0) makes the call fail with INVALID_ARGUMENT: the C ABI
  // would read it as the default, not as PyTorch's uniform weights (for
  // those, pass a tiny nonzero scale such as 1e-30f). Must be finite.
  SdpaOptions& scale(std::optional<float> s) {
    scale_ = s;
    return *this;
  }
  SdpaOptions& causal(Causal c) {
    c_.causal = static_cast<hwyattn_causal>(c);
    return *this;
  }
  // Broadcastable to [B, Hq, Lq, Lk]: BOOL (true = attend), F32 or F16 (added;
  // F16 read in place, as ggml's KQ mask).
  SdpaOptions& mask(const ConstTensorView& m) {
    mask_ = m.c_tensor();
    return *this;
  }
  // [B] valid key counts (PyTorch's key_padding_mask as lengths).
  SdpaOptions& kv_len(const int32_t* lengths) {
    c_.kv_len = lengths;
    return *this;
  }
  SdpaOptions& kv_len(const std::vector<int32_t>& lengths) { return kv_len(lengths.data()); }
  SdpaOptions& kv_len(const std::vector<int32_t>&&) = delete;
  // Optional outputs: the probabilities [B, Hq, Lq, Lk] and the log-sum-exp
  // [B, Hq, Lq], both F32.
  SdpaOptions& weights(const TensorView& w) {
    weights_ = w.c_tensor();
    return *this;
  }
  SdpaOptions& lse(const TensorView& l) {
    lse_ = l.c_tensor();
    return *this;
  }
  // Sliding windows (0 = unbounded): a query at position p sees keys
  // p - window_left < j < p + window_right.
  SdpaOptions& window_left(int64_t w) {
    c_.window_left = w;
    return *this;
  }
  SdpaOptions& window_right(int64_t w) {
    c_.window_right = w;
    return *this;
  }
  // 0 = off; c > 0: every scaled score s becomes c * tanh(s / c).
  SdpaOptions& softcap(float c) {
    c_.softcap = c;
    return *this;
  }
  // [Hq] F32 ALiBi slopes; [Hq] F32 attention-sink logits.
  SdpaOptions& alibi_slopes(const float* slopes) {
    c_.alibi_slopes = slopes;
    return *this;
  }
  SdpaOptions& alibi_slopes(const std::vector<float>& slopes) {
    return alibi_slopes(slopes.data());
  }
  SdpaOptions& alibi_slopes(const std::vector<float>&&) = delete;
  SdpaOptions& sinks(const float* logits) {
    c_.sinks = logits;
    return *this;
  }
  SdpaOptions& sinks(const std::vector<float>& logits) { return sinks(logits.data()); }
  SdpaOptions& sinks(const std::vector<float>&&) = delete;
  // The caller's thread pool (see hwyattn_parallel); nullptr = the library's.
  SdpaOptions& parallel(const hwyattn_parallel* pool) {
    c_.parallel = pool;
    return *this;
  }
  // kF32 (the default), kBF16 or kInt8: the products' precision (hwyattn_precision).
  SdpaOptions& precision(Precision p) {
    c_.precision = static_cast<hwyattn_precision>(p);
    return *this;
  }

  const std::optional<float>& scale() const noexcept { return scale_; }

  // Fills *out with these options as the C struct, for calls this binding
  // does not wrap; the descriptors out's pointers refer to live in *tensors,
  // which must outlive *out's use. Fails (INVALID_ARGUMENT) on an explicit
  // scale of 0 and writes nothing then.
  struct CTensors {
    hwyattn_tensor mask, weights, lse;
  };
  Result<void> to_c(hwyattn_sdpa_options* out, CTensors* tensors) const {
    if (scale_ && *scale_ == 0.0f) {
      return detail::Invalid(
          "scale is 0: an explicit zero is rejected. The C ABI reads scale 0 as the default "
          "1/sqrt(head_dim), while PyTorch's scale=0.0 means uniform weights; leave the scale "
          "unset (std::nullopt) for the default, or pass a tiny nonzero scale (e.g. 1e-30f) for "
          "uniform weights");
    }
    *out = c_;
    out->scale = scale_.value_or(0.0f);
    if (mask_) {
      tensors->mask = *mask_;
      out->mask = &tensors->mask;
    }
    if (weights_) {
      tensors->weights = *weights_;
      out->weights = &tensors->weights;
    }
    if (lse_) {
      tensors->lse = *lse_;
      out->lse = &tensors->lse;
    }
    return Result<void>();
  }

 private:
  static hwyattn_sdpa_options Init() {
    hwyattn_sdpa_options o;
    hwyattn_sdpa_options_init(&o);
    return o;
  }
  hwyattn_sdpa_options c_ = Init();  // the scalar fields and plain pointers
  std::optional<float> scale_;
  std::optional<hwyattn_tensor> mask_, weights_, lse_;
};

// out = softmax(q k^T * scale + mask) v: hwyattn_sdpa (shapes, dtypes, GQA,
// masks and modifiers as documented there). q, k, v: [B, Hq|Hkv, L, D|Dv];
// out: [B, Hq, Lq, Dv], F32, F16 or BF16 (rounded once at the store).
inline Result<void> try_sdpa(const ConstTensorView& q, const ConstTensorView& k,
                             const ConstTensorView& v, const TensorView& out,
                             const SdpaOptions& options = SdpaOptions()) {
  hwyattn_sdpa_options c;
  SdpaOptions::CTensors tensors;
  Result<void> r = options.to_c(&c, &tensors);
  if (!r) return r;
  hwyattn_tensor o = out.c_tensor();
  return detail::Check(hwyattn_sdpa(&q.c_tensor(), &k.c_tensor(), &v.c_tensor(), &o, &c));
}
inline void sdpa(const ConstTensorView& q, const ConstTensorView& k, const ConstTensorView& v,
                 const TensorView& out, const SdpaOptions& options = SdpaOptions()) {
  try_sdpa(q, k, v, out, options).value();
}

// ---------------------------------------------------------------------------
// Merging partial states
// ---------------------------------------------------------------------------

// hwyattn_merge_states: merges n partial results outs[i] [B, H, L, Dv] with
// their log-sum-exps lses[i] [B, H, L] (as sdpa's lse writes them) into out,
// and optionally their joint lse into lse_out; sinks is an optional [H] of
// attention-sink logits. outs and lses must have the same number of entries
// (at least one). out may be outs[0] and lse_out lses[0] (in place).
inline Result<void> try_merge_states(const std::vector<ConstTensorView>& outs,
                                     const std::vector<ConstTensorView>& lses,
                                     const TensorView& out,
                                     const std::optional<TensorView>& lse_out = std::nullopt,
                                     const float* sinks = nullptr) {
  if (lses.size() != outs.size()) {
    return detail::Invalid("lses: " + std::to_string(lses.size()) + " entries but outs has " +
                           std::to_string(outs.size()) + "; they must pair up");
  }
  if (outs.size() > static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
    return detail::Invalid("outs: " + std::to_string(outs.size()) +
                           " partial states; at most 2^31 - 1 are supported");
  }
  std::vector<hwyattn_tensor> c_outs, c_lses;
  std::vector<const hwyattn_tensor*> p_outs, p_lses;
  c_outs.reserve(outs.size());
  c_lses.reserve(lses.size());
  for (const ConstTensorView& t : outs) c_outs.push_back(t.c_tensor());
  for (const ConstTensorView& t : lses) c_lses.push_back(t.c_tensor());
  for (const hwyattn_tensor& t : c_outs) p_outs.push_back(&t);
  for (const hwyattn_tensor& t : c_lses) p_lses.push_back(&t);
  hwyattn_tensor o = out.c_tensor();
  hwyattn_tensor l = lse_out ? lse_out->c_tensor() : hwyattn_tensor();
  return detail::Check(hwyattn_merge_states(static_cast<int32_t>(outs.size()), p_outs.data(),
                                            p_lses.data(), sinks, &o, lse_out ? &l : nullptr));
}
inline void merge_states(const std::vector<ConstTensorView>& outs,
                         const std::vector<ConstTensorView>& lses, const TensorView& out,
                         const std::optional<TensorView>& lse_out = std::nullopt,
                         const float* sinks = nullptr) {
  try_merge_states(outs, lses, out, lse_out, sinks).value();
}

// ---------------------------------------------------------------------------
// KV cache
// ---------------------------------------------------------------------------

// A KV cache in the caller's memory (hwyattn_kv_cache): a pool of pages that
// the library reads (kv_attention) and writes (kv_cache_write), never owns.
//
//   k  [num_pages, Hkv, page_size, D]   F32, F16, BF16, I8, F8E4M3, F8E5M2, a
//                                       block format (kQ8_0 ... kIQ4_NL) or I4
//   v  [num_pages, Hkv, page_size, Dv]  the dtype of k; or, k and v both float
//                                       or block dtypes, any two of those
//
// Any strides: vLLM's [pages, Hkv, page, D] is the dense view, FlashAttention's
// [pages, page, Hkv, D] the same shape with strides {page*Hkv*D, D, Hkv*D, 1}.
// Shapes and strides count elements for every dtype; a block format's or
// kI4's pool takes dense_bytes(dtype, {P, Hkv, S, D}) bytes, e.g.
//   std::vector<uint8_t> kpool(hwyattn::dense_bytes(DType::kQ8_0, {P, Hkv, S, D}));
//   TensorView(kpool, DType::kQ8_0, {P, Hkv, S, D})
// (the byte-vector view checks the size). The block formats carry their
// scales; I8 and I4 pages need scales() (FP8 pages take them or not: scale
// 1): F32 per token [num_pages, Hkv, page_size, 1] (written by
// kv_cache_write, so that memory is written too), or per channel
// [1, Hkv, 1, D] / [1, Hkv, 1, Dv], per kv head [1, Hkv, 1, 1] or per tensor
// [1] (fixed by the caller, each finite and > 0). block_table():
// int32 [num_seqs, stride], the pages of each sequence of a batch in order;
// without one, sequence s is page s (a padded contiguous cache whose
// page_size is each sequence's capacity).
//
// A plain value: copying it copies the descriptors, not the pages, and the
// memory it points to must outlive every call that uses it. Its setters
// return *this, e.g.
//   KvCache(TensorView(kpool, DType::kBF16, {P, Hkv, S, D}),
//           TensorView(vpool, DType::kBF16, {P, Hkv, S, D})).block_table(table, max_pages)
class KvCache {
 public:
  KvCache(const TensorView& k, const TensorView& v) : k_(k.c_tensor()), v_(v.c_tensor()) {}

  // The I8 or FP8 scales (F32); see the class comment for the layouts. The
  // two may use different layouts.
  KvCache& scales(const ConstTensorView& k_scale, const ConstTensorView& v_scale) {
    k_scale_ = k_scale.c_tensor();
    v_scale_ = v_scale.c_tensor();
    return *this;
  }
  // Row s of `table` (row stride `stride` entries) lists sequence s's pages;
  // only the first ceil(kv_len[s] / page_size) entries of a row are read.
  KvCache& block_table(const int32_t* table, int64_t stride) {
    block_table_ = table;
    block_table_stride_ = stride;
    return *this;
  }
  // As above over a vector holding whole rows: its size must be a multiple
  // of stride (>= 1), else kv_attention fails with INVALID_ARGUMENT.
  KvCache& block_table(const std::vector<int32_t>& table, int64_t stride) {
    block_table(table.data(), stride);
    table_size_ = table.size();
    return *this;
  }
  KvCache& block_table(const std::vector<int32_t>&&, int64_t) = delete;
  // Back to "sequence s is page s".
  KvCache& no_block_table() {
    block_table_ = nullptr;
    block_table_stride_ = 0;
    table_size_.reset();
    return *this;
  }

  // The C struct, for calls this binding does not wrap. Its scale pointers
  // point into *this: use it while *this lives, unmodified.
  hwyattn_kv_cache c_cache() const {
    hwyattn_kv_cache c;
    hwyattn_kv_cache_init(&c);
    c.k = k_;
    c.v = v_;
    c.k_scale = k_scale_ ? &*k_scale_ : nullptr;
    c.v_scale = v_scale_ ? &*v_scale_ : nullptr;
    c.block_table = block_table_;
    c.block_table_stride = block_table_stride_;
    return c;
  }
  // The number of whole rows of a vector block table (nullopt for a table
  // given by pointer, or none).
  std::optional<size_t> block_table_rows() const {
    if (!table_size_ || block_table_stride_ < 1) return std::nullopt;
    return *table_size_ / static_cast<size_t>(block_table_stride_);
  }
  std::optional<size_t> block_table_size() const { return table_size_; }
  int64_t block_table_stride() const noexcept { return block_table_stride_; }

 private:
  hwyattn_tensor k_, v_;
  std::optional<hwyattn_tensor> k_scale_, v_scale_;
  const int32_t* block_table_ = nullptr;
  int64_t block_table_stride_ = 0;
  std::optional<size_t> table_size_;  // set by the vector overload
};

// The sequences of one kv_attention call (hwyattn_kv_batch): sequence s owns
// the query tokens [q_start[s], q_start[s+1]) of q [T, Hq, D] and has
// kv_len[s] keys in the cache, this step's included; its first query token
// has position q_pos[s], by default (no q_pos) kv_len[s] - q_len: the new
// tokens are the last ones of the cache.
class KvBatch {
 public:
  // Over the caller's arrays, which must outlive the calls (copies of the
  // KvBatch point to the same arrays): num_seqs >= 1; q_start
  // [num_seqs + 1], kv_len [num_seqs], q_pos [num_seqs] or nullptr.
  KvBatch(int32_t num_seqs, const int32_t* q_start, const int32_t* kv_len,
          const int32_t* q_pos = nullptr)
      : num_seqs_(num_seqs), q_start_(q_start), kv_len_(kv_len), q_pos_(q_pos) {}
  // Over copies of the vectors (a few ints per sequence), whose sizes the
  // constructor checks (throws an INVALID_ARGUMENT Error): kv_len.size()
  // sequences, q_start one more, q_pos (if not empty) one per sequence.
  KvBatch(std::vector<int32_t> q_start, std::vector<int32_t> kv_len,
          std::vector<int32_t> q_pos = {})
      : num_seqs_(CheckedCount(q_start, kv_len, q_pos)),
        owned_q_start_(std::move(q_start)),
        owned_kv_len_(std::move(kv_len)),
        owned_q_pos_(std::move(q_pos)),
        owned_(true) {}

  int32_t num_seqs() const noexcept { return num_seqs_; }
  // The C struct, for calls this binding does not wrap; it points into *this
  // (owned vectors) or to the caller's arrays.
  hwyattn_kv_batch c_batch() const {
    hwyattn_kv_batch b;
    hwyattn_kv_batch_init(&b);
    b.num_seqs = num_seqs_;
    if (owned_) {
      b.q_start = owned_q_start_.data();
      b.kv_len = owned_kv_len_.data();
      b.q_pos = owned_q_pos_.empty() ? nullptr : owned_q_pos_.data();
    } else {
      b.q_start = q_start_;
      b.kv_len = kv_len_;
      b.q_pos = q_pos_;
    }
    return b;
  }

 private:
  static int32_t CheckedCount(const std::vector<int32_t>& q_start,
                              const std::vector<int32_t>& kv_len,
                              const std::vector<int32_t>& q_pos) {
    if (kv_len.empty() ||
        kv_len.size() > static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
      throw detail::Invalid("kv_len: " + std::to_string(kv_len.size()) +
                            " sequences; must be 1 .. 2^31 - 1");
    }
    if (q_start.size() != kv_len.size() + 1) {
      throw detail::Invalid("q_start: " + std::to_string(q_start.size()) + " entries for " +
                            std::to_string(kv_len.size()) + " sequences; must be num_seqs + 1 = " +
                            std::to_string(kv_len.size() + 1));
    }
    if (!q_pos.empty() && q_pos.size() != kv_len.size()) {
      throw detail::Invalid("q_pos: " + std::to_string(q_pos.size()) + " entries for " +
                            std::to_string(kv_len.size()) + " sequences; must be one each");
    }
    return static_cast<int32_t>(kv_len.size());
  }
  int32_t num_seqs_;
  const int32_t* q_start_ = nullptr;
  const int32_t* kv_len_ = nullptr;
  const int32_t* q_pos_ = nullptr;
  std::vector<int32_t> owned_q_start_, owned_kv_len_, owned_q_pos_;
  bool owned_ = false;
};

namespace detail {
// Logical dimension i (0..3) of a right-aligned view.
inline int64_t Dim4(const ConstTensorView& t, int i) {
  const int lead = 4 - t.rank();
  return i < lead ? 1 : t.shape(i - lead);
}
}  // namespace detail

// Writes token t of k_new [T, Hkv, D] / v_new [T, Hkv, Dv] (F32, F16 or
// BF16) into slot slot[t] of the cache (page slot / page_size, offset
// slot % page_size; negative: skipped), converting to the cache's dtype
// (hwyattn_kv_cache_write: rounding, I8 quantization and its scales as
// documented there). Of the options only parallel() is read (an explicit
// scale of 0 is still rejected, as everywhere). Nothing is written on error.
inline Result<void> try_kv_cache_write(const KvCache& cache, const ConstTensorView& k_new,
                                       const ConstTensorView& v_new, const int64_t* slot,
                                       const SdpaOptions& options = SdpaOptions()) {
  hwyattn_sdpa_options c;
  SdpaOptions::CTensors tensors;
  Result<void> r = options.to_c(&c, &tensors);
  if (!r) return r;
  const hwyattn_kv_cache cc = cache.c_cache();
  return detail::Check(hwyattn_kv_cache_write(&cc, &k_new.c_tensor(), &v_new.c_tensor(), slot, &c));
}
// The same with the slots in a vector, which must hold exactly T entries.
inline Result<void> try_kv_cache_write(const KvCache& cache, const ConstTensorView& k_new,
                                       const ConstTensorView& v_new,
                                       const std::vector<int64_t>& slot,
                                       const SdpaOptions& options = SdpaOptions()) {
  const int64_t tokens = detail::Dim4(k_new, 1);
  if (static_cast<uint64_t>(tokens) != slot.size()) {
    return detail::Invalid("slot: " + std::to_string(slot.size()) + " entries but k_new has " +
                           std::to_string(tokens) + " tokens");
  }
  return try_kv_cache_write(cache, k_new, v_new, slot.data(), options);
}
inline void kv_cache_write(const KvCache& cache, const ConstTensorView& k_new,
                           const ConstTensorView& v_new, const int64_t* slot,
                           const SdpaOptions& options = SdpaOptions()) {
  try_kv_cache_write(cache, k_new, v_new, slot, options).value();
}
inline void kv_cache_write(const KvCache& cache, const ConstTensorView& k_new,
                           const ConstTensorView& v_new, const std::vector<int64_t>& slot,
                           const SdpaOptions& options = SdpaOptions()) {
  try_kv_cache_write(cache, k_new, v_new, slot, options).value();
}

// Attention of the packed varlen queries q [T, Hq, D] (F32, F16 or BF16) of
// `batch` over `cache` into out [T, Hq, Dv] (F32): prefill, chunked prefill
// and decode rows in one call (hwyattn_kv_attention). The options that apply:
// scale (unset = 1/sqrt(D); an explicit 0 is rejected), causal (any rule
// other than kNone: key position <= query position), window_left/right,
// softcap, alibi_slopes and sinks [Hq], parallel, precision, and lse (an F32
// [T, Hq] output). mask, kv_len and weights must be unset (INVALID_ARGUMENT
// from the library). A block table given as a vector must hold at least
// num_seqs whole rows (checked here). Nothing is written on error.
inline Result<void> try_kv_attention(const ConstTensorView& q, const KvCache& cache,
                                     const KvBatch& batch, const TensorView& out,
                                     const SdpaOptions& options = SdpaOptions()) {
  if (const std::optional<size_t> size = cache.block_table_size()) {
    const int64_t stride = cache.block_table_stride();
    const std::optional<size_t> rows = cache.block_table_rows();
    if (!rows || *size % static_cast<size_t>(stride) != 0 ||
        *rows < static_cast<size_t>(std::max<int32_t>(batch.num_seqs(), 0))) {
      return detail::Invalid("block_table: " + std::to_string(*size) + " entries with stride " +
                             std::to_string(stride) +
                             "; must be whole rows (stride >= 1), at least num_seqs = " +
                             std::to_string(batch.num_seqs()) + " of them");
    }
  }
  hwyattn_sdpa_options c;
  SdpaOptions::CTensors tensors;
  Result<void> r = options.to_c(&c, &tensors);
  if (!r) return r;
  const hwyattn_kv_cache cc = cache.c_cache();
  const hwyattn_kv_batch cb = batch.c_batch();
  hwyattn_tensor o = out.c_tensor();
  return detail::Check(hwyattn_kv_attention(&q.c_tensor(), &cc, &cb, &o, &c));
}
inline void kv_attention(const ConstTensorView& q, const KvCache& cache, const KvBatch& batch,
                         const TensorView& out, const SdpaOptions& options = SdpaOptions()) {
  try_kv_attention(q, cache, batch, out, options).value();
}

// ---------------------------------------------------------------------------
// Multi-head attention module
// ---------------------------------------------------------------------------

// hwyattn_mha_config with its defaults: 0 means "derived" as in C (head_dim =
// embed_dim / num_heads, num_kv_heads = num_heads, kdim = vdim = embed_dim).
struct MhaConfig {
  int64_t embed_dim = 0;
  int64_t num_heads = 0;
  int64_t head_dim = 0;
  int64_t num_kv_heads = 0;
  int64_t kdim = 0;
  int64_t vdim = 0;
  bool has_bias = false;
};

// The projection weights and biases, F32 in the torch nn.Linear layout; see
// hwyattn_mha_weights. Copied when the module is created.
using MhaWeights = hwyattn_mha_weights;

// An hwyattn_mha: a multi-head attention layer with its weights packed.
// Move-only; the destructor frees it. A moved-from module is empty (valid()
// is false) and its forward fails with INVALID_ARGUMENT. forward is const and
// thread-safe: many threads may run one module at once.
class MultiheadAttention {
 public:
  // Creates the module (hwyattn_mha_create); throws an Error if cfg or w is
  // invalid, try_create returns it instead.
  MultiheadAttention(const MhaConfig& cfg, const MhaWeights& w) {
    *this = try_create(cfg, w).value();
  }
  static Result<MultiheadAttention> try_create(const MhaConfig& cfg, const MhaWeights& w) {
    hwyattn_mha_config c;
    hwyattn_mha_config_init(&c);
    c.embed_dim = cfg.embed_dim;
    c.num_heads = cfg.num_heads;
    c.head_dim = cfg.head_dim;
    c.num_kv_heads = cfg.num_kv_heads;
    c.kdim = cfg.kdim;
    c.vdim = cfg.vdim;
    c.has_bias = cfg.has_bias ? 1 : 0;
    hwyattn_mha* m = nullptr;
    const hwyattn_status s = hwyattn_mha_create(&c, &w, &m);
    if (s != HWYATTN_OK) return Error::FromLastError(s);
    return MultiheadAttention(m);
  }
  // Takes ownership of a module made with hwyattn_mha_create (may be null).
  explicit MultiheadAttention(hwyattn_mha* m) noexcept : m_(m) {}

  MultiheadAttention(const MultiheadAttention&) = delete;
  MultiheadAttention& operator=(const MultiheadAttention&) = delete;
  MultiheadAttention(MultiheadAttention&& other) noexcept : m_(other.release()) {}
  MultiheadAttention& operator=(MultiheadAttention&& other) noexcept {
    if (this != &other) {
      hwyattn_mha_destroy(m_);
      m_ = other.release();
    }
    return *this;
  }
  ~MultiheadAttention() { hwyattn_mha_destroy(m_); }

  bool valid() const noexcept { return m_ != nullptr; }
  explicit operator bool() const noexcept { return valid(); }
  const hwyattn_mha* get() const noexcept { return m_; }
  // Gives up ownership: the caller must hwyattn_mha_destroy the result.
  hwyattn_mha* release() noexcept {
    hwyattn_mha* m = m_;
    m_ = nullptr;
    return m;
  }

  // Cross-attention: query [B, Lq, embed_dim], key [B, Lk, kdim], value
  // [B, Lk, vdim], all F32, out [B, Lq, embed_dim] F32, F16 or BF16
  // (hwyattn_mha_forward).
  Result<void> try_forward(const ConstTensorView& query, const ConstTensorView& key,
                           const ConstTensorView& value, const TensorView& out,
                           const SdpaOptions& options = SdpaOptions()) const {
    return Forward(query, &key, &value, out, options);
  }
  void forward(const ConstTensorView& query, const ConstTensorView& key,
               const ConstTensorView& value, const TensorView& out,
               const SdpaOptions& options = SdpaOptions()) const {
    try_forward(query, key, value, out, options).value();
  }
  // Self-attention: key = value = query.
  Result<void> try_forward(const ConstTensorView& query, const TensorView& out,
                           const SdpaOptions& options = SdpaOptions()) const {
    return Forward(query, nullptr, nullptr, out, options);
  }
  void forward(const ConstTensorView& query, const TensorView& out,
               const SdpaOptions& options = SdpaOptions()) const {
    try_forward(query, out, options).value();
  }

 private:
  Result<void> Forward(const ConstTensorView& query, const ConstTensorView* key,
                       const ConstTensorView* value, const TensorView& out,
                       const SdpaOptions& options) const {
    if (m_ == nullptr) {
      return detail::Invalid("MultiheadAttention: the module is empty (moved from or released)");
    }
    hwyattn_sdpa_options c;
    SdpaOptions::CTensors tensors;
    Result<void> r = options.to_c(&c, &tensors);
    if (!r) return r;
    hwyattn_tensor o = out.c_tensor();
    return detail::Check(hwyattn_mha_forward(m_, &query.c_tensor(),
                                             key ? &key->c_tensor() : nullptr,
                                             value ? &value->c_tensor() : nullptr, &o, &c));
  }

  hwyattn_mha* m_ = nullptr;
};

}  // namespace hwyattn

#endif  // HWYATTN_HPP_
