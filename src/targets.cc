// SPDX-License-Identifier: Apache-2.0
#include "src/targets.h"

#include <stdlib.h>
#include <strings.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

#include "hwy/targets.h"

namespace hwyattn {
namespace {

// Parses HWYATTN_TARGET ("AVX2", "sse4", ...) into a mask of the targets no
// better than it. Unset or unknown names impose no cap (documented in
// hwyattn.h: an unknown name is ignored rather than failing every call).
int64_t CapFromEnvironment() {
  const char* name = getenv("HWYATTN_TARGET");
  if (name == nullptr || name[0] == '\0') return ~int64_t{0};
  for (int bit = 0; bit < 63; ++bit) {
    const int64_t target = int64_t{1} << bit;
    if (strcasecmp(name, hwy::TargetName(target)) == 0) {
      return ~(target - 1);  // this target and every worse (higher) bit
    }
  }
  return ~int64_t{0};
}

StreamPrefetch PrefetchLevelFromCpu() {
#if defined(__x86_64__) || defined(__i386__)
  unsigned eax, ebx, ecx, edx;
  if (__get_cpuid(0, &eax, &ebx, &ecx, &edx) == 0) return StreamPrefetch::kL1;
  char vendor[12];
  memcpy(vendor, &ebx, 4);
  memcpy(vendor + 4, &edx, 4);
  memcpy(vendor + 8, &ecx, 4);
  if (memcmp(vendor, "AuthenticAMD", 12) != 0) return StreamPrefetch::kL1;
  if (__get_cpuid(1, &eax, &ebx, &ecx, &edx) == 0) return StreamPrefetch::kL1;
  const unsigned family = ((eax >> 8) & 0xF) + ((eax >> 20) & 0xFF);
  return family == 0x19 ? StreamPrefetch::kL2 : StreamPrefetch::kL1;
#else
  return StreamPrefetch::kL1;
#endif
}

// CPUID.(EAX=7, ECX=1):EAX bit 5: AVX512_BF16 (with the AVX-512 state the
// OS enables, which hwy::SupportedTargets already checked for AVX3).
bool CpuHasAvx512Bf16() {
#if defined(__x86_64__)
  unsigned eax, ebx, ecx, edx;
  if (__get_cpuid_count(7, 1, &eax, &ebx, &ecx, &edx) == 0) return false;
  return (eax >> 5) & 1u;
#else
  return false;
#endif
}

// HWYATTN_TARGET names a Highway target (which is then the cap: no bf16 dot
// products above it), or is unset, "AVX3_BF16" or unknown (no cap).
bool CapAllowsBf16Dot() {
  const char* name = getenv("HWYATTN_TARGET");
  if (name == nullptr || name[0] == '\0' || strcasecmp(name, kBf16DotTargetName) == 0) return true;
  for (int bit = 0; bit < 63; ++bit) {
    if (strcasecmp(name, hwy::TargetName(int64_t{1} << bit)) == 0) return false;
  }
  return true;
}

}  // namespace

bool Bf16DotAvailable() {
  static const bool available =
      (AllowedTargets() & HWY_AVX3) != 0 && CpuHasAvx512Bf16() && CapAllowsBf16Dot();
  return available;
}

bool Bf16DotFor(int64_t target) { return target == HWY_AVX3 && Bf16DotAvailable(); }

StreamPrefetch StreamPrefetchLevel() {
  static const StreamPrefetch level = PrefetchLevelFromCpu();
  return level;
}

int64_t AllowedTargets() {
  static const int64_t allowed = hwy::SupportedTargets() & CapFromEnvironment();
  return allowed;
}

const char* TargetName(int64_t target) { return hwy::TargetName(target); }

}  // namespace hwyattn
