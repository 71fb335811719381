/* SPDX-License-Identifier: Apache-2.0
 *
 * shim.h: the C side of the Go binding. Each function takes every pointer to
 * Go memory as a direct argument and builds the descriptors and structs that
 * point at it on its own stack (C memory), for the duration of one call; the
 * Go side never stores a Go pointer in C memory (cgo's pointer rules; see
 * cgo.go). Each also copies hwyattn_last_error() into the caller's buffer on
 * failure, on the thread that failed (the message is thread-local, and a
 * goroutine may change threads between two cgo calls).
 */
#ifndef HWYATTN_GO_SHIM_H_
#define HWYATTN_GO_SHIM_H_

#include <stddef.h>
#include <stdint.h>

#include <hwyattn.h>

/* The slots of the descriptor array of hwyattn_go_attend, and their bits in
 * its `present` mask. */
enum {
  HWYATTN_GO_Q = 0,
  HWYATTN_GO_K,
  HWYATTN_GO_V,
  HWYATTN_GO_OUT,
  HWYATTN_GO_MASK,
  HWYATTN_GO_WEIGHTS,
  HWYATTN_GO_LSE,
  HWYATTN_GO_NUM_SLOTS
};

/* The number of partial states hwyattn_go_merge takes as direct arguments;
 * the Go side copies the others into C memory. */
#define HWYATTN_GO_MERGE_DIRECT 8

/* hwyattn_sdpa (m == NULL) or hwyattn_mha_forward (q = query, k = key,
 * v = value) over descs[HWYATTN_GO_NUM_SLOTS], whose data fields are NULL:
 * slot i gets data `i` of the arguments when bit i of `present` is set and
 * is passed as NULL otherwise. *opts has NULL pointer fields; they are set
 * from the slots and from kv_len, alibi_slopes and sinks. */
hwyattn_status hwyattn_go_attend(const hwyattn_mha* m, const hwyattn_tensor* descs,
                                 uint32_t present, const hwyattn_sdpa_options* opts, void* q,
                                 void* k, void* v, void* out, void* mask, void* weights, void* lse,
                                 const int32_t* kv_len, const float* alibi_slopes,
                                 const float* sinks, char* err, size_t err_size);

/* hwyattn_merge_states over descs[2 * n + 2] = outs[0..n), lses[0..n), out,
 * lse_out (lse_out only when has_lse_out). Partial i < HWYATTN_GO_MERGE_DIRECT
 * gets data o<i> / l<i>; the descriptors of the others already point at C
 * memory. out and lse_out get `out` and `lse_out`. */
hwyattn_status hwyattn_go_merge(int32_t n, const hwyattn_tensor* descs, int has_lse_out, void* o0,
                                void* o1, void* o2, void* o3, void* o4, void* o5, void* o6,
                                void* o7, void* l0, void* l1, void* l2, void* l3, void* l4,
                                void* l5, void* l6, void* l7, const float* sinks, void* out,
                                void* lse_out, char* err, size_t err_size);

/* hwyattn_mha_create with the weights as direct arguments. */
hwyattn_status hwyattn_go_mha_create(const hwyattn_mha_config* cfg, const float* w_q,
                                     const float* w_k, const float* w_v, const float* w_o,
                                     const float* b_q, const float* b_k, const float* b_v,
                                     const float* b_o, hwyattn_mha** out, char* err,
                                     size_t err_size);

/* The slots of the descriptor array of hwyattn_go_kv_write and
 * hwyattn_go_kv_attention (bits of `present` for the optional ones). */
enum {
  HWYATTN_GO_KV_K = 0,
  HWYATTN_GO_KV_V,
  HWYATTN_GO_KV_K_SCALE,
  HWYATTN_GO_KV_V_SCALE,
  HWYATTN_GO_KV_X, /* k_new (write) or q (attention) */
  HWYATTN_GO_KV_Y, /* v_new (write) or out (attention) */
  HWYATTN_GO_KV_LSE,
  HWYATTN_GO_KV_NUM_SLOTS
};

/* hwyattn_kv_cache_write over descs[HWYATTN_GO_KV_NUM_SLOTS] (data NULL):
 * the cache's k, v (and k_scale, v_scale when their bits of `present` are
 * set), k_new and v_new get the matching data arguments. */
hwyattn_status hwyattn_go_kv_write(const hwyattn_tensor* descs, uint32_t present, void* k, void* v,
                                   void* k_scale, void* v_scale, void* k_new, void* v_new,
                                   const int64_t* slot, char* err, size_t err_size);

/* hwyattn_kv_attention over descs[HWYATTN_GO_KV_NUM_SLOTS] (data NULL): the
 * cache as in hwyattn_go_kv_write with block_table (NULL = none) and its
 * stride, q, out and lse (when its bit is set), the batch's arrays, and
 * *opts (NULL pointer fields) completed with lse, alibi_slopes and sinks. */
hwyattn_status hwyattn_go_kv_attention(const hwyattn_tensor* descs, uint32_t present,
                                       const hwyattn_sdpa_options* opts, void* k, void* v,
                                       void* k_scale, void* v_scale, const int32_t* block_table,
                                       int64_t block_table_stride, void* q, void* out, void* lse,
                                       int32_t num_seqs, const int32_t* q_start,
                                       const int32_t* kv_len, const int32_t* q_pos,
                                       const float* alibi_slopes, const float* sinks, char* err,
                                       size_t err_size);

/* hwyattn_set_num_threads with its message. */
hwyattn_status hwyattn_go_set_num_threads(int n, char* err, size_t err_size);

#endif /* HWYATTN_GO_SHIM_H_ */
