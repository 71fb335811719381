// SPDX-License-Identifier: Apache-2.0

package hwyattn

// #include <stdlib.h>
// #include "shim.h"
import "C"

import (
	"fmt"
	"unsafe"
)

// MergeStates merges attention results computed over disjoint shards of the
// keys (split-KV decoding, sequence parallelism, a cache in several pieces)
// into the result over all of them: per row, with lse_i = lses[i][b, h, l],
//
//	L   = log(sum_i exp(lse_i) + exp(sinks[h]))   (the sink term only with sinks)
//	out = sum_i exp(lse_i - L) * outs[i][b, h, l, :]
//	lseOut = L
//
// outs[i] are [B, H, L, Dv] partial outputs and lses[i] their [B, H, L]
// log-sum-exps (as SDPA's Options.LSE writes them); len(outs) == len(lses)
// >= 1. sinks ([H]) may be nil; lseOut may be nil. out (and lseOut) may be
// outs[0] (and lses[0]) itself: in place. See hwyattn_merge_states in
// include/hwyattn.h for the accuracy, determinism and NaN rules.
//
// The first 8 partials are read where they are; further ones are copied
// into C memory first (cgo's pointer rules let a call take a fixed number of
// Go pointers as arguments, and Go 1.19 cannot pin more), which costs one
// extra read and write of those partials.
func MergeStates(outs, lses []Tensor, sinks []float32, out, lseOut *Tensor) error {
	if len(outs) != len(lses) {
		return invalidf("outs has %d partial outputs but lses has %d", len(outs), len(lses))
	}
	if out == nil {
		return invalidf("out is nil")
	}
	n := len(outs)
	if n > 1<<30 {
		return invalidf("n is %d; too many partial states", n)
	}
	const direct = C.HWYATTN_GO_MERGE_DIRECT
	// descs: outs, lses, out, lseOut; no Go pointers (see attend).
	descs := make([]C.hwyattn_tensor, 2*n+2)
	var od, ld [direct]unsafe.Pointer
	var copies []unsafe.Pointer // C buffers of the partials past `direct`
	defer func() {
		for _, p := range copies {
			C.free(p)
		}
	}()
	for i := 0; i < n; i++ {
		for j, t := range []*Tensor{&outs[i], &lses[i]} {
			name := fmt.Sprintf("outs[%d]", i)
			if j == 1 {
				name = fmt.Sprintf("lses[%d]", i)
			}
			d, err := t.describe(name)
			if err != nil {
				return err
			}
			if i < direct {
				if j == 0 {
					od[i] = unsafe.Pointer(&t.Data[0])
				} else {
					ld[i] = unsafe.Pointer(&t.Data[0])
				}
			} else {
				// The elements the view reaches, from its first: a C copy
				// with the same strides.
				span := reach(d)
				p := C.malloc(C.size_t(span) * C.sizeof_float)
				if p == nil {
					return &Error{Status: OutOfMemory, Message: fmt.Sprintf("%s: no C memory for a copy of %d floats", name, span)}
				}
				copies = append(copies, p)
				copy(unsafe.Slice((*float32)(p), span), t.Data[:span])
				d.data = p
			}
			descs[j*n+i] = d
		}
	}
	d, err := out.describe("out")
	if err != nil {
		return err
	}
	descs[2*n] = d
	outData := unsafe.Pointer(&out.Data[0])
	var lseData unsafe.Pointer
	hasLse := C.int(0)
	if lseOut != nil {
		d, err := lseOut.describe("lse_out")
		if err != nil {
			return err
		}
		descs[2*n+1] = d
		lseData = unsafe.Pointer(&lseOut.Data[0])
		hasLse = 1
	}
	var cs *C.float
	if sinks != nil && n > 0 {
		cs, err = perHead("sinks", sinks, dim4(outs[0].Shape, 1))
		if err != nil {
			return err
		}
	}
	var d0 *C.hwyattn_tensor
	if n > 0 {
		d0 = &descs[0]
	}
	var msg [errorBufferSize]C.char
	status := C.hwyattn_go_merge(C.int32_t(n), d0, hasLse,
		od[0], od[1], od[2], od[3], od[4], od[5], od[6], od[7],
		ld[0], ld[1], ld[2], ld[3], ld[4], ld[5], ld[6], ld[7],
		cs, outData, lseData, &msg[0], C.size_t(len(msg)))
	return statusError(status, &msg)
}

// reach is the number of elements a validated descriptor's view spans.
func reach(d C.hwyattn_tensor) int {
	last := int64(0)
	for i := 0; i < int(d.rank); i++ {
		last += int64(d.shape[i]-1) * int64(d.stride[i])
	}
	return int(last + 1)
}
