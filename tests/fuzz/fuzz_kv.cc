// SPDX-License-Identifier: Apache-2.0
//
// The KV-cache part of the fuzz target (fuzz_sdpa.cc calls FuzzKv):
// hwyattn_kv_cache_write and hwyattn_kv_attention on small shapes (a few
// sequences of up to 40 keys, pages of 1..9 slots, F32/F16/BF16/I8/FP8
// caches with every scale layout (FP8 also without scales) and ggml's block
// formats (head dims 32 or 64, random blocks), with or without
// a block table, explicit or default positions, every score modifier), then
// optionally one corrupted index (a page id, a q_start or kv_len entry, a
// q_pos, a slot) or field (a scale the caller fixed among them).
// Every buffer is its own heap block of exactly its bytes.
//
//  - A write the library accepts must have had slots inside the pool and
//    none twice; it changes exactly the written slots, and an F32 cache
//    holds the inputs exactly.
//  - An attention call the library accepts must be one the double oracle
//    (ReferenceKvAttention) can compute (every page id it needs in range),
//    and match it within 1e-5 of max(max|reference|, max|V|) (plus the
//    scores' float32 roundings, and under bf16 products, one call in four,
//    what bf16's roundings can move).
//  - A call it rejects returns an error with a message and leaves every
//    output byte unchanged.

#include <fuzzer/FuzzedDataProvider.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "hwyattn.h"
#include "tests/reference.h"

namespace {

[[noreturn]] void Die(const char* what, const std::string& detail) {
  fprintf(stderr, "fuzz_kv: %s: %s\n", what, detail.c_str());
  abort();
}

// A heap block of exactly `bytes` (at least 1, so that data is never NULL).
struct Block {
  std::unique_ptr<unsigned char[]> data;
  size_t bytes = 0;
  explicit Block(size_t n) : data(new unsigned char[std::max<size_t>(n, 1)]), bytes(n) {}
  std::string Copy() const { return std::string(reinterpret_cast<const char*>(data.get()), bytes); }
  bool Same(const std::string& s) const {
    return bytes == s.size() && memcmp(data.get(), s.data(), bytes) == 0;
  }
};

void StoreFloat(hwyattn_dtype dtype, float x, unsigned char* p) {
  if (dtype == HWYATTN_F32) {
    memcpy(p, &x, 4);
  } else {
    const uint16_t h =
        dtype == HWYATTN_F16 ? hwyattn_test::FloatToF16(x) : hwyattn_test::FloatToBf16(x);
    memcpy(p, &h, 2);
  }
}

// Values in [-2, 2] from the input (exact in every dtype's range).
float Value(FuzzedDataProvider& in) {
  return static_cast<float>(in.ConsumeIntegralInRange<int32_t>(-256, 256)) / 128.0f;
}

void ExpectError(hwyattn_status s, const std::vector<std::pair<const Block*, std::string>>& outs) {
  if (s != HWYATTN_INVALID_ARGUMENT && s != HWYATTN_UNSUPPORTED && s != HWYATTN_OUT_OF_MEMORY) {
    Die("status", hwyattn_status_string(s));
  }
  if (hwyattn_last_error()[0] == '\0') Die("last_error", "empty after a failure");
  for (const auto& o : outs) {
    if (!o.first->Same(o.second)) Die("output written by a failing call", hwyattn_last_error());
  }
}

}  // namespace

int FuzzKv(FuzzedDataProvider& in, const hwyattn_parallel* pool) {
  const int64_t Hkv = in.ConsumeIntegralInRange(1, 3), G = in.ConsumeIntegralInRange(1, 3);
  const int64_t Hq = Hkv * G, S = in.ConsumeIntegralInRange(1, 9);
  const hwyattn_dtype dtypes[13] = {HWYATTN_F32,    HWYATTN_F16,    HWYATTN_BF16, HWYATTN_I8,
                                    HWYATTN_F8E4M3, HWYATTN_F8E5M2, HWYATTN_Q8_0, HWYATTN_Q4_0,
                                    HWYATTN_Q4_1,   HWYATTN_Q5_0,   HWYATTN_Q5_1, HWYATTN_IQ4_NL,
                                    HWYATTN_I4};
  const hwyattn_dtype dtype = dtypes[in.ConsumeIntegralInRange(0, 12)];
  // ggml's block formats: rows of blocks of 32 (and no scale tensors); I4:
  // even head dims, so that dense rows start on a byte.
  const size_t block = hwyattn_test::BlockBytes(dtype);
  const bool int4 = dtype == HWYATTN_I4;
  auto draw_dim = [&] {
    return block  ? 32 * in.ConsumeIntegralInRange(1, 2)
           : int4 ? 2 * in.ConsumeIntegralInRange(1, 9)
                  : in.ConsumeIntegralInRange(1, 17);
  };
  const int64_t D = draw_dim();
  const int64_t Dv = in.ConsumeBool() ? D : draw_dim();
  const bool quantized =
      dtype == HWYATTN_I8 || int4 || dtype == HWYATTN_F8E4M3 || dtype == HWYATTN_F8E5M2;
  const bool fp8 = quantized && dtype != HWYATTN_I8 && !int4;
  // Scale layouts: 0 per token, 1 per channel, 2 per kv head, 3 per tensor.
  const int k_layout = in.ConsumeIntegralInRange(0, 3), v_layout = in.ConsumeIntegralInRange(0, 3);
  const bool k_token = k_layout == 0, v_token = v_layout == 0;
  const bool scales = !fp8 || in.ConsumeBool();  // FP8: maybe none (scale 1)
  const int32_t n = in.ConsumeIntegralInRange(1, 4);
  const bool causal = in.ConsumeBool(), explicit_pos = in.ConsumeBool();
  std::vector<int32_t> kv_len(n), q_start(n + 1, 0), q_pos(n);
  int64_t pages = 0, max_pages = 0;
  for (int32_t s = 0; s < n; ++s) {
    kv_len[s] = in.ConsumeIntegralInRange(0, 40);
    int32_t q_len = in.ConsumeIntegralInRange(0, 5);
    if (causal) q_len = std::min(q_len, kv_len[s]);
    q_start[s + 1] = q_start[s] + q_len;
    q_pos[s] = explicit_pos && kv_len[s] >= q_len ? in.ConsumeIntegralInRange(0, kv_len[s] - q_len)
                                                  : std::max(0, kv_len[s] - q_len);
    const int64_t need = (kv_len[s] + S - 1) / S;
    pages += need;
    max_pages = std::max(max_pages, need);
  }
  const int32_t T = q_start[n];
  if (T == 0) return 0;  // a q tensor needs a token
  const bool table = in.ConsumeBool() || max_pages > 1;
  const int64_t P = table ? pages + in.ConsumeIntegralInRange(0, 3) : n;
  if (P == 0) return 0;
  const int64_t stride = max_pages + in.ConsumeIntegralInRange(0, 2);
  std::vector<int32_t> block_table(static_cast<size_t>(std::max<int64_t>(n * stride, 1)), -1);
  {
    std::vector<int32_t> perm(static_cast<size_t>(P));
    for (int64_t i = 0; i < P; ++i) perm[i] = static_cast<int32_t>(i);
    for (int64_t i = P - 1; i > 0; --i)
      std::swap(perm[i], perm[in.ConsumeIntegralInRange<int64_t>(0, i)]);
    int64_t next = 0;
    for (int32_t s = 0; s < n && table; ++s) {
      for (int64_t j = 0; j < (kv_len[s] + S - 1) / S; ++j)
        block_table[s * stride + j] = perm[next++];
    }
  }
  // The pool (every slot filled: unread slots hold values too, so that the
  // check below can only catch wrong reads, not uninitialised ones).
  // FP8 keys: any finite value, or (half the draws) below 2 in magnitude,
  // so that scores stay small enough for the output to be checked tightly
  // (huge keys make huge scores, whose float32 roundings the tolerance
  // must then allow: ScoreTolerance).
  const bool small_keys = fp8 && in.ConsumeBool();
  const size_t es = block || int4 ? 1 : hwyattn_test::DtypeSize(dtype);  // packed: bytes
  Block kp(hwyattn_test::StorageBytes(dtype, P * Hkv * S * D)),
      vp(hwyattn_test::StorageBytes(dtype, P * Hkv * S * Dv));
  for (Block* b : {&kp, &vp}) {
    for (size_t e = 0; e < b->bytes / es; ++e) {
      if (block) {  // any numbers; each block's d (and m) in [-1/16, 1/16]
        b->data[e] = static_cast<unsigned char>(in.ConsumeIntegral<uint8_t>());
        const size_t at = e % block;
        const bool offset = dtype == HWYATTN_Q4_1 || dtype == HWYATTN_Q5_1;
        if (at == 1 || (offset && at == 3)) {
          const float x = static_cast<float>(in.ConsumeIntegralInRange(-64, 64)) / 1024.0f;
          const uint16_t h = hwyattn_test::FloatToF16(x);
          memcpy(b->data.get() + e - 1, &h, 2);
        }
      } else if (dtype == HWYATTN_I8 || int4) {
        b->data[e] = static_cast<unsigned char>(in.ConsumeIntegral<uint8_t>());
      } else if (fp8) {  // any finite number (NaN and infinities become small ones)
        uint8_t x = in.ConsumeIntegral<uint8_t>();
        if (!std::isfinite(hwyattn_test::Fp8ToDouble(dtype, x))) x &= 0x83;
        if (b == &kp && small_keys) x &= 0xBF;  // exponent field < bias: |k| < 2
        b->data[e] = x;
      } else {
        StoreFloat(dtype, Value(in), b->data.get() + e * es);
      }
    }
  }
  const int64_t kscale_n = k_token ? P * Hkv * S : Hkv * D,
                vscale_n = v_token ? P * Hkv * S : Hkv * Dv;  // at least the layout's
  // Room for twice the elements and one more: corruption 7 below grows one
  // dimension of the K scales' shape by 1, which can make a different layout
  // that the library must then read in full (memory the caller owns).
  Block ks(static_cast<size_t>(2 * kscale_n + 1) * 4),
      vs(static_cast<size_t>(2 * vscale_n + 1) * 4);
  for (Block* b : {&ks, &vs}) {
    for (size_t e = 0; e < b->bytes / 4; ++e) {
      const float x = static_cast<float>(in.ConsumeIntegralInRange(1, 64)) / 1024.0f;
      memcpy(b->data.get() + e * 4, &x, 4);
    }
  }
  hwyattn_kv_cache cache;
  hwyattn_kv_cache_init(&cache);
  const int64_t kshape[4] = {P, Hkv, S, D}, vshape[4] = {P, Hkv, S, Dv};
  hwyattn_tensor_contiguous(&cache.k, kp.data.get(), dtype, 4, kshape);
  hwyattn_tensor_contiguous(&cache.v, vp.data.get(), dtype, 4, vshape);
  if (in.ConsumeBool()) {  // FlashAttention's page layout [P, S, Hkv, dim]
    cache.k.stride[1] = D, cache.k.stride[2] = Hkv * D;
    cache.v.stride[1] = Dv, cache.v.stride[2] = Hkv * Dv;
  }
  hwyattn_tensor tks, tvs;
  const int64_t kshapes[4][4] = {{P, Hkv, S, 1}, {1, Hkv, 1, D}, {1, Hkv, 1, 1}, {1, 1, 1, 1}};
  const int64_t vshapes[4][4] = {{P, Hkv, S, 1}, {1, Hkv, 1, Dv}, {1, Hkv, 1, 1}, {1, 1, 1, 1}};
  // The library takes a scale tensor of the per-token shape as per token
  // (include/hwyattn.h): with one page of one slot, a per-head, per-tensor
  // or (D = 1) per-channel tensor is one, whose values are data, not checked.
  const int64_t* kdims = kshapes[k_layout];
  const bool k_read_per_token = kdims[0] == P && kdims[1] == Hkv && kdims[2] == S && kdims[3] == 1;
  hwyattn_tensor_contiguous(&tks, ks.data.get(), HWYATTN_F32, 4, kshapes[k_layout]);
  hwyattn_tensor_contiguous(&tvs, vs.data.get(), HWYATTN_F32, 4, vshapes[v_layout]);
  if (quantized && scales) {
    cache.k_scale = &tks;
    cache.v_scale = &tvs;
  }
  if (table) {
    cache.block_table = block_table.data();
    cache.block_table_stride = stride;
  }

  hwyattn_sdpa_options opts;
  hwyattn_sdpa_options_init(&opts);
  opts.parallel = pool;

  // A write of a few tokens (slots may repeat or leave the pool).
  if (in.ConsumeBool()) {
    const int64_t W = in.ConsumeIntegralInRange(1, 6);
    std::vector<int64_t> slot(static_cast<size_t>(W));
    bool valid = true;
    for (int64_t t = 0; t < W; ++t) {
      slot[t] = in.ConsumeIntegralInRange<int64_t>(-2, P * S + (in.ConsumeBool() ? 1 : 0) - 1);
      if (slot[t] >= P * S) valid = false;
      for (int64_t u = 0; u < t; ++u) valid = valid && !(slot[t] >= 0 && slot[u] == slot[t]);
    }
    Block kn(static_cast<size_t>(W * Hkv * D) * 4), vn(static_cast<size_t>(W * Hkv * Dv) * 4);
    for (Block* b : {&kn, &vn}) {
      for (size_t e = 0; e < b->bytes / 4; ++e)
        StoreFloat(HWYATTN_F32, Value(in), b->data.get() + e * 4);
    }
    hwyattn_tensor tkn, tvn;
    const int64_t kns[3] = {W, Hkv, D}, vns[3] = {W, Hkv, Dv};
    hwyattn_tensor_contiguous(&tkn, kn.data.get(), HWYATTN_F32, 3, kns);
    hwyattn_tensor_contiguous(&tvn, vn.data.get(), HWYATTN_F32, 3, vns);
    const std::string k0 = kp.Copy(), v0 = vp.Copy(), ks0 = ks.Copy();
    const hwyattn_status s = hwyattn_kv_cache_write(&cache, &tkn, &tvn, slot.data(), &opts);
    if (s != HWYATTN_OK) {
      if (valid) Die("write", std::string("a valid write was rejected: ") + hwyattn_last_error());
      ExpectError(s, {{&kp, k0}, {&vp, v0}, {&ks, ks0}});
    } else {
      if (!valid) Die("write", "slots out of the pool or repeated were accepted");
      // Unwritten slots keep their bytes; F32 caches hold the inputs exactly.
      std::vector<bool> written(static_cast<size_t>(P * S), false);
      for (int64_t t = 0; t < W; ++t) {
        if (slot[t] >= 0) written[static_cast<size_t>(slot[t])] = true;
      }
      for (int64_t pg = 0; pg < P; ++pg) {
        for (int64_t h = 0; h < Hkv; ++h) {
          for (int64_t o = 0; o < S; ++o) {
            if (written[static_cast<size_t>(pg * S + o)]) continue;
            const size_t at = hwyattn_test::StorageBytes(
                dtype, pg * cache.k.stride[0] + h * cache.k.stride[1] + o * cache.k.stride[2]);
            if (memcmp(kp.data.get() + at, k0.data() + at, hwyattn_test::StorageBytes(dtype, D)) !=
                0)
              Die("write", "an unwritten slot changed");
          }
        }
      }
      if (fp8 && !scales) {  // FP8 without scales: the nearest number of each input
        for (int64_t t = 0; t < W; ++t) {
          if (slot[t] < 0) continue;
          const int64_t pg = slot[t] / S, o = slot[t] % S;
          for (int64_t h = 0; h < Hkv; ++h) {
            for (int64_t d = 0; d < D; ++d) {
              float x;
              memcpy(&x, kn.data.get() + ((t * Hkv + h) * D + d) * 4, 4);
              const uint8_t got = kp.data[static_cast<size_t>(
                  pg * cache.k.stride[0] + h * cache.k.stride[1] + o * cache.k.stride[2] + d)];
              if (got != hwyattn_test::NearestFp8(dtype, x))
                Die("write", "an FP8 slot does not hold its input's nearest number");
            }
          }
        }
      }
      if (dtype == HWYATTN_F32) {
        for (int64_t t = 0; t < W; ++t) {
          if (slot[t] < 0) continue;
          const int64_t pg = slot[t] / S, o = slot[t] % S;
          for (int64_t h = 0; h < Hkv; ++h) {
            for (int64_t d = 0; d < D; ++d) {
              float got, want;
              memcpy(&got,
                     kp.data.get() + (pg * cache.k.stride[0] + h * cache.k.stride[1] +
                                      o * cache.k.stride[2] + d) *
                                         4,
                     4);
              memcpy(&want, kn.data.get() + ((t * Hkv + h) * D + d) * 4, 4);
              if (got != want) Die("write", "an F32 slot does not hold its input");
            }
          }
        }
      }
    }
  }

  // The attention call.
  Block q(static_cast<size_t>(T * Hq * D) * 4), out(static_cast<size_t>(T * Hq * Dv) * 4);
  Block lse(static_cast<size_t>(T * Hq) * 4);
  for (size_t e = 0; e < q.bytes / 4; ++e) StoreFloat(HWYATTN_F32, Value(in), q.data.get() + e * 4);
  memset(out.data.get(), 0x7F, out.bytes);
  memset(lse.data.get(), 0x7F, lse.bytes);
  hwyattn_tensor tq, to, tl;
  const int64_t qs[3] = {T, Hq, D}, os[3] = {T, Hq, Dv}, ls[2] = {T, Hq};
  hwyattn_tensor_contiguous(&tq, q.data.get(), HWYATTN_F32, 3, qs);
  hwyattn_tensor_contiguous(&to, out.data.get(), HWYATTN_F32, 3, os);
  hwyattn_tensor_contiguous(&tl, lse.data.get(), HWYATTN_F32, 2, ls);
  hwyattn_kv_batch batch;
  hwyattn_kv_batch_init(&batch);
  batch.num_seqs = n;
  batch.q_start = q_start.data();
  batch.kv_len = kv_len.data();
  if (explicit_pos) batch.q_pos = q_pos.data();
  opts.causal = causal ? HWYATTN_CAUSAL_BOTTOM_RIGHT : HWYATTN_CAUSAL_NONE;
  opts.lse = in.ConsumeBool() ? &tl : nullptr;
  std::vector<float> per_head(static_cast<size_t>(Hq));
  for (float& x : per_head) x = Value(in);
  if (in.ConsumeBool()) opts.window_left = in.ConsumeIntegralInRange(0, 8);
  if (in.ConsumeBool()) opts.window_right = in.ConsumeIntegralInRange(0, 8);
  if (in.ConsumeBool()) opts.softcap = static_cast<float>(in.ConsumeIntegralInRange(1, 8)) * 0.5f;
  if (in.ConsumeBool()) opts.alibi_slopes = per_head.data();
  if (in.ConsumeBool()) opts.sinks = per_head.data();
  // bf16 products one call in four (the decode kernel's AVX512_BF16 loops
  // where the CPU has them, I8 and FP8 caches included).
  const bool bf16 = in.ConsumeIntegralInRange(0, 3) == 0;
  if (bf16) opts.precision = HWYATTN_PRECISION_BF16;
  // Integer products one call in three of the others (F32 on a float K),
  // checked against the unquantized oracle within the header's bound; not
  // with per-channel K scales, which scale the query before its rounding
  // (kv_attention_test checks those against the oracle on the rule's query).
  const bool int8 = !bf16 && k_layout != 1 && in.ConsumeIntegralInRange(0, 2) == 0;
  if (int8) opts.precision = HWYATTN_PRECISION_INT8;
  // One corruption, maybe.
  switch (in.ConsumeIntegralInRange(0, 10)) {
    case 1:
      if (table)
        block_table[in.ConsumeIntegralInRange<size_t>(0, block_table.size() - 1)] =
            in.ConsumeIntegral<int32_t>();
      break;
    case 2: q_start[in.ConsumeIntegralInRange(0, n)] = in.ConsumeIntegralInRange(-2, T + 2); break;
    case 3: kv_len[in.ConsumeIntegralInRange(0, n - 1)] = in.ConsumeIntegralInRange(-2, 60); break;
    case 4:
      q_pos[in.ConsumeIntegralInRange(0, n - 1)] = in.ConsumeIntegralInRange(-2, 60);
      batch.q_pos = q_pos.data();
      break;
    case 5: cache.block_table_stride = in.ConsumeIntegralInRange<int64_t>(-1, stride); break;
    case 6: cache.k_scale = nullptr; break;  // FP8 without scales: v_scale = NULL too
    case 9: {  // a scale the caller fixed: 0, negative, NaN or infinite
      const float bad[4] = {0.0f, -1.0f, NAN, INFINITY};
      if (!k_read_per_token) memcpy(ks.data.get(), &bad[in.ConsumeIntegralInRange(0, 3)], 4);
      break;
    }
    case 7: tks.shape[in.ConsumeIntegralInRange(0, 3)] += 1; break;
    case 8:
      opts.causal =
          opts.causal == HWYATTN_CAUSAL_NONE ? HWYATTN_CAUSAL_TOP_LEFT : HWYATTN_CAUSAL_NONE;
      break;
    default: break;
  }
  const std::string out0 = out.Copy(), lse0 = lse.Copy();
  const hwyattn_status s = hwyattn_kv_attention(&tq, &cache, &batch, &to, &opts);
  if (s != HWYATTN_OK) {
    ExpectError(s, {{&out, out0}, {&lse, lse0}});
    return 0;
  }
  // Accepted: the oracle must be able to compute it, and agree. First the
  // rules the oracle does not check itself.
  const bool is_causal = opts.causal != HWYATTN_CAUSAL_NONE;
  if (cache.k_scale != nullptr && !k_read_per_token) {
    float k0;
    memcpy(&k0, ks.data.get(), 4);
    if (!(k0 > 0.0f) || std::isinf(k0)) Die("accepted", "a fixed scale not finite and > 0");
  }
  if (q_start[0] != 0 || q_start[n] != T) Die("accepted", "q_start does not cover [0, T)");
  for (int32_t s2 = 0; s2 < n; ++s2) {
    const int32_t ql = q_start[s2 + 1] - q_start[s2];
    const int64_t pos = batch.q_pos != nullptr ? q_pos[s2] : kv_len[s2] - ql;
    if (ql < 0 || kv_len[s2] < 0) Die("accepted", "a negative q_len or kv_len");
    if (batch.q_pos != nullptr && pos < 0) Die("accepted", "a negative q_pos");
    if (is_causal && ql > 0 && (pos < 0 || pos + ql > kv_len[s2]))
      Die("accepted", "a causal query without its key");
    if (table && (kv_len[s2] + S - 1) / S > cache.block_table_stride)
      Die("accepted", "a block table too short");
  }
  hwyattn_test::KvRefResult ref;
  std::string error;
  if (!hwyattn_test::ReferenceKvAttention(tq, cache, batch, &opts, &ref, &error)) {
    Die("accepted a call the oracle refuses", error);
  }
  double max_ref = 0, max_err = 0, max_v = 0;
  for (int64_t pg = 0; pg < P; ++pg)
    for (int64_t h = 0; h < Hkv; ++h)
      for (int64_t o = 0; o < S; ++o)
        for (int64_t d = 0; d < Dv; ++d)
          max_v =
              std::max(max_v, std::fabs(hwyattn_test::ReadCacheValue(cache, true, pg, h, o, d)));
  for (size_t e = 0; e < ref.out.size(); ++e) {
    float got;
    memcpy(&got, out.data.get() + e * 4, 4);
    if (!std::isfinite(got)) Die("out", "non-finite output for finite inputs");
    max_ref = std::max(max_ref, std::fabs(ref.out[e]));
    max_err = std::max(max_err, std::fabs(got - ref.out[e]));
  }
  // Large scores (an FP8 cache's keys reach 57344) carry proportionally
  // large float32 roundings in the exponent (ScoreTolerance).
  double score_tol = hwyattn_test::ScoreTolerance(ref.score_magnitude, D);
  // bf16 products against the unrounded oracle: q and k within 2^-9 each
  // move a score by 2^-8 of the score magnitude M at most, so a weight by a
  // factor within exp(+-2^-7 M) of its own (the normalisation included);
  // P's and V's roundings add 2^-8 max|v|.
  if (bf16) score_tol += std::expm1(std::ldexp(ref.score_magnitude, -7)) + std::ldexp(1.0, -7);
  // INT8: each score within e = scale * sum_b max_b|q| / 254 * sum_b |k| of
  // the unquantized query's (the header), bounded by the largest |q| and
  // the largest key row's sum; a weight moves by a factor within exp(+-2e).
  if (int8) {
    double q_max = 0, k_sum = 0;
    for (size_t e = 0; e < q.bytes / 4; ++e) {
      float x;
      memcpy(&x, q.data.get() + e * 4, 4);
      q_max = std::max(q_max, std::fabs(static_cast<double>(x)));
    }
    for (int64_t pg = 0; pg < P; ++pg)
      for (int64_t h = 0; h < Hkv; ++h)
        for (int64_t o = 0; o < S; ++o) {
          double sum = 0;
          for (int64_t d = 0; d < D; ++d)
            sum += std::fabs(hwyattn_test::ReadCacheValue(cache, false, pg, h, o, d));
          if (std::isfinite(sum)) k_sum = std::max(k_sum, sum);
        }
    const double e = q_max / 254.0 * k_sum / std::sqrt(static_cast<double>(D));
    score_tol += std::expm1(2.0 * e) + 2.0 * e;
  }
  if (max_err > (1e-5 + score_tol) * std::max({max_ref, max_v, 1e-30}) && max_err > 1e-30) {
    char buf[160];
    snprintf(buf, sizeof(buf), "max|err| %g vs max|ref| %g, max|v| %g", max_err, max_ref, max_v);
    Die("out", buf);
  }
  if (opts.lse != nullptr) {
    for (size_t e = 0; e < ref.lse.size(); ++e) {
      float got;
      memcpy(&got, lse.data.get() + e * 4, 4);
      const double want = ref.lse[e];
      if (std::isinf(want)
              ? got != want
              : std::fabs(got - want) > 1e-5 * std::max(1.0, std::fabs(want)) + score_tol / 2) {
        Die("lse", "differs from the oracle at row " + std::to_string(e));
      }
    }
  }
  return 0;
}
