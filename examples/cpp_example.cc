// SPDX-License-Identifier: Apache-2.0
//
// cpp_example.cc: hwyattn from C++ through the header-only binding
// hwyattn.hpp. The same problem as sdpa_example.c (three tokens, one head of
// dimension 2, scale ln 2, so the softmax weights are powers of two and the
// results can be checked by hand; see that file for the arithmetic), then
// the two error styles and a multi-head attention module.
//
// Build against an installed hwyattn:
//   c++ -std=c++17 cpp_example.cc $(pkg-config --cflags --libs hwyattn) -o cpp_example
// or with CMake: find_package(hwyattn CONFIG REQUIRED) and link hwyattn::hwyattn.
//
// Exits non-zero if a result differs from the hand-computed one or an error
// is not reported as documented. Expected output (the target depends on the CPU):
//   hwyattn 0.4.0, SIMD target: AVX3
//   bidirectional: (3.0000, 4.0000) (3.4000, 4.4000) (3.5000, 4.5000)
//   causal:        (1.0000, 2.0000) (2.3333, 3.3333) (3.5000, 4.5000)
//   error (exception): k: head_dim (shape[3]) is 1 but q's head_dim is 2
//   error (Result): scale is 0: an explicit zero is rejected. ...
//   module: out[0] = (0.8446, 0.6667)
#include <hwyattn.hpp>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

namespace {

bool Near(const std::vector<float>& got, const std::vector<float>& want) {
  for (size_t i = 0; i < want.size(); ++i) {
    if (std::fabs(got[i] - want[i]) > 1e-4f) return false;
  }
  return got.size() == want.size();
}

void Print(const char* label, const std::vector<float>& out) {
  std::printf("%-15s", label);
  for (size_t i = 0; i + 1 < out.size(); i += 2) std::printf(" (%.4f, %.4f)", out[i], out[i + 1]);
  std::printf("\n");
}

}  // namespace

int main() {
  if (!hwyattn::abi_compatible()) {
    std::fprintf(stderr, "libhwyattn's ABI %u is not this header's\n", hwyattn::abi_version());
    return 1;
  }
  std::printf("hwyattn %s, SIMD target: %s\n", hwyattn::version(), hwyattn::simd_target());

  // Tokens x0 = (1, 0), x1 = (0, 1), x2 = (1, 1) are the queries and the keys.
  const std::vector<float> x = {1, 0, 0, 1, 1, 1};
  const std::vector<float> v = {1, 2, 3, 4, 5, 6};
  std::vector<float> out(6);
  const hwyattn::ConstTensorView tx(x, {1, 1, 3, 2}), tv(v, {1, 1, 3, 2});  // [B, H, L, D]
  const hwyattn::TensorView to(out, {1, 1, 3, 2});
  const float ln2 = 0.69314718f;

  // 1. Throwing style: a failure is an hwyattn::Error (a std::runtime_error).
  try {
    hwyattn::sdpa(tx, tx, tv, to, hwyattn::SdpaOptions().scale(ln2));
    Print("bidirectional:", out);
    if (!Near(out, {3.0f, 4.0f, 3.4f, 4.4f, 3.5f, 4.5f})) return 1;
    hwyattn::sdpa(tx, tx, tv, to,
                  hwyattn::SdpaOptions().scale(ln2).causal(hwyattn::Causal::kTopLeft));
    Print("causal:", out);
    if (!Near(out, {1.0f, 2.0f, 7.0f / 3, 10.0f / 3, 3.5f, 4.5f})) return 1;

    // A key of head_dim 1 against queries of head_dim 2: the message names
    // the argument and the values.
    hwyattn::sdpa(tx, hwyattn::ConstTensorView(x, {1, 1, 6, 1}), tv, to);
    return 1;  // not reached
  } catch (const hwyattn::Error& e) {
    std::printf("error (exception): %s\n", e.what());
    if (e.status() != HWYATTN_INVALID_ARGUMENT || std::string(e.what()).rfind("k:", 0) != 0) {
      return 1;
    }
  }

  // 2. Result style: try_* functions return the Error instead of throwing.
  //    An explicit scale of 0 is refused (PyTorch's 0 means uniform weights;
  //    the C ABI would read it as the default 1/sqrt(D)); leave it unset for
  //    the default.
  const hwyattn::Result<void> r =
      hwyattn::try_sdpa(tx, tx, tv, to, hwyattn::SdpaOptions().scale(0.0f));
  if (r.ok()) return 1;
  std::printf("error (Result): %.54s...\n", r.error().what());

  // 3. A multi-head attention module (2 heads of 1 dimension over the same
  //    tokens, identity projections): RAII, move-only, freed at scope exit.
  const std::vector<float> eye = {1, 0, 0, 1};
  hwyattn::MhaConfig cfg;
  cfg.embed_dim = 2;
  cfg.num_heads = 2;
  hwyattn::MhaWeights w = {};
  w.w_q = w.w_k = w.w_v = w.w_o = eye.data();
  hwyattn::Result<hwyattn::MultiheadAttention> module =
      hwyattn::MultiheadAttention::try_create(cfg, w);
  if (!module) {
    std::fprintf(stderr, "%s\n", module.error().what());
    return 1;
  }
  std::vector<float> mha_out(6);
  // Self-attention over [B, L, E] = [1, 3, 2], scale 1: head 0 sees the first
  // coordinate, head 1 the second.
  module->forward(hwyattn::ConstTensorView(x, {1, 3, 2}), hwyattn::TensorView(mha_out, {1, 3, 2}),
                  hwyattn::SdpaOptions().scale(1.0f));
  // Token x0 = (1, 0). Head 0: scores (1, 0, 1) -> weights (e, 1, e)/(2e + 1)
  // over the values' first coordinates (1, 0, 1): 2e / (2e + 1) = 0.8446.
  // Head 1: scores (0, 0, 0) -> uniform over (0, 1, 1): 2/3.
  const float e = std::exp(1.0f);
  std::printf("module: out[0] = (%.4f, %.4f)\n", mha_out[0], mha_out[1]);
  if (std::fabs(mha_out[0] - 2 * e / (2 * e + 1)) > 1e-4f) return 1;
  if (std::fabs(mha_out[1] - 2.0f / 3) > 1e-4f) return 1;
  return 0;
}
