// SPDX-License-Identifier: Apache-2.0
//
// Proves that HWYATTN_TARGET caps the SIMD target. ctest runs every suite
// once per target with HWYATTN_TARGET set (see CMakeLists.txt); without this
// test a broken cap would silently run the best target four times and the
// per-target runs would prove nothing.

#include <cctype>
#include <cstdlib>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#if defined(__x86_64__)
#include <cpuid.h>
#endif
#if defined(__aarch64__) && defined(__linux__)
#include <sys/auxv.h>
#endif
#include "hwy/targets.h"
#include "hwyattn.h"

namespace {

std::string Upper(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

// Every name hwyattn_simd_target() may give (Highway's target names, and
// those with "_BF16": AVX3 with the AVX512_BF16 dot products, NEON and the
// SVE targets with the BFDOT ones of precision = BF16). PPC9, PPC10, Z14 and
// Z15 exist from Highway 1.1 on (built with -DHWYATTN_HIGHWAY).
const char* const kKnownTargets[] = {
    "AVX3_BF16",   "AVX3_ZEN4", "AVX3_DL",      "AVX3",      "AVX2",          "SSE4",     "SSSE3",
    "EMU128",      "SCALAR",    "NEON",         "NEON_BF16", "SVE",           "SVE_BF16", "SVE2",
    "SVE2_BF16",   "SVE_256",   "SVE_256_BF16", "SVE2_128",  "SVE2_128_BF16", "RVV",      "WASM",
    "WASM_EMU256", "PPC8",      "PPC9",         "PPC10",     "Z14",           "Z15"};

bool IsKnown(const std::string& name) {
  for (const char* known : kKnownTargets) {
    if (name == known) return true;
  }
  return false;
}

// The Highway bit of a SIMD target name of this architecture (not the
// portable fallback), or 0 if the name is not one.
int64_t SimdTargetBit(const std::string& name) {
  for (int bit = 0; bit < 61; ++bit) {  // below EMU128 (61) and SCALAR (62)
    const int64_t target = int64_t{1} << bit;
    if ((HWY_TARGETS & target) != 0 && name == hwy::TargetName(target)) return target;
  }
  return 0;
}

// The targets with bf16 dot-product tiles: AVX3 (x86-64), NEON and the SVE
// targets (arm64).
#if HWY_ARCH_X86_64
constexpr int64_t kBf16DotBits = HWY_AVX3;
#elif HWY_ARCH_ARM_A64
constexpr int64_t kBf16DotBits = HWY_NEON | HWY_SVE | HWY_SVE2 | HWY_SVE_256 | HWY_SVE2_128;
#else
constexpr int64_t kBf16DotBits = 0;
#endif

// Whether the CPU has the bf16 dot products of `target`, asked directly:
// AVX512_BF16 (CPUID.(7, 1):EAX bit 5) on x86-64; on arm64 the BF16 hwcap
// for NEON, SVEBF16 for the SVE targets.
bool CpuHasBf16Dot(int64_t target) {
  (void)target;
#if HWY_ARCH_X86_64
  unsigned eax, ebx, ecx, edx;
  if (__get_cpuid_count(7, 1, &eax, &ebx, &ecx, &edx) == 0) return false;
  return (eax >> 5) & 1u;
#elif defined(__aarch64__) && defined(__linux__)
  const unsigned long hwcap2 = target == HWY_NEON ? 1ul << 14   // HWCAP2_BF16
                                                  : 1ul << 12;  // HWCAP2_SVEBF16
  return (getauxval(AT_HWCAP2) & hwcap2) != 0;
#else
  return false;
#endif
}

// The name the library gives `target` with its bf16 dot products on.
std::string Bf16DotName(int64_t target) { return std::string(hwy::TargetName(target)) + "_BF16"; }

// The best target this build compiled that the CPU supports, as Highway sees
// it (the SVE targets' vector-length rule aside: the legs that would meet it
// set HWYATTN_TEST_EXPECT_TARGET).
int64_t BestTarget() {
  for (int b = 0; b < 63; ++b) {  // up to HWY_SCALAR (bit 62)
    const int64_t t = int64_t{1} << b;
    if ((HWY_TARGETS & hwy::SupportedTargets() & t) != 0) return t;
  }
  return HWY_SCALAR;
}

// Whether the library runs the bf16 dot products where this target is
// the best allowed: it has such tiles, is compiled, and the CPU has them.
bool Bf16DotOn(int64_t best) {
  return (best & kBf16DotBits & HWY_TARGETS) != 0 && CpuHasBf16Dot(best);
}

// The name the library gives `target` when it is the best allowed one.
std::string NameOf(int64_t target) {
  return Bf16DotOn(target) ? Bf16DotName(target) : hwy::TargetName(target);
}

TEST(TargetTest, HonoursHwyattnTarget) {
  // The library reads HWYATTN_TARGET at its first call, this one.
  testing::internal::CaptureStderr();
  const char* target = hwyattn_simd_target();
  const std::string first_call_stderr = testing::internal::GetCapturedStderr();
  ASSERT_NE(target, nullptr);
  const std::string got = target;
  EXPECT_TRUE(IsKnown(got)) << "unknown target name \"" << got << "\"";
  // The name is chosen once: later calls return the same string.
  EXPECT_EQ(std::string(hwyattn_simd_target()), got);

  const char* requested_env = std::getenv("HWYATTN_TARGET");
  if (requested_env == nullptr || *requested_env == '\0') {
    GTEST_LOG_(INFO) << "HWYATTN_TARGET unset; running on " << got;
    // Set by whoever knows the CPU independently of Highway: scripts/cross_test.sh
    // for each QEMU CPU it emulates (NEON on a Cortex-A72, ...).
    const char* expect = std::getenv("HWYATTN_TEST_EXPECT_TARGET");
    if (expect != nullptr && *expect != '\0') {
      EXPECT_EQ(got, Upper(expect)) << "the library's choice on this CPU";
    } else if (Bf16DotOn(BestTarget())) {
      EXPECT_EQ(got, NameOf(BestTarget())) << "the CPU has the bf16 dot products";
    }
    return;
  }
  const std::string requested = Upper(requested_env);
  // "<target>_BF16": that target with its dot products, if the CPU has them.
  const std::string suffix = "_BF16";
  if (requested.size() > suffix.size() &&
      requested.compare(requested.size() - suffix.size(), suffix.size(), suffix) == 0) {
    const int64_t bit = SimdTargetBit(requested.substr(0, requested.size() - suffix.size()));
    if (bit != 0 && (bit & kBf16DotBits) != 0) {
      if ((hwy::SupportedTargets() & bit) == 0) {
        GTEST_SKIP() << "this CPU does not support " << requested << "; the library chose " << got;
      }
      EXPECT_EQ(got, NameOf(bit)) << "HWYATTN_TARGET=" << requested_env;
      return;
    }
  }
  // CMakeLists.txt registers only the targets /proc/cpuinfo showed at
  // configure time. If the tests run on another machine than the one that
  // configured them, a requested target may be missing here: the library then
  // falls back to a lower one, which is correct, and this test skips. The CPU
  // check asks Highway directly, independently of the library.
  const int64_t bit = SimdTargetBit(requested);
  if (bit == 0 && requested != "EMU128" && requested != "SCALAR") {
    // Not a target of this build (e.g. NEON on x86): ignored, so the choice
    // is the best target the CPU supports, as Highway sees it; the library
    // said so on stderr at its first call, which this test's first line made.
    const int64_t best_bit = BestTarget();
    const std::string best = NameOf(best_bit);
    EXPECT_EQ(got, best) << "HWYATTN_TARGET=" << requested_env << " is no target of this build";
    EXPECT_NE(first_call_stderr.find(std::string("HWYATTN_TARGET=") + requested_env),
              std::string::npos)
        << "stderr at the first call: " << first_call_stderr;
    return;
  }
  if (bit != 0 && (hwy::SupportedTargets() & bit) == 0) {
    GTEST_SKIP() << "this CPU does not support " << requested << "; the library chose " << got;
  }
  std::string want = requested;
#if HWY_BROKEN_EMU128
  // Highway disables EMU128 on compilers with GCC bug 106322 (GCC < 12.3)
  // and compiles HWY_SCALAR as the portable fallback instead. Capping at
  // EMU128 then correctly lands on SCALAR, the next lower target.
  if (requested == "EMU128") want = "SCALAR";
#endif
  EXPECT_EQ(Upper(got), want) << "HWYATTN_TARGET=" << requested_env
                              << " did not cap the SIMD target";
}

// The kernels really run on the reported target: a call succeeds after the
// target was reported, and the target does not change because of it.
TEST(TargetTest, StableAcrossCalls) {
  const std::string before = hwyattn_simd_target();
  float q[2] = {1.0f, 0.5f}, k[2] = {0.25f, -1.0f}, v[2] = {2.0f, 3.0f}, o[2] = {0, 0};
  const int64_t shape[4] = {1, 1, 1, 2};
  hwyattn_tensor tq, tk, tv, to;
  ASSERT_EQ(hwyattn_tensor_contiguous(&tq, q, HWYATTN_F32, 4, shape), HWYATTN_OK);
  ASSERT_EQ(hwyattn_tensor_contiguous(&tk, k, HWYATTN_F32, 4, shape), HWYATTN_OK);
  ASSERT_EQ(hwyattn_tensor_contiguous(&tv, v, HWYATTN_F32, 4, shape), HWYATTN_OK);
  ASSERT_EQ(hwyattn_tensor_contiguous(&to, o, HWYATTN_F32, 4, shape), HWYATTN_OK);
  ASSERT_EQ(hwyattn_sdpa(&tq, &tk, &tv, &to, nullptr), HWYATTN_OK) << hwyattn_last_error();
  // One key: its weight is 1 whatever the score, so out = v exactly.
  EXPECT_EQ(o[0], 2.0f);
  EXPECT_EQ(o[1], 3.0f);
  EXPECT_EQ(std::string(hwyattn_simd_target()), before);
}

// HWYATTN_TUNING is read at the first decode a call plans (the stream
// prefetch level is a tuning field): a name that is no tuning is ignored,
// with one line on stderr, and the call still answers; a known name or none
// prints nothing. The ctest leg target_test.unknown_tuning sets a bad name.
TEST(TargetTest, HwyattnTuningIsReadOnceAndUnknownNamesReported) {
  const int64_t lk = 1024, d = 64;
  std::vector<float> q(d, 0.0f), k(lk * d), v(lk * d, 0.0f), out(d, -1.0f);
  for (int64_t j = 0; j < lk; ++j) {
    for (int64_t i = 0; i < d; ++i) k[j * d + i] = static_cast<float>((j + i) % 7) * 0.125f;
    v[j * d] = static_cast<float>(j % 2);  // mean 0.5 under the uniform weights of q = 0
  }
  const int64_t qs[4] = {1, 1, 1, d}, ks[4] = {1, 1, lk, d};
  hwyattn_tensor tq, tk, tv, to;
  ASSERT_EQ(hwyattn_tensor_contiguous(&tq, q.data(), HWYATTN_F32, 4, qs), HWYATTN_OK);
  ASSERT_EQ(hwyattn_tensor_contiguous(&tk, k.data(), HWYATTN_F32, 4, ks), HWYATTN_OK);
  ASSERT_EQ(hwyattn_tensor_contiguous(&tv, v.data(), HWYATTN_F32, 4, ks), HWYATTN_OK);
  ASSERT_EQ(hwyattn_tensor_contiguous(&to, out.data(), HWYATTN_F32, 4, qs), HWYATTN_OK);
  testing::internal::CaptureStderr();
  const hwyattn_status first = hwyattn_sdpa(&tq, &tk, &tv, &to, nullptr);
  const hwyattn_status second = hwyattn_sdpa(&tq, &tk, &tv, &to, nullptr);
  const std::string printed = testing::internal::GetCapturedStderr();
  ASSERT_EQ(first, HWYATTN_OK);
  ASSERT_EQ(second, HWYATTN_OK);
  EXPECT_NEAR(out[0], 0.5f, 1e-6f);
  EXPECT_EQ(out[1], 0.0f);
  const char* tuning = std::getenv("HWYATTN_TUNING");
  const std::string name = tuning != nullptr ? Upper(tuning) : "";
  const std::string line = std::string("HWYATTN_TUNING=") + (tuning != nullptr ? tuning : "");
  if (name.empty() || name == "ZEN4" || name == "DEFAULT") {
    EXPECT_EQ(printed.find("HWYATTN_TUNING"), std::string::npos) << printed;
  } else {
    const size_t at = printed.find(line);
    EXPECT_NE(at, std::string::npos) << "stderr: " << printed;
    EXPECT_EQ(printed.find(line, at + 1), std::string::npos) << "reported twice: " << printed;
  }
}

}  // namespace
