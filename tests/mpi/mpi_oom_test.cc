// SPDX-License-Identifier: Apache-2.0
//
// The OOM sweep of libhwyattn_mpi (tests/oom_test.cc's, for the collective
// entry points), under mpirun -np 1 and 2. For each call and each rank in
// turn (the victim), the victim's n-th allocation is made to fail, for
// n = 0, 1, 2, ... until the call needs no more and succeeds, while the
// other ranks allocate freely; two kinds of allocation, each swept alone:
//  - the library's (hwyattn's AlignedAlloc: scratch of hwyattn_sdpa), via
//    src/scratch.h's test hook, reachable because this test links the
//    static libraries;
//  - the C++ heap of the calling thread (libhwyattn_mpi's tables, partial
//    states, K/V buffers, masks), via tests/new_hook.h (not under
//    sanitizers).
// Every rank must return the same status (HWYATTN_OUT_OF_MEMORY, or OK once
// the victim has enough), name the victim in its message, leave out and lse
// untouched, and not hang (ctest's TIMEOUT); the call that finally succeeds
// must match the single-process hwyattn_sdpa. Each call runs on a fresh
// thread (MPI_THREAD_SERIALIZED), whose scratch starts empty, so every
// allocation is reached.

#include <stdio.h>
#include <string.h>

#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "hwyattn_mpi.h"
#include "src/scratch.h"
#include "tests/mpi/mpi_test_util.h"
#include "tests/new_hook.h"

namespace hwyattn_mpi_test {
namespace {

constexpr float kSentinel = 7.0f;
constexpr int64_t kMaxAllocations = 200;

enum class Kind { kLibrary, kCppHeap };

// Runs `call` on a fresh thread; on the victim, allocations of `kind` fail
// after `allowed`.
hwyattn_status RunOnFreshThread(bool victim, Kind kind, int64_t allowed,
                                const std::function<hwyattn_status()>& call, std::string* error) {
  hwyattn_status status = HWYATTN_INTERNAL_ERROR;
  std::thread t([&] {
    if (victim && kind == Kind::kLibrary) hwyattn::FailAllocationsAfter(allowed);
    if (victim && kind == Kind::kCppHeap) hwyattn_test::FailNewAfter(allowed);
    status = call();
    hwyattn_test::FailNewAfter(-1);
    hwyattn::FailAllocationsAfter(-1);
    *error = hwyattn_mpi_last_error();
  });
  t.join();
  return status;
}

// One call's outputs on this rank and the reference rows it must end with.
struct Outputs {
  Dense out, lse;
  std::vector<float> want_out, want_lse;
  void Reset() {
    for (float& x : out.data) x = kSentinel;
    for (float& x : lse.data) x = kSentinel;
  }
  bool Untouched() const {
    for (float x : out.data) {
      if (x != kSentinel) return false;
    }
    for (float x : lse.data) {
      if (x != kSentinel) return false;
    }
    return true;
  }
};

// Sweeps every victim and both kinds for one call.
void Sweep(const char* name, Outputs* o, const std::function<hwyattn_status()>& call) {
  for (int victim = 0; victim < g_size; ++victim) {
    for (Kind kind : {Kind::kLibrary, Kind::kCppHeap}) {
      if (kind == Kind::kCppHeap && !hwyattn_test::kNewHooked) continue;
      const char* kind_name = kind == Kind::kLibrary ? "library" : "C++ heap";
      int64_t allowed = 0;
      for (;; ++allowed) {
        o->Reset();
        std::string error;
        const hwyattn_status s = RunOnFreshThread(g_rank == victim, kind, allowed, call, &error);
        int lo = s, hi = s;
        MPI_Allreduce(MPI_IN_PLACE, &lo, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
        MPI_Allreduce(MPI_IN_PLACE, &hi, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
        if (lo != hi) {
          EXPECT_MPI(false, "%s, victim rank %d, %s allocation %lld: statuses %d..%d (%s)", name,
                     victim, kind_name, static_cast<long long>(allowed), lo, hi, error.c_str());
          break;
        }
        if (lo == HWYATTN_OK) break;
        EXPECT_MPI(s == HWYATTN_OUT_OF_MEMORY, "%s, victim rank %d, %s allocation %lld: %d (%s)",
                   name, victim, kind_name, static_cast<long long>(allowed), static_cast<int>(s),
                   error.c_str());
        const std::string who = "rank " + std::to_string(victim);
        EXPECT_MPI(error.find(who) != std::string::npos,
                   "%s, victim rank %d, %s allocation %lld: message \"%s\" does not name it", name,
                   victim, kind_name, static_cast<long long>(allowed), error.c_str());
        EXPECT_MPI(o->Untouched(),
                   "%s, victim rank %d, %s allocation %lld failed, yet out or lse "
                   "was written",
                   name, victim, kind_name, static_cast<long long>(allowed));
        if (allowed == kMaxAllocations) {
          EXPECT_MPI(false, "%s: never succeeded", name);
          break;
        }
      }
      // The victim needed allocations of this kind (else the sweep tested
      // nothing): every rank agrees on `allowed`.
      EXPECT_MPI(allowed > 0, "%s, victim rank %d: no %s allocation at all: the sweep is vacuous",
                 name, victim, kind_name);
      if (g_rank == 0) {
        printf("%s, victim rank %d: %lld %s allocations failed in turn\n", name, victim,
               static_cast<long long>(allowed), kind_name);
      }
      char what[160];
      snprintf(what, sizeof(what), "%s after the %s sweep of rank %d: out", name, kind_name,
               victim);
      EXPECT_MPI(Close(what, o->out.data.data(), o->want_out.data(), o->out.size(), 2e-6),
                 "against hwyattn_sdpa");
      EXPECT_MPI(Close(what, o->lse.data.data(), o->want_lse.data(), o->lse.size(), 2e-6),
                 "against hwyattn_sdpa (lse)");
    }
  }
}

// hwyattn_mpi_sharded_sdpa: a decode block with kv_len, a window, sinks and
// lse, and a prefill whose causal diagonal crosses the shards (position
// masks built per rank).
void Sharded(const Case& c) {
  Problem p(c);
  const std::vector<int64_t> lens = SplitKeys(c.k_len, {1});
  int64_t offset = 0;
  for (int r = 0; r < g_rank; ++r) offset += lens[static_cast<size_t>(r)];
  hwyattn_tensor k = KeySlice(p.k.desc, 2, offset, lens[static_cast<size_t>(g_rank)]);
  hwyattn_tensor v = KeySlice(p.v.desc, 2, offset, lens[static_cast<size_t>(g_rank)]);
  Outputs o;
  const int64_t os[4] = {c.batch, c.q_heads, c.q_len, c.value_dim};
  o.out.Reset(4, os);
  o.lse.Reset(3, os);
  o.want_out = p.out_ref.data;
  o.want_lse = p.lse_ref.data;
  const hwyattn_sdpa_options opts = p.Options(o.lse.t());
  Sweep(c.name, &o, [&] {
    return hwyattn_mpi_sharded_sdpa(MPI_COMM_WORLD, p.q.t(), &k, &v, o.out.t(), &opts);
  });
}

// hwyattn_mpi_ring_sdpa: causal, with sinks and lse.
void Ring(const Case& c) {
  Problem p(c);
  const Chunks mine = MySlice(c.q_len);
  SliceOf q(p.q, mine, c.head_dim), k(p.k, mine, c.head_dim), v(p.v, mine, c.value_dim);
  Outputs o;
  const int64_t os[4] = {c.batch, c.q_heads, mine.total(), c.value_dim};
  o.out.Reset(4, os);
  o.lse.Reset(3, os);
  o.want_out = SliceOf(p.out_ref, mine, c.value_dim).data;
  Dense lse_whole;  // [B, Hq, L] as [B, Hq, L, 1], to slice it the same way
  const int64_t ls[4] = {c.batch, c.q_heads, c.q_len, 1};
  lse_whole.Reset(4, ls);
  lse_whole.data = p.lse_ref.data;
  o.want_lse = SliceOf(lse_whole, mine, 1).data;
  const hwyattn_sdpa_options opts = p.Options(o.lse.t());
  Sweep(c.name, &o, [&] {
    return hwyattn_mpi_ring_sdpa(MPI_COMM_WORLD, &q.desc, &k.desc, &v.desc, o.out.t(), &opts);
  });
}

}  // namespace
}  // namespace hwyattn_mpi_test

int main(int argc, char** argv) {
  using namespace hwyattn_mpi_test;
  int provided = MPI_THREAD_SINGLE;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &g_size);
  if (provided < MPI_THREAD_SERIALIZED) {
    if (g_rank == 0) printf("mpi_oom_test: skipped (MPI lacks MPI_THREAD_SERIALIZED)\n");
    MPI_Finalize();
    return 0;
  }
  {
    Case c{"oom_sharded_decode", 2, 4, 2, 1, 90, 16, 16, HWYATTN_CAUSAL_BOTTOM_RIGHT};
    c.window_left = 50;
    c.kv_len = c.sinks = true;
    Sharded(c);
  }
  {
    Case c{"oom_sharded_prefill", 1, 2, 1, 40, 40, 8, 8, HWYATTN_CAUSAL_TOP_LEFT};
    c.alibi = true;
    Sharded(c);
  }
  {
    Case c = SelfCase("oom_ring", 1, 4, 2, 48, 16, 16);
    c.causal = HWYATTN_CAUSAL_TOP_LEFT;
    c.sinks = true;
    Ring(c);
  }
  const int code = Finish("mpi_oom_test");
  MPI_Finalize();
  return code;
}
