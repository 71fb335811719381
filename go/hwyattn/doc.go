// SPDX-License-Identifier: Apache-2.0

// Package hwyattn is the Go binding of hwyattn, a portable SIMD CPU library
// for transformer attention, over its C ABI (include/hwyattn.h) with cgo.
//
// SDPA computes scaled dot-product attention over float32 tensors in Go
// slices, MergeStates combines the results of key shards, and
// MultiheadAttention is a whole attention layer with packed weights;
// KVCache, KVCacheWrite and KVAttention are the paged KV-cache interface
// (continuous batching: prefill chunks and decodes of many sequences in one
// call, over F32, F16, BF16, int8, fp8, ggml block-format (llama.cpp's
// q8_0 ... iq4_nl) or int4 pages in Go slices). Every
// failure is an *Error carrying the library's Status and a message that
// names the argument; nothing is written on failure. Slice lengths are
// checked against shapes on the Go side before any C call, so a short slice
// is an error, never an out-of-bounds access.
//
// Linking: by default the package links -lhwyattn and finds hwyattn.h and
// the library on the default paths or through CGO_CFLAGS / CGO_LDFLAGS;
// -tags hwyattn_pkgconfig asks pkg-config instead. See go/README.md.
//
// Differences from the C ABI: Options.Scale is a pointer, nil for the
// default 1/sqrt(D), and an explicit 0 is an error (the C ABI reads 0 as the
// default, PyTorch reads it as uniform weights). Inputs are float32 only
// (the C ABI also takes F16 and BF16; a KVCache's pages may be F16, BF16,
// int8 or fp8, held as bits, or the bytes of a block format or of int4),
// outputs float32 or, for SDPA's and
// KVAttention's out, F16 / BF16 bits (HalfTensor), and calls run on the library's own
// threads (SetNumThreads), not on a caller's pool.
package hwyattn
