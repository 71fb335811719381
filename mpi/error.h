// SPDX-License-Identifier: Apache-2.0
//
// hwyattn_mpi_last_error(): the calling thread's last failure message of an
// hwyattn_mpi_* call, and the helpers that set it.
#ifndef HWYATTN_MPI_ERROR_H_
#define HWYATTN_MPI_ERROR_H_

#include <mpi.h>

#include "include/hwyattn.h"

namespace hwyattn_mpi {

// Sets the thread's message (printf format) and returns `status`.
hwyattn_status Fail(hwyattn_status status, const char* format, ...)
    __attribute__((format(printf, 2, 3)));
// Clears the message (at the start of every call).
void ClearError();
// The thread's message.
const char* LastError();
// Prefixes the thread's message with "rank r: " (no allocation: it runs
// where memory may have run out).
void PrefixRank(int rank);

// HWYATTN_INTERNAL_ERROR naming the MPI function and MPI's error string,
// unless mpi_error is MPI_SUCCESS (then HWYATTN_OK).
hwyattn_status CheckMpi(int mpi_error, const char* function);

}  // namespace hwyattn_mpi

#define HWYATTN_MPI_RETURN_IF_ERROR(expr)                    \
  do {                                                       \
    const hwyattn_status _hwyattn_mpi_s = (expr);            \
    if (_hwyattn_mpi_s != HWYATTN_OK) return _hwyattn_mpi_s; \
  } while (0)

#endif  // HWYATTN_MPI_ERROR_H_
