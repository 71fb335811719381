// SPDX-License-Identifier: Apache-2.0
//
// hwyattn_mpi_ring_sdpa: sequence-parallel attention. Local checks
// (call_checks), one MPI_Allgather to agree on the problem and check the
// zigzag layout (ring_layout), then N steps in which the K/V slices travel
// around the ring (kv_rotation) while each rank computes its query chunks
// against the slice it holds (block_attention), merging the partials in a
// fixed order; one MPI_Allreduce of the verdict; the sinks, once.

#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>

#include <algorithm>
#include <chrono>
#include <new>
#include <vector>

#include "include/hwyattn_mpi.h"
#include "mpi/agreement.h"
#include "mpi/block_attention.h"
#include "mpi/call_checks.h"
#include "mpi/error.h"
#include "mpi/kv_rotation.h"
#include "mpi/ring_layout.h"
#include "mpi/tensor_view.h"

namespace hwyattn_mpi {
namespace {

constexpr int kKeyTag = 18551, kValueTag = 18552;

thread_local hwyattn_mpi_ring_stats g_stats = {};

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// One query chunk's running state: the merge of its partials so far.
struct ChunkState {
  int64_t rows = 0;  // B * Hq * len
  float* out = nullptr;
  float* lse = nullptr;
  bool any = false;  // whether a partial has been merged in
};

// Everything a rank allocates before the agreement (so that running out of
// memory is a verdict every rank hears): the K and V slice buffers and the
// F32 partials.
struct Workspace {
  SliceStream keys, values;
  std::vector<float> state;    // both chunks' out, then both chunks' lse
  std::vector<float> partial;  // one block's out, then its lse

  hwyattn_status Allocate(const Sizes& s, const hwyattn_tensor& k, const hwyattn_tensor& v,
                          int ranks) {
    const Dims4 kd(k), vd(v);
    // The largest slice of the layout is at most 2 tokens longer than any
    // other (chunk lengths differ by at most one). One rank sends nothing.
    const int64_t max_len = ranks > 1 ? s.key_len + 2 : 0;
    HWYATTN_MPI_RETURN_IF_ERROR(
        keys.Allocate(kd.shape[0], s.kv_heads, s.head_dim, k.dtype, max_len));
    HWYATTN_MPI_RETURN_IF_ERROR(
        values.Allocate(vd.shape[0], s.kv_heads, s.value_dim, v.dtype, max_len));
    const int64_t rows = s.batch * s.q_heads * s.q_len;  // checked against overflow
    try {
      state.resize(static_cast<size_t>(rows * (s.value_dim + 1)));
      partial.resize(static_cast<size_t>(rows * (s.value_dim + 1)));
    } catch (const std::bad_alloc&) {
      return Fail(HWYATTN_OUT_OF_MEMORY,
                  "out of memory for the partial states (2 x %" PRId64 " rows of %" PRId64
                  " floats)",
                  rows, s.value_dim + 1);
    }
    return HWYATTN_OK;
  }
};

// Whether a query at some position in [q_pos, q_pos + q_len) may see a key
// in [k_pos, k_pos + k_len) (rows' visible ranges grow with the position).
bool MaySee(const PositionRules& rules, int64_t q_pos, int64_t q_len, int64_t k_pos,
            int64_t k_len) {
  int64_t lo_first, hi_first, lo_last, hi_last;
  rules.Visible(q_pos, &lo_first, &hi_first);
  rules.Visible(q_pos + q_len - 1, &lo_last, &hi_last);
  return lo_first < k_pos + k_len && hi_last > k_pos;
}

// Folds a block's partial into the chunk's state (state first: a fixed
// order). The first partial is computed straight into the state instead.
hwyattn_status MergeInto(ChunkState* st, const int64_t out_shape[4], float* out, float* lse) {
  hwyattn_tensor outs[2], lses[2];
  float* o[2] = {st->out, out};
  float* l[2] = {st->lse, lse};
  for (int i = 0; i < 2; ++i) {
    hwyattn_tensor_contiguous(&outs[i], o[i], HWYATTN_F32, 4, out_shape);
    hwyattn_tensor_contiguous(&lses[i], l[i], HWYATTN_F32, 3, out_shape);
  }
  const hwyattn_tensor* op[2] = {&outs[0], &outs[1]};
  const hwyattn_tensor* lp[2] = {&lses[0], &lses[1]};
  const hwyattn_status s = hwyattn_merge_states(2, op, lp, nullptr, &outs[0], &lses[0]);
  if (s != HWYATTN_OK) return Fail(s, "hwyattn_merge_states: %s", hwyattn_last_error());
  return HWYATTN_OK;
}

// The checks every rank makes of the agreed table, with the same verdict.
hwyattn_status CheckLayout(const std::vector<int64_t>& lens, const hwyattn_sdpa_options& opts,
                           const Sizes& sizes, const Workspace& ws, int64_t* seq_len) {
  const int64_t n = static_cast<int64_t>(lens.size());
  int64_t total = 0;
  for (int64_t len : lens) {
    if (__builtin_add_overflow(total, len, &total)) {
      return Fail(HWYATTN_INVALID_ARGUMENT, "the ranks' slices (q shape[2]) overflow int64");
    }
  }
  if (total < 2 * n) {
    return Fail(HWYATTN_INVALID_ARGUMENT,
                "the sequence has %" PRId64
                " tokens (the sum of every rank's q shape[2]); "
                "the ring over %" PRId64 " ranks needs at least %" PRId64 " (two chunks per rank)",
                total, n, 2 * n);
  }
  for (int64_t r = 0; r < n; ++r) {
    const RingChunks c = RingSlice(r, n, total);
    if (c.total() != lens[static_cast<size_t>(r)]) {
      return Fail(HWYATTN_INVALID_ARGUMENT,
                  "rank %" PRId64 ": q: shape[2] (its slice) is %" PRId64
                  " tokens but the zigzag layout of %" PRId64 " tokens over %" PRId64
                  " ranks gives it %" PRId64 " (see hwyattn_mpi_ring_slice)",
                  r, lens[static_cast<size_t>(r)], total, n, c.total());
    }
    if (!ws.keys.Fits(c.total()) || !ws.values.Fits(c.total())) {
      return Fail(HWYATTN_UNSUPPORTED,
                  "rank %" PRId64 ": its K/V slice of %" PRId64
                  " tokens exceeds one MPI message (%d rows)",
                  r, c.total(), INT_MAX);
    }
  }
  HWYATTN_MPI_RETURN_IF_ERROR(CheckKvLen(opts, sizes.batch, total, "the whole sequence"));
  *seq_len = total;
  return HWYATTN_OK;
}

// Shares each rank's verdict on its computation: HWYATTN_OK everywhere, or
// the lowest failed rank's status everywhere (its own message there).
hwyattn_status ShareVerdict(MPI_Comm comm, int rank, hwyattn_status mine) {
  const int64_t none = INT64_MAX;
  int64_t code = mine == HWYATTN_OK ? none : static_cast<int64_t>(rank) * 64 + mine;
  int64_t lowest = none;
  HWYATTN_MPI_RETURN_IF_ERROR(
      CheckMpi(MPI_Allreduce(&code, &lowest, 1, MPI_INT64_T, MPI_MIN, comm), "MPI_Allreduce"));
  if (lowest == none) return HWYATTN_OK;
  const hwyattn_status status = static_cast<hwyattn_status>(lowest % 64);
  const int failed = static_cast<int>(lowest / 64);
  if (failed == rank) return status;  // its message stands
  return Fail(status, "rank %d failed with %s (its hwyattn_mpi_last_error() has the detail)",
              failed, hwyattn_status_string(status));
}

}  // namespace

hwyattn_status RingSdpa(MPI_Comm comm, const hwyattn_tensor* q, const hwyattn_tensor* k,
                        const hwyattn_tensor* v, hwyattn_tensor* out,
                        const hwyattn_sdpa_options* user_opts) {
  ClearError();
  const double t_start = Now();
  if (comm == MPI_COMM_NULL) return Fail(HWYATTN_INVALID_ARGUMENT, "comm is MPI_COMM_NULL");
  int rank = 0, size = 1;
  HWYATTN_MPI_RETURN_IF_ERROR(CheckMpi(MPI_Comm_rank(comm, &rank), "MPI_Comm_rank"));
  HWYATTN_MPI_RETURN_IF_ERROR(CheckMpi(MPI_Comm_size(comm, &size), "MPI_Comm_size"));

  CallShape shape;
  hwyattn_sdpa_options opts;
  Sizes sizes = {};
  Workspace ws;
  if (Describe(Mode::kRing, q, k, v, out, user_opts, &shape, &opts, &sizes) == HWYATTN_OK) {
    const hwyattn_status s = ws.Allocate(sizes, *k, *v, size);
    if (s != HWYATTN_OK) RecordFailure(&shape, s);
  }
  std::vector<int64_t> lens;
  HWYATTN_MPI_RETURN_IF_ERROR(Agree(comm, shape, &lens));
  int64_t seq_len = 0;
  HWYATTN_MPI_RETURN_IF_ERROR(CheckLayout(lens, opts, sizes, ws, &seq_len));

  // This rank's query chunks and their running states.
  const RingChunks mine = RingSlice(rank, size, seq_len);
  hwyattn_tensor q_chunk[2];
  ChunkState state[2];
  const int64_t per_row = sizes.batch * sizes.q_heads;
  float* lse_base = ws.state.data() + per_row * sizes.q_len * sizes.value_dim;
  for (int a = 0; a < 2; ++a) {
    const int64_t offset = a == 0 ? 0 : mine.len[0];
    q_chunk[a] = Slice(*q, 2, offset, mine.len[a]);
    state[a].rows = per_row * mine.len[a];
    state[a].out = ws.state.data() + per_row * offset * sizes.value_dim;
    state[a].lse = lse_base + per_row * offset;
  }
  const PositionRules rules = PositionRules::From(opts);

  double compute = 0.0, wait = 0.0;
  int64_t bytes_sent = 0;
  hwyattn_status failed = HWYATTN_OK;  // this rank's computation
  bool reported = false;
  const int right = (rank + 1) % size, left = (rank + size - 1) % size;
  if (size > 1) {
    ws.keys.Begin(*k);
    ws.values.Begin(*v);
  }
  for (int step = 0; step < size; ++step) {
    const int src = (rank - step + size) % size;
    const RingChunks theirs = RingSlice(src, size, seq_len);
    const bool more = step + 1 < size;
    if (more) {
      const int64_t next_len = RingSlice((src + size - 1) % size, size, seq_len).total();
      HWYATTN_MPI_RETURN_IF_ERROR(
          ws.keys.Post(comm, kKeyTag, right, theirs.total(), left, next_len));
      HWYATTN_MPI_RETURN_IF_ERROR(
          ws.values.Post(comm, kValueTag, right, theirs.total(), left, next_len));
      bytes_sent += theirs.total() * (ws.keys.BytesPerToken() + ws.values.BytesPerToken());
    }
    // Step 0 computes on the caller's own tensors, later steps on the
    // received slices.
    const hwyattn_tensor k_slice = step == 0 ? *k : ws.keys.Current(theirs.total());
    const hwyattn_tensor v_slice = step == 0 ? *v : ws.values.Current(theirs.total());
    const double t0 = Now();
    for (int a = 0; a < 2 && failed == HWYATTN_OK; ++a) {
      for (int b = 0; b < 2 && failed == HWYATTN_OK; ++b) {
        if (!MaySee(rules, mine.first[a], mine.len[a], theirs.first[b], theirs.len[b])) continue;
        const int64_t k_offset = b == 0 ? 0 : theirs.len[0];
        const hwyattn_tensor kb = Slice(k_slice, 2, k_offset, theirs.len[b]);
        const hwyattn_tensor vb = Slice(v_slice, 2, k_offset, theirs.len[b]);
        Block block;
        block.q = &q_chunk[a];
        block.k = &kb;
        block.v = &vb;
        block.key_len = theirs.len[b];
        block.q_pos = mine.first[a];
        block.k_pos = theirs.first[b];
        block.kv_len = opts.kv_len;
        block.batch = sizes.batch;
        block.q_heads = sizes.q_heads;
        block.q_len = mine.len[a];
        block.value_dim = sizes.value_dim;
        ChunkState* st = &state[a];
        float* o = st->any ? ws.partial.data() : st->out;
        float* l = st->any ? ws.partial.data() + st->rows * sizes.value_dim : st->lse;
        failed = ComputeBlock(block, rules, opts, o, l);
        if (failed == HWYATTN_OK && st->any) {
          const int64_t shape4[4] = {sizes.batch, sizes.q_heads, mine.len[a], sizes.value_dim};
          failed = MergeInto(st, shape4, o, l);
        }
        st->any = true;
        if (more) {
          ws.keys.Progress();
          ws.values.Progress();
        }
      }
    }
    if (failed != HWYATTN_OK && !reported) {  // later steps only pass the slices on
      PrefixRank(rank);
      reported = true;
    }
    const double t1 = Now();
    compute += t1 - t0;
    if (more) {
      HWYATTN_MPI_RETURN_IF_ERROR(ws.keys.Wait());
      HWYATTN_MPI_RETURN_IF_ERROR(ws.values.Wait());
      wait += Now() - t1;
    }
  }
  HWYATTN_MPI_RETURN_IF_ERROR(ShareVerdict(comm, rank, failed));

  // The sinks join each chunk's state, once, on its way to the caller's out.
  const double t2 = Now();
  for (int a = 0; a < 2; ++a) {
    ChunkState& st = state[a];
    if (!st.any) {  // no key visible to any row of the chunk
      std::fill(st.out, st.out + st.rows * sizes.value_dim, 0.0f);
      std::fill(st.lse, st.lse + st.rows, -INFINITY);
    }
    const int64_t shape4[4] = {sizes.batch, sizes.q_heads, mine.len[a], sizes.value_dim};
    const int64_t offset = a == 0 ? 0 : mine.len[0];
    hwyattn_tensor out_a = Slice(*out, 2, offset, mine.len[a]);
    hwyattn_tensor lse_a;
    if (opts.lse != nullptr) lse_a = Slice(*opts.lse, 3, offset, mine.len[a]);
    HWYATTN_MPI_RETURN_IF_ERROR(WriteResult(st.out, st.lse, shape4, opts.sinks, &out_a,
                                            opts.lse != nullptr ? &lse_a : nullptr, rank));
  }
  const double t_end = Now();
  compute += t_end - t2;
  g_stats.total_seconds = t_end - t_start;
  g_stats.compute_seconds = compute;
  g_stats.wait_seconds = wait;
  g_stats.bytes_sent = bytes_sent;
  g_stats.steps = size;
  return HWYATTN_OK;
}

}  // namespace hwyattn_mpi

extern "C" HWYATTN_MPI_API hwyattn_status hwyattn_mpi_ring_sdpa(
    MPI_Comm comm, const hwyattn_tensor* q, const hwyattn_tensor* k, const hwyattn_tensor* v,
    hwyattn_tensor* out, const hwyattn_sdpa_options* opts) {
  return hwyattn_mpi::RingSdpa(comm, q, k, v, out, opts);
}

extern "C" HWYATTN_MPI_API void hwyattn_mpi_ring_last_stats(hwyattn_mpi_ring_stats* stats) {
  if (stats != nullptr) *stats = hwyattn_mpi::g_stats;
}
