/* SPDX-License-Identifier: Apache-2.0
 *
 * hwyattn_mpi.h: attention over more than one machine, with MPI. The optional
 * component libhwyattn_mpi (built when CMake finds MPI; -DHWYATTN_MPI=OFF
 * leaves it out). It calls libhwyattn's public C API (hwyattn_sdpa with
 * opts->lse, hwyattn_merge_states) and MPI; libhwyattn itself never depends
 * on MPI.
 *
 * Plain C99, like hwyattn.h, whose conventions hold here too (tensors,
 * options, status codes, nothing written to an output on failure). Link
 * with the MPI compiler wrapper or the flags of your MPI:
 *   mpicc app.c $(pkg-config --cflags --libs hwyattn_mpi)
 *   find_package(hwyattn CONFIG COMPONENTS mpi) -> hwyattn::hwyattn_mpi
 *
 * Collective calls
 * ----------------
 * Every function below is collective over its communicator: every rank of
 * comm calls it, with arguments that describe one problem (see each
 * function). The shapes and options of all ranks are agreed with one small
 * MPI_Allgather before any work, so a bad argument on one rank (a NULL
 * tensor, a shape that differs between ranks, options that differ) is the
 * same error on EVERY rank, never a hang: each rank returns
 * HWYATTN_INVALID_ARGUMENT (or HWYATTN_UNSUPPORTED) and
 * hwyattn_mpi_last_error() names the rank, the argument and the values. An
 * error that only shows during a rank's own computation (hwyattn_sdpa
 * rejecting a stride, memory running out) is carried by the merge's
 * collective and likewise returned on every rank, with the failing rank's
 * own message there and "rank r failed: ..." elsewhere.
 *
 * MPI itself: the calls use comm as given (no duplicate; collectives only),
 * so calls on one communicator must be made in the same order on every rank,
 * as for any MPI collective. If an MPI
 * call returns an error (only with an error handler that returns, such as
 * MPI_ERRORS_RETURN), the function returns HWYATTN_INTERNAL_ERROR with MPI's
 * error string. With MPI_THREAD_MULTIPLE, different threads may run calls on
 * different communicators at once.
 *
 * Threads inside a rank: each rank's hwyattn_sdpa runs on the library's
 * threads (hwyattn_set_num_threads) or on opts->parallel, as in one process.
 */
#ifndef HWYATTN_MPI_H_
#define HWYATTN_MPI_H_

#include <mpi.h>

#include "hwyattn.h"

#if defined(_WIN32) || defined(__CYGWIN__)
#if defined(HWYATTN_MPI_BUILDING_SHARED)
#define HWYATTN_MPI_API __declspec(dllexport)
#else
#define HWYATTN_MPI_API __declspec(dllimport)
#endif
#elif defined(__GNUC__) || defined(__clang__)
#define HWYATTN_MPI_API __attribute__((visibility("default")))
#else
#define HWYATTN_MPI_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/** Detail of the calling thread's last failure of an hwyattn_mpi_* call:
 *  the rank that failed, the argument and the value, e.g.
 *  "rank 2: q: shape[1] (query heads) is 8 but rank 0 has 4". Thread-local;
 *  valid until this thread's next hwyattn_mpi_* call. "" if none. Never NULL.
 *  (hwyattn_last_error() keeps libhwyattn's own calls' messages.) */
HWYATTN_MPI_API const char* hwyattn_mpi_last_error(void);

/** Key-sharded attention (decode, or any query block, over a KV cache split
 *  across ranks): the hwyattn_sdpa of q over the concatenation of every
 *  rank's keys, in rank order.
 *
 *    q    [B, Hq,  Lq,   D ]  the same on every rank (same shape; the values
 *                             are the caller's business: each rank computes
 *                             with its own copy)
 *    k    [Bk, Hkv, Lk_r, D ]  this rank's keys: keys [o_r, o_r + Lk_r) of the
 *                             whole sequence, o_r = Lk_0 + ... + Lk_{r-1}
 *    v    [Bk, Hkv, Lk_r, Dv]  their values
 *    out  [B, Hq,  Lq,   Dv]  F32, written on every rank
 *
 *  Each shard is described by its own tensors (dtypes, strides and Bk, which
 *  may be 1 or B, may differ from rank to rank). A rank may hold no keys:
 *  Lk_r = 0 (the second-to-last dimension of k and v; the only size that may
 *  be 0), and then k->data and v->data may be NULL; at least one rank holds
 *  keys. Every other size, the dtype of q and every option below must be
 *  the same on every rank.
 *
 *  opts (NULL = defaults) describes the WHOLE problem, as if one process
 *  held all Lk = sum_r Lk_r keys:
 *  - scale, causal, window_left, window_right, softcap, alibi_slopes, sinks,
 *    precision: the same on every rank (values compared). Positions are the
 *    whole sequence's (hwyattn.h: key j has position j, query row i position
 *    i + Lk - Lq under HWYATTN_CAUSAL_BOTTOM_RIGHT, else i), so causal
 *    alignment, windows and ALiBi come out as in one process.
 *  - kv_len [B]: the valid length of each batch's WHOLE sequence, each in
 *    [0, Lk], the same values on every rank; a rank applies
 *    clamp(kv_len[b] - o_r, 0, Lk_r) to its shard.
 *  - mask: this rank's key columns of the whole problem's mask, broadcastable
 *    to [B, Hq, Lq, Lk_r] (BOOL or F32, as in hwyattn_sdpa); NULL on every
 *    rank or on none (an empty shard's mask is not read).
 *  - lse: optional F32 [B, Hq, Lq] output, the whole problem's log-sum-exp,
 *    written on every rank.
 *  - weights: not available (the probabilities of the whole problem are
 *    spread over the ranks): HWYATTN_UNSUPPORTED.
 *  - parallel: this rank's own thread pool (may differ between ranks).
 *
 *  How: each rank computes its shard's partial output and lse with
 *  hwyattn_sdpa (no sinks; the whole problem's positions expressed in the
 *  shard's terms, with a BOOL mask of the shard's query x key block where a
 *  causal or window boundary crosses it, and keys that no query row can see
 *  skipped), then one MPI_Allreduce, whose user-defined, non-commutative
 *  operation merges (out, lse) pairs with hwyattn_merge_states, combines the
 *  partials of all ranks in rank order; the sinks are applied once, after
 *  it. Communication: one MPI_Allgather of a few hundred bytes per rank, and
 *  one MPI_Allreduce of B * Hq * Lq * (Dv + 1) floats.
 *
 *  Results: out and lse are the same bits on every rank and in every run
 *  (on one MPI installation and communicator size); they equal the
 *  single-process hwyattn_sdpa within 2e-6 relative (or a few fp32 ulps of
 *  the largest |lse|, as hwyattn_merge_states states). Not bit-identical to
 *  it: the keys are summed in a different order.
 *
 *  Errors (on every rank, see "Collective calls"): a NULL q, k, v or out; a
 *  size (B, Hq, Hkv, Lq, D, Dv) or option that differs between ranks; no
 *  keys on any rank; kv_len out of [0, Lk]; what hwyattn_sdpa rejects for a
 *  shard. comm must be an intra-communicator (MPI_COMM_NULL: the error is
 *  only local, since there is nobody to tell).
 *  @returns HWYATTN_OK, or a status describing the error
 *  (see hwyattn_mpi_last_error()). */
HWYATTN_MPI_API hwyattn_status hwyattn_mpi_sharded_sdpa(MPI_Comm comm, const hwyattn_tensor* q,
                                                        const hwyattn_tensor* k,
                                                        const hwyattn_tensor* v,
                                                        hwyattn_tensor* out,
                                                        const hwyattn_sdpa_options* opts);

#ifdef __cplusplus
}  /* extern "C" */
#endif

#endif /* HWYATTN_MPI_H_ */
