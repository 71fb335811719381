// SPDX-License-Identifier: Apache-2.0

#include "tests/new_hook.h"

#include <stdlib.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <new>

namespace {
std::atomic<bool> g_counting{false};
std::atomic<int64_t> g_allocations{0};
thread_local int64_t t_budget = -1;  // < 0: no limit

#if HWYATTN_NEW_HOOKED
void* Allocate(size_t bytes, size_t align) {
  if (g_counting.load(std::memory_order_relaxed)) g_allocations.fetch_add(1);
  if (t_budget == 0) throw std::bad_alloc();
  if (t_budget > 0) --t_budget;
  void* p = nullptr;
  if (posix_memalign(&p, std::max(align, sizeof(void*)), bytes == 0 ? 1 : bytes) != 0) {
    throw std::bad_alloc();
  }
  return p;
}

void* AllocateOrNull(size_t bytes, size_t align) noexcept {
  try {
    return Allocate(bytes, align);
  } catch (const std::bad_alloc&) {
    return nullptr;
  }
}

constexpr size_t kDefaultAlign = alignof(std::max_align_t);
#endif  // HWYATTN_NEW_HOOKED
}  // namespace

namespace hwyattn_test {

void CountNew(bool on) {
  if (on) g_allocations = 0;
  g_counting = on;
}

int64_t NewCount() { return g_allocations.load(); }

void FailNewAfter(int64_t n) { t_budget = n; }

}  // namespace hwyattn_test

#if HWYATTN_NEW_HOOKED

// Every form, so that no allocation reaches another allocator's operator new
// and comes back through this free() (sanitizers check the pairing).
void* operator new(size_t n) { return Allocate(n, kDefaultAlign); }
void* operator new[](size_t n) { return Allocate(n, kDefaultAlign); }
void* operator new(size_t n, std::align_val_t a) { return Allocate(n, static_cast<size_t>(a)); }
void* operator new[](size_t n, std::align_val_t a) { return Allocate(n, static_cast<size_t>(a)); }
void* operator new(size_t n, const std::nothrow_t&) noexcept {
  return AllocateOrNull(n, kDefaultAlign);
}
void* operator new[](size_t n, const std::nothrow_t&) noexcept {
  return AllocateOrNull(n, kDefaultAlign);
}
void* operator new(size_t n, std::align_val_t a, const std::nothrow_t&) noexcept {
  return AllocateOrNull(n, static_cast<size_t>(a));
}
void* operator new[](size_t n, std::align_val_t a, const std::nothrow_t&) noexcept {
  return AllocateOrNull(n, static_cast<size_t>(a));
}
void operator delete(void* p) noexcept { free(p); }
void operator delete[](void* p) noexcept { free(p); }
void operator delete(void* p, size_t) noexcept { free(p); }
void operator delete[](void* p, size_t) noexcept { free(p); }
void operator delete(void* p, std::align_val_t) noexcept { free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { free(p); }
void operator delete(void* p, size_t, std::align_val_t) noexcept { free(p); }
void operator delete[](void* p, size_t, std::align_val_t) noexcept { free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { free(p); }
void operator delete(void* p, std::align_val_t, const std::nothrow_t&) noexcept { free(p); }
void operator delete[](void* p, std::align_val_t, const std::nothrow_t&) noexcept { free(p); }
#endif  // HWYATTN_NEW_HOOKED
