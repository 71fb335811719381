/* SPDX-License-Identifier: Apache-2.0
 *
 * Prints the layout of include/hwyattn.h as the C compiler sees it, one
 * "name value" per line: every struct's size and alignment, every field's
 * offset and size, every enum's size and every constant. tests/abi.rs
 * compiles and runs it and compares each line with the Rust declarations. */
#include <stddef.h>
#include <stdio.h>

#include "hwyattn.h"

/* C99 has no _Alignof: a struct's alignment is where it lands after a char. */
#define ALIGNED(T)   \
  struct align_##T { \
    char c;          \
    T t;             \
  };
ALIGNED(hwyattn_parallel)
ALIGNED(hwyattn_tensor)
ALIGNED(hwyattn_sdpa_options)
ALIGNED(hwyattn_mha_config)
ALIGNED(hwyattn_mha_weights)
ALIGNED(hwyattn_kv_cache)
ALIGNED(hwyattn_kv_batch)

#define STRUCT(S) \
  printf("sizeof(%s) %zu\nalignof(%s) %zu\n", #S, sizeof(S), #S, offsetof(struct align_##S, t))
#define FIELD(S, f)                                                                   \
  printf("offsetof(%s, %s) %zu\nsizeof(%s.%s) %zu\n", #S, #f, offsetof(S, f), #S, #f, \
         sizeof(((S*)0)->f))
#define ENUM(E) printf("sizeof(%s) %zu\n", #E, sizeof(E))
#define CONST(c) printf("%s %lld\n", #c, (long long)(c))

int main(void) {
  STRUCT(hwyattn_parallel);
  FIELD(hwyattn_parallel, struct_size);
  FIELD(hwyattn_parallel, num_workers);
  FIELD(hwyattn_parallel, pool);
  FIELD(hwyattn_parallel, parallel_for);

  STRUCT(hwyattn_tensor);
  FIELD(hwyattn_tensor, data);
  FIELD(hwyattn_tensor, dtype);
  FIELD(hwyattn_tensor, rank);
  FIELD(hwyattn_tensor, shape);
  FIELD(hwyattn_tensor, stride);

  STRUCT(hwyattn_sdpa_options);
  FIELD(hwyattn_sdpa_options, struct_size);
  FIELD(hwyattn_sdpa_options, scale);
  FIELD(hwyattn_sdpa_options, causal);
  FIELD(hwyattn_sdpa_options, mask);
  FIELD(hwyattn_sdpa_options, kv_len);
  FIELD(hwyattn_sdpa_options, weights);
  FIELD(hwyattn_sdpa_options, lse);
  FIELD(hwyattn_sdpa_options, window_left);
  FIELD(hwyattn_sdpa_options, window_right);
  FIELD(hwyattn_sdpa_options, softcap);
  FIELD(hwyattn_sdpa_options, alibi_slopes);
  FIELD(hwyattn_sdpa_options, sinks);
  FIELD(hwyattn_sdpa_options, parallel);
  FIELD(hwyattn_sdpa_options, precision);
  FIELD(hwyattn_sdpa_options, reserved0);

  STRUCT(hwyattn_mha_config);
  FIELD(hwyattn_mha_config, struct_size);
  FIELD(hwyattn_mha_config, embed_dim);
  FIELD(hwyattn_mha_config, num_heads);
  FIELD(hwyattn_mha_config, head_dim);
  FIELD(hwyattn_mha_config, num_kv_heads);
  FIELD(hwyattn_mha_config, kdim);
  FIELD(hwyattn_mha_config, vdim);
  FIELD(hwyattn_mha_config, has_bias);
  FIELD(hwyattn_mha_config, reserved0);
  FIELD(hwyattn_mha_config, weight_dtype);
  FIELD(hwyattn_mha_config, reserved1);

  STRUCT(hwyattn_mha_weights);
  FIELD(hwyattn_mha_weights, w_q);
  FIELD(hwyattn_mha_weights, w_k);
  FIELD(hwyattn_mha_weights, w_v);
  FIELD(hwyattn_mha_weights, w_o);
  FIELD(hwyattn_mha_weights, b_q);
  FIELD(hwyattn_mha_weights, b_k);
  FIELD(hwyattn_mha_weights, b_v);
  FIELD(hwyattn_mha_weights, b_o);

  STRUCT(hwyattn_kv_cache);
  FIELD(hwyattn_kv_cache, struct_size);
  FIELD(hwyattn_kv_cache, reserved0);
  FIELD(hwyattn_kv_cache, k);
  FIELD(hwyattn_kv_cache, v);
  FIELD(hwyattn_kv_cache, k_scale);
  FIELD(hwyattn_kv_cache, v_scale);
  FIELD(hwyattn_kv_cache, block_table);
  FIELD(hwyattn_kv_cache, block_table_stride);

  STRUCT(hwyattn_kv_batch);
  FIELD(hwyattn_kv_batch, struct_size);
  FIELD(hwyattn_kv_batch, num_seqs);
  FIELD(hwyattn_kv_batch, q_start);
  FIELD(hwyattn_kv_batch, kv_len);
  FIELD(hwyattn_kv_batch, q_pos);

  ENUM(hwyattn_status);
  ENUM(hwyattn_dtype);
  ENUM(hwyattn_causal);
  ENUM(hwyattn_precision);

  CONST(HWYATTN_VERSION_MAJOR);
  CONST(HWYATTN_VERSION_MINOR);
  CONST(HWYATTN_VERSION_PATCH);
  CONST(HWYATTN_ABI_VERSION);
  CONST(HWYATTN_OK);
  CONST(HWYATTN_INVALID_ARGUMENT);
  CONST(HWYATTN_UNSUPPORTED);
  CONST(HWYATTN_OUT_OF_MEMORY);
  CONST(HWYATTN_INTERNAL_ERROR);
  CONST(HWYATTN_F32);
  CONST(HWYATTN_F16);
  CONST(HWYATTN_BF16);
  CONST(HWYATTN_BOOL);
  CONST(HWYATTN_I8);
  CONST(HWYATTN_F8E4M3);
  CONST(HWYATTN_F8E5M2);
  CONST(HWYATTN_Q8_0);
  CONST(HWYATTN_Q4_0);
  CONST(HWYATTN_Q4_1);
  CONST(HWYATTN_Q5_0);
  CONST(HWYATTN_Q5_1);
  CONST(HWYATTN_IQ4_NL);
  CONST(HWYATTN_I4);
  CONST(HWYATTN_CAUSAL_NONE);
  CONST(HWYATTN_CAUSAL_TOP_LEFT);
  CONST(HWYATTN_CAUSAL_BOTTOM_RIGHT);
  CONST(HWYATTN_PRECISION_F32);
  CONST(HWYATTN_PRECISION_BF16);
  CONST(HWYATTN_PRECISION_INT8);
  return 0;
}
