// SPDX-License-Identifier: Apache-2.0
//
// Register tiles that sizeless vectors can be: the kernels' accumulators and
// operand rows as a pack of named local vectors instead of an array.
//
// SVE's vector types (and RVV's) have no size known to the compiler, so they
// cannot be array elements, struct members or captured by value; they can be
// local variables, parameters and references. WithRegisters declares kN
// local vectors (one per level of a compile-time recursion that inlines
// away) and hands them to the body as a pack of references; Nth<I> names one
// of the pack, and Unroll<kN> runs a body once per compile-time index. After
// inlining, the vectors are kN locals of the kernel's frame, which the
// register allocator keeps in registers exactly as it kept the array's
// elements (same instructions on AVX-512: see docs/PERFORMANCE.md).
//
//   WithRegisters<kMR * kNQ>(hn::Zero(df), [&](auto&... acc) HWYATTN_INLINE_LAMBDA {
//     for (size_t k = 0; k < kc; ++k) {
//       Unroll<kMR>([&](auto r) HWYATTN_INLINE_LAMBDA {
//         const auto ar = hn::Set(df, a(k, r));
//         Unroll<kNQ>([&](auto c) HWYATTN_INLINE_LAMBDA {
//           auto& x = Nth<r * kNQ + c>(acc...);
//           x = hn::MulAdd(ar, hn::LoadU(df, b + k * ldb + c * N), x);
//         });
//       });
//     }
//   });

// The lambdas given to these helpers carry HWYATTN_INLINE_LAMBDA (always
// inline, as HWY_INLINE functions are): GCC's heuristics otherwise leave a
// large body (a tile's k loop) out of line, and the vectors of the pack then
// go through memory by reference.
//
//   Unroll<kN>([&](auto i) HWYATTN_INLINE_LAMBDA { ... });
#ifndef HWYATTN_INLINE_LAMBDA
#if defined(__GNUC__) || defined(__clang__)
#define HWYATTN_INLINE_LAMBDA __attribute__((always_inline))
#else
#define HWYATTN_INLINE_LAMBDA
#endif
#endif

// Per-target include guard (foreach_target includes this once per target).
#if defined(HWYATTN_SRC_OPS_REGISTERS_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef HWYATTN_SRC_OPS_REGISTERS_INL_H_
#undef HWYATTN_SRC_OPS_REGISTERS_INL_H_
#else
#define HWYATTN_SRC_OPS_REGISTERS_INL_H_
#endif

#include <stddef.h>

#include <type_traits>
#include <utility>

#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace hwyattn {
namespace HWY_NAMESPACE {

// The compile-time index I, as Unroll passes it (usable as a template
// argument: Nth<i>(...), and converting to size_t).
template <size_t I>
using Index = std::integral_constant<size_t, I>;

namespace detail {
template <class F, size_t... I>
HWY_INLINE void UnrollIndices(F&& f, std::index_sequence<I...>) {
  (f(Index<I>()), ...);
}
}  // namespace detail

// f(Index<0>()), f(Index<1>()), ..., f(Index<kN - 1>()), in order.
template <size_t kN, class F>
HWY_INLINE void Unroll(F&& f) {
  detail::UnrollIndices(f, std::make_index_sequence<kN>());
}

// The I-th of a pack of references.
template <size_t I, class V, class... Vs>
HWY_INLINE V& Nth(V& first, Vs&... rest) {
  if constexpr (I == 0) {
    return first;
  } else {
    return Nth<I - 1>(rest...);
  }
}

// Calls body(v_0, ..., v_{kN-1}) with kN local vectors, each initialised to
// init; body takes them as `auto&... v`. Returns what body returns.
template <size_t kN, class V, class Body, class... Vs>
HWY_INLINE decltype(auto) WithRegisters(V init, Body&& body, Vs&... regs) {
  if constexpr (sizeof...(Vs) == kN) {
    return body(regs...);
  } else {
    V next = init;
    return WithRegisters<kN>(init, body, regs..., next);
  }
}

// Calls body(v_0, ..., v_{kN-1}) with v_i = make(Index<i>()): registers
// loaded or computed one by one.
template <size_t kN, class Make, class Body, class... Vs>
HWY_INLINE decltype(auto) WithRegistersFrom(Make&& make, Body&& body, Vs&... regs) {
  if constexpr (sizeof...(Vs) == kN) {
    return body(regs...);
  } else {
    auto next = make(Index<sizeof...(Vs)>());
    return WithRegistersFrom<kN>(make, body, regs..., next);
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace hwyattn
HWY_AFTER_NAMESPACE();

#endif  // HWYATTN_SRC_OPS_REGISTERS_INL_H_
