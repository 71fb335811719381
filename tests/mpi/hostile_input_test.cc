// SPDX-License-Identifier: Apache-2.0
//
// The hostile-input table of libhwyattn_mpi (tests/hardening_test.cc's,
// for the collective entry points), under mpirun -np 1..4. Each row breaks
// one argument of a valid hwyattn_mpi_sharded_sdpa or hwyattn_mpi_ring_sdpa
// call, on every rank, on rank 0 or on the last rank only (shapes and
// options that differ between ranks, a communicator of the wrong size for
// the shards or slices), and checks on every rank:
//  - the row's status (HWYATTN_INVALID_ARGUMENT or HWYATTN_UNSUPPORTED),
//    the same on every rank;
//  - hwyattn_mpi_last_error() naming the argument and its value (and the
//    rank, when one rank was broken);
//  - out and lse untouched on every rank;
//  - no hang (ctest's TIMEOUT) and the communicator still in step: a valid
//    call right after succeeds.
// The local entry points (hwyattn_mpi_ring_slice, hwyattn_mpi_ring_last_stats)
// have their rows too.

#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <memory>
#include <string>
#include <vector>

#include "hwyattn_mpi.h"
#include "tests/mpi/mpi_test_util.h"

namespace hwyattn_mpi_test {
namespace {

enum class Fn { kSharded, kRing, kBoth };  // kBoth: the row runs for each
enum class Who { kAll, kRank0, kLast };

constexpr float kSentinel = 7.0f;

// One rank's arguments: a valid call (the fixture's problem, this rank's
// shard or slice), which a row's mutation then breaks.
struct Args {
  Fn fn = Fn::kSharded;
  MPI_Comm comm = MPI_COMM_WORLD;
  hwyattn_tensor q, k, v, mask;
  Dense out, lse;
  const hwyattn_tensor *qp = &q, *kp = &k, *vp = &v;
  hwyattn_tensor* outp = nullptr;
  hwyattn_sdpa_options opts;
  // opts followed by bytes a newer caller's struct might carry.
  struct {
    hwyattn_sdpa_options opts;
    unsigned char tail[16];
  } bigger;
  const hwyattn_sdpa_options* optsp = &opts;
  std::vector<int32_t> kv_len;
  std::vector<float> sinks, slopes, spare;
  std::vector<uint8_t> mask_data;
  std::unique_ptr<SliceOf> sq, sk, sv;  // ring: this rank's slices

  void Outputs(int64_t rows) {  // out [B, Hq, rows, Dv], lse [B, Hq, rows], sentinels
    const int64_t os[4] = {q.shape[0], q.shape[1], rows, v.shape[3]};
    out.Reset(4, os);
    lse.Reset(3, os);
    for (float& x : out.data) x = kSentinel;
    for (float& x : lse.data) x = kSentinel;
    outp = out.t();
    opts.lse = lse.t();
  }
};

// The problems every row starts from: a decode-ish block of 3 queries over
// 24 keys (sharded, keys split evenly), and a 24-token sequence (ring).
struct Fixture {
  Problem sharded{Case{"hostile_sharded", 2, 4, 2, 3, 24, 8, 8, HWYATTN_CAUSAL_BOTTOM_RIGHT}};
  Problem ring{SelfCase("hostile_ring", 2, 4, 2, 24, 8, 8)};

  // The sharded call with the keys split as for `ranks` ranks (this rank's
  // shard; a rank past the split gets none).
  void Shard(Args* a, int ranks) const {
    int64_t offset = 0, mine = 0;
    for (int r = 0; r < ranks; ++r) {
      const int64_t len = sharded.c.k_len * (r + 1) / ranks - sharded.c.k_len * r / ranks;
      if (r < g_rank) offset += len;
      if (r == g_rank) mine = len;
    }
    a->k = KeySlice(sharded.k.desc, 2, offset, mine);
    a->v = KeySlice(sharded.v.desc, 2, offset, mine);
  }

  void Build(Fn fn, Args* a) const {
    a->fn = fn;
    const Problem& p = fn == Fn::kSharded ? sharded : ring;
    a->sinks = p.sinks;
    a->slopes = p.slopes;
    a->opts = p.Options(nullptr);
    a->opts.causal = fn == Fn::kSharded ? HWYATTN_CAUSAL_BOTTOM_RIGHT : HWYATTN_CAUSAL_TOP_LEFT;
    a->opts.sinks = a->sinks.data();
    if (fn == Fn::kSharded) {
      a->q = p.q.desc;
      Shard(a, g_size);
      a->Outputs(p.c.q_len);
    } else {
      Slices(a, MySlice(p.c.q_len));
    }
  }

  // Ring: q, k, v and the outputs for the given chunks of the sequence.
  void Slices(Args* a, const Chunks& c) const {
    a->sq.reset(new SliceOf(ring.q, c, ring.c.head_dim));
    a->sk.reset(new SliceOf(ring.k, c, ring.c.head_dim));
    a->sv.reset(new SliceOf(ring.v, c, ring.c.value_dim));
    a->q = a->sq->desc;
    a->k = a->sk->desc;
    a->v = a->sv->desc;
    a->Outputs(c.total());
  }
};

using Mutate = void (*)(Args*, const Fixture&);

struct Row {
  const char* name;
  Fn fn;
  Who who;  // the ranks whose arguments the mutation breaks
  Mutate mutate;
  hwyattn_status want;
  const char* needles[2];  // the argument and its value, in every rank's message
  int min_ranks = 1;       // a disagreement needs two ranks
  bool names_rank = true;  // the message names the broken rank (Who::kRank0, kLast)
};

// The rows. Values in the needles follow from the fixture's sizes (B 2,
// Hq 4, Hkv 2, D = Dv = 8; sharded Lq 3, Lk 24; ring L 24).
const Row kRows[] = {
    // --- hwyattn_mpi_sharded_sdpa: this rank's own arguments ---
    {"q NULL",
     Fn::kBoth,
     Who::kLast,
     [](Args* a, const Fixture&) { a->qp = nullptr; },
     HWYATTN_INVALID_ARGUMENT,
     {"q is NULL", "q is NULL"}},
    {"k NULL",
     Fn::kBoth,
     Who::kRank0,
     [](Args* a, const Fixture&) { a->kp = nullptr; },
     HWYATTN_INVALID_ARGUMENT,
     {"k is NULL", "k is NULL"}},
    {"v NULL",
     Fn::kBoth,
     Who::kLast,
     [](Args* a, const Fixture&) { a->vp = nullptr; },
     HWYATTN_INVALID_ARGUMENT,
     {"v is NULL", "v is NULL"}},
    {"out NULL",
     Fn::kBoth,
     Who::kAll,
     [](Args* a, const Fixture&) { a->outp = nullptr; },
     HWYATTN_INVALID_ARGUMENT,
     {"out is NULL", "out is NULL"}},
    {"q misaligned",
     Fn::kBoth,
     Who::kRank0,
     [](Args* a, const Fixture&) {
       a->q.data = static_cast<char*>(a->q.data) + 2;  // rejected before any access
     },
     HWYATTN_INVALID_ARGUMENT,
     {"q: data", "not aligned to 4 bytes"}},
    {"q dtype I8",
     Fn::kBoth,
     Who::kAll,
     [](Args* a, const Fixture&) { a->q.dtype = HWYATTN_I8; },
     HWYATTN_INVALID_ARGUMENT,
     {"q: dtype", "is 4"}},
    {"q stride -4",
     Fn::kBoth,
     Who::kLast,
     [](Args* a, const Fixture&) { a->q.stride[2] = -4; },
     HWYATTN_INVALID_ARGUMENT,
     {"q: logical stride 2", "is -4"}},
    {"v batch 3 (not 1 or 2)",
     Fn::kBoth,
     Who::kLast,
     [](Args* a, const Fixture&) { a->v.shape[0] = 3; },
     HWYATTN_INVALID_ARGUMENT,
     {"v: shape[0] (batch)", "is 3"}},
    {"q rank 5",
     Fn::kBoth,
     Who::kLast,
     [](Args* a, const Fixture&) { a->q.rank = 5; },
     HWYATTN_INVALID_ARGUMENT,
     {"q: rank", "is 5"}},
    {"k rank 0",
     Fn::kSharded,
     Who::kRank0,
     [](Args* a, const Fixture&) { a->k.rank = 0; },
     HWYATTN_INVALID_ARGUMENT,
     {"k: rank", "is 0"}},
    {"q head_dim 0",
     Fn::kSharded,
     Who::kAll,
     [](Args* a, const Fixture&) { a->q.shape[3] = 0; },
     HWYATTN_INVALID_ARGUMENT,
     {"q: logical dimension 3 (head_dim)", "is 0"}},
    {"q batch -1",
     Fn::kSharded,
     Who::kLast,
     [](Args* a, const Fixture&) { a->q.shape[0] = -1; },
     HWYATTN_INVALID_ARGUMENT,
     {"q: logical dimension 0 (batch)", "is -1"}},
    {"k key length -3",
     Fn::kSharded,
     Who::kLast,
     [](Args* a, const Fixture&) { a->k.shape[2] = -3; },
     HWYATTN_INVALID_ARGUMENT,
     {"k and v: key lengths", "are -3 and"}},
    {"kv heads 3 (do not divide 4)",
     Fn::kSharded,
     Who::kAll,
     [](Args* a, const Fixture&) { a->k.shape[1] = a->v.shape[1] = 3; },
     HWYATTN_INVALID_ARGUMENT,
     {"k: shape[1] (kv heads)", "is 3"}},
    {"k head_dim 7",
     Fn::kSharded,
     Who::kRank0,
     [](Args* a, const Fixture&) { a->k.shape[3] = 7; },
     HWYATTN_INVALID_ARGUMENT,
     {"k: head_dim", "is 7 but q has 8"}},
    {"out F16",
     Fn::kBoth,
     Who::kLast,
     [](Args* a, const Fixture&) { a->out.desc.dtype = HWYATTN_F16; },
     HWYATTN_UNSUPPORTED,
     {"out: dtype", "is 1"}},
    {"out query length 2",
     Fn::kSharded,
     Who::kAll,
     [](Args* a, const Fixture&) { a->out.desc.shape[2] = 2; },
     HWYATTN_INVALID_ARGUMENT,
     {"out: logical dimension 2", "is 2 but must be 3"}},
    {"out data NULL",
     Fn::kBoth,
     Who::kRank0,
     [](Args* a, const Fixture&) { a->out.desc.data = nullptr; },
     HWYATTN_INVALID_ARGUMENT,
     {"out: data", "is NULL"}},
    {"out misaligned",
     Fn::kSharded,
     Who::kLast,
     [](Args* a, const Fixture&) {
       // (rejected before any access: the byte past the block is not touched)
       a->out.desc.data = reinterpret_cast<char*>(a->out.data.data()) + 1;
     },
     HWYATTN_INVALID_ARGUMENT,
     {"out: data", "not aligned to 4 bytes"}},
    {"out stride 0 (writes twice)",
     Fn::kBoth,
     Who::kAll,
     [](Args* a, const Fixture&) { a->out.desc.stride[3] = 0; },
     HWYATTN_INVALID_ARGUMENT,
     {"out: its strides", "write an element twice"}},
    {"out stride -1",
     Fn::kSharded,
     Who::kLast,
     [](Args* a, const Fixture&) { a->out.desc.stride[2] = -1; },
     HWYATTN_INVALID_ARGUMENT,
     {"out: logical stride 2", "is -1"}},
    {"lse heads 3",
     Fn::kSharded,
     Who::kRank0,
     [](Args* a, const Fixture&) { a->lse.desc.shape[1] = 3; },
     HWYATTN_INVALID_ARGUMENT,
     {"opts->lse: logical dimension 2", "is 3 but must be 4"}},
    {"weights",
     Fn::kBoth,
     Who::kLast,
     [](Args* a, const Fixture&) { a->opts.weights = a->lse.t(); },
     HWYATTN_UNSUPPORTED,
     {"opts->weights", "not available from hwyattn_mpi_"}},
    {"mask F16",
     Fn::kSharded,
     Who::kAll,
     [](Args* a, const Fixture&) {
       a->spare.assign(3 * 24, 0.0f);
       const int64_t ms[2] = {3, a->k.shape[2]};
       hwyattn_tensor_contiguous(&a->mask, a->spare.data(), HWYATTN_F16, 2, ms);
       a->opts.mask = &a->mask;
     },
     HWYATTN_INVALID_ARGUMENT,
     {"opts->mask: dtype", "is 1"}},
    {"mask of 5 keys",
     Fn::kSharded,
     Who::kAll,
     [](Args* a, const Fixture&) {
       a->mask_data.assign(3 * 5, 1);
       const int64_t ms[2] = {3, 5};
       hwyattn_tensor_contiguous(&a->mask, a->mask_data.data(), HWYATTN_BOOL, 2, ms);
       a->opts.mask = &a->mask;
     },
     HWYATTN_INVALID_ARGUMENT,
     {"opts->mask: logical dimension 3", "is 5"}},
    {"mask data NULL",
     Fn::kSharded,
     Who::kAll,
     [](Args* a, const Fixture&) {
       const int64_t ms[2] = {3, a->k.shape[2]};
       hwyattn_tensor_contiguous(&a->mask, nullptr, HWYATTN_BOOL, 2, ms);
       a->opts.mask = &a->mask;
     },
     HWYATTN_INVALID_ARGUMENT,
     {"opts->mask: data", "is NULL"}},
    {"struct_size 4",
     Fn::kBoth,
     Who::kRank0,
     [](Args* a, const Fixture&) { a->opts.struct_size = 4; },
     HWYATTN_INVALID_ARGUMENT,
     {"opts->struct_size", "is 4"}},
    {"struct_size 52 (no header's)",
     Fn::kBoth,
     Who::kLast,
     [](Args* a, const Fixture&) { a->opts.struct_size = 52; },
     HWYATTN_INVALID_ARGUMENT,
     {"opts->struct_size", "is 52, which is not the size of any"}},
    {"struct_size 1 GiB (not read)",
     Fn::kBoth,
     Who::kAll,
     [](Args* a, const Fixture&) { a->opts.struct_size = 1u << 30; },
     HWYATTN_INVALID_ARGUMENT,
     {"opts->struct_size", "is 1073741824"}},
    {"an unknown option set",
     Fn::kBoth,
     Who::kLast,
     [](Args* a, const Fixture&) {
       a->bigger.opts = a->opts;
       memset(a->bigger.tail, 0, sizeof(a->bigger.tail));
       a->bigger.tail[3] = 1;
       a->bigger.opts.struct_size = sizeof(a->bigger);
       a->optsp = &a->bigger.opts;
     },
     HWYATTN_UNSUPPORTED,
     {"opts->struct_size", "is set"}},
    {"causal 5",
     Fn::kBoth,
     Who::kAll,
     [](Args* a, const Fixture&) { a->opts.causal = static_cast<hwyattn_causal>(5); },
     HWYATTN_INVALID_ARGUMENT,
     {"opts: causal", "is 5"}},
    {"window_left -1",
     Fn::kBoth,
     Who::kAll,
     [](Args* a, const Fixture&) { a->opts.window_left = -1; },
     HWYATTN_INVALID_ARGUMENT,
     {"opts: window_left", "is -1"}},
    // --- after the agreement: the whole problem ---
    // The options' own rules (libhwyattn's, through the probe call).
    {"scale NaN",
     Fn::kBoth,
     Who::kLast,
     [](Args* a, const Fixture&) { a->opts.scale = NAN; },
     HWYATTN_INVALID_ARGUMENT,
     {"opts: scale", "is nan"}},
    {"softcap -1",
     Fn::kBoth,
     Who::kRank0,
     [](Args* a, const Fixture&) { a->opts.softcap = -1.0f; },
     HWYATTN_INVALID_ARGUMENT,
     {"opts: softcap", "is -1"}},
    {"alibi slope inf",
     Fn::kBoth,
     Who::kAll,
     [](Args* a, const Fixture&) {
       a->slopes[2] = INFINITY;
       a->opts.alibi_slopes = a->slopes.data();
     },
     HWYATTN_INVALID_ARGUMENT,
     {"alibi_slopes[2]", "inf"}},
    {"sink NaN",
     Fn::kBoth,
     Who::kLast,
     [](Args* a, const Fixture&) { a->sinks[3] = NAN; },
     HWYATTN_INVALID_ARGUMENT,
     {"sinks[3]", "nan"}},
    {"precision 7",
     Fn::kBoth,
     Who::kAll,
     [](Args* a, const Fixture&) { a->opts.precision = static_cast<hwyattn_precision>(7); },
     HWYATTN_INVALID_ARGUMENT,
     {"opts: precision", "is 7"}},
    {"reserved0 set",
     Fn::kBoth,
     Who::kRank0,
     [](Args* a, const Fixture&) { a->opts.reserved0 = 1; },
     HWYATTN_UNSUPPORTED,
     {"opts: reserved0", "is 1"}},
    {"kv_len beyond all keys",
     Fn::kBoth,
     Who::kAll,
     [](Args* a, const Fixture&) {
       a->kv_len = {3, 25};
       a->opts.kv_len = a->kv_len.data();
     },
     HWYATTN_INVALID_ARGUMENT,
     {"opts->kv_len[1]", "is 25; must be in [0, 24]"}},
    {"kv_len -1",
     Fn::kBoth,
     Who::kAll,
     [](Args* a, const Fixture&) {
       a->kv_len = {-1, 3};
       a->opts.kv_len = a->kv_len.data();
     },
     HWYATTN_INVALID_ARGUMENT,
     {"opts->kv_len[0]", "is -1"}},
    {"every shard empty",
     Fn::kSharded,
     Who::kAll,
     [](Args* a, const Fixture& f) {
       a->k = KeySlice(f.sharded.k.desc, 2, 0, 0);
       a->v = KeySlice(f.sharded.v.desc, 2, 0, 0);
     },
     HWYATTN_INVALID_ARGUMENT,
     {"k: every rank's shard is empty", "shape[2] = 0"}},
    {"comm MPI_COMM_NULL",
     Fn::kBoth,
     Who::kAll,
     [](Args* a, const Fixture&) { a->comm = MPI_COMM_NULL; },
     HWYATTN_INVALID_ARGUMENT,
     {"comm", "MPI_COMM_NULL"}},
    // A communicator of the wrong size: the shards (slices) of one more
    // rank than comm has, kv_len the whole sequence's. (The slices' lengths
    // alone may be a valid layout of a shorter sequence: see the ring rows.)
    {"comm one rank short of the shards",
     Fn::kBoth,
     Who::kAll,
     [](Args* a, const Fixture& f) {
       if (a->fn == Fn::kSharded) {
         f.Shard(a, g_size + 1);
       } else {
         f.Slices(a, MySlice(f.ring.c.q_len, g_size + 1));
       }
       a->kv_len = {24, 24};
       a->opts.kv_len = a->kv_len.data();
     },
     HWYATTN_INVALID_ARGUMENT,
     {"opts->kv_len[0]", "is 24; must be in [0, "}},
    // --- hwyattn_mpi_sharded_sdpa: ranks that disagree (the last rank's) ---
    {"kv heads differ",
     Fn::kBoth,
     Who::kLast,
     [](Args* a, const Fixture&) { a->k.shape[1] = a->v.shape[1] = 1; },
     HWYATTN_INVALID_ARGUMENT,
     {"k: shape[1] (kv heads)", "is 1 but rank 0 has 2"},
     2},
    {"batch differs",
     Fn::kBoth,
     Who::kLast,
     [](Args* a, const Fixture&) {
       a->q.shape[0] = a->out.desc.shape[0] = a->lse.desc.shape[0] = 1;
       a->k.shape[0] = a->v.shape[0] = 1;  // locally valid
     },
     HWYATTN_INVALID_ARGUMENT,
     {"q: shape[0] (batch)", "is 1 but rank 0 has 2"},
     2},
    {"query length differs",
     Fn::kSharded,
     Who::kLast,
     [](Args* a, const Fixture&) {
       a->q.shape[2] = a->out.desc.shape[2] = a->lse.desc.shape[2] = 2;
     },
     HWYATTN_INVALID_ARGUMENT,
     {"q: shape[2] (query length)", "is 2 but rank 0 has 3"},
     2},
    {"head_dim differs",
     Fn::kBoth,
     Who::kLast,
     [](Args* a, const Fixture&) { a->q.shape[3] = a->k.shape[3] = 4; },
     HWYATTN_INVALID_ARGUMENT,
     {"q: shape[3] (head_dim)", "is 4 but rank 0 has 8"},
     2},
    {"value_dim differs",
     Fn::kBoth,
     Who::kLast,
     [](Args* a, const Fixture&) { a->v.shape[3] = a->out.desc.shape[3] = 4; },
     HWYATTN_INVALID_ARGUMENT,
     {"v: shape[3] (value_dim)", "is 4 but rank 0 has 8"},
     2},
    {"q dtype differs",
     Fn::kBoth,
     Who::kLast,
     [](Args* a, const Fixture&) { a->q.dtype = HWYATTN_BF16; },
     HWYATTN_INVALID_ARGUMENT,
     {"q: dtype", "is 2 but rank 0 has 0"},
     2},
    {"scale differs",
     Fn::kBoth,
     Who::kLast,
     [](Args* a, const Fixture&) { a->opts.scale = 0.5f; },
     HWYATTN_INVALID_ARGUMENT,
     {"opts->scale", "is 1056964608 but rank 0 has 0"},
     2},
    {"causal differs",
     Fn::kBoth,
     Who::kLast,
     [](Args* a, const Fixture&) { a->opts.causal = HWYATTN_CAUSAL_NONE; },
     HWYATTN_INVALID_ARGUMENT,
     {"opts->causal", "is 0 but rank 0 has"},
     2},
    {"window_left differs",
     Fn::kBoth,
     Who::kLast,
     [](Args* a, const Fixture&) { a->opts.window_left = 5; },
     HWYATTN_INVALID_ARGUMENT,
     {"opts->window_left", "is 5 but rank 0 has 0"},
     2},
    {"window_right differs",
     Fn::kBoth,
     Who::kLast,
     [](Args* a, const Fixture&) { a->opts.window_right = 6; },
     HWYATTN_INVALID_ARGUMENT,
     {"opts->window_right", "is 6 but rank 0 has 0"},
     2},
    {"softcap differs",
     Fn::kBoth,
     Who::kLast,
     [](Args* a, const Fixture&) { a->opts.softcap = 2.0f; },
     HWYATTN_INVALID_ARGUMENT,
     {"opts->softcap", "is 1073741824 but rank 0 has 0"},
     2},
    // (No "precision differs" row: this build accepts one precision only;
    // HWYATTN_PRECISION_BF16 is UNSUPPORTED by the options' probe.)
    {"lse on rank 0 only",
     Fn::kBoth,
     Who::kLast,
     [](Args* a, const Fixture&) { a->opts.lse = nullptr; },
     HWYATTN_INVALID_ARGUMENT,
     {"opts->lse (1 = given)", "is 0 but rank 0 has 1"},
     2},
    {"mask on the last rank only",
     Fn::kSharded,
     Who::kLast,
     [](Args* a, const Fixture&) {
       a->mask_data.assign(static_cast<size_t>(3 * a->k.shape[2]), 1);
       const int64_t ms[2] = {3, a->k.shape[2]};
       hwyattn_tensor_contiguous(&a->mask, a->mask_data.data(), HWYATTN_BOOL, 2, ms);
       a->opts.mask = &a->mask;
     },
     HWYATTN_INVALID_ARGUMENT,
     {"opts->mask (1 = given)", "is 1 but rank 0 has 0"},
     2},
    {"kv_len values differ",
     Fn::kBoth,
     Who::kLast,
     [](Args* a, const Fixture&) {
       a->kv_len = {3, 4};
       a->opts.kv_len = a->kv_len.data();
     },
     HWYATTN_INVALID_ARGUMENT,
     {"opts->kv_len (0 = none, else a hash", "but rank 0 has 0"},
     2},
    {"alibi_slopes differ",
     Fn::kBoth,
     Who::kLast,
     [](Args* a, const Fixture&) { a->opts.alibi_slopes = a->slopes.data(); },
     HWYATTN_INVALID_ARGUMENT,
     {"opts->alibi_slopes (0 = none", "but rank 0 has 0"},
     2},
    {"sinks differ",
     Fn::kBoth,
     Who::kLast,
     [](Args* a, const Fixture&) { a->sinks[1] += 1.0f; },
     HWYATTN_INVALID_ARGUMENT,
     {"opts->sinks (0 = none, else a hash", "but rank 0 has"},
     2},
    {"the last rank calls hwyattn_mpi_ring_sdpa",
     Fn::kSharded,
     Who::kLast,
     [](Args* a, const Fixture& f) { f.Build(Fn::kRing, a); },
     HWYATTN_INVALID_ARGUMENT,
     {"the function called", "is 2 but rank 0 has 1"},
     2},

    // --- hwyattn_mpi_ring_sdpa: this rank's own arguments ---
    {"ring: k slice shorter than q's",
     Fn::kRing,
     Who::kLast,
     [](Args* a, const Fixture&) { --a->k.shape[2]; },
     HWYATTN_INVALID_ARGUMENT,
     {"k and v: logical dimension 2 (this rank's tokens)", "must equal q's"}},
    {"k dtype 9",
     Fn::kBoth,
     Who::kAll,
     [](Args* a, const Fixture&) { a->k.dtype = static_cast<hwyattn_dtype>(9); },
     HWYATTN_INVALID_ARGUMENT,
     {"k: dtype", "is 9"}},
    {"v dtype BOOL",
     Fn::kBoth,
     Who::kAll,
     [](Args* a, const Fixture&) { a->v.dtype = HWYATTN_BOOL; },
     HWYATTN_INVALID_ARGUMENT,
     {"v: dtype", "is 3"}},
    {"k data NULL",
     Fn::kBoth,
     Who::kRank0,
     [](Args* a, const Fixture&) { a->k.data = nullptr; },
     HWYATTN_INVALID_ARGUMENT,
     {"k: data", "is NULL"}},
    {"v misaligned",
     Fn::kBoth,
     Who::kLast,
     [](Args* a, const Fixture&) {
       a->v.data = static_cast<char*>(a->v.data) + 2;  // rejected before any access
     },
     HWYATTN_INVALID_ARGUMENT,
     {"v: data", "not aligned to 4 bytes"}},
    {"k stride -8",
     Fn::kBoth,
     Who::kLast,
     [](Args* a, const Fixture&) { a->k.stride[2] = -8; },
     HWYATTN_INVALID_ARGUMENT,
     {"k: logical stride 2", "is -8"}},
    {"ring: out value_dim 9",
     Fn::kRing,
     Who::kAll,
     [](Args* a, const Fixture&) { a->out.desc.shape[3] = 9; },
     HWYATTN_INVALID_ARGUMENT,
     {"out: logical dimension 3", "is 9 but must be 8"}},
    {"ring: mask",
     Fn::kRing,
     Who::kRank0,
     [](Args* a, const Fixture&) {
       a->mask_data.assign(1, 1);
       const int64_t ms[1] = {1};
       hwyattn_tensor_contiguous(&a->mask, a->mask_data.data(), HWYATTN_BOOL, 1, ms);
       a->opts.mask = &a->mask;
     },
     HWYATTN_UNSUPPORTED,
     {"opts->mask", "not available from hwyattn_mpi_ring_sdpa"}},
    {"ring: window_right -2",
     Fn::kRing,
     Who::kLast,
     [](Args* a, const Fixture&) { a->opts.window_right = -2; },
     HWYATTN_INVALID_ARGUMENT,
     {"opts: window_right", "is -2"}},
    // --- after the agreement: the layout and the whole sequence ---
    {"ring: one token per rank (L < 2N)",
     Fn::kRing,
     Who::kAll,
     [](Args* a, const Fixture& f) {
       f.Slices(a, Chunks{{g_rank, 0}, {1, 0}});
     },
     HWYATTN_INVALID_ARGUMENT,
     {"the sequence has", "needs at least"}},
    {"ring: the last rank's slice a token short",
     Fn::kRing,
     Who::kLast,
     [](Args* a, const Fixture& f) {
       Chunks c = MySlice(f.ring.c.q_len);
       --c.len[1];
       f.Slices(a, c);
     },
     HWYATTN_INVALID_ARGUMENT,
     {"q: shape[2] (its slice)", "zigzag layout of 23 tokens"},
     2,
     /*names_rank=*/false},  // the first rank whose length is wrong: any
    // A communicator of the wrong size: slices laid out for one more rank
    // than comm has, kv_len the whole sequence's (the slices' lengths alone
    // may form a valid layout of a shorter sequence: see the next row).
    // N ranks given the slices of an (N + 1)-rank layout of 11 tokens (N =
    // 3) or 13 (N = 4): their lengths are not an N-rank layout's. (For N = 2
    // every such mistake has a valid layout's lengths: only kv_len, above,
    // can tell.)
    {"ring: comm one rank short of the layout (lengths)",
     Fn::kRing,
     Who::kAll,
     [](Args* a, const Fixture& f) { f.Slices(a, MySlice(g_size == 3 ? 11 : 13, g_size + 1)); },
     HWYATTN_INVALID_ARGUMENT,
     {"q: shape[2] (its slice)", "(see hwyattn_mpi_ring_slice)"},
     3},
    // --- hwyattn_mpi_ring_sdpa: ranks that disagree ---
    {"ring: k dtype differs",
     Fn::kRing,
     Who::kLast,
     [](Args* a, const Fixture&) { a->k.dtype = HWYATTN_BF16; },
     HWYATTN_INVALID_ARGUMENT,
     {"k: dtype", "is 2 but rank 0 has 0"},
     2},
    {"ring: v dtype differs",
     Fn::kRing,
     Who::kLast,
     [](Args* a, const Fixture&) { a->v.dtype = HWYATTN_F16; },
     HWYATTN_INVALID_ARGUMENT,
     {"v: dtype", "is 1 but rank 0 has 0"},
     2},
    {"ring: k batch 1 on one rank",
     Fn::kRing,
     Who::kLast,
     [](Args* a, const Fixture&) { a->k.shape[0] = 1; },
     HWYATTN_INVALID_ARGUMENT,
     {"k: shape[0] (batch of the keys)", "is 1 but rank 0 has 2"},
     2},
    {"ring: the last rank calls hwyattn_mpi_sharded_sdpa",
     Fn::kRing,
     Who::kLast,
     [](Args* a, const Fixture& f) { f.Build(Fn::kSharded, a); },
     HWYATTN_INVALID_ARGUMENT,
     {"the function called", "is 1 but rank 0 has 2"},
     2},
};

bool Selected(Who who) {
  return who == Who::kAll || (who == Who::kRank0 && g_rank == 0) ||
         (who == Who::kLast && g_rank == g_size - 1);
}

hwyattn_status Call(Args* a) {
  return a->fn == Fn::kSharded
             ? hwyattn_mpi_sharded_sdpa(a->comm, a->qp, a->kp, a->vp, a->outp, a->optsp)
             : hwyattn_mpi_ring_sdpa(a->comm, a->qp, a->kp, a->vp, a->outp, a->optsp);
}

void RunRow(const Fixture& f, const Row& row, Fn fn) {
  const std::string label = std::string(row.name) + (fn == Fn::kSharded ? " (sharded)" : " (ring)");
  const char* name = label.c_str();
  Args a;
  f.Build(fn, &a);
  if (Selected(row.who)) row.mutate(&a, f);
  // The outputs to watch are the ones this rank was built with (a row may
  // rebuild them): their sentinels must survive.
  const hwyattn_status s = Call(&a);
  const std::string message = hwyattn_mpi_last_error();
  int lo = s, hi = s;
  MPI_Allreduce(MPI_IN_PLACE, &lo, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  MPI_Allreduce(MPI_IN_PLACE, &hi, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  EXPECT_MPI(s == row.want, "%s: status %d, expected %d (%s)", name, static_cast<int>(s),
             static_cast<int>(row.want), message.c_str());
  EXPECT_MPI(lo == hi, "%s: the ranks returned statuses %d..%d", name, lo, hi);
  for (const char* needle : row.needles) {
    EXPECT_MPI(message.find(needle) != std::string::npos, "%s: message \"%s\" lacks \"%s\"", name,
               message.c_str(), needle);
  }
  if (row.who != Who::kAll && row.names_rank) {
    const std::string who = "rank " + std::to_string(row.who == Who::kRank0 ? 0 : g_size - 1);
    EXPECT_MPI(message.find(who) != std::string::npos, "%s: message \"%s\" does not name %s", name,
               message.c_str(), who.c_str());
  }
  bool untouched = true;
  for (float x : a.out.data) untouched &= x == kSentinel;
  for (float x : a.lse.data) untouched &= x == kSentinel;
  EXPECT_MPI(untouched, "%s: out or lse was written", name);

  // The communicator is still in step: a valid call succeeds.
  Args good;
  f.Build(fn, &good);
  const hwyattn_status again = Call(&good);
  EXPECT_MPI(again == HWYATTN_OK, "%s, then a valid call: %s", name, hwyattn_mpi_last_error());
}

// The local entry points: bad arguments are errors that write nothing.
void LocalRows() {
  const int64_t kUnset = -77;
  int64_t o[4] = {kUnset, kUnset, kUnset, kUnset};
  struct SliceRow {
    int32_t rank, size;
    int64_t seq_len;
    bool null_output;
    const char* needle;
  };
  const SliceRow rows[] = {
      {-1, 2, 10, false, "rank is -1"},
      {2, 2, 10, false, "rank is 2"},
      {0, 0, 10, false, "size 0"},
      {0, -3, 10, false, "size -3"},
      {0, 3, 5, false, "seq_len is 5"},
      {0, 1, -1, false, "seq_len is -1"},
      {0, 2, INT64_MAX, false, "seq_len is"},
      {0, 1, 50, true, "must not be NULL"},
  };
  for (const SliceRow& r : rows) {
    const hwyattn_status s = hwyattn_mpi_ring_slice(
        r.rank, r.size, r.seq_len, r.null_output ? nullptr : &o[0], &o[1], &o[2], &o[3]);
    const std::string message = hwyattn_mpi_last_error();
    // INT64_MAX tokens: a valid layout only if the arithmetic does not
    // overflow; either way no garbage.
    if (r.seq_len == INT64_MAX && s == HWYATTN_OK) {
      EXPECT_MPI(o[0] == 0 && o[1] > 0 && o[2] > o[1] && o[3] > 0,
                 "ring_slice(INT64_MAX): %lld+%lld %lld+%lld", (long long)o[0], (long long)o[1],
                 (long long)o[2], (long long)o[3]);
      for (int64_t& x : o) x = kUnset;
      continue;
    }
    EXPECT_MPI(s == HWYATTN_INVALID_ARGUMENT && message.find(r.needle) != std::string::npos,
               "ring_slice(%d, %d, %lld): status %d, \"%s\" (want \"%s\")", r.rank, r.size,
               (long long)r.seq_len, static_cast<int>(s), message.c_str(), r.needle);
    EXPECT_MPI(o[0] == kUnset && o[1] == kUnset && o[2] == kUnset && o[3] == kUnset,
               "ring_slice(%d, %d, %lld) wrote its outputs", r.rank, r.size, (long long)r.seq_len);
  }
  hwyattn_mpi_ring_last_stats(nullptr);  // ignored, not a crash
}

}  // namespace
}  // namespace hwyattn_mpi_test

int main(int argc, char** argv) {
  using namespace hwyattn_mpi_test;
  Init(&argc, &argv);
  const Fixture fixture;
  int rows = 0;
  for (const Row& row : kRows) {
    if (g_size < row.min_ranks) continue;
    for (Fn fn : {Fn::kSharded, Fn::kRing}) {
      if (row.fn == fn || row.fn == Fn::kBoth) {
        RunRow(fixture, row, fn);
        ++rows;
      }
    }
  }
  LocalRows();
  if (g_rank == 0) printf("hostile_input_test: %d rows on %d ranks\n", rows, g_size);
  const int code = Finish("hostile_input_test");
  MPI_Finalize();
  return code;
}
