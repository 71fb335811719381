// SPDX-License-Identifier: Apache-2.0
#include "src/targets.h"

#include <stdio.h>
#include <stdlib.h>
#include <strings.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif
#if defined(__aarch64__) && defined(__linux__)
#include <sys/auxv.h>
#include <sys/prctl.h>
#endif

#include "hwy/detect_targets.h"
#include "hwy/targets.h"

namespace hwyattn {
namespace {

// The targets the kernels are compiled for: every foreach_target translation
// unit is built with the same definitions (CMakeLists.txt's
// HWYATTN_TARGET_DEFINITIONS), so HWY_TARGETS here is theirs.
constexpr int64_t kCompiledTargets = HWY_TARGETS;

// The targets whose kernels hold bf16 dot-product tiles, the name
// hwyattn_simd_target gives each with them on, and (arm64) the HWCAP2 bit
// that says the CPU has its instructions.
struct Bf16DotTarget {
  int64_t target;
  const char* name;
  unsigned long hwcap2;
};
#if HWY_ARCH_X86_64
constexpr Bf16DotTarget kBf16DotTargets[] = {{HWY_AVX3, "AVX3_BF16", 0}};
#elif HWY_ARCH_ARM_A64
constexpr unsigned long kHwcap2SveBf16 = 1ul << 12;  // HWCAP2_SVEBF16, asm/hwcap.h
constexpr unsigned long kHwcap2Bf16 = 1ul << 14;     // HWCAP2_BF16
constexpr Bf16DotTarget kBf16DotTargets[] = {{HWY_SVE2, "SVE2_BF16", kHwcap2SveBf16},
                                             {HWY_SVE, "SVE_BF16", kHwcap2SveBf16},
                                             {HWY_SVE_256, "SVE_256_BF16", kHwcap2SveBf16},
                                             {HWY_SVE2_128, "SVE2_128_BF16", kHwcap2SveBf16},
                                             {HWY_NEON, "NEON_BF16", kHwcap2Bf16}};
#else
constexpr Bf16DotTarget kBf16DotTargets[] = {{0, nullptr, 0}};  // none
#endif

const Bf16DotTarget* FindBf16DotTarget(int64_t target) {
  for (const Bf16DotTarget& t : kBf16DotTargets) {
    if (t.target == target && t.name != nullptr) return &t;
  }
  return nullptr;
}

// The names HWYATTN_TARGET accepts on this build, for the warning below.
void AppendAcceptedNames(char* out, size_t size) {
  size_t used = strlen(out);
  auto append = [&](const char* name) {
    const int n = snprintf(out + used, size - used, "%s%s", used == 0 ? "" : " ", name);
    if (n > 0)
      used = used + static_cast<size_t>(n) < size ? used + static_cast<size_t>(n) : size - 1;
  };
  for (const Bf16DotTarget& t : kBf16DotTargets) {
    if (t.name != nullptr && (kCompiledTargets & t.target) != 0) append(t.name);
  }
  for (int bit = 0; bit < 63; ++bit) {
    const int64_t target = int64_t{1} << bit;
    if ((kCompiledTargets & target) != 0 && target != HWY_EMU128 && target != HWY_SCALAR) {
      append(hwy::TargetName(target));
    }
  }
  append("EMU128");
  append("SCALAR");
}

// HWYATTN_TARGET, parsed: the targets no better than the one it names, and
// whether the dot products (bf16, and AVX512_VNNI's int8) stay on.
struct TargetCap {
  int64_t targets;
  bool dot_products;  // the bf16 dot products and AVX512_VNNI
};
constexpr TargetCap kNoCap = {~int64_t{0}, true};

// Parses HWYATTN_TARGET ("AVX2", "sse4", "NEON", "SVE_256_BF16", ...) into a
// TargetCap: a Highway name caps at that target without the bf16 dot
// products, a bf16 name (kBf16DotTargets) at its target with them. Accepted:
// the names of the targets this build compiled for this architecture, their
// bf16 names, and EMU128 or SCALAR (either: the portable fallback, whichever
// this compiler built). Unset means no cap. Anything else (a typo, another
// architecture's target such as NEON on x86) imposes no cap either, rather
// than failing every call, and is reported once on stderr, as libgomp
// reports an invalid OMP_* variable (documented in hwyattn.h).
TargetCap CapFromEnvironment() {
  const char* name = getenv("HWYATTN_TARGET");
  if (name == nullptr || name[0] == '\0') return kNoCap;
  if (strcasecmp(name, "EMU128") == 0 || strcasecmp(name, "SCALAR") == 0) {
    return {~(HWY_EMU128 - 1), false};  // the fallback, EMU128 or SCALAR (the worst bits)
  }
  for (int bit = 0; bit < 63; ++bit) {
    const int64_t target = int64_t{1} << bit;
    if ((kCompiledTargets & target) != 0 && strcasecmp(name, hwy::TargetName(target)) == 0) {
      return {~(target - 1), false};  // this target and every worse (higher) bit
    }
  }
  for (const Bf16DotTarget& t : kBf16DotTargets) {
    if (t.name != nullptr && (kCompiledTargets & t.target) != 0 && strcasecmp(name, t.name) == 0) {
      return {~(t.target - 1), true};
    }
  }
  char accepted[256] = "";
  AppendAcceptedNames(accepted, sizeof(accepted));
  fprintf(stderr, "hwyattn: HWYATTN_TARGET=%s names no target of this build (%s); ignored\n", name,
          accepted);
  return kNoCap;
}

constexpr Tuning kTunings[] = {{"zen4", StreamPrefetch::kL2, true},
                               {"default", StreamPrefetch::kL1, false}};
constexpr const Tuning& kDefaultTuning = kTunings[1];

// The CPU's row: AMD family 19h is "zen4", anything else "default".
const Tuning& TuningOfCpu() {
#if defined(__x86_64__) || defined(__i386__)
  unsigned eax, ebx, ecx, edx;
  if (__get_cpuid(0, &eax, &ebx, &ecx, &edx) == 0) return kDefaultTuning;
  char vendor[12];
  memcpy(vendor, &ebx, 4);
  memcpy(vendor + 4, &edx, 4);
  memcpy(vendor + 8, &ecx, 4);
  if (memcmp(vendor, "AuthenticAMD", 12) != 0) return kDefaultTuning;
  if (__get_cpuid(1, &eax, &ebx, &ecx, &edx) == 0) return kDefaultTuning;
  const unsigned family = ((eax >> 8) & 0xF) + ((eax >> 20) & 0xFF);
  return family == 0x19 ? kTunings[0] : kDefaultTuning;
#else
  return kDefaultTuning;
#endif
}

// HWYATTN_TUNING names a row; unset, the CPU's; an unknown name is reported
// once on stderr and ignored (as HWYATTN_TARGET).
const Tuning& TuningFromEnvironment() {
  const char* name = getenv("HWYATTN_TUNING");
  if (name == nullptr || name[0] == '\0') return TuningOfCpu();
  for (const Tuning& t : kTunings) {
    if (strcasecmp(name, t.name) == 0) return t;
  }
  fprintf(stderr, "hwyattn: HWYATTN_TUNING=%s names no tuning (zen4 default); ignored\n", name);
  return TuningOfCpu();
}

// Whether the CPU has the bf16 dot products of `t`. x86-64: CPUID.(EAX=7,
// ECX=1):EAX bit 5, AVX512_BF16 (with the AVX-512 state the OS enables, which
// hwy::SupportedTargets already checked for AVX3). arm64 (Linux): the hwcap
// of BFDOT for t's registers (NEON: BF16; SVE: SVEBF16).
bool CpuHasBf16Dot(const Bf16DotTarget& t) {
  (void)t;
#if defined(__x86_64__)
  unsigned eax, ebx, ecx, edx;
  if (__get_cpuid_count(7, 1, &eax, &ebx, &ecx, &edx) == 0) return false;
  return (eax >> 5) & 1u;
#elif defined(__aarch64__) && defined(__linux__)
  return (getauxval(AT_HWCAP2) & t.hwcap2) != 0;
#else
  return false;
#endif
}

// All targets, less the vector-length-agnostic SVE targets (whose kernels
// are built for kSveVlaFloatLanes floats) unless the hardware vector is that
// long. The length is the thread's (prctl: the same for every thread unless
// a program changes it, which Highway's dispatch does not support either).
int64_t VlaSveTargets() {
#if HWY_ARCH_ARM_A64 && defined(__linux__) && defined(PR_SVE_GET_VL)
  const int vl = prctl(PR_SVE_GET_VL);
  if (vl >= 0 &&
      static_cast<size_t>(vl & PR_SVE_VL_LEN_MASK) == kSveVlaFloatLanes * sizeof(float)) {
    return ~int64_t{0};
  }
#endif
  return ~(int64_t{HWY_SVE} | int64_t{HWY_SVE2});
}

// HWYATTN_TARGET's cap, read (and reported, if need be) once.
const TargetCap& Cap() {
  static const TargetCap cap = CapFromEnvironment();
  return cap;
}

// The allowed targets whose bf16 dot products run: compiled, the CPU has
// them, and the cap keeps them.
int64_t Bf16DotTargetsOn() {
  int64_t on = 0;
  if (!HWYATTN_BF16_DOT_COMPILED || !Cap().dot_products) return on;
  for (const Bf16DotTarget& t : kBf16DotTargets) {
    if (t.name != nullptr && (AllowedTargets() & kCompiledTargets & t.target) != 0 &&
        CpuHasBf16Dot(t)) {
      on |= t.target;
    }
  }
  return on;
}

// Whether the CPU has AVX512_VBMI: CPUID.(EAX=7, ECX=0):ECX bit 1 (the
// AVX-512 state: checked with AVX3 by hwy::SupportedTargets).
bool CpuHasVbmi() {
#if defined(__x86_64__)
  unsigned eax, ebx, ecx, edx;
  return __get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) != 0 && ((ecx >> 1) & 1u) != 0;
#else
  return false;
#endif
}

}  // namespace

bool Bf16DotFor(int64_t target, Bf16DotKernel kernel) {
  static const int64_t on = Bf16DotTargetsOn();
  static const bool vbmi = CpuHasVbmi();
  // arm64 has the prefill's tiles only.
  const bool has_kernel = HWY_ARCH_X86_64 || kernel == Bf16DotKernel::kPrefill;
  const bool tuned = kernel != Bf16DotKernel::kDecodeI8 || CpuTuning().i8_bf16_dot;
  const bool decode = kernel == Bf16DotKernel::kDecode || kernel == Bf16DotKernel::kDecodeI8;
  const bool instructions = !decode || vbmi;
  return has_kernel && tuned && instructions && (on & target) != 0;
}

bool Int8DotFor(int64_t target) {
  static const int64_t on = [] {
#if HWYATTN_BF16_DOT_COMPILED && defined(__x86_64__)
    // CPUID.(EAX=7, ECX=0):ECX bit 11, AVX512_VNNI (the AVX-512 state the
    // OS enables: hwy::SupportedTargets checked it for AVX3).
    unsigned eax, ebx, ecx, edx;
    if (Cap().dot_products && (AllowedTargets() & HWY_AVX3) != 0 &&
        __get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) != 0 && ((ecx >> 11) & 1u) != 0) {
      return int64_t{HWY_AVX3};
    }
#endif
    return int64_t{0};
  }();
  return (on & target) != 0;
}

const char* Bf16DotTargetName(int64_t target) {
  const Bf16DotTarget* t = FindBf16DotTarget(target);
  return t != nullptr ? t->name : nullptr;
}

const Tuning& CpuTuning() {
  static const Tuning& tuning = TuningFromEnvironment();
  return tuning;
}

int64_t AllowedTargets() {
  static const int64_t allowed = hwy::SupportedTargets() & Cap().targets & VlaSveTargets();
  return allowed;
}

const char* TargetName(int64_t target) { return hwy::TargetName(target); }

}  // namespace hwyattn
