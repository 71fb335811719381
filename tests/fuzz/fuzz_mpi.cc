// SPDX-License-Identifier: Apache-2.0
//
// libFuzzer target for libhwyattn_mpi's entry points: hwyattn_mpi_sharded_sdpa
// and hwyattn_mpi_ring_sdpa on a communicator of one rank, and the local
// hwyattn_mpi_ring_slice (built with -DHWYATTN_BUILD_FUZZ=ON and clang, with
// MPI; run under `mpirun -np 1` by scripts/test.sh --sanitizers and
// scripts/fuzz.sh; it links the static libraries, so the coverage of the
// library and of libhwyattn_mpi guides it).
//
// One rank, because libFuzzer drives one process: what it exercises is every
// argument check (call_checks), the agreement's verdict on a table of one,
// the layout checks, the block decomposition and merges, and the writes.
// Disagreements between ranks need two ranks and are the hostile-input
// table's (tests/mpi/hostile_input_test.cc), which runs them under mpirun
// -np 2..4.
//
// The input bytes choose a problem (sizes, GQA, dtypes, layouts), options
// (causal, windows, softcap, ALiBi, sinks, kv_len, lse, a mask for the
// sharded mode) and the data, then optionally corrupt one field of one
// argument (fuzz_args.h), pass a NULL tensor or MPI_COMM_NULL, or ask for
// what the MPI modes do not offer (weights; a mask in the ring).
//  - Accepted: on one rank both modes are the whole problem, so out and lse
//    must match hwyattn_sdpa of the same arguments (fuzz_sdpa holds that one
//    to the double reference) within 1e-5 of max(|ref|, 1), when the inputs
//    are finite; no input may change.
//  - Rejected: INVALID_ARGUMENT, UNSUPPORTED or OUT_OF_MEMORY, a non-empty
//    hwyattn_mpi_last_error(), and every output byte unchanged. A
//    descriptor that is certainly invalid must be rejected.

#include <fuzzer/FuzzedDataProvider.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "hwyattn_mpi.h"
#include "tests/fuzz/fuzz_args.h"

namespace {

using namespace hwyattn_fuzz;  // NOLINT: the shared argument helpers

void FinalizeMpi() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

void ExpectRejected(hwyattn_status s, const std::vector<std::pair<const Arg*, std::string>>& outs) {
  if (s != HWYATTN_INVALID_ARGUMENT && s != HWYATTN_UNSUPPORTED && s != HWYATTN_OUT_OF_MEMORY) {
    Die("mpi status", std::string(hwyattn_status_string(s)) + ": " + hwyattn_mpi_last_error());
  }
  if (hwyattn_mpi_last_error()[0] == '\0') Die("mpi last_error", "empty after a failing call");
  for (const auto& o : outs) {
    if (Bytes(*o.first) != o.second)
      Die("output written by a failing call", hwyattn_mpi_last_error());
  }
}

// Dense F32 copies of an F32 output, read through its descriptor.
HWYATTN_FUZZ_NO_COVERAGE std::vector<float> Read(const hwyattn_tensor& t, int64_t n) {
  std::vector<float> v(static_cast<size_t>(n));
  int64_t shape[4] = {1, 1, 1, 1}, stride[4] = {0, 0, 0, 0};
  for (int i = 0; i < t.rank; ++i) {
    shape[4 - t.rank + i] = t.shape[i];
    stride[4 - t.rank + i] = t.stride[i];
  }
  const float* p = static_cast<const float*>(t.data);
  size_t k = 0;
  for (int64_t a = 0; a < shape[0]; ++a)
    for (int64_t b = 0; b < shape[1]; ++b)
      for (int64_t c = 0; c < shape[2]; ++c)
        for (int64_t d = 0; d < shape[3]; ++d)
          v[k++] = p[a * stride[0] + b * stride[1] + c * stride[2] + d * stride[3]];
  return v;
}

HWYATTN_FUZZ_NO_COVERAGE void Compare(const char* what, const std::vector<float>& got,
                                      const std::vector<float>& want) {
  double max_ref = 1.0, max_err = 0.0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isinf(want[i]) && got[i] == want[i]) continue;  // lse -inf
    if (!std::isfinite(got[i]) || !std::isfinite(want[i])) {
      Die(what, "non-finite element " + std::to_string(i) + " for finite inputs");
    }
    max_ref = std::max(max_ref, std::fabs(static_cast<double>(want[i])));
    max_err = std::max(max_err, std::fabs(static_cast<double>(got[i]) - want[i]));
  }
  if (max_err > 1e-5 * max_ref) {
    Die(what, "max|err| " + std::to_string(max_err) + " vs max|ref| " + std::to_string(max_ref));
  }
}

// hwyattn_mpi_ring_slice with arbitrary integers: a valid call's chunks are
// the layout's formula; an invalid one writes nothing.
int FuzzRingSlice(FuzzedDataProvider& in) {
  const int32_t rank = in.ConsumeIntegral<int32_t>() % 9, size = in.ConsumeIntegral<int32_t>() % 9;
  const int64_t len = in.ConsumeBool() ? in.ConsumeIntegral<int64_t>()
                                       : in.ConsumeIntegralInRange<int64_t>(-2, 100);
  int64_t o[4] = {-5, -5, -5, -5};
  const bool null_out = in.ConsumeIntegralInRange(0, 9) == 0;
  const hwyattn_status s =
      hwyattn_mpi_ring_slice(rank, size, len, null_out ? nullptr : &o[0], &o[1], &o[2], &o[3]);
  const bool invalid = null_out || size < 1 || rank < 0 || rank >= size || len < 2 * int64_t{size};
  if (s != HWYATTN_OK) {
    if (!invalid)
      Die("ring_slice", std::string("a valid call failed: ") + hwyattn_mpi_last_error());
    if (o[0] != -5 || o[1] != -5 || o[2] != -5 || o[3] != -5) Die("ring_slice", "wrote on error");
    return 0;
  }
  if (invalid) Die("ring_slice", "an invalid call returned OK");
  auto start = [&](int64_t c) {
    return static_cast<int64_t>(static_cast<__int128>(c) * len / (2 * int64_t{size}));
  };
  const int64_t c1 = 2 * int64_t{size} - 1 - rank;
  if (o[0] != start(rank) || o[1] != start(rank + 1) - start(rank) || o[2] != start(c1) ||
      o[3] != start(c1 + 1) - start(c1) || o[1] < 1 || o[3] < 1) {
    Die("ring_slice", "chunks differ from the layout");
  }
  return 0;
}

int FuzzCall(FuzzedDataProvider& in, bool ring) {
  const int64_t B = in.ConsumeIntegralInRange(1, 2), Hkv = in.ConsumeIntegralInRange(1, 2);
  const int64_t Hq = Hkv * in.ConsumeIntegralInRange(1, 3);
  const int64_t Lk = in.ConsumeIntegralInRange<int64_t>(ring ? 2 : 0, in.ConsumeBool() ? 12 : 80);
  const int64_t Lq = ring ? Lk : in.ConsumeIntegralInRange<int64_t>(1, in.ConsumeBool() ? 3 : 24);
  const int64_t D = in.ConsumeIntegralInRange(1, 24), Dv = in.ConsumeIntegralInRange(1, 24);
  const int64_t kv_batch = in.ConsumeIntegralInRange(0, 3) == 0 ? 1 : B;
  const hwyattn_dtype kTypes[3] = {HWYATTN_F32, HWYATTN_F16, HWYATTN_BF16};
  const hwyattn_dtype qt = in.ConsumeBool() ? HWYATTN_F32 : kTypes[in.ConsumeIntegralInRange(0, 2)];
  const hwyattn_dtype kt = in.ConsumeBool() ? HWYATTN_F32 : kTypes[in.ConsumeIntegralInRange(0, 2)];
  const hwyattn_dtype vt = in.ConsumeBool() ? HWYATTN_F32 : kTypes[in.ConsumeIntegralInRange(0, 2)];
  Arg q, k, v, out, lse, mask;
  const int64_t qs[4] = {B, Hq, Lq, D}, ks[4] = {kv_batch, Hkv, Lk, D},
                vs[4] = {kv_batch, Hkv, Lk, Dv}, os[4] = {B, Hq, Lq, Dv}, ls[4] = {1, B, Hq, Lq};
  Describe(&q, in, qs, qt, false);
  // An empty shard (Lk = 0, sharded only) is described by hand: the
  // layout helper wants sizes >= 1.
  const int64_t ks1[4] = {kv_batch, Hkv, std::max<int64_t>(Lk, 1), D};
  const int64_t vs1[4] = {kv_batch, Hkv, std::max<int64_t>(Lk, 1), Dv};
  Describe(&k, in, Lk == 0 ? ks1 : ks, kt, false);
  Describe(&v, in, Lk == 0 ? vs1 : vs, vt, false);
  Describe(&out, in, os, HWYATTN_F32, true);
  const bool has_lse = in.ConsumeBool();
  Describe(&lse, in, ls, HWYATTN_F32, true, 3);
  OptionsStorage store{};
  hwyattn_sdpa_options& opts = store.opts;
  hwyattn_sdpa_options_init(&opts);
  const float kScales[4] = {0.0f, 0.125f, 1.0f, -0.5f};
  opts.scale = kScales[in.ConsumeIntegralInRange(0, 3)];
  opts.causal = static_cast<hwyattn_causal>(in.ConsumeIntegralInRange(0, 2));
  const bool has_mask =
      !ring ? in.ConsumeIntegralInRange(0, 3) == 0 : in.ConsumeIntegralInRange(0, 15) == 0;
  if (has_mask) {
    int64_t ms[4] = {B, Hq, Lq, std::max<int64_t>(Lk, 1)};
    for (int i = 0; i < 3; ++i) {
      if (in.ConsumeBool()) ms[i] = 1;
    }
    Describe(&mask, in, ms, in.ConsumeBool() ? HWYATTN_BOOL : HWYATTN_F32, false);
  }
  std::vector<int32_t> kv_len;
  if (in.ConsumeBool()) {
    for (int64_t b = 0; b < B; ++b) {
      kv_len.push_back(in.ConsumeIntegralInRange<int32_t>(0, static_cast<int32_t>(Lk)));
    }
  }
  if (in.ConsumeBool()) {
    opts.window_left = in.ConsumeIntegralInRange<int64_t>(0, Lk + Lq + 2);
    opts.window_right = in.ConsumeBool() ? in.ConsumeIntegralInRange<int64_t>(0, Lk + Lq + 2) : 0;
  }
  if (in.ConsumeBool()) opts.softcap = in.ConsumeFloatingPointInRange<float>(0.25f, 30.0f);
  std::vector<float> slopes, sinks;
  if (in.ConsumeBool()) {
    for (int64_t h = 0; h < Hq; ++h) {
      slopes.push_back(in.ConsumeFloatingPointInRange<float>(-0.05f, 0.05f));
    }
  }
  if (in.ConsumeBool()) {
    for (int64_t h = 0; h < Hq; ++h) {
      sinks.push_back(in.ConsumeIntegralInRange(0, 4) == 0
                          ? -INFINITY
                          : in.ConsumeFloatingPointInRange<float>(-3.0f, 3.0f));
    }
  }
  std::vector<Arg*> args = {&q, &k, &v, &out, &lse};
  if (has_mask) args.push_back(&mask);
  if (in.ConsumeIntegralInRange(0, 2) == 0) Corrupt(in, args, &opts, &kv_len);
  // An empty shard after the layout: shape 0 along the keys, data NULL.
  for (Arg* a : args) {
    if (!Allocate(a)) return 0;  // too large to run quickly
  }
  int emptied = 0;  // of k and v (a rank-1 descriptor has no key axis to empty)
  if (Lk == 0) {
    for (Arg* a : {&k, &v}) {
      if (a->t.rank < 2 || a->t.rank > 4) continue;  // no key axis (or corrupted)
      a->t.shape[a->t.rank - 2] = 0;
      a->t.data = nullptr;
      ++emptied;
    }
  }
  Fill(&q, in, 2.0f);
  Fill(&k, in, 2.0f);
  Fill(&v, in, 3.0f);
  if (has_mask) Fill(&mask, in, 2.0f);
  memset(out.block.get(), 0xC3, out.bytes);
  memset(lse.block.get(), 0xC3, lse.bytes);
  if (!kv_len.empty()) opts.kv_len = kv_len.data();
  if (!slopes.empty()) opts.alibi_slopes = slopes.data();
  if (!sinks.empty()) opts.sinks = sinks.data();
  if (has_lse) opts.lse = &lse.t;
  if (has_mask) opts.mask = &mask.t;
  bool certainly_invalid = false;
  std::string why;  // which argument is certainly invalid
  const char* const kNames[6] = {"q", "k", "v", "out", "lse", "mask"};
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i]->certainly_invalid && !(args[i] == &lse && !has_lse)) {
      certainly_invalid = true;
      why += std::string(kNames[i]) + " ";
    }
  }
  const hwyattn_tensor* qp = &q.t;
  const hwyattn_tensor* kp = &k.t;
  const hwyattn_tensor* vp = &v.t;
  hwyattn_tensor* op = &out.t;
  MPI_Comm comm = MPI_COMM_WORLD;
  switch (in.ConsumeIntegralInRange(0, 31)) {
    case 0:
      qp = nullptr;
      certainly_invalid = true;
      break;
    case 1:
      kp = nullptr;
      certainly_invalid = true;
      break;
    case 2:
      vp = nullptr;
      certainly_invalid = true;
      break;
    case 3:
      op = nullptr;
      certainly_invalid = true;
      break;
    case 4:
      comm = MPI_COMM_NULL;
      certainly_invalid = true;
      break;
    case 5:
      opts.weights = &lse.t;
      certainly_invalid = true;
      break;  // UNSUPPORTED
    default: break;
  }
  if (ring && has_mask) certainly_invalid = true, why += "mask in the ring ";  // UNSUPPORTED
  // Both emptied: every shard (the one) is empty; one: k and v lengths differ.
  if (emptied > 0) certainly_invalid = true, why += "no keys ";

  std::vector<std::string> inputs_before;
  for (const Arg* a : args) inputs_before.push_back(Bytes(*a));
  const std::vector<std::pair<const Arg*, std::string>> outputs_before = {{&out, Bytes(out)},
                                                                          {&lse, Bytes(lse)}};
  const hwyattn_status s = ring ? hwyattn_mpi_ring_sdpa(comm, qp, kp, vp, op, &opts)
                                : hwyattn_mpi_sharded_sdpa(comm, qp, kp, vp, op, &opts);
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] != &out && args[i] != &lse && Bytes(*args[i]) != inputs_before[i]) {
      Die("mpi", "an input changed");
    }
  }
  if (s != HWYATTN_OK) {
    ExpectRejected(s, outputs_before);
    return 0;
  }
  if (certainly_invalid) Die("mpi status", "a certainly invalid call returned OK: " + why);
  if (!has_lse && Bytes(lse) != outputs_before[1].second) Die("mpi", "lse written, not given");
  for (const Arg* a : {&q, &k, &v}) {
    if (!AllFinite(*a)) return 0;
  }
  if (has_mask && !AllFinite(mask)) return 0;
  if (emptied > 0) return 0;
  // The whole problem in one process: hwyattn_sdpa of the same arguments.
  std::vector<float> want_out(static_cast<size_t>(B * Hq * Lq * Dv)),
      want_lse(static_cast<size_t>(B * Hq * Lq));
  hwyattn_tensor ref_out, ref_lse;
  hwyattn_tensor_contiguous(&ref_out, want_out.data(), HWYATTN_F32, 4, os);
  hwyattn_tensor_contiguous(&ref_lse, want_lse.data(), HWYATTN_F32, 3, os);
  OptionsStorage ref_store = store;  // with the bytes a larger struct_size covers
  ref_store.opts.lse = &ref_lse;
  const hwyattn_status rs = hwyattn_sdpa(qp, kp, vp, &ref_out, &ref_store.opts);
  if (rs != HWYATTN_OK) {
    Die("mpi", std::string("accepted what hwyattn_sdpa rejects: ") + hwyattn_last_error());
  }
  Compare(ring ? "ring out" : "sharded out", Read(out.t, B * Hq * Lq * Dv), want_out);
  if (has_lse) Compare(ring ? "ring lse" : "sharded lse", Read(lse.t, B * Hq * Lq), want_lse);
  return 0;
}

}  // namespace

// Open MPI keeps its runtime's allocations (some in components it has
// unloaded) until exit: no leak check at exit. libFuzzer's own check after
// each input (-detect_leaks, on by default) still reports leaks of a call.
extern "C" const char* __asan_default_options() { return "leak_check_at_exit=0"; }

extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) {
  // Open MPI would replace libFuzzer's handlers of SIGABRT, SIGSEGV, SIGBUS
  // and SIGFPE by its own (which write no crash file): catch none.
  setenv("OMPI_MCA_opal_signal", "", 0);
  int provided = 0;
  MPI_Init_thread(argc, argv, MPI_THREAD_SINGLE, &provided);
  int size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size != 1) {
    fprintf(stderr, "fuzz_mpi: run it on one rank (mpirun -np 1), not %d\n", size);
    exit(2);
  }
  atexit(FinalizeMpi);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  switch (in.ConsumeIntegralInRange(0, 7)) {
    case 0: return FuzzRingSlice(in);
    case 1:
    case 2:
    case 3: return FuzzCall(in, /*ring=*/true);
    default: return FuzzCall(in, /*ring=*/false);
  }
}
