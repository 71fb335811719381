// SPDX-License-Identifier: Apache-2.0
//
// The double-precision oracle for hwyattn_sdpa. Everything here is written
// for obviousness rather than speed: the inputs are first copied into dense
// double arrays through the descriptors' strides, then each query row is a
// textbook softmax. See reference.h.

#include "tests/reference.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <limits>
#include <sstream>

namespace hwyattn_test {

namespace {

uint32_t FloatBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  return u;
}

float BitsToFloat(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}

}  // namespace

uint16_t FloatToF16(float f) {
  const uint32_t bits = FloatBits(f);
  const uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  const uint32_t abs_bits = bits & 0x7FFFFFFFu;
  if (abs_bits >= 0x7F800000u) {  // Infinity or NaN.
    return static_cast<uint16_t>(sign | (abs_bits > 0x7F800000u ? 0x7E00u : 0x7C00u));
  }
  // 65520 is halfway between the largest half (65504, odd mantissa) and 2^16,
  // so ties-to-even sends it and everything above it to infinity.
  if (abs_bits >= 0x477FF000u) return static_cast<uint16_t>(sign | 0x7C00u);
  if (abs_bits < 0x38800000u) {
    // Below the smallest normal half (2^-14): the result is a subnormal whose
    // integer mantissa is |f| * 2^24. Scaling by a power of two is exact, and
    // nearbyint rounds to nearest even in the default rounding mode. A result
    // of 1024 correctly becomes the smallest normal.
    const float scaled = std::fabs(f) * 16777216.0f;
    return static_cast<uint16_t>(sign | static_cast<uint16_t>(std::nearbyint(scaled)));
  }
  // Normal: rebias the exponent from 127 to 15 and round away 13 mantissa
  // bits to nearest even (a carry into the exponent is the correct result).
  const uint32_t rounded = abs_bits + 0xFFFu + ((abs_bits >> 13) & 1u);
  return static_cast<uint16_t>(sign | ((rounded - (112u << 23)) >> 13));
}

uint16_t FloatToBf16(float f) {
  const uint32_t bits = FloatBits(f);
  if ((bits & 0x7FFFFFFFu) > 0x7F800000u) {
    return static_cast<uint16_t>(((bits >> 16) & 0x8000u) | 0x7FC0u);
  }
  const uint32_t rounded = bits + 0x7FFFu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(rounded >> 16);
}

double F16ToDouble(uint16_t h) {
  const int exponent = (h >> 10) & 0x1F;
  const int mantissa = h & 0x3FF;
  const double sign = (h & 0x8000) ? -1.0 : 1.0;
  if (exponent == 0) return sign * std::ldexp(static_cast<double>(mantissa), -24);
  if (exponent == 31) {
    return mantissa == 0 ? sign * std::numeric_limits<double>::infinity()
                         : std::numeric_limits<double>::quiet_NaN();
  }
  return sign * std::ldexp(static_cast<double>(mantissa | 0x400), exponent - 25);
}

double Fp8ToDouble(hwyattn_dtype dtype, uint8_t bits) {
  // The OCP definitions, from the fields: E4M3 (bias 7; S.1111.111 is NaN,
  // no infinities), E5M2 (bias 15; exponent 31 is infinity or NaN).
  const bool e4m3 = dtype == HWYATTN_F8E4M3;
  const int mbits = e4m3 ? 3 : 2, bias = e4m3 ? 7 : 15;
  const int exp = (bits & 0x7F) >> mbits, mant = bits & ((1 << mbits) - 1);
  const double sign = (bits & 0x80) != 0 ? -1.0 : 1.0;
  if (e4m3 && (bits & 0x7F) == 0x7F) return std::numeric_limits<double>::quiet_NaN();
  if (!e4m3 && exp == 31) {
    return mant == 0 ? sign * std::numeric_limits<double>::infinity()
                     : std::numeric_limits<double>::quiet_NaN();
  }
  if (exp == 0) return sign * std::ldexp(static_cast<double>(mant), 1 - bias - mbits);
  return sign * std::ldexp(1.0 + static_cast<double>(mant) / (1 << mbits), exp - bias);
}

uint8_t NearestFp8(hwyattn_dtype dtype, double x) {
  const bool e4m3 = dtype == HWYATTN_F8E4M3;
  const uint8_t sign = std::signbit(x) ? 0x80 : 0x00;
  const uint8_t largest = e4m3 ? 0x7E : 0x7B;
  if (std::isnan(x)) return sign | (e4m3 ? 0x7F : 0x7E);
  if (std::isinf(x)) return sign | (e4m3 ? largest : 0x7C);
  const double a = std::fabs(x);
  if (a >= Fp8ToDouble(dtype, largest)) return sign | largest;  // saturates
  uint8_t best = 0;
  for (int c = 1; c <= largest; ++c) {
    const double err = std::fabs(Fp8ToDouble(dtype, static_cast<uint8_t>(c)) - a);
    const double best_err = std::fabs(Fp8ToDouble(dtype, best) - a);
    if (err < best_err || (err == best_err && (c & 1) == 0)) best = static_cast<uint8_t>(c);
  }
  return sign | best;
}

double Bf16ToDouble(uint16_t b) {
  return static_cast<double>(BitsToFloat(static_cast<uint32_t>(b) << 16));
}

const char* DtypeName(hwyattn_dtype dtype) {
  switch (dtype) {
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
  return "BadDtype";
}

size_t BlockBytes(hwyattn_dtype dtype) {
  switch (dtype) {
    case HWYATTN_Q8_0: return 2 + 32;
    case HWYATTN_Q4_0: return 2 + 16;
    case HWYATTN_Q4_1: return 2 + 2 + 16;
    case HWYATTN_Q5_0: return 2 + 4 + 16;
    case HWYATTN_Q5_1: return 2 + 2 + 4 + 16;
    case HWYATTN_IQ4_NL: return 2 + 16;
    default: return 0;
  }
}

size_t StorageBytes(hwyattn_dtype dtype, int64_t elements) {
  if (BlockBytes(dtype) != 0) return static_cast<size_t>((elements + 31) / 32) * BlockBytes(dtype);
  if (dtype == HWYATTN_I4) return static_cast<size_t>((elements + 1) / 2);
  return static_cast<size_t>(elements) * DtypeSize(dtype);
}

double BlockElement(hwyattn_dtype dtype, const unsigned char* block, int i) {
  uint16_t bits;
  std::memcpy(&bits, block, 2);  // d, in the machine's byte order
  const double d = F16ToDouble(bits);
  double m = 0.0;
  if (dtype == HWYATTN_Q4_1 || dtype == HWYATTN_Q5_1) {
    std::memcpy(&bits, block + 2, 2);
    m = F16ToDouble(bits);
  }
  if (dtype == HWYATTN_Q8_0) return d * static_cast<int8_t>(block[2 + i]);
  const bool offset = dtype == HWYATTN_Q4_1 || dtype == HWYATTN_Q5_1;
  const bool five = dtype == HWYATTN_Q5_0 || dtype == HWYATTN_Q5_1;
  const unsigned char* qh = block + (offset ? 4 : 2);
  const unsigned char* qs = qh + (five ? 4 : 0);
  // Element i < 16: low nibble of qs[i]; i >= 16: high nibble of qs[i - 16].
  int q = i < 16 ? (qs[i] & 0xF) : (qs[i - 16] >> 4);
  if (five) q |= ((qh[i / 8] >> (i % 8)) & 1) << 4;  // bit i of little-endian qh
  switch (dtype) {
    case HWYATTN_Q4_0: return d * (q - 8);
    case HWYATTN_Q4_1: return d * q + m;
    case HWYATTN_Q5_0: return d * (q - 16);
    case HWYATTN_Q5_1: return d * q + m;
    case HWYATTN_IQ4_NL: {
      static const int kLevels[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                      1,    13,   25,  38,  53,  69,  89,  113};
      return d * kLevels[q];
    }
    default: return std::numeric_limits<double>::quiet_NaN();
  }
}

size_t DtypeSize(hwyattn_dtype dtype) {
  switch (dtype) {
    case HWYATTN_F32: return 4;
    case HWYATTN_F16:
    case HWYATTN_BF16: return 2;
    case HWYATTN_BOOL:
    case HWYATTN_I8:
    case HWYATTN_F8E4M3:
    case HWYATTN_F8E5M2: return 1;
    default: return 0;  // a block format (BlockBytes), I4 (two per byte) or unknown
  }
}

bool LogicalDims(const hwyattn_tensor& t, int64_t shape[4], int64_t stride[4]) {
  if (t.rank < 1 || t.rank > 4) return false;
  const int lead = 4 - t.rank;
  for (int d = 0; d < 4; ++d) {
    if (d < lead) {
      shape[d] = 1;
      stride[d] = 0;
    } else {
      shape[d] = t.shape[d - lead];
      stride[d] = t.stride[d - lead];
    }
  }
  return true;
}

double ReadElement(const hwyattn_tensor& t, const int64_t idx[4]) {
  int64_t shape[4], stride[4];
  if (!LogicalDims(t, shape, stride)) return std::numeric_limits<double>::quiet_NaN();
  int64_t offset = 0;
  for (int d = 0; d < 4; ++d) offset += idx[d] * stride[d];
  const unsigned char* base = static_cast<const unsigned char*>(t.data);
  if (BlockBytes(t.dtype) != 0) {
    return BlockElement(t.dtype, base + offset / 32 * static_cast<int64_t>(BlockBytes(t.dtype)),
                        static_cast<int>(offset % 32));
  }
  if (t.dtype == HWYATTN_I4) {  // element 2i: the low nibble of byte i, two's complement
    const int nibble = offset % 2 == 0 ? base[offset / 2] & 0xF : base[offset / 2] >> 4;
    return static_cast<double>(nibble >= 8 ? nibble - 16 : nibble);
  }
  const unsigned char* p = base + offset * static_cast<int64_t>(DtypeSize(t.dtype));
  switch (t.dtype) {
    case HWYATTN_F32: {
      float f;
      std::memcpy(&f, p, sizeof(f));
      return static_cast<double>(f);
    }
    case HWYATTN_F16: {
      uint16_t h;
      std::memcpy(&h, p, sizeof(h));
      return F16ToDouble(h);
    }
    case HWYATTN_BF16: {
      uint16_t b;
      std::memcpy(&b, p, sizeof(b));
      return Bf16ToDouble(b);
    }
    case HWYATTN_BOOL: return *p != 0 ? 1.0 : 0.0;
    case HWYATTN_I8: return static_cast<double>(static_cast<int8_t>(*p));
    case HWYATTN_F8E4M3:
    case HWYATTN_F8E5M2: return Fp8ToDouble(t.dtype, *p);
    default: break;
  }
  return std::numeric_limits<double>::quiet_NaN();
}

namespace {

// Copies a tensor into a dense [d0, d1, d2, d3] double array.
std::vector<double> Densify(const hwyattn_tensor& t) {
  int64_t shape[4], stride[4];
  LogicalDims(t, shape, stride);
  std::vector<double> dense(static_cast<size_t>(shape[0] * shape[1] * shape[2] * shape[3]));
  size_t n = 0;
  int64_t idx[4];
  for (idx[0] = 0; idx[0] < shape[0]; ++idx[0]) {
    for (idx[1] = 0; idx[1] < shape[1]; ++idx[1]) {
      for (idx[2] = 0; idx[2] < shape[2]; ++idx[2]) {
        for (idx[3] = 0; idx[3] < shape[3]; ++idx[3]) dense[n++] = ReadElement(t, idx);
      }
    }
  }
  return dense;
}

bool Fail(std::string* error, const std::string& message) {
  if (error != nullptr) *error = message;
  return false;
}

// True if the caller's struct (struct_size bytes) reaches the end of the
// field at [offset, offset + size): a struct from an older header lacks the
// fields appended after it, and those count as 0.
bool HasField(const hwyattn_sdpa_options& opts, size_t offset, size_t size) {
  return opts.struct_size >= offset + size;
}

#define HWYATTN_REF_HAS(opts, field) \
  HasField(opts, offsetof(hwyattn_sdpa_options, field), sizeof((opts).field))

}  // namespace

bool ReferenceSdpa(const hwyattn_tensor& q, const hwyattn_tensor& k, const hwyattn_tensor& v,
                   const hwyattn_sdpa_options* opts, RefResult* result, std::string* error) {
  int64_t qs[4], ks[4], vs[4], unused[4];
  if (!LogicalDims(q, qs, unused) || !LogicalDims(k, ks, unused) || !LogicalDims(v, vs, unused)) {
    return Fail(error, "rank outside 1..4");
  }
  for (const hwyattn_tensor* t : {&q, &k, &v}) {
    const bool blocks = t != &q && BlockBytes(t->dtype) != 0;  // k, v: a block format too
    if (!blocks &&
        (t->dtype == HWYATTN_BOOL || t->dtype == HWYATTN_I8 || DtypeSize(t->dtype) == 0)) {
      return Fail(error, "q/k/v dtype must be F32, F16 or BF16 (k, v: or a block format)");
    }
  }
  const int64_t batch = qs[0], q_heads = qs[1], q_len = qs[2], dim = qs[3];
  const int64_t kv_heads = ks[1], k_len = ks[2], v_dim = vs[3];
  // k and v may have batch 1 (numpy broadcasting, which the header's
  // right-aligned shapes imply: a rank-3 k has batch 1 whatever q's is).
  const bool k_batch_ok = ks[0] == batch || ks[0] == 1;
  const bool v_batch_ok = vs[0] == batch || vs[0] == 1;
  if (!k_batch_ok || !v_batch_ok || ks[3] != dim || vs[1] != kv_heads || vs[2] != k_len ||
      kv_heads < 1 || q_heads % kv_heads != 0) {
    return Fail(error, "inconsistent q/k/v shapes");
  }
  const int64_t group = q_heads / kv_heads;

  double scale = 1.0 / std::sqrt(static_cast<double>(dim));
  hwyattn_causal causal = HWYATTN_CAUSAL_NONE;
  const hwyattn_tensor* mask = nullptr;
  const int32_t* kv_len = nullptr;
  int64_t window_left = 0, window_right = 0;
  double softcap = 0.0;
  const float* alibi_slopes = nullptr;
  const float* sinks = nullptr;
  if (opts != nullptr) {
    if (opts->scale != 0.0f) scale = static_cast<double>(opts->scale);
    causal = opts->causal;
    mask = opts->mask;
    kv_len = opts->kv_len;
    if (HWYATTN_REF_HAS(*opts, window_left)) window_left = opts->window_left;
    if (HWYATTN_REF_HAS(*opts, window_right)) window_right = opts->window_right;
    if (HWYATTN_REF_HAS(*opts, softcap)) softcap = static_cast<double>(opts->softcap);
    if (HWYATTN_REF_HAS(*opts, alibi_slopes)) alibi_slopes = opts->alibi_slopes;
    if (HWYATTN_REF_HAS(*opts, sinks)) sinks = opts->sinks;
  }
  // Values the header gives no meaning to.
  if (window_left < 0 || window_right < 0) return Fail(error, "negative window");
  if (!(softcap >= 0.0) || std::isinf(softcap)) {
    return Fail(error, "softcap must be 0 (off) or positive and finite");
  }
  for (int64_t h = 0; h < q_heads; ++h) {
    if (alibi_slopes != nullptr && !std::isfinite(alibi_slopes[h])) {
      return Fail(error, "an ALiBi slope is not finite");
    }
    if (sinks != nullptr &&
        (std::isnan(sinks[h]) || sinks[h] == std::numeric_limits<float>::infinity())) {
      return Fail(error, "a sink is NaN or +INFINITY");
    }
  }

  // The mask broadcasts to [B, Hq, Lq, Lk]: each of its logical dimensions is
  // either that size or 1 (then index 0 is used for every position).
  int64_t ms[4] = {1, 1, 1, 1};
  const int64_t full[4] = {batch, q_heads, q_len, k_len};
  if (mask != nullptr) {
    if (!LogicalDims(*mask, ms, unused)) return Fail(error, "mask rank outside 1..4");
    if (mask->dtype != HWYATTN_BOOL && mask->dtype != HWYATTN_F32 && mask->dtype != HWYATTN_F16) {
      return Fail(error, "mask dtype must be BOOL, F32 or F16");
    }
    for (int d = 0; d < 4; ++d) {
      if (ms[d] != 1 && ms[d] != full[d]) return Fail(error, "mask not broadcastable");
    }
  }
  if (kv_len != nullptr) {
    for (int64_t b = 0; b < batch; ++b) {
      if (kv_len[b] < 0 || kv_len[b] > k_len) return Fail(error, "kv_len out of range");
    }
  }

  const std::vector<double> qd = Densify(q), kd = Densify(k), vd = Densify(v);

  result->batch = batch;
  result->q_heads = q_heads;
  result->q_len = q_len;
  result->k_len = k_len;
  result->v_dim = v_dim;
  const size_t rows = static_cast<size_t>(batch * q_heads * q_len);
  result->out.assign(rows * static_cast<size_t>(v_dim), 0.0);
  result->weights.assign(rows * static_cast<size_t>(k_len), 0.0);
  result->lse.assign(rows, 0.0);
  result->row_blocked.assign(rows, false);
  result->key_allowed.assign(rows * static_cast<size_t>(k_len), false);

  std::vector<double> scores(static_cast<size_t>(k_len));
  std::vector<bool> allowed(static_cast<size_t>(k_len));
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t h = 0; h < q_heads; ++h) {
      const int64_t hk = h / group;
      const double inf = std::numeric_limits<double>::infinity();
      // The sink's logit; -inf is a sink that is off (exp(-inf) = 0).
      const double sink = sinks != nullptr ? static_cast<double>(sinks[h]) : -inf;
      const double slope = alibi_slopes != nullptr ? static_cast<double>(alibi_slopes[h]) : 0.0;
      for (int64_t i = 0; i < q_len; ++i) {
        const double* qrow = &qd[static_cast<size_t>(((b * q_heads + h) * q_len + i) * dim)];
        // The query's position (key j's position is j).
        const int64_t pos_q = causal == HWYATTN_CAUSAL_BOTTOM_RIGHT ? i + (k_len - q_len) : i;
        bool any_allowed = false;
        double row_max = -inf;
        for (int64_t j = 0; j < k_len; ++j) {
          bool ok = true;
          if (causal == HWYATTN_CAUSAL_TOP_LEFT && j > i) ok = false;
          if (causal == HWYATTN_CAUSAL_BOTTOM_RIGHT && j > pos_q) ok = false;
          if (kv_len != nullptr && j >= kv_len[b]) ok = false;
          // j > p - W and j < p + W, written as distances so that a huge W
          // cannot overflow (|p - j| < Lq + Lk).
          if (window_left > 0 && !(pos_q - j < window_left)) ok = false;
          if (window_right > 0 && !(j - pos_q < window_right)) ok = false;
          double additive = 0.0;
          if (mask != nullptr) {
            const int64_t pos[4] = {b, h, i, j};
            int64_t midx[4];
            for (int d = 0; d < 4; ++d) midx[d] = ms[d] == 1 ? 0 : pos[d];
            const double m = ReadElement(*mask, midx);
            if (mask->dtype == HWYATTN_BOOL) {
              if (m == 0.0) ok = false;
            } else if (std::isinf(m) && m < 0) {
              ok = false;
            } else {
              additive = m;
            }
          }
          allowed[static_cast<size_t>(j)] = ok;
          if (!ok) continue;
          const int64_t kb = ks[0] == 1 ? 0 : b;
          const double* krow = &kd[static_cast<size_t>(((kb * kv_heads + hk) * k_len + j) * dim)];
          double dot = 0.0, size = 0.0;
          for (int64_t d = 0; d < dim; ++d) {
            dot += qrow[d] * krow[d];
            size += std::fabs(qrow[d] * krow[d]);
          }
          // scale, then softcap, then ALiBi and the additive mask.
          double s = scale * dot;
          if (softcap > 0.0) s = softcap * std::tanh(s / softcap);
          s += slope * static_cast<double>(j - pos_q);
          s += additive;
          result->score_magnitude =
              std::max(result->score_magnitude,
                       std::fabs(scale) * size + std::fabs(slope * static_cast<double>(j - pos_q)) +
                           std::fabs(additive));
          scores[static_cast<size_t>(j)] = s;
          row_max = std::max(row_max, s);
          any_allowed = true;
        }
        const size_t row = static_cast<size_t>(result->RowIndex(b, h, i));
        for (int64_t j = 0; j < k_len; ++j) {
          result->key_allowed[row * static_cast<size_t>(k_len) + static_cast<size_t>(j)] =
              allowed[static_cast<size_t>(j)];
        }
        if (!any_allowed) {
          // Every key is blocked: zeros for out and weights (already there)
          // and lse = the sink's logit, which is -inf without sinks, as the
          // header specifies.
          result->row_blocked[row] = true;
          result->lse[row] = sink;
          continue;
        }
        // The denominator, shifted by the largest logit (the sink's
        // included) so that no exp overflows: exp(sink - m) is 0 for a sink
        // of -inf.
        const double m = std::max(row_max, sink);
        double sum = std::exp(sink - m);
        for (int64_t j = 0; j < k_len; ++j) {
          if (allowed[static_cast<size_t>(j)]) sum += std::exp(scores[static_cast<size_t>(j)] - m);
        }
        result->lse[row] = m + std::log(sum);
        double* wrow = &result->weights[row * static_cast<size_t>(k_len)];
        double* orow = &result->out[row * static_cast<size_t>(v_dim)];
        for (int64_t j = 0; j < k_len; ++j) {
          if (!allowed[static_cast<size_t>(j)]) continue;
          const double p = std::exp(scores[static_cast<size_t>(j)] - m) / sum;
          wrow[j] = p;
          const int64_t vb = vs[0] == 1 ? 0 : b;
          const double* vrow = &vd[static_cast<size_t>(((vb * kv_heads + hk) * k_len + j) * v_dim)];
          for (int64_t c = 0; c < v_dim; ++c) orow[c] += p * vrow[c];
        }
      }
    }
  }
  return true;
}

// ---------------------------------------------------------------------------
// hwyattn_kv_attention
// ---------------------------------------------------------------------------

double ScoreTolerance(double score_magnitude, int64_t dim) {
  return 2.0 * static_cast<double>(dim + 4) * std::ldexp(score_magnitude, -24);
}

double ReadCacheValue(const hwyattn_kv_cache& cache, bool values, int64_t page, int64_t head,
                      int64_t offset, int64_t d) {
  const hwyattn_tensor& t = values ? cache.v : cache.k;
  const int64_t idx[4] = {page, head, offset, d};
  const double x = ReadElement(t, idx);
  const hwyattn_tensor* scale = values ? cache.v_scale : cache.k_scale;
  if (t.dtype != HWYATTN_I8 && t.dtype != HWYATTN_I4 &&
      (t.dtype == HWYATTN_F32 || t.dtype == HWYATTN_F16 || t.dtype == HWYATTN_BF16 ||
       BlockBytes(t.dtype) != 0 || scale == nullptr)) {
    return x;  // a float or block cache, or an FP8 cache without scales (scale 1)
  }
  // Every layout by broadcasting: per token [P, Hkv, S, 1], per channel
  // [1, Hkv, 1, D], per kv head [1, Hkv, 1, 1], per tensor [1, 1, 1, 1].
  int64_t ss[4], unused[4];
  LogicalDims(*scale, ss, unused);
  const int64_t at[4] = {page, head, offset, d};
  int64_t sidx[4];
  for (int i = 0; i < 4; ++i) sidx[i] = ss[i] == 1 ? 0 : at[i];
  return x * ReadElement(*scale, sidx);
}

bool ReferenceKvAttention(const hwyattn_tensor& q, const hwyattn_kv_cache& cache,
                          const hwyattn_kv_batch& batch, const hwyattn_sdpa_options* opts,
                          KvRefResult* result, std::string* error) {
  int64_t qs[4], ks[4], vs[4], unused[4];
  if (!LogicalDims(q, qs, unused) || !LogicalDims(cache.k, ks, unused) ||
      !LogicalDims(cache.v, vs, unused)) {
    return Fail(error, "rank outside 1..4");
  }
  const int64_t T = qs[1], Hq = qs[2], D = qs[3];
  const int64_t P = ks[0], Hkv = ks[1], S = ks[2], Dv = vs[3];
  if (qs[0] != 1 || ks[3] != D || vs[0] != P || vs[1] != Hkv || vs[2] != S || Hkv < 1 ||
      Hq % Hkv != 0) {
    return Fail(error, "inconsistent q/cache shapes");
  }
  if ((cache.k.dtype == HWYATTN_I8 || cache.k.dtype == HWYATTN_I4) &&
      (cache.k_scale == nullptr || cache.v_scale == nullptr)) {
    return Fail(error, "I8 or I4 cache without scales");
  }
  if (batch.num_seqs < 1 || batch.q_start[0] != 0 || batch.q_start[batch.num_seqs] != T) {
    return Fail(error, "q_start does not cover [0, T)");
  }
  hwyattn_sdpa_options o;
  std::memset(&o, 0, sizeof(o));
  if (opts != nullptr) std::memcpy(&o, opts, std::min<size_t>(opts->struct_size, sizeof(o)));
  if (o.window_left < 0 || o.window_right < 0 || !(o.softcap >= 0) || std::isinf(o.softcap)) {
    return Fail(error, "modifier values without a meaning");
  }
  const double scale = o.scale != 0.0f ? o.scale : 1.0 / std::sqrt(static_cast<double>(D));
  const bool causal = o.causal != HWYATTN_CAUSAL_NONE;
  const int64_t group = Hq / Hkv;
  result->tokens = T;
  result->q_heads = Hq;
  result->v_dim = Dv;
  result->out.assign(static_cast<size_t>(T * Hq * Dv), 0.0);
  result->lse.assign(static_cast<size_t>(T * Hq), 0.0);
  for (int32_t s = 0; s < batch.num_seqs; ++s) {
    const int64_t q0 = batch.q_start[s], q_len = batch.q_start[s + 1] - q0;
    const int64_t len = batch.kv_len[s];
    if (q_len < 0 || len < 0) return Fail(error, "negative q_len or kv_len");
    const int64_t first_pos = batch.q_pos != nullptr ? batch.q_pos[s] : len - q_len;
    auto page_of = [&](int64_t t) -> int64_t {
      return cache.block_table != nullptr ? cache.block_table[s * cache.block_table_stride + t / S]
                                          : s;
    };
    for (int64_t t = 0; t < len; ++t) {
      if (page_of(t) < 0 || page_of(t) >= P || (cache.block_table == nullptr && len > S)) {
        return Fail(error, "a page outside the pool");
      }
    }
    for (int64_t h = 0; h < Hq; ++h) {
      const int64_t kvh = h / group;
      const double sink = o.sinks != nullptr ? static_cast<double>(o.sinks[h])
                                             : -std::numeric_limits<double>::infinity();
      for (int64_t i = 0; i < q_len; ++i) {
        const int64_t pos = first_pos + i;
        std::vector<double> score;
        std::vector<int64_t> keys;
        for (int64_t t = 0; t < len; ++t) {
          if (causal && t > pos) continue;
          if (o.window_left > 0 && t <= pos - o.window_left) continue;
          if (o.window_right > 0 && t >= pos + o.window_right) continue;
          double dot = 0.0, size = 0.0;
          for (int64_t d = 0; d < D; ++d) {
            const int64_t qi[4] = {0, q0 + i, h, d};
            const double prod =
                ReadElement(q, qi) * ReadCacheValue(cache, false, page_of(t), kvh, t % S, d);
            dot += prod;
            size += std::fabs(prod);
          }
          double x = scale * dot;
          if (o.softcap > 0) x = o.softcap * std::tanh(x / o.softcap);
          double bias = 0.0;
          if (o.alibi_slopes != nullptr) {
            bias = static_cast<double>(o.alibi_slopes[h]) * static_cast<double>(t - pos);
            x += bias;
          }
          result->score_magnitude =
              std::max(result->score_magnitude, std::fabs(scale) * size + std::fabs(bias));
          score.push_back(x);
          keys.push_back(t);
        }
        double m = sink;
        for (double x : score) m = std::max(m, x);
        double* out = &result->out[static_cast<size_t>(((q0 + i) * Hq + h) * Dv)];
        double& lse = result->lse[static_cast<size_t>((q0 + i) * Hq + h)];
        if (score.empty()) {
          lse = sink;
          continue;
        }
        double sum = std::isinf(sink) ? 0.0 : std::exp(sink - m);
        for (double x : score) sum += std::exp(x - m);
        lse = m + std::log(sum);
        for (size_t j = 0; j < keys.size(); ++j) {
          const double w = std::exp(score[j] - lse);
          const int64_t t = keys[j];
          for (int64_t d = 0; d < Dv; ++d) {
            out[d] += w * ReadCacheValue(cache, true, page_of(t), kvh, t % S, d);
          }
        }
      }
    }
  }
  return true;
}

}  // namespace hwyattn_test
