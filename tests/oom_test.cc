// SPDX-License-Identifier: Apache-2.0
//
// Every allocation the library makes can fail cleanly: with the n-th
// allocation made to fail (src/scratch.h's test hook, reachable because this
// test links the static library), a call returns HWYATTN_OUT_OF_MEMORY with a
// message and leaves its outputs untouched, for n = 0, 1, 2, ... until the
// call needs no more allocations and succeeds. Each call runs on a fresh
// thread, whose scratch buffers start empty, so every allocation is reached.
#include <string.h>

#include <functional>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "hwyattn.h"
#include "src/scratch.h"

namespace {

// Runs `call` on a fresh thread with allocations failing after `allowed`.
hwyattn_status RunWithAllocationLimit(int64_t allowed, const std::function<hwyattn_status()>& call,
                                      std::string* error) {
  hwyattn_status status = HWYATTN_INTERNAL_ERROR;
  std::thread t([&] {
    hwyattn::FailAllocationsAfter(allowed);
    status = call();
    hwyattn::FailAllocationsAfter(-1);
    *error = hwyattn_last_error();
  });
  t.join();
  return status;
}

// Fails allocation 0, 1, ... until `call` succeeds; `output` must keep its
// bytes on every failure.
void ExpectCleanOutOfMemory(const std::function<hwyattn_status()>& call,
                            const std::vector<float>& output) {
  const std::vector<float> before = output;
  for (int64_t allowed = 0;; ++allowed) {
    ASSERT_LT(allowed, 64) << "the call never succeeded";
    std::string error;
    const hwyattn_status s = RunWithAllocationLimit(allowed, call, &error);
    if (s == HWYATTN_OK) {
      EXPECT_GT(allowed, 0) << "the call allocated nothing: the test is vacuous";
      return;
    }
    ASSERT_EQ(s, HWYATTN_OUT_OF_MEMORY) << "allocation " << allowed << ": " << error;
    EXPECT_FALSE(error.empty());
    ASSERT_EQ(memcmp(before.data(), output.data(), before.size() * sizeof(float)), 0)
        << "allocation " << allowed << " failed, yet the output was written";
  }
}

hwyattn_tensor Dense(float* data, std::vector<int64_t> shape) {
  hwyattn_tensor t;
  hwyattn_tensor_contiguous(&t, data, HWYATTN_F32, static_cast<int32_t>(shape.size()), shape.data());
  return t;
}

TEST(OutOfMemory, SdpaPrefillAndDecode) {
  for (int64_t q_len : {1, 100}) {  // the decode and the prefill kernel
    std::vector<float> q(2 * 4 * q_len * 32, 0.25f), k(2 * 2 * 300 * 32, 0.5f),
        v(2 * 2 * 300 * 32, 0.75f), out(q.size(), -7.0f);
    hwyattn_tensor tq = Dense(q.data(), {2, 4, q_len, 32}), tk = Dense(k.data(), {2, 2, 300, 32}),
                   tv = Dense(v.data(), {2, 2, 300, 32}), to = Dense(out.data(), {2, 4, q_len, 32});
    hwyattn_sdpa_options opts;
    hwyattn_sdpa_options_init(&opts);
    opts.causal = HWYATTN_CAUSAL_BOTTOM_RIGHT;  // also allocates the non-finite flags
    ExpectCleanOutOfMemory([&] { return hwyattn_sdpa(&tq, &tk, &tv, &to, &opts); }, out);
  }
}

TEST(OutOfMemory, MhaCreateAndForward) {
  const int64_t E = 32;
  std::vector<float> w(4 * E * E, 0.01f), x(2 * 9 * E, 0.5f), out(x.size(), -7.0f);
  hwyattn_mha_config cfg;
  hwyattn_mha_config_init(&cfg);
  cfg.embed_dim = E;
  cfg.num_heads = 4;
  const hwyattn_mha_weights weights = {w.data(), w.data() + E * E, w.data() + 2 * E * E,
                                       w.data() + 3 * E * E, nullptr, nullptr, nullptr, nullptr};
  hwyattn_mha* m = nullptr;
  std::vector<float> none;
  ExpectCleanOutOfMemory(
      [&] {
        hwyattn_mha_destroy(m);  // a module from an earlier, successful try
        m = nullptr;
        return hwyattn_mha_create(&cfg, &weights, &m);
      },
      none);
  ASSERT_NE(m, nullptr);
  hwyattn_tensor tx = Dense(x.data(), {2, 9, E}), to = Dense(out.data(), {2, 9, E});
  ExpectCleanOutOfMemory([&] { return hwyattn_mha_forward(m, &tx, nullptr, nullptr, &to, nullptr); },
                         out);
  hwyattn_mha_destroy(m);
}

}  // namespace
