// SPDX-License-Identifier: Apache-2.0
//
// The extern "C" bodies of hwyattn.h: validate, call the engine, map errors.
// No exception crosses this boundary.
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <new>

#include "capi/abi_sizes.h"
#include "capi/error.h"
#include "capi/validate.h"
#include "include/hwyattn.h"
#include "src/attention.h"
#include "src/kv_attention.h"
#include "src/mha.h"
#include "src/threading.h"

namespace hwyattn {
namespace {
thread_local char t_last_error[512] = "";
// hwyattn_set_num_threads refuses more than this.
constexpr int kMaxThreads = 4096;
}  // namespace

hwyattn_status Fail(hwyattn_status status, const char* format, ...) {
  va_list args;
  va_start(args, format);
  vsnprintf(t_last_error, sizeof(t_last_error), format, args);
  va_end(args);
  return status;
}

const char* LastError() { return t_last_error; }

// Zeroes the caller's `size` bytes of an extensible struct and sets its
// struct_size to `size` (when the field fits). Nothing past `size` is
// written: the caller's struct may be older and smaller than ours.
template <typename T>
void InitStruct(T* s, size_t size) {
  if (s == nullptr) return;
  memset(static_cast<void*>(s), 0, size);
  if (size >= sizeof(uint32_t)) {
    const uint32_t struct_size = static_cast<uint32_t>(size > UINT32_MAX ? UINT32_MAX : size);
    memcpy(static_cast<void*>(s), &struct_size, sizeof(struct_size));
  }
}

// Runs an entry point's body (validate, then run) so that no exception
// crosses into C: std::bad_alloc becomes HWYATTN_OUT_OF_MEMORY and anything
// else HWYATTN_INTERNAL_ERROR, each message naming the entry point.
template <typename Body>
hwyattn_status Guarded(const char* entry, const Body& body) noexcept {
  try {
    return body();
  } catch (const std::bad_alloc&) {
    return Fail(HWYATTN_OUT_OF_MEMORY, "%s: out of memory", entry);
  } catch (...) {
    return Fail(HWYATTN_INTERNAL_ERROR, "%s: unexpected exception", entry);
  }
}

}  // namespace hwyattn

// The opaque handle of hwyattn.h: one MHA layer, immutable after creation.
struct hwyattn_mha {
  hwyattn::MhaLayer layer;
};

using hwyattn::Fail;

extern "C" {

uint32_t hwyattn_abi_version(void) { return HWYATTN_ABI_VERSION; }

const char* hwyattn_version(void) {
#define HWYATTN_STR2(x) #x
#define HWYATTN_STR(x) HWYATTN_STR2(x)
  return HWYATTN_STR(HWYATTN_VERSION_MAJOR) "." HWYATTN_STR(HWYATTN_VERSION_MINOR) "." HWYATTN_STR(
      HWYATTN_VERSION_PATCH);
#undef HWYATTN_STR
#undef HWYATTN_STR2
}

const char* hwyattn_status_string(hwyattn_status status) {
  // A C caller may pass any int; loading one outside the enumerators as the
  // C++ enum is undefined, so the bits are read as an int.
  int32_t s;
  static_assert(sizeof(s) == sizeof(status), "enum layout");
  memcpy(&s, &status, sizeof(s));
  switch (s) {
    case HWYATTN_OK: return "HWYATTN_OK: success";
    case HWYATTN_INVALID_ARGUMENT: return "HWYATTN_INVALID_ARGUMENT: an argument is invalid";
    case HWYATTN_UNSUPPORTED: return "HWYATTN_UNSUPPORTED: valid, but not supported by this build";
    case HWYATTN_OUT_OF_MEMORY: return "HWYATTN_OUT_OF_MEMORY: memory allocation failed";
    case HWYATTN_INTERNAL_ERROR: return "HWYATTN_INTERNAL_ERROR: a bug in hwyattn";
  }
  return "unknown hwyattn_status";
}

const char* hwyattn_last_error(void) { return hwyattn::LastError(); }

const char* hwyattn_simd_target(void) { return hwyattn::KernelTargetName(); }

hwyattn_status hwyattn_set_num_threads(int n) {
  if (n < 0)
    return Fail(HWYATTN_INVALID_ARGUMENT, "n: %d threads; must be >= 0 (0 = all cores)", n);
  // A runaway count would make the OpenMP runtime try to start that many
  // threads at the next large call, and libgomp aborts the process when
  // thread creation fails.
  if (n > hwyattn::kMaxThreads) {
    return Fail(HWYATTN_UNSUPPORTED, "n: %d threads; at most %d are supported", n,
                hwyattn::kMaxThreads);
  }
  hwyattn::SetNumThreads(n);
  return HWYATTN_OK;
}

int hwyattn_get_num_threads(void) { return hwyattn::NumThreads(); }

hwyattn_status hwyattn_sdpa_options_copy(hwyattn_sdpa_options* dst,
                                         const hwyattn_sdpa_options* src) {
  return hwyattn::ReadSdpaOptions(src, dst);
}

hwyattn_status hwyattn_tensor_contiguous(hwyattn_tensor* t, void* data, hwyattn_dtype dtype,
                                         int32_t rank, const int64_t* shape) {
  if (t == nullptr) return Fail(HWYATTN_INVALID_ARGUMENT, "t is NULL");
  int32_t raw_dtype;  // any int may sit in a C enum: compare the bits
  static_assert(sizeof(raw_dtype) == sizeof(dtype), "enum layout");
  memcpy(&raw_dtype, &dtype, sizeof(raw_dtype));
  if (!hwyattn::IsDtype(raw_dtype)) {
    return Fail(HWYATTN_INVALID_ARGUMENT, "dtype is %d, which is not an hwyattn_dtype",
                static_cast<int>(raw_dtype));
  }
  int64_t count;
  const hwyattn_status s = hwyattn::ValidateShape("shape", rank, shape, &count);
  if (s != HWYATTN_OK) return s;
  memset(t, 0, sizeof(*t));
  t->data = data;
  t->dtype = dtype;
  t->rank = rank;
  int64_t stride = 1;
  for (int i = rank - 1; i >= 0; --i) {
    t->shape[i] = shape[i];
    t->stride[i] = stride;
    stride *= shape[i];  // cannot overflow: the product was checked
  }
  return HWYATTN_OK;
}

void hwyattn_sdpa_options_init_sized(hwyattn_sdpa_options* opts, size_t size) {
  hwyattn::InitStruct(opts, size);
}

// The 0.1 symbol (the parentheses keep the header's macro from expanding).
void(hwyattn_sdpa_options_init)(hwyattn_sdpa_options* opts) {
  hwyattn::InitStruct(opts, sizeof(hwyattn::SdpaOptions01));
}

void hwyattn_parallel_init_sized(hwyattn_parallel* p, size_t size) {
  hwyattn::InitStruct(p, size);
  if (p != nullptr && size >= offsetof(hwyattn_parallel, num_workers) + sizeof(p->num_workers)) {
    p->num_workers = 1;
  }
}

hwyattn_status hwyattn_sdpa(const hwyattn_tensor* q, const hwyattn_tensor* k,
                            const hwyattn_tensor* v, hwyattn_tensor* out,
                            const hwyattn_sdpa_options* opts) {
  return hwyattn::Guarded(__func__, [&]() -> hwyattn_status {
    hwyattn::SdpaProblem problem;
    const hwyattn_status s = hwyattn::ValidateSdpa(q, k, v, out, opts, &problem);
    if (s != HWYATTN_OK) return s;
    const hwyattn_status r = hwyattn::RunSdpa(problem);
    if (r == HWYATTN_OUT_OF_MEMORY) {
      return Fail(r,
                  "hwyattn_sdpa: could not allocate packed operands and scratch for "
                  "B=%lld Hkv=%lld Lk=%lld D=%lld Dv=%lld",
                  static_cast<long long>(problem.batch), static_cast<long long>(problem.kv_heads),
                  static_cast<long long>(problem.kv_len), static_cast<long long>(problem.head_dim),
                  static_cast<long long>(problem.value_dim));
    }
    return r;
  });
}

hwyattn_status hwyattn_merge_states(int32_t n, const hwyattn_tensor* const* outs,
                                    const hwyattn_tensor* const* lses, const float* sinks,
                                    hwyattn_tensor* out, hwyattn_tensor* lse_out) {
  return hwyattn::Guarded(__func__, [&]() -> hwyattn_status {
    hwyattn::MergeProblem problem;
    const hwyattn_status s = hwyattn::ValidateMerge(n, outs, lses, sinks, out, lse_out, &problem);
    if (s != HWYATTN_OK) return s;
    hwyattn::RunMerge(problem);  // allocates nothing
    return HWYATTN_OK;
  });
}

void hwyattn_mha_config_init_sized(hwyattn_mha_config* cfg, size_t size) {
  hwyattn::InitStruct(cfg, size);
}

void(hwyattn_mha_config_init)(hwyattn_mha_config* cfg) {
  hwyattn::InitStruct(cfg, sizeof(hwyattn::MhaConfig01));
}

hwyattn_status hwyattn_mha_create(const hwyattn_mha_config* cfg, const hwyattn_mha_weights* w,
                                  hwyattn_mha** out) {
  return hwyattn::Guarded(__func__, [&]() -> hwyattn_status {
    if (out == nullptr) return Fail(HWYATTN_INVALID_ARGUMENT, "out is NULL");
    hwyattn::MhaConfig config;
    const hwyattn_status s = hwyattn::ValidateMhaConfig(cfg, w, &config);
    if (s != HWYATTN_OK) return s;
    hwyattn_mha* m = new (std::nothrow) hwyattn_mha;
    if (m == nullptr) return Fail(HWYATTN_OUT_OF_MEMORY, "hwyattn_mha_create: out of memory");
    if (m->layer.Init(config, *w) != HWYATTN_OK) {
      delete m;
      return Fail(HWYATTN_OUT_OF_MEMORY,
                  "hwyattn_mha_create: could not allocate the packed "
                  "weights");
    }
    *out = m;
    return HWYATTN_OK;
  });
}

void hwyattn_mha_destroy(hwyattn_mha* m) { delete m; }

hwyattn_status hwyattn_mha_forward(const hwyattn_mha* m, const hwyattn_tensor* query,
                                   const hwyattn_tensor* key, const hwyattn_tensor* value,
                                   hwyattn_tensor* out, const hwyattn_sdpa_options* opts) {
  return hwyattn::Guarded(__func__, [&]() -> hwyattn_status {
    if (m == nullptr) return Fail(HWYATTN_INVALID_ARGUMENT, "m is NULL");
    hwyattn::MhaCall call;
    const hwyattn_status s =
        hwyattn::ValidateMhaForward(m->layer.config(), query, key, value, out, opts, &call);
    if (s != HWYATTN_OK) return s;
    const hwyattn_status r = m->layer.Forward(call);
    if (r == HWYATTN_OUT_OF_MEMORY) {
      return Fail(r, "hwyattn_mha_forward: could not allocate the activations and scratch");
    }
    return r;
  });
}

void hwyattn_kv_cache_init_sized(hwyattn_kv_cache* c, size_t size) { hwyattn::InitStruct(c, size); }

void hwyattn_kv_batch_init_sized(hwyattn_kv_batch* b, size_t size) { hwyattn::InitStruct(b, size); }

hwyattn_status hwyattn_kv_attention(const hwyattn_tensor* q, const hwyattn_kv_cache* cache,
                                    const hwyattn_kv_batch* batch, hwyattn_tensor* out,
                                    const hwyattn_sdpa_options* opts) {
  return hwyattn::Guarded(__func__, [&]() -> hwyattn_status {
    hwyattn::KvAttentionProblem problem;
    const hwyattn_status s = hwyattn::ValidateKvAttention(q, cache, batch, out, opts, &problem);
    if (s != HWYATTN_OK) return s;
    const hwyattn_status r = hwyattn::RunKvAttention(problem);
    if (r == HWYATTN_OUT_OF_MEMORY) {
      return Fail(r,
                  "hwyattn_kv_attention: could not allocate the scratch of %d sequences "
                  "(Hkv=%lld D=%lld Dv=%lld: decode partials, packed K/V of prefill rows)",
                  static_cast<int>(problem.num_seqs),
                  static_cast<long long>(problem.cache.kv_heads),
                  static_cast<long long>(problem.cache.head_dim),
                  static_cast<long long>(problem.cache.value_dim));
    }
    return r;
  });
}

hwyattn_status hwyattn_kv_cache_write(const hwyattn_kv_cache* cache, const hwyattn_tensor* k_new,
                                      const hwyattn_tensor* v_new, const int64_t* slot,
                                      const hwyattn_sdpa_options* opts) {
  return hwyattn::Guarded(__func__, [&]() -> hwyattn_status {
    hwyattn::KvWriteProblem problem;
    const hwyattn_status s = hwyattn::ValidateKvWrite(cache, k_new, v_new, slot, opts, &problem);
    if (s != HWYATTN_OK) return s;
    const hwyattn_status r = hwyattn::RunKvCacheWrite(problem);
    if (r == HWYATTN_OUT_OF_MEMORY) {
      return Fail(r, "hwyattn_kv_cache_write: could not allocate the per-worker row buffers");
    }
    return r;
  });
}

}  // extern "C"
