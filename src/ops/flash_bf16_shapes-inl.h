// SPDX-License-Identifier: Apache-2.0
//
// ScoreTile and ValueTile (flash_bf16.h) of one instruction set's bf16 tiles:
// the one home of the step from a call's run-time shape (1 to
// kBf16TileVectors query vectors, 1 to kTileRows value dims) to the tiles'
// compile-time shapes, for AVX512_BF16 (flash_bf16.cc), NEON's BFDOT
// (flash_bf16_neon.cc) and SVE's (flash_bf16_sve.cc).
//
// Not a header of its own: each of those files includes it once, inside its
// namespace (avx512_bf16, neon_bf16, sve_bf16), after defining there, under
// its target attribute HWYATTN_BF16_TARGET (which every function below
// carries, so that the tiles inline into them):
//   kValueRowsAtRunTime  false: ValueTileFixed has its number of value dims
//       at compile time (kRows, one instance per number); true: the tile
//       takes `rows` at run time (SVE: predicated loads and stores);
//   ScoreTileFixed<kVectors>(pairs, k_pairs, q_pairs, ldq, scale, s, lds)
//       (AVX512_BF16 and NEON: from flash_bf16_tiles-inl.h);
//   ValueTileFixed<kRows, kVectors>(pairs, v_pairs, ldv, p_pairs, ldp, alpha,
//       o, ldo), or where kValueRowsAtRunTime
//       ValueTileFixed<kVectors>(rows, pairs, v_pairs, ...).

static_assert(kBf16TileVectors == 3, "the switches below take 1, 2 or 3 query vectors");

namespace {

// One value tile of `rows` = kRows value dims (or any `rows` where
// kValueRowsAtRunTime) and kVectors query vectors.
template <size_t kRows, size_t kVectors>
HWYATTN_BF16_TARGET inline void ValueTileOf(size_t rows, size_t pairs, const uint32_t* v_pairs,
                                            size_t ldv, const uint32_t* p_pairs, size_t ldp,
                                            const float* alpha, float* o, size_t ldo) {
  if constexpr (kValueRowsAtRunTime) {
    ValueTileFixed<kVectors>(rows, pairs, v_pairs, ldv, p_pairs, ldp, alpha, o, ldo);
  } else {
    ValueTileFixed<kRows, kVectors>(pairs, v_pairs, ldv, p_pairs, ldp, alpha, o, ldo);
  }
}

// ValueTile with at most kRows value dims: the tile of exactly `rows` of them.
template <size_t kRows>
HWYATTN_BF16_TARGET void ValueTileRows(size_t rows, size_t vectors, size_t pairs,
                                       const uint32_t* v_pairs, size_t ldv, const uint32_t* p_pairs,
                                       size_t ldp, const float* alpha, float* o, size_t ldo) {
  if constexpr (kRows > 1 && !kValueRowsAtRunTime) {
    if (rows < kRows) {
      ValueTileRows<kRows - 1>(rows, vectors, pairs, v_pairs, ldv, p_pairs, ldp, alpha, o, ldo);
      return;
    }
  }
  switch (vectors) {
    case 1: ValueTileOf<kRows, 1>(rows, pairs, v_pairs, ldv, p_pairs, ldp, alpha, o, ldo); break;
    case 2: ValueTileOf<kRows, 2>(rows, pairs, v_pairs, ldv, p_pairs, ldp, alpha, o, ldo); break;
    default: ValueTileOf<kRows, 3>(rows, pairs, v_pairs, ldv, p_pairs, ldp, alpha, o, ldo); break;
  }
}

}  // namespace

HWYATTN_BF16_TARGET void ScoreTile(size_t vectors, size_t pairs, const uint32_t* k_pairs,
                                   const uint32_t* q_pairs, size_t ldq, float scale, float* s,
                                   size_t lds) {
  switch (vectors) {
    case 1: ScoreTileFixed<1>(pairs, k_pairs, q_pairs, ldq, scale, s, lds); break;
    case 2: ScoreTileFixed<2>(pairs, k_pairs, q_pairs, ldq, scale, s, lds); break;
    default: ScoreTileFixed<3>(pairs, k_pairs, q_pairs, ldq, scale, s, lds); break;
  }
}

HWYATTN_BF16_TARGET void ValueTile(size_t rows, size_t vectors, size_t pairs,
                                   const uint32_t* v_pairs, size_t ldv, const uint32_t* p_pairs,
                                   size_t ldp, const float* alpha, float* o, size_t ldo) {
  ValueTileRows<kTileRows>(rows, vectors, pairs, v_pairs, ldv, p_pairs, ldp, alpha, o, ldo);
}
