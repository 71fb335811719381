// SPDX-License-Identifier: Apache-2.0
//
// A replacement of the global operator new for the tests that watch C++
// heap allocations (tests/oom_test.cc, tests/mpi/mpi_oom_test.cc): it counts
// every allocation of the process while counting is on, and fails the
// calling thread's allocations after a budget (std::bad_alloc; the nothrow
// forms return null). Link new_hook.cc into the test. Not under sanitizers,
// whose runtimes bring their own operator new (ThreadSanitizer's clashes at
// link time): there kNewHooked is false and the functions do nothing.
#ifndef HWYATTN_TESTS_NEW_HOOK_H_
#define HWYATTN_TESTS_NEW_HOOK_H_

#include <stdint.h>

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define HWYATTN_NEW_HOOKED 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || \
    __has_feature(memory_sanitizer)
#define HWYATTN_NEW_HOOKED 0
#endif
#endif
#ifndef HWYATTN_NEW_HOOKED
#define HWYATTN_NEW_HOOKED 1
#endif

namespace hwyattn_test {

constexpr bool kNewHooked = HWYATTN_NEW_HOOKED != 0;

// Starts (from 0) or stops counting every thread's operator new calls.
void CountNew(bool on);
// The calls counted since counting last started.
int64_t NewCount();

// The calling thread's next n operator new calls succeed and every later
// one fails, until FailNewAfter(-1) (the default: no limit).
void FailNewAfter(int64_t n);

}  // namespace hwyattn_test

#endif  // HWYATTN_TESTS_NEW_HOOK_H_
