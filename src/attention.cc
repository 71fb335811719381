// SPDX-License-Identifier: Apache-2.0
//
// The attention planner: picks the kernel (row by row for tiny problems,
// decode for a few query rows per kv head, the fused prefill kernel
// otherwise), sizes the packed operands and the per-worker scratch, decides
// how many workers a call deserves, and runs the phases as parallel regions
// (src/threading.h: OpenMP, or the caller's pool):
// decode = key chunks (a fixed split; an item may take two in a row), then,
// in a second region, their merge per kv head;
// prefill = packing or scanning K/V per kv head where needed, then, in a
// second region, the query tiles (a contiguous share per worker, then
// helping the others: ItemShare).
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

struct Work {
  const FlashKernels* kernels;
  const FlashPlan* plan;
  int64_t heads;           // B * Hkv: packing items
  int64_t tiles_per_head;  // query tiles per (b, kv head)

  void Pack(int64_t i) const {
    kernels->pack_kv(*plan, i / plan->problem->kv_heads, i % plan->problem->kv_heads);
  }
  // Items are numbered head by head, so that consecutive items (a worker
  // takes its share in order) read the same K/V, still in L2; within a head
  // the last query tiles come first: under a causal mask they see the most
  // keys, and each share ends on small items (the first tiles of its last
  // head), so the workers finish together.
  FlashItem Item(int64_t i) const {
    const int64_t tile = tiles_per_head - 1 - i % tiles_per_head;
    const int64_t head = i / tiles_per_head;
    return {head / plan->problem->kv_heads, head % plan->problem->kv_heads,
            tile * static_cast<int64_t>(plan->geometry.query_tile)};
  }
  // Runs item i; the worker's next item is `next` (-1: none or unknown).
  void Attend(int64_t i, int64_t next, float* scratch) const {
    const FlashItem next_item = next >= 0 ? Item(next) : FlashItem{};
    kernels->attend(*plan, Item(i), next >= 0 ? &next_item : nullptr, scratch);
  }
};

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

// reserve_only: size and allocate the call's scratch, then return without
// running (ReserveSdpaScratch).
hwyattn_status RunDecode(const SdpaProblem& p, double flops, bool reserve_only) {
  const DecodeKernels& kernels = GetDecodeKernels();
  DecodePlan plan;
  plan.problem = &p;
  plan.rows = p.q_len * p.group();
  plan.chunks = (p.kv_len + kDecodeChunk - 1) / kDecodeChunk;
  plan.q_scale = p.scale * kLog2e;
  plan.prefetch_l2 = StreamPrefetchLevel() == StreamPrefetch::kL2;
  plan.scratch_floats = DecodeScratchFloats(p, plan.rows, kernels.lanes);
  const int64_t heads = p.batch * p.kv_heads;
  // Partials: [heads][chunks][rows] of Dv outputs and 2 stats; the sizes
  // are bounded by the K/V tensors' (rows <= kDecodeMaxRows), no overflow.
  const size_t partial_rows = static_cast<size_t>(heads * plan.chunks * plan.rows);
  const size_t out_floats = PadFloats(partial_rows * static_cast<size_t>(p.value_dim));
  const size_t stat_floats = PadFloats(partial_rows * 2);
  // One counter per head of its work items still running (a float slot each).
  const size_t counter_floats = PadFloats(static_cast<size_t>(heads));
  static_assert(sizeof(std::atomic<int32_t>) == sizeof(float) &&
                    alignof(std::atomic<int32_t>) <= alignof(float),
                "a head's counter takes one float slot");
  // Work items: runs of consecutive chunks when that still leaves 4 items
  // per thread (a contiguous split of fewer is uneven), else single chunks.
  // The run length never changes a result, only which thread does what.
  const int64_t threads = WorkersFor(p.executor, flops, heads * plan.chunks);
  const int64_t runs = (plan.chunks + kDecodeRun - 1) / kDecodeRun;
  plan.run = heads * runs >= 4 * threads ? kDecodeRun : 1;
  const int64_t runs_per_head = (plan.chunks + plan.run - 1) / plan.run;
  const int64_t items = heads * runs_per_head;
  float* memory =
      AttentionScratch(out_floats + stat_floats + counter_floats, plan.scratch_floats, threads);
  if (memory == nullptr) return HWYATTN_OUT_OF_MEMORY;
  if (reserve_only) return HWYATTN_OK;
  plan.partial_out = memory;
  plan.partial_stats = memory + out_floats;
  std::atomic<int32_t>* remaining =
      reinterpret_cast<std::atomic<int32_t>*>(memory + out_floats + stat_floats);
  for (int64_t h = 0; h < heads; ++h)
    new (&remaining[h]) std::atomic<int32_t>(static_cast<int32_t>(runs_per_head));
  float* scratch = memory + out_floats + stat_floats + counter_floats;

  // Item i is run i % runs_per_head of kv head i / runs_per_head. The merge
  // of a head (which normalises a lone chunk, and combines several in their
  // fixed order) is done by whichever worker finishes the head's last item:
  // a decode step is one parallel phase, with no barrier between the chunks
  // and the merges (a pool that sleeps between phases pays one wake-up, not
  // two). The acq_rel decrement orders every item's partials before the
  // merge that reads them; which worker merges never changes a bit.
  const int64_t kv_heads = p.kv_heads, chunks = plan.chunks, run = plan.run;
  const auto attend = [&](int64_t i, float* mine) {
    const int64_t head = i / runs_per_head, b = head / kv_heads, kvh = head % kv_heads;
    const int64_t chunk0 = i % runs_per_head * run;
    kernels.attend_chunks(plan, b, kvh, chunk0, std::min(run, chunks - chunk0), mine);
    if (remaining[head].fetch_sub(1, std::memory_order_acq_rel) == 1) kernels.merge(plan, b, kvh);
  };
  if (threads == 1) {
    for (int64_t i = 0; i < items; ++i) attend(i, scratch);
    return HWYATTN_OK;
  }
  // Work of an item: its chunks' visible keys plus a fixed cost per chunk
  // (set-up, softmax and output passes) worth about 32 keys.
  const auto weight = [&](int64_t i) {
    const int64_t head = i / runs_per_head, chunk0 = i % runs_per_head * run;
    double w = 0.0;
    for (int64_t c = chunk0; c < std::min(chunk0 + run, chunks); ++c) {
      int64_t first;
      w += 32.0 + static_cast<double>(plan.ChunkKeys(head / kv_heads, c, &first));
    }
    return w;
  };
  double total_weight = 0.0;
  for (int64_t i = 0; i < items; ++i) total_weight += weight(i);
  ParallelRegion(p.executor, threads, [&](int64_t me) {
    float* mine = scratch + static_cast<size_t>(me) * plan.scratch_floats;
    int64_t begin, end;
    WorkerRange(items, total_weight, weight, me, threads, &begin, &end);
    for (int64_t i = begin; i < end; ++i) attend(i, mine);
  });
  return HWYATTN_OK;
}

hwyattn_status RunFlash(const SdpaProblem& p, double flops, bool reserve_only) {
  const FlashKernels& kernels = GetFlashKernels();
  const FlashGeometry& g = kernels.geometry;
  const int64_t mr = static_cast<int64_t>(g.tile_rows);

  FlashPlan plan;
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
  // K and V packed as bf16 pairs (no larger than their fp32 packing).
  plan.bf16_dot = p.Bf16Products() && Bf16DotFor(kernels.target);

  // Sizes: every product is checked, a failure is reported as out of memory
  // (the request is valid, just too large to hold).
  size_t k_floats = 0, v_floats = 0, packed_floats;
  const size_t heads = static_cast<size_t>(p.batch * p.kv_heads);
  const size_t lk_pad = static_cast<size_t>(plan.key_panels) * g.tile_rows;
  if ((!plan.keys_in_place && !MulSize(lk_pad, static_cast<size_t>(p.head_dim), &k_floats)) ||
      (!plan.values_in_place &&
       !MulSize(static_cast<size_t>(p.kv_len), static_cast<size_t>(p.value_dim), &v_floats))) {
    return HWYATTN_OUT_OF_MEMORY;
  }
  plan.packed_k_floats = PadFloats(k_floats);
  plan.packed_v_floats = PadFloats(v_floats);
  plan.packed_head_floats = plan.packed_k_floats + plan.packed_v_floats;
  if (!MulSize(plan.packed_head_floats, heads, &packed_floats)) return HWYATTN_OUT_OF_MEMORY;
  // Masking can give a row a zero probability at a key whose V is not finite;
  // the kernel then needs to know which key tiles hold such values.
  const bool masked = p.MayBlockPerRow();
  const int64_t key_tile = static_cast<int64_t>(g.key_tile);
  plan.key_tiles = (p.kv_len + key_tile - 1) / key_tile;
  size_t flag_floats = 0;
  if (masked) {
    flag_floats = PadFloats((heads * static_cast<size_t>(plan.key_tiles) + 3) / 4);
    if (__builtin_add_overflow(packed_floats, flag_floats, &packed_floats)) {
      return HWYATTN_OUT_OF_MEMORY;
    }
  }
  plan.scratch_floats = FlashScratchLayout(p, g, plan.value_dim_pad).total;

  Work work;
  work.kernels = &kernels;
  work.plan = &plan;
  work.heads = static_cast<int64_t>(heads);
  const int64_t rows_per_head = p.q_len * p.group();
  const int64_t query_tile = static_cast<int64_t>(g.query_tile);
  work.tiles_per_head = (rows_per_head + query_tile - 1) / query_tile;
  const int64_t items = work.heads * work.tiles_per_head;
  const int64_t threads = WorkersFor(p.executor, flops, items);
  // The workers' shares follow the packed K/V (bounded by the thread count).
  const size_t share_floats = ShareFloats(threads);
  size_t shared_floats;
  if (__builtin_add_overflow(packed_floats, share_floats, &shared_floats))
    return HWYATTN_OUT_OF_MEMORY;
  float* memory = AttentionScratch(shared_floats, plan.scratch_floats, threads);
  if (memory == nullptr) return HWYATTN_OUT_OF_MEMORY;
  if (reserve_only) return HWYATTN_OK;
  plan.packed = memory;
  plan.nonfinite_values =
      masked ? reinterpret_cast<uint8_t*>(memory + packed_floats - flag_floats) : nullptr;
  float* scratch = memory + packed_floats + share_floats;

  const int64_t pack_items = plan.keys_in_place && plan.values_in_place && !masked ? 0 : work.heads;
  if (threads == 1) {
    for (int64_t i = 0; i < pack_items; ++i) work.Pack(i);
    for (int64_t i = 0; i < items; ++i) work.Attend(i, i + 1 < items ? i + 1 : -1, scratch);
    return HWYATTN_OK;
  }
  if (pack_items > 0) {
    // Heads handed out one at a time (they differ in cost under masks); the
    // query tiles read them all: a second region.
    std::atomic<int64_t> next_head{0};
    ParallelRegion(p.executor, std::min(threads, pack_items), [&](int64_t /*me*/) {
      for (int64_t i = next_head.fetch_add(1, std::memory_order_relaxed); i < pack_items;
           i = next_head.fetch_add(1, std::memory_order_relaxed)) {
        work.Pack(i);
      }
    });
  }
  ItemShare* shares = InitShares(memory + packed_floats, threads, items);
  ParallelRegion(p.executor, threads, [&](int64_t me) {
    float* mine = scratch + static_cast<size_t>(me) * plan.scratch_floats;
    RunShares(shares, threads, me, [&](int64_t i, int64_t next) { work.Attend(i, next, mine); });
  });
  return HWYATTN_OK;
}

}  // namespace

namespace {

// bf16 products (precision = BF16) run on the prefill kernel, whatever the
// size: it is the one that rounds its operands (RoundToBf16).
bool SmallFor(const SdpaProblem& p, double flops) {
  return !p.Bf16Products() && SmallApplies(p, flops);
}
bool DecodeFor(const SdpaProblem& p) { return !p.Bf16Products() && DecodeApplies(p); }

}  // namespace

hwyattn_status RunSdpa(const SdpaProblem& p) {
  const double flops = AttentionFlops(p);
  if (SmallFor(p, flops)) {
    SmallAttention(p);
    return HWYATTN_OK;
  }
  return DecodeFor(p) ? RunDecode(p, flops, false) : RunFlash(p, flops, false);
}

hwyattn_status ReserveSdpaScratch(const SdpaProblem& p) {
  const double flops = AttentionFlops(p);
  if (SmallFor(p, flops)) return HWYATTN_OK;  // no scratch
  return DecodeFor(p) ? RunDecode(p, flops, true) : RunFlash(p, flops, true);
}

void RunMerge(const MergeProblem& p) { GetMergeKernels().merge(p); }

const char* KernelTargetName() {
  const int64_t target = GetFlashKernels().target;
  return Bf16DotFor(target) ? kBf16DotTargetName : TargetName(target);
}

}  // namespace hwyattn
