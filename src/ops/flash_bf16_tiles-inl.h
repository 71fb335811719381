// SPDX-License-Identifier: Apache-2.0
//
// ScoreTileFixed and ValueTileFixed (flash_bf16_shapes-inl.h) of the bf16
// tiles whose accumulators are arrays of fixed-size vectors: AVX512_BF16
// (flash_bf16.cc) and NEON's BFDOT (flash_bf16_neon.cc). SVE's vectors are
// sizeless and cannot form arrays: flash_bf16_sve.cc writes its own.
//
// Not a header of its own: each of those files includes it once, inside its
// anonymous namespace, after defining there, under HWYATTN_BF16_TARGET:
//   Acc                     the fp32 accumulator vector (kLanes lanes);
//   Zero(), Set(x), Load(p), Mul(a, b), Store(p, a);
//   DotStep<kRows, kVectors>(acc, vecs, rows): acc[r][c] += (row r's pair
//       at rows[r]) . (the vector of pairs at vecs + c * kLanes).

// kTileRows keys' scores against kVectors vectors of query rows: s[r][c] =
// scale * sum over pairs of k[r] . q[c].
template <size_t kVectors>
HWYATTN_BF16_TARGET inline void ScoreTileFixed(size_t pairs, const uint32_t* k_pairs,
                                               const uint32_t* q_pairs, size_t ldq, float scale,
                                               float* s, size_t lds) {
  Acc acc[kTileRows][kVectors];
#pragma GCC unroll 16
  for (size_t r = 0; r < kTileRows; ++r)
#pragma GCC unroll 16
    for (size_t c = 0; c < kVectors; ++c) acc[r][c] = Zero();
  for (size_t i = 0; i < pairs; ++i) {
    DotStep<kTileRows, kVectors>(acc, q_pairs + i * ldq, k_pairs + i * kTileRows);
  }
  const Acc sc = Set(scale);
#pragma GCC unroll 16
  for (size_t r = 0; r < kTileRows; ++r)
#pragma GCC unroll 16
    for (size_t c = 0; c < kVectors; ++c) Store(s + r * lds + c * kLanes, Mul(acc[r][c], sc));
}

// kRows value dims of kVectors vectors of query rows: o[r][c] = o[r][c] *
// alpha[c] + sum over pairs of v[r] . p[c].
template <size_t kRows, size_t kVectors>
HWYATTN_BF16_TARGET inline void ValueTileFixed(size_t pairs, const uint32_t* v_pairs, size_t ldv,
                                               const uint32_t* p_pairs, size_t ldp,
                                               const float* alpha, float* o, size_t ldo) {
  Acc acc[kRows][kVectors];
#pragma GCC unroll 16
  for (size_t c = 0; c < kVectors; ++c) {
    const Acc a = Load(alpha + c * kLanes);
#pragma GCC unroll 16
    for (size_t r = 0; r < kRows; ++r) acc[r][c] = Mul(Load(o + r * ldo + c * kLanes), a);
  }
  for (size_t i = 0; i < pairs; ++i) {
    DotStep<kRows, kVectors>(acc, p_pairs + i * ldp, v_pairs + i * ldv);
  }
#pragma GCC unroll 16
  for (size_t r = 0; r < kRows; ++r)
#pragma GCC unroll 16
    for (size_t c = 0; c < kVectors; ++c) Store(o + r * ldo + c * kLanes, acc[r][c]);
}
