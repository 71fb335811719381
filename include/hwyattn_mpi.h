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
 * Every function below that takes a communicator is collective over it
 * (hwyattn_mpi_ring_slice and hwyattn_mpi_ring_last_stats are local): every
 * rank of comm calls it, with arguments that describe one problem (see each
 * function). The shapes and options of all ranks are agreed with one small
 * MPI_Allgather before any work (preceded by an MPI_Allreduce of one
 * integer, so that a rank that cannot allocate the gathered table says so
 * instead of leaving the others waiting), so a bad argument on one rank (a NULL
 * tensor, a shape that differs between ranks, options that differ) is the
 * same error on EVERY rank, never a hang: each rank returns
 * HWYATTN_INVALID_ARGUMENT (or HWYATTN_UNSUPPORTED) and
 * hwyattn_mpi_last_error() names the rank, the argument and the values. An
 * error that only shows during a rank's own computation (hwyattn_sdpa
 * rejecting a stride, memory running out) is carried by the merge's
 * collective and likewise returned on every rank, with the failing rank's
 * own message there and "rank r failed: ..." elsewhere.
 *
 * MPI itself: the calls use comm as given (no duplicate; collectives, and
 * the ring's tagged point-to-point messages, see hwyattn_mpi_ring_sdpa), so
 * calls on one communicator must be made in the same order on every rank,
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
 *  it. Communication: the agreement (one MPI_Allreduce of one integer, one
 *  MPI_Allgather of a few hundred bytes per rank), and one MPI_Allreduce of
 *  B * Hq * Lq * (Dv + 1) floats.
 *
 *  Results: out and lse are the same bits on every rank and in every run
 *  (on one MPI installation and communicator size); they equal the
 *  single-process hwyattn_sdpa within 2e-6 relative (or a few fp32 ulps of
 *  the largest |lse|, as hwyattn_merge_states states). Not bit-identical to
 *  it: the keys are summed in a different order.
 *
 *  Errors (on every rank, see "Collective calls"): a NULL q, k, v or out; q,
 *  k or v (of a shard that holds keys) not F32, F16 or BF16, with NULL or
 *  misaligned data or a negative stride; k or v of a batch other than 1 or
 *  B; an option hwyattn_sdpa rejects (scale, causal, windows, softcap,
 *  ALiBi slopes, sinks, precision, parallel: checked by a probe call to
 *  hwyattn_sdpa before any work, with its message); a
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

/* ------------------------------------------------------------------------ */
/* Sequence-parallel (ring) attention                                        */
/* ------------------------------------------------------------------------ */

/** The zigzag slice layout of hwyattn_mpi_ring_sdpa. A sequence of L tokens
 *  is cut into 2N chunks (N = the communicator's size), chunk c holding the
 *  tokens [floor(c * L / 2N), floor((c + 1) * L / 2N)) (lengths differ by at
 *  most one when 2N does not divide L). Rank r holds chunks r and 2N - 1 - r,
 *  concatenated in that order along the sequence axis: its slice has
 *  len0 + len1 tokens, token i of the slice being token first0 + i of the
 *  sequence for i < len0, else token first1 + (i - len0). Pairing an early
 *  chunk with its mirror gives every rank the same share of a causal
 *  triangle (the early chunk's rows see few keys, the late chunk's many).
 *
 *  Writes rank `rank`'s chunks of a sequence of seq_len tokens over `size`
 *  ranks. Local (not collective; any thread). Errors: a NULL output; rank
 *  outside [0, size); seq_len < 2 * size (every chunk must hold a token).
 *  Example, L = 10 over N = 2: chunks [0,2) [2,5) [5,7) [7,10); rank 0
 *  holds tokens 0-1 and 7-9, rank 1 tokens 2-4 and 5-6. */
HWYATTN_MPI_API hwyattn_status hwyattn_mpi_ring_slice(int32_t rank, int32_t size, int64_t seq_len,
                                                      int64_t* first0, int64_t* len0,
                                                      int64_t* first1, int64_t* len1);

/** Sequence-parallel attention for long prefills (ring attention): self
 *  attention over one sequence of L tokens whose queries, keys, values and
 *  outputs are spread over the ranks in the zigzag layout
 *  (hwyattn_mpi_ring_slice). The result is, row for row, the hwyattn_sdpa
 *  of the whole q [B, Hq, L, D] over the whole k, v.
 *
 *    q    [B,  Hq,  L_r, D ]  this rank's slice (L_r = len0 + len1 of
 *    k    [Bk, Hkv, L_r, D ]  hwyattn_mpi_ring_slice; L = sum_r L_r, and
 *    v    [Bv, Hkv, L_r, Dv]  each rank's L_r must be the layout's)
 *    out  [B,  Hq,  L_r, Dv]  F32: this rank's rows of the whole output
 *
 *  Sizes other than L_r, the dtypes of q, k and v, Bk and Bv (1 or B) and
 *  every option below must be the same on every rank; strides may differ.
 *  L >= 2N. Queries and keys are the same tokens (Lq = Lk = L): a prefill
 *  that continues a cache is not this call's (use hwyattn_mpi_sharded_sdpa,
 *  or hwyattn_sdpa per rank).
 *
 *  opts (NULL = defaults), the WHOLE problem's, as for one process:
 *  - scale, softcap, alibi_slopes, sinks, precision: as hwyattn_sdpa.
 *  - causal: TOP_LEFT and BOTTOM_RIGHT are the same here (Lq = Lk): token
 *    p sees tokens j <= p, positions being the whole sequence's. NONE: every
 *    token sees every token (any layout would do; the zigzag one is kept).
 *  - window_left, window_right: over whole-sequence positions. Blocks of
 *    keys outside every row's window are skipped (not computed), but every
 *    K/V slice still travels the whole ring.
 *  - kv_len [B]: each batch's valid length of the whole sequence, in
 *    [0, L], the same on every rank.
 *  - lse: optional F32 [B, Hq, L_r], this rank's rows of the whole lse.
 *  - mask, weights: not available (HWYATTN_UNSUPPORTED).
 *  - parallel: this rank's own thread pool.
 *
 *  How: N steps. At step s rank r holds the K/V slice of rank
 *  (r - s) mod N; it computes the attention of its two query chunks over
 *  that slice's two key chunks (four blocks, each fully visible, fully
 *  blocked and skipped, or on the causal diagonal, computed with
 *  hwyattn_sdpa as in hwyattn_mpi_sharded_sdpa) while MPI_Isend passes the
 *  slice on to rank r + 1 and MPI_Irecv takes the next one from rank r - 1
 *  (double buffers; MPI_Testall between blocks lets MPI progress). Each
 *  query chunk's partial (out, lse) pairs are merged with
 *  hwyattn_merge_states in step order, then key-chunk order, whatever the
 *  messages' timing; the sinks are applied once, at the end.
 *  Communication per rank: the agreement (one MPI_Allreduce of one integer,
 *  one MPI_Allgather of a few hundred bytes), N - 1 sends and receives of a K/V slice
 *  (Bk * Hkv * L_r * D + Bv * Hkv * L_r * Dv elements), one MPI_Allreduce of
 *  one integer (the verdict, so that a failure during the computation, such
 *  as hwyattn_sdpa rejecting a stride, is an error on every rank). The
 *  point-to-point messages use tags 18551 (keys) and 18552 (values) on comm:
 *  no receive with MPI_ANY_TAG from a ring neighbour may be pending on comm
 *  during the call. Memory per rank: two K/V buffers of the largest slice
 *  (L_r + 2 tokens), and F32 partials of B * Hq * L_r * (Dv + 1) floats
 *  twice.
 *
 *  Results: the same bits in every run (one MPI installation, one
 *  communicator size and thread count); within 2e-6 relative of the
 *  single-process hwyattn_sdpa (or a few fp32 ulps of the largest |lse|).
 *
 *  Errors (on every rank, see "Collective calls"): a NULL q, k, v or out; q,
 *  k or v not F32, F16 or BF16, with NULL or misaligned data or a negative
 *  stride; an option hwyattn_sdpa rejects (as for hwyattn_mpi_sharded_sdpa);
 *  a size, dtype or option that differs between ranks; an L_r that is not the
 *  layout's for the communicator's size (hwyattn_mpi_ring_slice) or
 *  L < 2N; kv_len out of [0, L]; K/V slices over INT_MAX rows
 *  (HWYATTN_UNSUPPORTED); what hwyattn_sdpa rejects.
 *  @returns HWYATTN_OK, or a status describing the error
 *  (see hwyattn_mpi_last_error()). */
HWYATTN_MPI_API hwyattn_status hwyattn_mpi_ring_sdpa(MPI_Comm comm, const hwyattn_tensor* q,
                                                     const hwyattn_tensor* k,
                                                     const hwyattn_tensor* v, hwyattn_tensor* out,
                                                     const hwyattn_sdpa_options* opts);

/** Where the time of the calling thread's last successful
 *  hwyattn_mpi_ring_sdpa went (for tuning and scaling estimates; all zero
 *  before the first). compute_seconds: in hwyattn_sdpa and the merges;
 *  wait_seconds: blocked in MPI_Waitall for the K/V slices, the
 *  communication the computation did not hide; bytes_sent: K/V bytes this
 *  rank sent (as many received). */
typedef struct hwyattn_mpi_ring_stats {
  double total_seconds;
  double compute_seconds;
  double wait_seconds;
  int64_t bytes_sent;
  int32_t steps; /* the communicator's size */
} hwyattn_mpi_ring_stats;

/** Copies the calling thread's last ring statistics into *stats (a NULL
 *  stats is ignored). Local. */
HWYATTN_MPI_API void hwyattn_mpi_ring_last_stats(hwyattn_mpi_ring_stats* stats);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* HWYATTN_MPI_H_ */
