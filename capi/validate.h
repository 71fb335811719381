// SPDX-License-Identifier: Apache-2.0
//
// Argument validation for the C ABI: turns caller descriptors into internal,
// rank-4 views, or fails with a message naming the argument and the value.
#ifndef HWYATTN_CAPI_VALIDATE_H_
#define HWYATTN_CAPI_VALIDATE_H_

#include "include/hwyattn.h"
#include "src/kv_cache.h"
#include "src/merge_problem.h"
#include "src/mha.h"
#include "src/sdpa_problem.h"
#include "src/tensor.h"

namespace hwyattn {

// Checks q, k, v, out and opts (NULL = defaults) of hwyattn_sdpa and fills
// *problem. Reads nothing but the descriptors and kv_len; writes nothing.
hwyattn_status ValidateSdpa(const hwyattn_tensor* q, const hwyattn_tensor* k,
                            const hwyattn_tensor* v, const hwyattn_tensor* out,
                            const hwyattn_sdpa_options* opts, SdpaProblem* problem);

// Checks cfg and w of hwyattn_mha_create and resolves the defaults.
hwyattn_status ValidateMhaConfig(const hwyattn_mha_config* cfg, const hwyattn_mha_weights* w,
                                 MhaConfig* config);

// Checks the arguments of hwyattn_mha_forward for a layer of shape cfg and
// fills *call (the attention problem's sizes and options, the activations).
hwyattn_status ValidateMhaForward(const MhaConfig& cfg, const hwyattn_tensor* query,
                                  const hwyattn_tensor* key, const hwyattn_tensor* value,
                                  const hwyattn_tensor* out, const hwyattn_sdpa_options* opts,
                                  MhaCall* call);

// Checks the arguments of hwyattn_merge_states (n partial outputs and lses,
// optional sinks, out and the optional lse_out) and fills *problem. Reads the
// descriptors and the sinks; writes nothing.
hwyattn_status ValidateMerge(int32_t n, const hwyattn_tensor* const* outs,
                             const hwyattn_tensor* const* lses, const float* sinks,
                             const hwyattn_tensor* out, const hwyattn_tensor* lse_out,
                             MergeProblem* problem);

// Checks the arguments of hwyattn_kv_attention (every page id a sequence
// needs, the batch's arrays, the options that apply) and fills *problem.
// Reads the descriptors, the batch's arrays and the block table; writes
// nothing.
hwyattn_status ValidateKvAttention(const hwyattn_tensor* q, const hwyattn_kv_cache* cache,
                                   const hwyattn_kv_batch* batch, const hwyattn_tensor* out,
                                   const hwyattn_sdpa_options* opts, KvAttentionProblem* problem);

// Checks the arguments of hwyattn_kv_cache_write (slots inside the pool and
// none twice, per-channel scales) and fills *problem. Writes nothing.
hwyattn_status ValidateKvWrite(const hwyattn_kv_cache* cache, const hwyattn_tensor* k_new,
                               const hwyattn_tensor* v_new, const int64_t* slot,
                               const hwyattn_sdpa_options* opts, KvWriteProblem* problem);

// Checks rank and shape of a would-be contiguous tensor and returns its element
// count in *count.
// Whether `raw` (an enum's bits) is one of hwyattn_dtype's values.
inline bool IsDtype(int64_t raw) { return raw >= HWYATTN_F32 && raw <= HWYATTN_I4; }

hwyattn_status ValidateShape(const char* name, int32_t rank, const int64_t* shape, int64_t* count);

// hwyattn_sdpa_options_copy: *src read by the rule of every entry point
// (ReadStruct: its struct_size), into *dst as this header's struct.
hwyattn_status ReadSdpaOptions(const hwyattn_sdpa_options* src, hwyattn_sdpa_options* dst);

}  // namespace hwyattn

#endif  // HWYATTN_CAPI_VALIDATE_H_
