// SPDX-License-Identifier: Apache-2.0
//
// Argument validation for the C ABI: turns caller descriptors into internal,
// rank-4 views, or fails with a message naming the argument and the value.
#ifndef HWYATTN_CAPI_VALIDATE_H_
#define HWYATTN_CAPI_VALIDATE_H_

#include "include/hwyattn.h"
#include "src/attention.h"
#include "src/tensor.h"

namespace hwyattn {

// Checks q, k, v, out and opts (NULL = defaults) of hwyattn_sdpa and fills
// *problem. Reads nothing but the descriptors and kv_len; writes nothing.
hwyattn_status ValidateSdpa(const hwyattn_tensor* q, const hwyattn_tensor* k,
                            const hwyattn_tensor* v, const hwyattn_tensor* out,
                            const hwyattn_sdpa_options* opts, SdpaProblem* problem);

// Checks rank and shape of a would-be contiguous tensor and returns its element
// count in *count.
hwyattn_status ValidateShape(const char* name, int32_t rank, const int64_t* shape,
                             int64_t* count);

}  // namespace hwyattn

#endif  // HWYATTN_CAPI_VALIDATE_H_
