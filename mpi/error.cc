// SPDX-License-Identifier: Apache-2.0

#include "mpi/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "include/hwyattn_mpi.h"

namespace hwyattn_mpi {
namespace {
thread_local char g_message[512] = "";
}  // namespace

hwyattn_status Fail(hwyattn_status status, const char* format, ...) {
  va_list args;
  va_start(args, format);
  vsnprintf(g_message, sizeof(g_message), format, args);
  va_end(args);
  return status;
}

void ClearError() { g_message[0] = '\0'; }

const char* LastError() { return g_message; }

void PrefixRank(int rank) {
  char detail[sizeof(g_message)];
  memcpy(detail, g_message, sizeof(detail));
  // (at most 480 bytes of the detail: the result fits, rank and all)
  snprintf(g_message, sizeof(g_message), "rank %d: %.480s", rank, detail);
}

hwyattn_status CheckMpi(int mpi_error, const char* function) {
  if (mpi_error == MPI_SUCCESS) return HWYATTN_OK;
  char text[MPI_MAX_ERROR_STRING] = "";
  int length = 0;
  MPI_Error_string(mpi_error, text, &length);
  return Fail(HWYATTN_INTERNAL_ERROR, "%s failed: %s", function, text);
}

}  // namespace hwyattn_mpi

extern "C" HWYATTN_MPI_API const char* hwyattn_mpi_last_error(void) {
  return hwyattn_mpi::LastError();
}
