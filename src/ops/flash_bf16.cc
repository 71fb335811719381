// SPDX-License-Identifier: Apache-2.0
//
// AVX512_BF16 register tiles (see flash_bf16.h). Not a foreach_target unit:
// one copy for x86-64, each function under a target attribute.
#include "src/ops/flash_bf16.h"
#include "src/targets.h"

#if HWYATTN_BF16_DOT_COMPILED && defined(__x86_64__)
#include "src/ops/bf16_dot_avx512.h"

namespace hwyattn {
namespace avx512_bf16 {
namespace {

static_assert(kLanes == kPairLanes, "flash_bf16.h's lanes are the step's");

using Acc = __m512;
HWYATTN_BF16_TARGET inline Acc Zero() { return _mm512_setzero_ps(); }
HWYATTN_BF16_TARGET inline Acc Set(float x) { return _mm512_set1_ps(x); }
HWYATTN_BF16_TARGET inline Acc Load(const float* p) { return _mm512_loadu_ps(p); }
HWYATTN_BF16_TARGET inline Acc Mul(Acc a, Acc b) { return _mm512_mul_ps(a, b); }
HWYATTN_BF16_TARGET inline void Store(float* p, Acc a) { _mm512_storeu_ps(p, a); }

#include "src/ops/flash_bf16_tiles-inl.h"

constexpr bool kValueRowsAtRunTime = false;

}  // namespace

#include "src/ops/flash_bf16_shapes-inl.h"

}  // namespace avx512_bf16
}  // namespace hwyattn

#endif  // HWYATTN_BF16_DOT_COMPILED && __x86_64__
