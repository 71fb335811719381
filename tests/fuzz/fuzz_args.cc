// SPDX-License-Identifier: Apache-2.0

#include "tests/fuzz/fuzz_args.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <cmath>

#include "tests/reference.h"

namespace hwyattn_fuzz {

[[noreturn]] void Die(const char* what, const std::string& detail) {
  fprintf(stderr, "fuzz: %s: %s\n", what, detail.c_str());
  abort();
}

size_t ElemSize(hwyattn_dtype t) { return hwyattn_test::DtypeSize(t); }

bool IsBlockFormat(hwyattn_dtype t) { return hwyattn_test::BlockBytes(t) != 0; }

// Elements the descriptor spans, or -1 if it is certainly invalid.
int64_t Span(const hwyattn_tensor& t) {
  if (t.rank < 1 || t.rank > 4) return -1;
  int64_t last = 0;
  for (int i = 0; i < t.rank; ++i) {
    if (t.shape[i] < 1 || t.stride[i] < 0) return -1;
    int64_t step;
    if (__builtin_mul_overflow(t.shape[i] - 1, t.stride[i], &step) ||
        __builtin_add_overflow(last, step, &last)) {
      return -1;
    }
  }
  if (last == INT64_MAX) return INT64_MAX;  // too large to allocate: skipped
  return last + 1;
}

// Allocates the block for a (possibly corrupted) descriptor. False: too big.
bool Allocate(Arg* a) {
  int64_t dtype;
  {
    int32_t raw;
    memcpy(&raw, &a->t.dtype, sizeof(raw));
    dtype = raw;
  }
  // ggml's block formats (k and v only): the bytes of whole blocks.
  const bool blocks = dtype >= HWYATTN_Q8_0 && dtype <= HWYATTN_IQ4_NL;
  const size_t elem = (dtype >= 0 && dtype <= 3) ? ElemSize(a->t.dtype) : 4;
  a->span = Span(a->t);
  a->certainly_invalid = a->span < 0 || !((dtype >= 0 && dtype <= 3) || blocks);
  const int64_t n = a->span < 0 ? 1 : a->span;
  if (n > kMaxSpan) return false;
  a->bytes = blocks ? hwyattn_test::StorageBytes(a->t.dtype, n) : static_cast<size_t>(n) * elem;
  a->block.reset(new unsigned char[a->bytes]);
  a->t.data = a->block.get();
  return true;
}

// Fills a block with values in [-amp, amp] for its dtype (BOOL: 0/1 bytes).
void Fill(Arg* a, FuzzedDataProvider& in, float amp) {
  const hwyattn_dtype d = a->t.dtype;
  if (IsBlockFormat(d)) {  // any numbers; d (and m) so that every value is within amp
    const size_t bytes = hwyattn_test::BlockBytes(d);
    const bool offset = d == HWYATTN_Q4_1 || d == HWYATTN_Q5_1;
    // The largest |number| each d multiplies (offset formats: plus m <= amp / 2).
    const float most = d == HWYATTN_Q8_0 || d == HWYATTN_IQ4_NL ? 127.0f
                       : d == HWYATTN_Q4_0                      ? 8.0f
                       : d == HWYATTN_Q5_0                      ? 16.0f
                       : d == HWYATTN_Q4_1                      ? 2.0f * 15.0f
                                                                : 2.0f * 31.0f;
    for (size_t b = 0; b + bytes <= a->bytes; b += bytes) {
      unsigned char* block = a->block.get() + b;
      for (size_t i = 0; i < bytes; ++i) block[i] = in.ConsumeIntegral<uint8_t>();
      for (size_t at = 0; at < (offset ? 4u : 2u); at += 2) {
        const float r = static_cast<float>(in.ConsumeIntegralInRange(-64, 64)) / 64.0f;
        const uint16_t h = hwyattn_test::FloatToF16(at == 0 ? r * amp / most : r * amp / 2);
        memcpy(block + at, &h, 2);
      }
    }
    return;
  }
  const size_t elem = ElemSize(d) == 0 ? 4 : ElemSize(d);
  const uint32_t seed = in.ConsumeIntegral<uint32_t>();
  uint32_t x = seed | 1;
  for (size_t i = 0; i + elem <= a->bytes; i += elem) {
    x ^= x << 13, x ^= x >> 17, x ^= x << 5;
    const float f = (static_cast<float>(x % 20001) / 10000.0f - 1.0f) * amp;
    if (d == HWYATTN_F32) {
      memcpy(a->block.get() + i, &f, 4);
    } else if (d == HWYATTN_F16) {
      const uint16_t h = hwyattn_test::FloatToF16(f);
      memcpy(a->block.get() + i, &h, 2);
    } else if (d == HWYATTN_BF16) {
      const uint16_t h = hwyattn_test::FloatToBf16(f);
      memcpy(a->block.get() + i, &h, 2);
    } else {
      a->block[i] = (x >> 7) % 4 != 0;  // 3/4 attend
    }
  }
}

// A layout for a logical shape: dims ordered in memory by `order`, padded,
// some inputs broadcast by stride 0, rank reduced when the leading dims are 1.
void Describe(Arg* a, FuzzedDataProvider& in, const int64_t shape[4], hwyattn_dtype dtype,
              bool is_output, int lead_fixed_rank) {
  hwyattn_tensor& t = a->t;
  t.dtype = dtype;
  // A block format's rows are whole blocks: the last dim innermost with
  // stride 1, padded by whole blocks.
  const bool blocks = IsBlockFormat(dtype);
  int order[4] = {0, 1, 2, 3};
  if (in.ConsumeBool()) std::swap(order[1], order[2]);  // [B, L, H, D] memory
  if (in.ConsumeIntegralInRange(0, 7) == 0 && !blocks) std::swap(order[2], order[3]);
  int64_t stride[4];
  int64_t running = blocks ? 1 : in.ConsumeIntegralInRange<int64_t>(1, 2);
  for (int pos = 3; pos >= 0; --pos) {
    const int d = order[pos];
    const bool broadcast = !is_output && shape[d] > 1 && in.ConsumeIntegralInRange(0, 5) == 0;
    if (broadcast) {
      stride[d] = 0;
      continue;
    }
    stride[d] = running;
    const int64_t pad = pos == 3 ? in.ConsumeIntegralInRange<int64_t>(0, 2) : 0;
    running = running * shape[d] + (blocks ? 32 * pad : pad);
  }
  int rank = 4;
  if (lead_fixed_rank != 0) {
    rank = lead_fixed_rank;
  } else {
    while (rank > 1 && shape[4 - rank] == 1 && in.ConsumeBool()) --rank;
  }
  t.rank = rank;
  for (int i = 0; i < rank; ++i) {
    t.shape[i] = shape[4 - rank + i];
    t.stride[i] = stride[4 - rank + i];
  }
}

// Overwrites one field of one descriptor (or of the options) with an
// arbitrary value: the call may become invalid, or stay valid.
void Corrupt(FuzzedDataProvider& in, std::vector<Arg*>& args, hwyattn_sdpa_options* opts,
             std::vector<int32_t>* kv_len) {
  const int what = in.ConsumeIntegralInRange(0, 11);
  Arg* a = args[in.ConsumeIntegralInRange<size_t>(0, args.size() - 1)];
  const int i = in.ConsumeIntegralInRange(0, 3);
  static const int64_t kValues[] = {0,
                                    -1,
                                    1,
                                    2,
                                    3,
                                    7,
                                    64,
                                    INT64_MAX,
                                    INT64_MIN,
                                    int64_t{1} << 31,
                                    int64_t{1} << 40,
                                    (int64_t{1} << 62) + 1};
  const int64_t v = in.ConsumeBool() ? kValues[in.ConsumeIntegralInRange<size_t>(0, 11)]
                                     : in.ConsumeIntegral<int64_t>();
  switch (what) {
    case 0: a->t.rank = static_cast<int32_t>(v); break;
    case 1: a->t.shape[i] = v; break;
    case 2: a->t.stride[i] = v; break;
    case 3: a->t.shape[i] = in.ConsumeIntegralInRange<int64_t>(1, 9); break;
    case 4: {
      const int32_t d = static_cast<int32_t>(v % 6);
      memcpy(&a->t.dtype, &d, sizeof(d));
      break;
    }
    case 5: {
      // The struct is followed by kExtraBytes of zeros (OptionsStorage): a
      // struct_size up to that models a newer caller; beyond it (up to the
      // library's 4096 plausibility cap) it would describe memory the caller
      // does not have, which no C API can detect, so it is not generated.
      uint32_t size = static_cast<uint32_t>(v);
      if (size > sizeof(hwyattn_sdpa_options) + kExtraBytes && size <= 4096) {
        size = static_cast<uint32_t>(sizeof(hwyattn_sdpa_options) + size % (kExtraBytes + 1));
      }
      opts->struct_size = size;
      if (in.ConsumeBool()) {  // an unknown field set: UNSUPPORTED if it is inside struct_size
        reinterpret_cast<unsigned char*>(
            opts + 1)[in.ConsumeIntegralInRange<size_t>(0, kExtraBytes - 1)] = 1;
      }
      break;
    }
    case 6: {
      const int32_t c = static_cast<int32_t>(v % 5);
      memcpy(&opts->causal, &c, sizeof(c));
      break;
    }
    case 7: opts->scale = in.ConsumeBool() ? NAN : INFINITY; break;
    case 9: opts->window_left = -1 - (v & 0xFFFF); break;            // invalid
    case 10: opts->softcap = in.ConsumeBool() ? NAN : -1.0f; break;  // invalid
    case 8:
      if (!kv_len->empty()) (*kv_len)[0] = static_cast<int32_t>(v);
      break;
    default: a->t.stride[i] = in.ConsumeIntegralInRange<int64_t>(0, 3); break;
  }
}

bool AllFinite(const Arg& a) {
  if (a.t.dtype == HWYATTN_BOOL || IsBlockFormat(a.t.dtype)) return true;  // blocks: Fill's d
  const size_t elem = ElemSize(a.t.dtype);
  for (size_t i = 0; i + elem <= a.bytes; i += elem) {
    double x;
    if (a.t.dtype == HWYATTN_F32) {
      float f;
      memcpy(&f, a.block.get() + i, 4);
      x = f;
    } else {
      uint16_t h;
      memcpy(&h, a.block.get() + i, 2);
      x = a.t.dtype == HWYATTN_F16 ? hwyattn_test::F16ToDouble(h) : hwyattn_test::Bf16ToDouble(h);
    }
    if (!std::isfinite(x)) return false;
  }
  return true;
}

std::string Bytes(const Arg& a) {
  if (a.bytes == 0) return std::string();
  return std::string(reinterpret_cast<const char*>(a.block.get()), a.bytes);
}

}  // namespace hwyattn_fuzz
