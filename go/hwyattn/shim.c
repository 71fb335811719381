/* SPDX-License-Identifier: Apache-2.0
 *
 * shim.c: see shim.h. Thin: it places pointers, calls, and copies the error
 * message; every check is the library's (or the Go side's length checks). */
#include "shim.h"

#include <stdlib.h>
#include <string.h>

static hwyattn_status finish(hwyattn_status s, char* err, size_t err_size) {
  if (s != HWYATTN_OK && err != NULL && err_size > 0) {
    strncpy(err, hwyattn_last_error(), err_size - 1);
    err[err_size - 1] = '\0';
  }
  return s;
}

hwyattn_status hwyattn_go_attend(const hwyattn_mha* m, const hwyattn_tensor* descs,
                                 uint32_t present, const hwyattn_sdpa_options* opts, void* q,
                                 void* k, void* v, void* out, void* mask, void* weights, void* lse,
                                 const int32_t* kv_len, const float* alibi_slopes,
                                 const float* sinks, char* err, size_t err_size) {
  void* data[HWYATTN_GO_NUM_SLOTS] = {q, k, v, out, mask, weights, lse};
  hwyattn_tensor t[HWYATTN_GO_NUM_SLOTS];
  hwyattn_tensor* p[HWYATTN_GO_NUM_SLOTS];
  for (int i = 0; i < HWYATTN_GO_NUM_SLOTS; ++i) {
    t[i] = descs[i];
    t[i].data = data[i];
    p[i] = (present >> i) & 1u ? &t[i] : NULL;
  }
  hwyattn_sdpa_options o = *opts;
  o.mask = p[HWYATTN_GO_MASK];
  o.weights = p[HWYATTN_GO_WEIGHTS];
  o.lse = p[HWYATTN_GO_LSE];
  o.kv_len = kv_len;
  o.alibi_slopes = alibi_slopes;
  o.sinks = sinks;
  hwyattn_status s;
  if (m == NULL) {
    s = hwyattn_sdpa(p[HWYATTN_GO_Q], p[HWYATTN_GO_K], p[HWYATTN_GO_V], p[HWYATTN_GO_OUT], &o);
  } else {
    s = hwyattn_mha_forward(m, p[HWYATTN_GO_Q], p[HWYATTN_GO_K], p[HWYATTN_GO_V], p[HWYATTN_GO_OUT],
                            &o);
  }
  return finish(s, err, err_size);
}

hwyattn_status hwyattn_go_merge(int32_t n, const hwyattn_tensor* descs, int has_lse_out, void* o0,
                                void* o1, void* o2, void* o3, void* o4, void* o5, void* o6,
                                void* o7, void* l0, void* l1, void* l2, void* l3, void* l4,
                                void* l5, void* l6, void* l7, const float* sinks, void* out,
                                void* lse_out, char* err, size_t err_size) {
  if (n < 1) {
    /* The library reports n itself; nothing to place. */
    return finish(hwyattn_merge_states(n, NULL, NULL, sinks, NULL, NULL), err, err_size);
  }
  void* od[HWYATTN_GO_MERGE_DIRECT] = {o0, o1, o2, o3, o4, o5, o6, o7};
  void* ld[HWYATTN_GO_MERGE_DIRECT] = {l0, l1, l2, l3, l4, l5, l6, l7};
  /* 2n + 2 descriptors, then 2n pointers to them, in one C allocation. */
  const size_t count = 2 * (size_t)n + 2;
  void* block = malloc(count * sizeof(hwyattn_tensor) + 2 * (size_t)n * sizeof(hwyattn_tensor*));
  if (block == NULL) {
    if (err != NULL && err_size > 0) {
      strncpy(err, "hwyattn (Go): out of memory for the merge's descriptors", err_size - 1);
      err[err_size - 1] = '\0';
    }
    return HWYATTN_OUT_OF_MEMORY;
  }
  hwyattn_tensor* t = (hwyattn_tensor*)block;
  const hwyattn_tensor** ptrs = (const hwyattn_tensor**)(t + count);
  memcpy(t, descs, count * sizeof(hwyattn_tensor));
  for (int32_t i = 0; i < n; ++i) {
    if (i < HWYATTN_GO_MERGE_DIRECT) {
      t[i].data = od[i];
      t[n + i].data = ld[i];
    }
    ptrs[i] = &t[i];
    ptrs[n + i] = &t[n + i];
  }
  hwyattn_tensor* t_out = &t[2 * n];
  hwyattn_tensor* t_lse = &t[2 * n + 1];
  t_out->data = out;
  t_lse->data = lse_out;
  const hwyattn_status s =
      hwyattn_merge_states(n, ptrs, ptrs + n, sinks, t_out, has_lse_out ? t_lse : NULL);
  free(block);
  return finish(s, err, err_size);
}

hwyattn_status hwyattn_go_mha_create(const hwyattn_mha_config* cfg, const float* w_q,
                                     const float* w_k, const float* w_v, const float* w_o,
                                     const float* b_q, const float* b_k, const float* b_v,
                                     const float* b_o, hwyattn_mha** out, char* err,
                                     size_t err_size) {
  hwyattn_mha_weights w;
  w.w_q = w_q;
  w.w_k = w_k;
  w.w_v = w_v;
  w.w_o = w_o;
  w.b_q = b_q;
  w.b_k = b_k;
  w.b_v = b_v;
  w.b_o = b_o;
  return finish(hwyattn_mha_create(cfg, &w, out), err, err_size);
}

/* Copies the descriptors, places the data pointers, and fills *cache; p[i]
 * is &t[i] or NULL for an absent slot. */
static void place_kv(const hwyattn_tensor* descs, uint32_t present, void** data, hwyattn_tensor* t,
                     hwyattn_tensor** p, hwyattn_kv_cache* cache) {
  for (int i = 0; i < HWYATTN_GO_KV_NUM_SLOTS; ++i) {
    t[i] = descs[i];
    t[i].data = data[i];
    p[i] = (present >> i) & 1u ? &t[i] : NULL;
  }
  hwyattn_kv_cache_init(cache);
  cache->k = t[HWYATTN_GO_KV_K];
  cache->v = t[HWYATTN_GO_KV_V];
  cache->k_scale = p[HWYATTN_GO_KV_K_SCALE];
  cache->v_scale = p[HWYATTN_GO_KV_V_SCALE];
}

hwyattn_status hwyattn_go_kv_write(const hwyattn_tensor* descs, uint32_t present, void* k, void* v,
                                   void* k_scale, void* v_scale, void* k_new, void* v_new,
                                   const int64_t* slot, char* err, size_t err_size) {
  void* data[HWYATTN_GO_KV_NUM_SLOTS] = {k, v, k_scale, v_scale, k_new, v_new, NULL};
  hwyattn_tensor t[HWYATTN_GO_KV_NUM_SLOTS];
  hwyattn_tensor* p[HWYATTN_GO_KV_NUM_SLOTS];
  hwyattn_kv_cache cache;
  place_kv(descs, present, data, t, p, &cache);
  return finish(
      hwyattn_kv_cache_write(&cache, &t[HWYATTN_GO_KV_X], &t[HWYATTN_GO_KV_Y], slot, NULL), err,
      err_size);
}

hwyattn_status hwyattn_go_kv_attention(const hwyattn_tensor* descs, uint32_t present,
                                       const hwyattn_sdpa_options* opts, void* k, void* v,
                                       void* k_scale, void* v_scale, const int32_t* block_table,
                                       int64_t block_table_stride, void* q, void* out, void* lse,
                                       int32_t num_seqs, const int32_t* q_start,
                                       const int32_t* kv_len, const int32_t* q_pos,
                                       const float* alibi_slopes, const float* sinks, char* err,
                                       size_t err_size) {
  void* data[HWYATTN_GO_KV_NUM_SLOTS] = {k, v, k_scale, v_scale, q, out, lse};
  hwyattn_tensor t[HWYATTN_GO_KV_NUM_SLOTS];
  hwyattn_tensor* p[HWYATTN_GO_KV_NUM_SLOTS];
  hwyattn_kv_cache cache;
  place_kv(descs, present, data, t, p, &cache);
  cache.block_table = block_table;
  cache.block_table_stride = block_table_stride;
  hwyattn_kv_batch batch;
  hwyattn_kv_batch_init(&batch);
  batch.num_seqs = num_seqs;
  batch.q_start = q_start;
  batch.kv_len = kv_len;
  batch.q_pos = q_pos;
  hwyattn_sdpa_options o = *opts;
  o.lse = p[HWYATTN_GO_KV_LSE];
  o.alibi_slopes = alibi_slopes;
  o.sinks = sinks;
  return finish(hwyattn_kv_attention(&t[HWYATTN_GO_KV_X], &cache, &batch, &t[HWYATTN_GO_KV_Y], &o),
                err, err_size);
}

hwyattn_status hwyattn_go_set_num_threads(int n, char* err, size_t err_size) {
  return finish(hwyattn_set_num_threads(n), err, err_size);
}
