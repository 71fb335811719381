// SPDX-License-Identifier: Apache-2.0
//
// The thread-local last-error message behind hwyattn_last_error().
#ifndef HWYATTN_CAPI_ERROR_H_
#define HWYATTN_CAPI_ERROR_H_

#include "include/hwyattn.h"

// The format rules of the vsnprintf behind Fail: MinGW's own stdio (C99:
// %zu, %lld), which C++ programs use there, or Windows' C runtime; its
// headers name the one in use (__MINGW_PRINTF_FORMAT). Elsewhere printf's.
#if defined(__MINGW32__)
#include <stdio.h>
#define HWYATTN_PRINTF_FORMAT __MINGW_PRINTF_FORMAT
#else
#define HWYATTN_PRINTF_FORMAT printf
#endif

namespace hwyattn {

// Formats the message (printf-style) into this thread's buffer and returns
// `status`, so failures read `return Fail(HWYATTN_INVALID_ARGUMENT, ...)`.
hwyattn_status Fail(hwyattn_status status, const char* format, ...)
    __attribute__((format(HWYATTN_PRINTF_FORMAT, 2, 3)));

const char* LastError();

}  // namespace hwyattn

#endif  // HWYATTN_CAPI_ERROR_H_
