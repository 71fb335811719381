// SPDX-License-Identifier: Apache-2.0
//
// The fuzz targets' arguments (fuzz_sdpa.cc, fuzz_mpi.cc): tensors in heap
// blocks of exactly the bytes their descriptors span (so that any access
// out of bounds is an AddressSanitizer report), laid out and filled from the
// input bytes, and corrupted on purpose.
#ifndef HWYATTN_TESTS_FUZZ_FUZZ_ARGS_H_
#define HWYATTN_TESTS_FUZZ_FUZZ_ARGS_H_

#include <fuzzer/FuzzedDataProvider.h>
#include <stddef.h>
#include <stdint.h>

#include <memory>
#include <string>
#include <vector>

#include "hwyattn.h"

// For the harness' own reference arithmetic: no coverage instrumentation
// (it guides nothing, and traced comparisons in its inner loops cost more
// than the library call under test).
#define HWYATTN_FUZZ_NO_COVERAGE __attribute__((no_sanitize("coverage")))

namespace hwyattn_fuzz {

// Prints "fuzz: what: detail" and aborts (a finding).
[[noreturn]] void Die(const char* what, const std::string& detail);

size_t ElemSize(hwyattn_dtype t);

// ggml's block formats (k and v of hwyattn_sdpa): HWYATTN_Q8_0 ... IQ4_NL.
bool IsBlockFormat(hwyattn_dtype t);

// One argument: a descriptor and the exact heap block it spans.
struct Arg {
  hwyattn_tensor t{};
  std::unique_ptr<unsigned char[]> block;
  size_t bytes = 0;
  bool certainly_invalid = false;  // rank / size / stride / overflow
  int64_t span = 0;                // elements spanned (when not invalid)
};

// Elements the descriptor spans, or -1 if it is certainly invalid.
int64_t Span(const hwyattn_tensor& t);

constexpr int64_t kMaxSpan = 1 << 20;  // elements per tensor actually allocated

// Allocates the block for a (possibly corrupted) descriptor. False: too big.
bool Allocate(Arg* a);

// Fills a block with values in [-amp, amp] for its dtype (BOOL: 0/1 bytes;
// block formats: random numbers, each block's d and m bounded so).
void Fill(Arg* a, FuzzedDataProvider& in, float amp);

// A layout for a logical shape: dims ordered in memory by `order`, padded,
// some inputs broadcast by stride 0, rank reduced when the leading dims are 1.
void Describe(Arg* a, FuzzedDataProvider& in, const int64_t shape[4], hwyattn_dtype dtype,
              bool is_output, int lead_fixed_rank = 0);

constexpr size_t kExtraBytes = 64;
// Options followed by zero bytes, as a newer header's larger struct.
struct OptionsStorage {
  hwyattn_sdpa_options opts;
  unsigned char extra[kExtraBytes];
};

// Overwrites one field of one descriptor (or of the options) with an
// arbitrary value: the call may become invalid, or stay valid.
void Corrupt(FuzzedDataProvider& in, std::vector<Arg*>& args, hwyattn_sdpa_options* opts,
             std::vector<int32_t>* kv_len);

// Whether every element of a block is finite (BOOL: true).
bool AllFinite(const Arg& a);

// The block's bytes.
std::string Bytes(const Arg& a);

}  // namespace hwyattn_fuzz

#endif  // HWYATTN_TESTS_FUZZ_FUZZ_ARGS_H_
