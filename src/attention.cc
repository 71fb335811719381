// SPDX-License-Identifier: Apache-2.0
//
// The attention planner: picks each problem's kernel (row by row for tiny
// problems, decode for a few query rows per kv head, the fused prefill
// kernel otherwise), sizes the packed operands and the per-worker scratch,
// decides how many workers a call deserves, and runs the work items of all
// the call's problems (one for hwyattn_sdpa, a sequence each for
// hwyattn_kv_attention) in at most two parallel regions (src/threading.h:
// OpenMP, or the caller's pool):
//   A: decode runs of key chunks (the last worker to finish a kv head
//      merges it), small problems whole, prefill K/V packing per kv head;
//      a contiguous share of about equal cost per worker, fixed by the
//      shape, then helping the others (ItemShare);
//   B: prefill query tiles (an equal contiguous share per worker, then
//      helping the others).
// Which worker runs an item never changes a bit of any result.
#include "src/attention.h"

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include <algorithm>
#include <atomic>
#include <new>

#include "src/ops/decode_attention.h"
#include "src/ops/flash_attention.h"
#include "src/ops/merge_states.h"
#include "src/ops/score_rules.h"
#include "src/ops/small_attention.h"
#include "src/scratch.h"
#include "src/targets.h"
#include "src/threading.h"

namespace hwyattn {
namespace {

// a * b into *out, false on size_t overflow.
bool MulSize(size_t a, size_t b, size_t* out) { return !__builtin_mul_overflow(a, b, out); }

double AttentionFlops(const SdpaProblem& p) {
  return 2.0 * static_cast<double>(p.batch * p.q_heads) * static_cast<double>(p.q_len) *
         static_cast<double>(p.kv_len) * static_cast<double>(p.head_dim + p.value_dim);
}

// `floats` of this thread's attention scratch, or null (size overflow or
// allocation failure: both are out of memory for a valid request).
float* AttentionScratch(size_t shared_floats, size_t per_thread_floats, int64_t threads) {
  size_t per_threads, total;
  if (!MulSize(per_thread_floats, static_cast<size_t>(threads), &per_threads) ||
      __builtin_add_overflow(shared_floats, per_threads, &total) ||
      total > SIZE_MAX / sizeof(float)) {
    return nullptr;
  }
  return static_cast<float*>(ThreadScratch(ScratchSlot::kAttention, total * sizeof(float)));
}

// Items [*begin, *end) of worker `me` of `workers`: contiguous ranges of
// about equal total weight. The split depends only on the problem and the
// worker count, never on timing, so every call gives a worker the same
// items: in decode, the K/V a core read in the previous step are still in
// its caches (its L2 and its share of L3, which on a multi-CCD machine is
// its own L3), where a dynamic schedule would hand many of them to the
// other core (D1, 2 threads: 8% faster than a dynamic schedule).
template <typename Weight>
void WorkerRange(int64_t items, double total_weight, const Weight& weight, int64_t me,
                 int64_t workers, int64_t* begin, int64_t* end) {
  *begin = *end = 0;
  double before = 0.0;
  for (int64_t i = 0; i < items; ++i) {
    const double w = weight(i);
    // Owner of item i: by the position of its midpoint in the total weight.
    const double position = (before + 0.5 * w) / total_weight;
    const int64_t owner = std::min<int64_t>(
        workers - 1, static_cast<int64_t>(position * static_cast<double>(workers)));
    before += w;
    if (owner < me) *begin = i + 1;
    if (owner <= me) *end = i + 1;
  }
  if (*end < *begin) *end = *begin;
}

// One problem of a call, planned: its kernel, its plan, its share of the
// call's scratch, and where its work items sit among the call's. Phase A
// items (one parallel region): a small problem whole, a decode problem's runs
// of key chunks (the last to finish a kv head merges it), a prefill
// problem's K/V packing per (b, kv head); phase B (a second region, after
// the packing): the prefill problems' query tiles, and in a call that also
// has prefill problems the decode problems' runs (decode_in_b), so that a
// core streams a decode's K/V while the other computes a prefill's tiles
// instead of both cores streaming at once and then both computing.
struct Job {
  enum class Kernel : uint8_t { kSmall, kDecode, kFlash };
  const SdpaProblem* problem;
  Kernel kernel;
  double flops;
  int64_t heads;         // B * Hkv; decode: B * its units (DecodePlan)
  int64_t per_head;      // decode: runs of chunks per unit; flash: query tiles per kv head
  int64_t pack;          // flash: heads packed in phase A (0: K/V read in place)
  size_t shared_floats;  // its part of the call's shared scratch
  size_t worker_floats;  // a worker's scratch for one of its items
  DecodePlan decode;
  FlashPlan flash;
  std::atomic<int32_t>* remaining;  // decode: per unit, its items still running
  bool decode_in_b;                 // decode: its runs are phase B items
  int64_t first_a, first_b;         // its first item in phase A, in phase B

  int64_t ItemsA() const {
    if (kernel == Kernel::kSmall) return 1;
    if (kernel == Kernel::kDecode) return decode_in_b ? 0 : heads * per_head;
    return pack;
  }
  int64_t ItemsB() const {
    if (kernel == Kernel::kFlash) return heads * per_head;
    return kernel == Kernel::kDecode && decode_in_b ? heads * per_head : 0;
  }

  // Phase A, item i of this job's; `scratch` is the worker's.
  void RunA(int64_t i, float* scratch) const {
    const SdpaProblem& p = *problem;
    if (kernel == Kernel::kSmall) {
      SmallAttention(p);
    } else if (kernel == Kernel::kDecode) {
      RunDecode(i, scratch);
    } else {
      GetFlashKernels().pack_kv(flash, i / p.kv_heads, i % p.kv_heads);
    }
  }
  // Decode item i (in phase A, or B under decode_in_b): run i % per_head of
  // unit i / per_head. The merge of a unit (which normalises a lone
  // chunk, and combines several in their fixed order) is done by whichever
  // worker finishes the head's last item: no barrier between the chunks and
  // the merges. The acq_rel decrement orders every item's partials before
  // the merge that reads them; which worker merges never changes a bit.
  void RunDecode(int64_t i, float* scratch) const {
    const DecodeKernels& kernels = GetDecodeKernels();
    const int64_t head = i / per_head, b = head / decode.units(), unit = head % decode.units();
    const int64_t chunk0 = i % per_head * decode.run;
    kernels.attend_chunks(decode, b, unit, chunk0, std::min(decode.run, decode.chunks - chunk0),
                          scratch);
    if (remaining[head].fetch_sub(1, std::memory_order_acq_rel) == 1)
      kernels.merge(decode, b, unit);
  }
  // The cost of phase A item i, in keys streamed: a decode run's visible
  // keys plus a fixed cost per chunk (set-up, softmax and output passes)
  // worth about 32 keys; a packed head's keys; a small problem's rows x keys
  // (a quarter: they stay in L1).
  double WeightA(int64_t i) const {
    const SdpaProblem& p = *problem;
    if (kernel == Kernel::kSmall)
      return flops / (8.0 * static_cast<double>(p.head_dim + p.value_dim));
    if (kernel == Kernel::kFlash) return static_cast<double>(p.KeyEnd(i / p.kv_heads));
    const int64_t b = i / per_head / decode.units(), chunk0 = i % per_head * decode.run;
    double w = 0.0;
    for (int64_t c = chunk0; c < std::min(chunk0 + decode.run, decode.chunks); ++c) {
      int64_t first;
      w += 32.0 + static_cast<double>(decode.ChunkKeys(b, c, &first));
    }
    return w;
  }
  // The cost of phase B item i under decode_in_b, in FLOPs: a query tile's
  // share of its problem's; a decode run's K/V bytes (WeightA's keys, K and
  // V rows of one kv head) at the bytes-for-FLOPs rate of the thread-count
  // rule (threading.h: kMinBytesPerWorker streamed cost kMinFlopsPerWorker).
  double WeightB(int64_t i) const {
    if (kernel == Kernel::kFlash) return flops / static_cast<double>(ItemsB());
    const SdpaProblem& p = *problem;
    const double row_bytes = static_cast<double>(p.head_dim) * ElementBytes(p.k.dtype) +
                             static_cast<double>(p.value_dim) * ElementBytes(p.v.dtype);
    return WeightA(i) * row_bytes * (kMinFlopsPerWorker / kMinBytesPerWorker);
  }
  // Phase B item i: query tiles numbered head by head, so that consecutive
  // items (a worker takes its share in order) read the same K/V, still in
  // L2; within a head the last tiles come first: under a causal mask they
  // see the most keys, and each share ends on small items (the first tiles
  // of its last head), so the workers finish together. Tiles are Bq rows,
  // except that a last tile of one vector or less is merged with the one
  // before into two tiles of whole vectors (a one-vector register tile runs
  // at about half the speed: one query load per 8 broadcasts).
  FlashItem ItemB(int64_t i) const {
    const int64_t tile = per_head - 1 - i % per_head, head = i / per_head;
    const int64_t bq = static_cast<int64_t>(flash.geometry.query_tile);
    const int64_t lanes = static_cast<int64_t>(flash.geometry.lanes);
    const int64_t total = problem->q_len * problem->group();
    int64_t row0 = tile * bq, rows = std::min(bq, total - row0);
    const int64_t last = total - (per_head - 1) * bq;  // rows of the last tile
    if (per_head >= 2 && last <= lanes && tile >= per_head - 2) {
      const int64_t pair0 = (per_head - 2) * bq, pair_rows = bq + last;
      const int64_t first_rows = (pair_rows / 2 + lanes - 1) / lanes * lanes;
      row0 = tile == per_head - 2 ? pair0 : pair0 + first_rows;
      rows = tile == per_head - 2 ? first_rows : pair_rows - first_rows;
    }
    return {head / problem->kv_heads, head % problem->kv_heads, row0, rows};
  }
};

// The shared scratch of a decode problem: partials [B * units][chunks][rows]
// of Dv outputs and 2 stats, then a counter per unit (a float slot each).
// The sizes are bounded by the K/V tensors' (rows <= kDecodeMaxRows): no
// overflow.
void PlanDecode(Job* job) {
  const SdpaProblem& p = *job->problem;
  const DecodeKernels& kernels = GetDecodeKernels();
  DecodePlan& plan = job->decode;
  plan.problem = &p;
  plan.parts = DecodeParts(p);
  plan.heads = p.group() / plan.parts;
  plan.rows = p.q_len * plan.heads;
  job->heads = p.batch * plan.units();
  plan.chunks = (p.kv_len + kDecodeChunk - 1) / kDecodeChunk;
  plan.run = 1;  // set once the call's thread count is known
  plan.q_scale = p.scale * kLog2e;
  plan.prefetch_l2 = StreamPrefetchLevel() == StreamPrefetch::kL2;
  plan.bf16 = p.Bf16Products();
  plan.bf16_dot = Bf16DotApplies(p) && Bf16DotFor(kernels.target, DecodeBf16DotKernel(p));
  plan.staged = DecodeStaged(p);
  plan.int8 = p.Int8Products();
  plan.scratch_floats = DecodeScratchFloats(p, plan.rows, kernels.lanes, plan.bf16_dot);
  static_assert(sizeof(std::atomic<int32_t>) == sizeof(float) &&
                    alignof(std::atomic<int32_t>) <= alignof(float),
                "a head's counter takes one float slot");
  const size_t partial_rows = static_cast<size_t>(job->heads * plan.chunks * plan.rows);
  job->shared_floats = PadFloats(partial_rows * static_cast<size_t>(p.value_dim)) +
                       PadFloats(partial_rows * 2) + PadFloats(static_cast<size_t>(job->heads));
  job->worker_floats = plan.scratch_floats;
  job->per_head = plan.chunks;
}

// The decode problem's pointers into its shared scratch, its counters set.
void PlaceDecode(Job* job, float* memory, int64_t run) {
  DecodePlan& plan = job->decode;
  plan.run = run;
  job->per_head = (plan.chunks + run - 1) / run;
  const size_t partial_rows = static_cast<size_t>(job->heads * plan.chunks * plan.rows);
  const size_t out_floats = PadFloats(partial_rows * static_cast<size_t>(job->problem->value_dim));
  plan.partial_out = memory;
  plan.partial_stats = memory + out_floats;
  job->remaining =
      reinterpret_cast<std::atomic<int32_t>*>(memory + out_floats + PadFloats(partial_rows * 2));
  for (int64_t h = 0; h < job->heads; ++h)
    new (&job->remaining[h]) std::atomic<int32_t>(static_cast<int32_t>(job->per_head));
}

// Sizes of a prefill problem: every product is checked, a failure is
// reported as out of memory (the request is valid, just too large to hold).
bool PlanFlash(Job* job) {
  const SdpaProblem& p = *job->problem;
  const FlashGeometry& g = GetFlashKernels().geometry;
  const int64_t mr = static_cast<int64_t>(g.tile_rows);
  FlashPlan& plan = job->flash;
  plan.problem = &p;
  plan.geometry = g;
  plan.key_panels = (p.kv_len + mr - 1) / mr;
  // bf16 products read K and V rounded, from their packed copies.
  const bool f32_products = !p.Bf16Products();
  plan.keys_in_place = f32_products && !p.Paged() && p.k.dtype == Dtype::kF32 &&
                       (p.k.stride[3] == 1 || p.head_dim == 1);
  const int64_t lanes = static_cast<int64_t>(g.lanes);
  plan.value_dim_pad = (p.value_dim + lanes - 1) / lanes * lanes;
  plan.values_in_place = f32_products && !p.Paged() && p.v.dtype == Dtype::kF32 &&
                         (p.v.stride[3] == 1 || p.value_dim == 1);
  plan.q_scale = p.scale * kLog2e;
  // K and V packed as bf16 pairs (no larger than their fp32 packing); a
  // quantized cache's are dequantized and rounded into the fp32 panels instead.
  plan.bf16_dot =
      p.Bf16Products() && Bf16DotFor(GetFlashKernels().target, Bf16DotKernel::kPrefill) &&
      p.k_scale.layout == KvScales::kNone && !IsPackedDtype(p.k.dtype) && !IsPackedDtype(p.v.dtype);
  // The plan's geometry is what the kernel and the scratch layout read.
  if (plan.bf16_dot) plan.geometry.key_tile = g.bf16_key_tile;

  size_t k_floats = 0, v_floats = 0, packed_floats;
  const size_t heads = static_cast<size_t>(job->heads);
  const size_t lk_pad = static_cast<size_t>(plan.key_panels) * g.tile_rows;
  if ((!plan.keys_in_place && !MulSize(lk_pad, static_cast<size_t>(p.head_dim), &k_floats)) ||
      (!plan.values_in_place &&
       !MulSize(static_cast<size_t>(p.kv_len), static_cast<size_t>(p.value_dim), &v_floats))) {
    return false;
  }
  plan.packed_k_floats = PadFloats(k_floats);
  plan.packed_v_floats = PadFloats(v_floats);
  plan.packed_head_floats = plan.packed_k_floats + plan.packed_v_floats;
  if (!MulSize(plan.packed_head_floats, heads, &packed_floats)) return false;
  // Masking can give a row a zero probability at a key whose V is not
  // finite; the kernel then needs to know which key tiles hold such values
  // (flags after the packed heads).
  const bool masked = p.MayBlockPerRow();
  const int64_t key_tile = static_cast<int64_t>(plan.geometry.key_tile);
  plan.key_tiles = (p.kv_len + key_tile - 1) / key_tile;
  if (masked) {
    const size_t flag_floats = PadFloats((heads * static_cast<size_t>(plan.key_tiles) + 3) / 4);
    if (__builtin_add_overflow(packed_floats, flag_floats, &packed_floats)) return false;
  }
  plan.scratch_floats = FlashScratchLayout(p, plan.geometry, plan.value_dim_pad).total;
  job->shared_floats = packed_floats;
  job->worker_floats = plan.scratch_floats;
  const int64_t query_tile = static_cast<int64_t>(g.query_tile);
  job->per_head = (p.q_len * p.group() + query_tile - 1) / query_tile;
  job->pack = plan.keys_in_place && plan.values_in_place && !masked ? 0 : job->heads;
  return true;
}

void PlaceFlash(Job* job, float* memory) {
  FlashPlan& plan = job->flash;
  plan.packed = memory;
  const size_t packed = plan.packed_head_floats * static_cast<size_t>(job->heads);
  plan.nonfinite_values =
      job->problem->MayBlockPerRow() ? reinterpret_cast<uint8_t*>(memory + packed) : nullptr;
}

// The job that holds item i of a phase (first: the jobs' first items, in
// increasing order; a job without items in the phase shares its successor's).
template <typename First>
const Job& JobOf(const Job* jobs, int64_t n, int64_t i, const First& first) {
  int64_t lo = 0, hi = n;  // the last job whose first item is <= i
  while (hi - lo > 1) {
    const int64_t mid = (lo + hi) / 2;
    if (first(jobs[mid]) <= i) {
      lo = mid;
    } else {
      hi = mid;
    }
  }
  return jobs[lo];
}

// Plans and runs `n` problems as one call on `executor`. Every allocation
// comes before any output is written.
hwyattn_status RunJobs(const SdpaProblem* problems, int64_t n, const Executor& executor) {
  size_t job_bytes;
  if (!MulSize(static_cast<size_t>(n), sizeof(Job), &job_bytes)) return HWYATTN_OUT_OF_MEMORY;
  Job* jobs = static_cast<Job*>(ThreadScratch(ScratchSlot::kJobs, job_bytes));
  if (jobs == nullptr) return HWYATTN_OUT_OF_MEMORY;
  double flops = 0.0;
  int64_t items_a = 0, items_b = 0, chunks = 0, decode_runs = 0;
  bool any_decode = false, any_flash = false;
  size_t shared_floats = 0, worker_floats = 0;
  for (int64_t k = 0; k < n; ++k) {
    Job* job = new (&jobs[k]) Job{};
    job->problem = &problems[k];
    const SdpaProblem& p = problems[k];
    job->flops = AttentionFlops(p);
    job->heads = p.batch * p.kv_heads;
    if (SmallApplies(p, job->flops)) {
      job->kernel = Job::Kernel::kSmall;
    } else if (DecodeApplies(p)) {
      job->kernel = Job::Kernel::kDecode;
      any_decode = true;
      PlanDecode(job);
      chunks += job->heads * job->decode.chunks;
      decode_runs += job->heads * ((job->decode.chunks + kDecodeRun - 1) / kDecodeRun);
    } else {
      job->kernel = Job::Kernel::kFlash;
      any_flash = true;
      if (!PlanFlash(job)) return HWYATTN_OUT_OF_MEMORY;
    }
    items_a += job->kernel == Job::Kernel::kDecode ? 0 : job->ItemsA();
    items_b += job->ItemsB();
    flops += job->flops;
    if (__builtin_add_overflow(shared_floats, job->shared_floats, &shared_floats))
      return HWYATTN_OUT_OF_MEMORY;
    worker_floats = std::max(worker_floats, job->worker_floats);
  }
  const int64_t threads = WorkersFor(executor, flops, std::max(items_a + chunks, items_b));
  // Decode items: runs of consecutive chunks when that still leaves 4 items
  // per thread (a contiguous split of fewer is uneven), else single chunks.
  // The run length never changes a result, only which thread does what.
  const int64_t run = decode_runs >= 4 * threads ? kDecodeRun : 1;
  // Shared scratch (the problems' parts, the shares of phases A and B), then a
  // slice per worker.
  const size_t share_floats = threads > 1 ? ShareFloats(threads) : 0;
  if (__builtin_add_overflow(shared_floats, share_floats, &shared_floats))
    return HWYATTN_OUT_OF_MEMORY;
  float* memory = AttentionScratch(shared_floats, worker_floats, threads);
  if (memory == nullptr) return HWYATTN_OUT_OF_MEMORY;
  float* at = memory;
  const bool decode_in_b = any_decode && any_flash;
  items_a = items_b = 0;
  for (int64_t k = 0; k < n; ++k) {
    Job& job = jobs[k];
    if (job.kernel == Job::Kernel::kDecode) {
      PlaceDecode(&job, at, run);
      job.decode_in_b = decode_in_b;
    }
    if (job.kernel == Job::Kernel::kFlash) PlaceFlash(&job, at);
    at += job.shared_floats;
    job.first_a = items_a;
    job.first_b = items_b;
    items_a += job.ItemsA();
    items_b += job.ItemsB();
  }
  float* scratch = at + share_floats;
  const auto first_a = [](const Job& job) { return job.first_a; };
  const auto first_b = [](const Job& job) { return job.first_b; };
  const auto run_a = [&](int64_t i, float* mine) {
    const Job& job = JobOf(jobs, n, i, first_a);
    job.RunA(i - job.first_a, mine);
  };
  const auto run_b = [&](int64_t i, int64_t next, float* mine) {
    const Job& job = JobOf(jobs, n, i, first_b);
    const int64_t local = i - job.first_b;
    if (job.kernel == Job::Kernel::kDecode) {
      job.RunDecode(local, mine);
      return;
    }
    const bool same = next >= 0 && next - job.first_b < job.ItemsB();
    const FlashItem next_item = same ? job.ItemB(next - job.first_b) : FlashItem{};
    GetFlashKernels().attend(job.flash, job.ItemB(local), same ? &next_item : nullptr, mine);
  };
  if (threads == 1) {
    for (int64_t i = 0; i < items_a; ++i) run_a(i, scratch);
    for (int64_t i = 0; i < items_b; ++i) run_b(i, i + 1 < items_b ? i + 1 : -1, scratch);
    return HWYATTN_OK;
  }
  if (items_a > 0) {
    // Shares of about equal cost (WorkerRange), with helping (RunShares):
    // a worker's share is the same items in every call of the same shape
    // (whose K/V it may still hold in its caches), and a worker that starts
    // late (a pool's thread still waking) is helped instead of waited for.
    const auto weight = [&](int64_t i) {
      const Job& job = JobOf(jobs, n, i, first_a);
      return job.WeightA(i - job.first_a);
    };
    double total_weight = 0.0;
    for (int64_t i = 0; i < items_a; ++i) total_weight += weight(i);
    const int64_t workers = std::min(threads, items_a);
    ItemShare* shares = static_cast<ItemShare*>(static_cast<void*>(at));
    for (int64_t w = 0; w < workers; ++w) {
      int64_t begin, end;
      WorkerRange(items_a, total_weight, weight, w, workers, &begin, &end);
      new (&shares[w]) ItemShare{{begin}, end};
    }
    ParallelRegion(executor, workers, [&](int64_t me) {
      float* mine = scratch + static_cast<size_t>(me) * worker_floats;
      RunShares(shares, workers, me, [&](int64_t i, int64_t) { run_a(i, mine); });
    });
  }
  if (items_b > 0) {
    ItemShare* shares = InitShares(at, threads, items_b);
    if (decode_in_b) {
      // Shares of about equal cost: the decode runs, in the order of their
      // problems, sit together in one or two shares, beside the others'
      // query tiles.
      const auto weight = [&](int64_t i) {
        const Job& job = JobOf(jobs, n, i, first_b);
        return job.WeightB(i - job.first_b);
      };
      double total_weight = 0.0;
      for (int64_t i = 0; i < items_b; ++i) total_weight += weight(i);
      for (int64_t w = 0; w < threads; ++w) {
        int64_t begin, end;
        WorkerRange(items_b, total_weight, weight, w, threads, &begin, &end);
        shares[w].next.store(begin, std::memory_order_relaxed);
        shares[w].end = end;
      }
    }
    ParallelRegion(executor, threads, [&](int64_t me) {
      float* mine = scratch + static_cast<size_t>(me) * worker_floats;
      RunShares(shares, threads, me, [&](int64_t i, int64_t next) { run_b(i, next, mine); });
    });
  }
  return HWYATTN_OK;
}

}  // namespace

hwyattn_status RunSdpa(const SdpaProblem& p) {
  // A tiny call goes straight to its kernel: no planning (T1's time).
  if (SmallApplies(p, AttentionFlops(p))) {
    SmallAttention(p);
    return HWYATTN_OK;
  }
  return RunJobs(&p, 1, p.executor);
}

hwyattn_status RunSdpaBatch(const SdpaProblem* problems, int64_t n, const Executor& executor) {
  return n > 0 ? RunJobs(problems, n, executor) : HWYATTN_OK;
}

void RunMerge(const MergeProblem& p) { GetMergeKernels().merge(p); }

const char* KernelTargetName() {
  const int64_t target = GetFlashKernels().target;
  return Bf16DotFor(target, Bf16DotKernel::kPrefill) ? Bf16DotTargetName(target)
                                                     : TargetName(target);
}

}  // namespace hwyattn
