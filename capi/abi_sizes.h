// SPDX-License-Identifier: Apache-2.0
//
// The extensible structs as released headers laid them out, so that the
// library knows every struct_size a caller may legitimately pass and the
// frozen 0.1 init symbols write exactly the 0.1 sizes, on any ABI.
#ifndef HWYATTN_CAPI_ABI_SIZES_H_
#define HWYATTN_CAPI_ABI_SIZES_H_

#include <stddef.h>
#include <stdint.h>

#include "include/hwyattn.h"

namespace hwyattn {

// hwyattn_sdpa_options of 0.1.
struct SdpaOptions01 {
  uint32_t struct_size;
  float scale;
  hwyattn_causal causal;
  const hwyattn_tensor* mask;
  const int32_t* kv_len;
  hwyattn_tensor* weights;
  hwyattn_tensor* lse;
};

// hwyattn_mha_config of 0.1 (its tail padding became reserved0 in 0.2,
// without changing the size).
struct MhaConfig01 {
  uint32_t struct_size;
  int64_t embed_dim, num_heads, head_dim, num_kv_heads, kdim, vdim;
  int32_t has_bias;
};

static_assert(offsetof(hwyattn_sdpa_options, window_left) >= sizeof(SdpaOptions01),
              "0.2 fields must come after the 0.1 struct");
static_assert(sizeof(hwyattn_sdpa_options) % 8 == 0 && sizeof(hwyattn_mha_config) % 8 == 0 &&
                  sizeof(hwyattn_parallel) % 8 == 0,
              "extensible structs end on an 8-byte boundary, without tail padding");
static_assert(offsetof(hwyattn_sdpa_options, reserved0) + sizeof(int32_t) ==
                  sizeof(hwyattn_sdpa_options),
              "no tail padding after hwyattn_sdpa_options::reserved0");
static_assert(offsetof(hwyattn_mha_config, weight_dtype) == sizeof(MhaConfig01) &&
                  offsetof(hwyattn_mha_config, reserved1) + sizeof(int32_t) ==
                      sizeof(hwyattn_mha_config),
              "hwyattn_mha_config: weight_dtype right after the 0.1 struct (its size grows, so "
              "a 0.1 library rejects it), no tail padding after reserved1");

static_assert(sizeof(hwyattn_kv_cache) % 8 == 0 && sizeof(hwyattn_kv_batch) % 8 == 0,
              "extensible structs end on an 8-byte boundary, without tail padding");
static_assert(offsetof(hwyattn_kv_cache, k) == 8 &&
                  offsetof(hwyattn_kv_cache, block_table_stride) + sizeof(int64_t) ==
                      sizeof(hwyattn_kv_cache),
              "hwyattn_kv_cache: no padding (reserved0 fills the gap after struct_size)");
static_assert(offsetof(hwyattn_kv_batch, q_pos) + sizeof(const int32_t*) ==
                  sizeof(hwyattn_kv_batch),
              "no tail padding after hwyattn_kv_batch::q_pos");

// The struct_size values released headers produce, oldest first; the last
// is this header's sizeof.
constexpr size_t kSdpaOptionsSizes[] = {sizeof(SdpaOptions01), sizeof(hwyattn_sdpa_options)};
constexpr size_t kMhaConfigSizes[] = {sizeof(MhaConfig01), sizeof(hwyattn_mha_config)};
constexpr size_t kParallelSizes[] = {sizeof(hwyattn_parallel)};
// Added with the KV cache interface (after 0.2.0).
constexpr size_t kKvCacheSizes[] = {sizeof(hwyattn_kv_cache)};
constexpr size_t kKvBatchSizes[] = {sizeof(hwyattn_kv_batch)};

}  // namespace hwyattn

#endif  // HWYATTN_CAPI_ABI_SIZES_H_
