// SPDX-License-Identifier: Apache-2.0
#include "src/mha.h"

#include <stddef.h>
#include <stdint.h>

#include "src/ops/convert.h"  // StoreOutputRow
#include "src/scratch.h"

namespace hwyattn {
namespace {

// The [B, H, L, head_dim] view of head-interleaved projections [B, L, H * head_dim].
TensorView HeadsView(const float* data, int64_t batch, int64_t heads, int64_t len,
                     int64_t head_dim) {
  TensorView v;
  v.data = data;
  v.dtype = Dtype::kF32;
  const int64_t shape[4] = {batch, heads, len, head_dim};
  const int64_t stride[4] = {len * heads * head_dim, head_dim, heads * head_dim, 1};
  for (int i = 0; i < 4; ++i) {
    v.shape[i] = shape[i];
    v.stride[i] = shape[i] == 1 ? 0 : stride[i];
  }
  return v;
}

}  // namespace

hwyattn_status MhaLayer::Init(const MhaConfig& c, const hwyattn_mha_weights& w) {
  config_ = c;
  const int64_t q_width = c.num_heads * c.head_dim, kv_width = c.num_kv_heads * c.head_dim;
  const bool bf16 = c.bf16_weights;
  const bool ok = w_q_.Pack(w.w_q, w.b_q, q_width, c.embed_dim, bf16) &&
                  w_k_.Pack(w.w_k, w.b_k, kv_width, c.kdim, bf16) &&
                  w_v_.Pack(w.w_v, w.b_v, kv_width, c.vdim, bf16) &&
                  w_o_.Pack(w.w_o, w.b_o, c.embed_dim, q_width, bf16);
  return ok ? HWYATTN_OK : HWYATTN_OUT_OF_MEMORY;
}

hwyattn_status MhaLayer::Forward(MhaCall& call) const {
  SdpaProblem& p = call.attention;
  const int64_t q_rows = p.batch * p.q_len, kv_rows = p.batch * p.kv_len;
  const int64_t q_width = config_.num_heads * config_.head_dim;
  const int64_t kv_width = config_.num_kv_heads * config_.head_dim;
  // Activations: Q, K, V projections and the attention output, each
  // [rows, width] row-major, in this thread's layer scratch.
  size_t q_floats, kv_floats, bytes;
  if (__builtin_mul_overflow(static_cast<size_t>(q_rows), static_cast<size_t>(q_width),
                             &q_floats) ||
      __builtin_mul_overflow(static_cast<size_t>(kv_rows), static_cast<size_t>(kv_width),
                             &kv_floats) ||
      q_floats > SIZE_MAX / 64 || kv_floats > SIZE_MAX / 64) {
    return HWYATTN_OUT_OF_MEMORY;  // valid, but no machine holds it
  }
  q_floats = PadFloats(q_floats);
  kv_floats = PadFloats(kv_floats);
  // An F16 or BF16 out: the output projection's F32 rows first, [q_rows,
  // embed_dim] (as many elements as out: no overflow), then rounded once.
  const bool f32_out = call.out_tensor.dtype == Dtype::kF32;
  const size_t out_floats =
      f32_out ? 0 : PadFloats(static_cast<size_t>(q_rows) * static_cast<size_t>(config_.embed_dim));
  bytes = (2 * q_floats + 2 * kv_floats + out_floats) * sizeof(float);
  float* q = static_cast<float*>(ThreadScratch(ScratchSlot::kLayer, bytes));
  if (q == nullptr) return HWYATTN_OUT_OF_MEMORY;
  float* k = q + q_floats;
  float* v = k + kv_floats;
  float* attended = v + kv_floats;
  float* projected = attended + q_floats;

  const RowsView q_rows_view = RowsView::Dense(q, q_rows, q_width, q_width);
  const RowsView k_rows_view = RowsView::Dense(k, kv_rows, kv_width, kv_width);
  const RowsView v_rows_view = RowsView::Dense(v, kv_rows, kv_width, kv_width);
  // Every phase (the projections, the attention's) runs on the call's
  // executor: the caller's pool or the library's threads.
  const Executor& executor = p.executor;
  // opts->precision = BF16: bf16 products in the projections too.
  const MatmulPrecision precision =
      p.Bf16Products() ? MatmulPrecision::kBf16 : MatmulPrecision::kF32;
  hwyattn_status s;
  if (call.self_attention) {
    // One packing of the input feeds all three projections.
    const LinearOutput qkv[3] = {{&w_q_, q_rows_view}, {&w_k_, k_rows_view}, {&w_v_, v_rows_view}};
    s = Linear(call.query, qkv, 3, executor, precision);
  } else {
    const LinearOutput q_out[1] = {{&w_q_, q_rows_view}};
    const LinearOutput k_out[1] = {{&w_k_, k_rows_view}};
    const LinearOutput v_out[1] = {{&w_v_, v_rows_view}};
    s = Linear(call.query, q_out, 1, executor, precision);
    if (s == HWYATTN_OK) s = Linear(call.key, k_out, 1, executor, precision);
    if (s == HWYATTN_OK) s = Linear(call.value, v_out, 1, executor, precision);
  }
  if (s != HWYATTN_OK) return s;

  p.q = HeadsView(q, p.batch, p.q_heads, p.q_len, p.head_dim);
  p.k = HeadsView(k, p.batch, p.kv_heads, p.kv_len, p.head_dim);
  p.v = HeadsView(v, p.batch, p.kv_heads, p.kv_len, p.head_dim);
  p.out = HeadsView(attended, p.batch, p.q_heads, p.q_len, p.head_dim);
  s = RunSdpa(p);
  if (s != HWYATTN_OK) return s;

  const int64_t embed = config_.embed_dim;
  const LinearOutput o_out[1] = {
      {&w_o_, f32_out ? call.out : RowsView::Dense(projected, q_rows, embed, embed)}};
  s = Linear(RowsView::Dense(attended, q_rows, q_width, q_width), o_out, 1, executor, precision);
  if (s != HWYATTN_OK || f32_out) return s;
  const TensorView& out = call.out_tensor;
  for (int64_t m = 0; m < q_rows; ++m) {
    StoreOutputRow(out, out.Offset(0, m / p.q_len, m % p.q_len, 0), projected + m * embed, embed);
  }
  return HWYATTN_OK;
}

}  // namespace hwyattn
