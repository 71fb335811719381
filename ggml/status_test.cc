// SPDX-License-Identifier: Apache-2.0
//
// What test-backend-ops does not check: an hwyattn error inside
// graph_compute comes back as a ggml status with hwyattn's message (never an
// abort), and the backend runs again after it; a declined layout is a
// supports_op false. Loads libggml-hwyattn.so as any ggml program does
// (GGML_BACKEND_PATH, ggml_backend_load_all). Built and run by
// ggml_test_backend_ops.sh against the same ggml build as test-backend-ops.
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <string>
#include <vector>

#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml.h"

namespace {

std::string g_log;

void CaptureLog(enum ggml_log_level level, const char* text, void*) {
  if (level == GGML_LOG_LEVEL_ERROR || level == GGML_LOG_LEVEL_CONT) g_log += text;
}

int g_failures = 0;

void Expect(bool ok, const char* what) {
  printf("%s: %s\n", ok ? "ok" : "FAILED", what);
  if (!ok) ++g_failures;
}

}  // namespace

int main() {
  ggml_backend_load_all();
  ggml_backend_dev_t dev = ggml_backend_dev_by_name("HWYATTN");
  if (dev == nullptr) {
    printf("FAILED: no HWYATTN device (is GGML_BACKEND_PATH set?)\n");
    return 1;
  }
  ggml_backend_t backend = ggml_backend_dev_init(dev, nullptr);

  const ggml_init_params params = {
      /* mem_size */ 64 * ggml_tensor_overhead() + ggml_graph_overhead(),
      /* mem_buffer */ nullptr, /* no_alloc */ true};
  ggml_context* ctx = ggml_init(params);
  // q [D, n_batch, n_head, 1], k and v [D, n_kv, n_head_kv, 1], GQA 4 over 2.
  const int64_t D = 64, n_batch = 3, n_head = 4, n_head_kv = 2, n_kv = 40;
  ggml_tensor* q = ggml_new_tensor_4d(ctx, GGML_TYPE_F32, D, n_batch, n_head, 1);
  ggml_tensor* k = ggml_new_tensor_4d(ctx, GGML_TYPE_F16, D, n_kv, n_head_kv, 1);
  ggml_tensor* v = ggml_new_tensor_4d(ctx, GGML_TYPE_F16, D, n_kv, n_head_kv, 1);
  ggml_tensor* mask = ggml_new_tensor_4d(ctx, GGML_TYPE_F16, n_kv, n_batch, 1, 1);
  ggml_tensor* sinks = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, n_head);
  ggml_tensor* out = ggml_flash_attn_ext(ctx, q, k, v, mask, 0.125f, 0.0f, 0.0f);
  ggml_flash_attn_ext_add_sinks(out, sinks);
  ggml_flash_attn_ext_set_prec(out, GGML_PREC_F32);
  // Claimed: the block formats of llama.cpp's caches (q8_0 K, q4_0 V).
  // Declined: a block format no cache uses (q4_K, blocks of 256).
  ggml_tensor* kq = ggml_new_tensor_4d(ctx, GGML_TYPE_Q8_0, D, n_kv, n_head_kv, 1);
  ggml_tensor* vq = ggml_new_tensor_4d(ctx, GGML_TYPE_Q4_0, D, n_kv, n_head_kv, 1);
  ggml_tensor* quantized = ggml_flash_attn_ext(ctx, q, kq, vq, mask, 0.125f, 0.0f, 0.0f);
  ggml_tensor* kk = ggml_new_tensor_4d(ctx, GGML_TYPE_Q4_K, 256, n_kv, n_head_kv, 1);
  ggml_tensor* q256 = ggml_new_tensor_4d(ctx, GGML_TYPE_F32, 256, n_batch, n_head, 1);
  ggml_tensor* kquant = ggml_flash_attn_ext(ctx, q256, kk, kk, mask, 0.0625f, 0.0f, 0.0f);
  Expect(ggml_backend_supports_op(backend, out), "supports_op: F16 K/V, F16 mask, sinks");
  Expect(ggml_backend_supports_op(backend, quantized), "supports_op: q8_0 K, q4_0 V");
  Expect(!ggml_backend_supports_op(backend, kquant), "supports_op declines q4_K K/V");

  ggml_backend_buffer_t buffer = ggml_backend_alloc_ctx_tensors(ctx, backend);
  std::vector<float> qd(static_cast<size_t>(ggml_nelements(q)), 0.5f);
  std::vector<ggml_fp16_t> kd(static_cast<size_t>(ggml_nelements(k)), ggml_fp32_to_fp16(0.25f));
  std::vector<ggml_fp16_t> md(static_cast<size_t>(ggml_nelements(mask)), ggml_fp32_to_fp16(0.0f));
  ggml_backend_tensor_set(q, qd.data(), 0, ggml_nbytes(q));
  ggml_backend_tensor_set(k, kd.data(), 0, ggml_nbytes(k));
  ggml_backend_tensor_set(v, kd.data(), 0, ggml_nbytes(v));
  ggml_backend_tensor_set(mask, md.data(), 0, ggml_nbytes(mask));
  ggml_cgraph* graph = ggml_new_graph(ctx);
  ggml_build_forward_expand(graph, out);

  // A NaN sink: hwyattn refuses it; ggml gets a status and the message.
  const float bad_sinks[4] = {0.0f, NAN, 0.0f, 0.0f};
  ggml_backend_tensor_set(sinks, bad_sinks, 0, sizeof(bad_sinks));
  ggml_log_set(CaptureLog, nullptr);
  const ggml_status bad = ggml_backend_graph_compute(backend, graph);
  ggml_log_set(nullptr, nullptr);
  Expect(bad == GGML_STATUS_FAILED, "a NaN sink: graph_compute returns GGML_STATUS_FAILED");
  Expect(g_log.find("HWYATTN_INVALID_ARGUMENT") != std::string::npos &&
             g_log.find("sinks[1] is nan") != std::string::npos,
         "the log carries hwyattn's status and message");
  printf("  logged: %s", g_log.c_str());

  // The same graph with valid sinks: every key equal, so out = v = 0.25
  // scaled by the sink's share of the denominator, 40 e^s / (40 e^s + 1).
  const float sinks_ok[4] = {0.0f, -INFINITY, 0.0f, 0.0f};
  ggml_backend_tensor_set(sinks, sinks_ok, 0, sizeof(sinks_ok));
  const ggml_status good = ggml_backend_graph_compute(backend, graph);
  Expect(good == GGML_STATUS_SUCCESS, "valid sinks: GGML_STATUS_SUCCESS after the failure");
  std::vector<float> od(static_cast<size_t>(ggml_nelements(out)));
  ggml_backend_tensor_get(out, od.data(), 0, ggml_nbytes(out));
  // out [D, n_head, n_batch, 1]: head 1 has no sink (-inf), the others 0.
  const double s = 0.125 * D * 0.5 * 0.25, with_sink = 40.0 * exp(s) / (40.0 * exp(s) + 1.0);
  double worst = 0;
  for (int64_t i = 0; i < n_batch; ++i) {
    for (int64_t h = 0; h < n_head; ++h) {
      const double want = 0.25 * (h == 1 ? 1.0 : with_sink);
      for (int64_t d = 0; d < D; ++d)
        worst = fmax(worst, fabs(od[(i * n_head + h) * D + d] - want));
    }
  }
  Expect(worst < 1e-5, "the result after the failure matches the closed form");

  ggml_backend_buffer_free(buffer);
  ggml_free(ctx);
  ggml_backend_free(backend);
  printf("%s\n", g_failures == 0 ? "PASS" : "FAIL");
  return g_failures == 0 ? 0 : 1;
}
