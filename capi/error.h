// SPDX-License-Identifier: Apache-2.0
//
// The thread-local last-error message behind hwyattn_last_error().
#ifndef HWYATTN_CAPI_ERROR_H_
#define HWYATTN_CAPI_ERROR_H_

#include "include/hwyattn.h"

namespace hwyattn {

// Formats the message (printf-style) into this thread's buffer and returns
// `status`, so failures read `return Fail(HWYATTN_INVALID_ARGUMENT, ...)`.
hwyattn_status Fail(hwyattn_status status, const char* format, ...)
    __attribute__((format(printf, 2, 3)));

const char* LastError();

}  // namespace hwyattn

#endif  // HWYATTN_CAPI_ERROR_H_
