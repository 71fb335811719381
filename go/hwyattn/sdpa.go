// SPDX-License-Identifier: Apache-2.0

package hwyattn

// #include "shim.h"
import "C"

import (
	"math"
	"unsafe"
)

// Causal selects a causal mask (the C ABI's hwyattn_causal).
type Causal int32

const (
	// CausalNone: no causal mask.
	CausalNone Causal = C.HWYATTN_CAUSAL_NONE
	// CausalTopLeft: query i sees keys j <= i (PyTorch is_causal=True).
	CausalTopLeft Causal = C.HWYATTN_CAUSAL_TOP_LEFT
	// CausalBottomRight: query i sees keys j <= i + (Lk - Lq), the decode /
	// KV-cache convention (the last query sees every key).
	CausalBottomRight Causal = C.HWYATTN_CAUSAL_BOTTOM_RIGHT
)

// Precision of the products Q K^T and P V (the C ABI's hwyattn_precision).
type Precision int32

const (
	// PrecisionF32: fp32 products (the default).
	PrecisionF32 Precision = C.HWYATTN_PRECISION_F32
	// PrecisionBF16: operands of Q K^T and P V rounded to bf16, fp32
	// accumulation (hwyattn.h's HWYATTN_PRECISION_BF16).
	PrecisionBF16 Precision = C.HWYATTN_PRECISION_BF16
	// PrecisionInt8: integer Q K^T for a quantized K (I8, I4 or a ggml
	// block format): each query row quantized per block of 32 head dims as
	// ggml's quantize_row_q8_0 does, times the cache's integers; P V, the
	// softmax and out stay fp32. On a float K it is PrecisionF32
	// (hwyattn.h's HWYATTN_PRECISION_INT8, which bounds the error).
	PrecisionInt8 Precision = C.HWYATTN_PRECISION_INT8
)

// Options are the optional settings of SDPA and MultiheadAttention.Forward:
// the C ABI's hwyattn_sdpa_options (include/hwyattn.h documents each rule).
// The zero value, like a nil *Options, means the defaults. Shapes below are
// for SDPA; for Forward, Hq is the layer's NumHeads.
type Options struct {
	// Scale multiplies Q K^T. nil = the default 1/sqrt(D); set it with
	// hwyattn.Scale(x). An explicit 0 is rejected: the C ABI reads 0 as the
	// default, while PyTorch's scale=0 means uniform weights, so passing it
	// through would silently compute something else. Must be finite.
	Scale *float32
	// Causal mask, if any.
	Causal Causal
	// Mask: an additive float mask, broadcastable to [B, Hq, Lq, Lk], added
	// to the scaled scores (-Inf blocks). At most one of Mask and BoolMask.
	Mask *Tensor
	// BoolMask: a boolean mask broadcastable to [B, Hq, Lq, Lk]; true =
	// attend, false = blocked.
	BoolMask *BoolTensor
	// KVLen, [B]: keys at positions >= KVLen[b] are padding (PyTorch's
	// key_padding_mask). Each value in [0, Lk].
	KVLen []int32
	// Weights, an output [B, Hq, Lq, Lk]: the attention probabilities.
	Weights *Tensor
	// LSE, an output [B, Hq, Lq]: the natural log of each row's softmax
	// denominator (for MergeStates); -Inf for a fully blocked row.
	LSE *Tensor
	// WindowLeft W > 0: a query at position p sees only keys j > p - W
	// (sliding_window = W). 0 = unbounded.
	WindowLeft int64
	// WindowRight W > 0: a query at position p sees only keys j < p + W.
	// 0 = unbounded.
	WindowRight int64
	// Softcap c > 0: every scaled score s becomes c * tanh(s / c). 0 = off.
	Softcap float32
	// ALiBiSlopes, [Hq]: slope[h] * (j - p) is added to head h's scores.
	ALiBiSlopes []float32
	// Sinks, [Hq]: attention sinks, a per-head logit in every row's softmax
	// denominator (gpt-oss). -Inf is a sink that is off.
	Sinks []float32
	// Precision of the products (PrecisionF32, the default; PrecisionBF16;
	// PrecisionInt8).
	Precision Precision
}

// Scale returns a pointer to s, for Options.Scale.
func Scale(s float32) *float32 { return &s }

// SDPA computes scaled dot-product attention into out:
// out = softmax(q k^T * scale + mask) v, per batch and query head.
//
//	q   [B, Hq,  Lq, D ]
//	k   [B, Hkv, Lk, D ]  batch may be 1 (shared by all B)
//	v   [B, Hkv, Lk, Dv]  batch may be 1
//	out [B, Hq,  Lq, Dv]  (written: a *Tensor, or a *HalfTensor of F16 or BF16 bits)
//
// Hq must be a multiple of Hkv (GQA / MQA). A query row whose keys are all
// blocked gets zeros. opts may be nil. Safe for concurrent use; out must not
// overlap any input. On error nothing is written and the error is an
// *Error naming the argument.
func SDPA(q, k, v Tensor, out Output, opts *Options) error {
	if out == nil {
		return invalidf("out is nil")
	}
	return attend(nil, &q, &k, &v, out, opts, dim4(q.Shape, 0), dim4(q.Shape, 1))
}

// attend runs hwyattn_sdpa (m == nil) or hwyattn_mha_forward (k and v nil
// for self-attention). batch and heads are how many KVLen and per-head
// values the library reads; they are checked against the slices here.
//
// cgo's pointer rules (Go 1.19 has no runtime.Pinner): Go memory passed to C
// must hold no Go pointers, and Go code must not store a Go pointer in C
// memory. So the descriptors and the options built here hold no pointers at
// all (their data and pointer fields stay nil, and hold no Go pointer when
// they are passed); every pointer to Go memory (the tensors' data, KVLen,
// ALiBiSlopes, Sinks) is a direct argument of the shim, which places them in
// copies of the descriptors and options on its own C stack for the one call.
// The library keeps no pointer after the call returns.
func attend(m *C.hwyattn_mha, q, k, v *Tensor, out Output, opts *Options, batch, heads int64) error {
	if opts == nil {
		opts = &Options{}
	}
	copts, err := scalarOptions(opts)
	if err != nil {
		return err
	}

	names := [3]string{"q", "k", "v"}
	if m != nil {
		names = [3]string{"query", "key", "value"}
	}
	var descs [C.HWYATTN_GO_NUM_SLOTS]C.hwyattn_tensor
	var data [C.HWYATTN_GO_NUM_SLOTS]unsafe.Pointer
	var present C.uint32_t
	place := func(slot int, name string, t *Tensor) error {
		if t == nil {
			return nil
		}
		d, err := t.describe(name)
		if err != nil {
			return err
		}
		descs[slot] = d
		data[slot] = unsafe.Pointer(&t.Data[0])
		present |= 1 << slot
		return nil
	}
	for _, s := range []struct {
		slot int
		name string
		t    *Tensor
	}{
		{C.HWYATTN_GO_Q, names[0], q}, {C.HWYATTN_GO_K, names[1], k},
		{C.HWYATTN_GO_V, names[2], v},
		{C.HWYATTN_GO_MASK, "opts.Mask", opts.Mask},
		{C.HWYATTN_GO_WEIGHTS, "opts.Weights", opts.Weights},
		{C.HWYATTN_GO_LSE, "opts.LSE", opts.LSE},
	} {
		if err := place(s.slot, s.name, s.t); err != nil {
			return err
		}
	}
	d, p, err := out.describeOut("out")
	if err != nil {
		return err
	}
	descs[C.HWYATTN_GO_OUT], data[C.HWYATTN_GO_OUT] = d, p
	present |= 1 << C.HWYATTN_GO_OUT
	if opts.BoolMask != nil {
		if opts.Mask != nil {
			return invalidf("opts: both Mask and BoolMask are set; give at most one")
		}
		d, err := opts.BoolMask.describe("opts.BoolMask")
		if err != nil {
			return err
		}
		descs[C.HWYATTN_GO_MASK] = d
		data[C.HWYATTN_GO_MASK] = unsafe.Pointer(&opts.BoolMask.Data[0])
		present |= 1 << C.HWYATTN_GO_MASK
	}

	var kvLen *C.int32_t
	if opts.KVLen != nil {
		if int64(len(opts.KVLen)) < batch {
			return invalidf("opts.KVLen has %d values; the batch is %d", len(opts.KVLen), batch)
		}
		kvLen = (*C.int32_t)(unsafe.Pointer(&opts.KVLen[0]))
	}
	slopes, err := perHead("opts.ALiBiSlopes", opts.ALiBiSlopes, heads)
	if err != nil {
		return err
	}
	sinks, err := perHead("opts.Sinks", opts.Sinks, heads)
	if err != nil {
		return err
	}

	var msg [errorBufferSize]C.char
	status := C.hwyattn_go_attend(m, &descs[0], present, &copts,
		data[C.HWYATTN_GO_Q], data[C.HWYATTN_GO_K], data[C.HWYATTN_GO_V],
		data[C.HWYATTN_GO_OUT], data[C.HWYATTN_GO_MASK], data[C.HWYATTN_GO_WEIGHTS],
		data[C.HWYATTN_GO_LSE], kvLen, slopes, sinks, &msg[0], C.size_t(len(msg)))
	return statusError(status, &msg)
}

// scalarOptions is the C struct of opts's scalar fields (scale, causal,
// windows, softcap, precision), its pointer fields left NULL. An explicit
// Scale of 0 is rejected here, for every call that takes Options.
func scalarOptions(opts *Options) (C.hwyattn_sdpa_options, error) {
	var copts C.hwyattn_sdpa_options
	C.hwyattn_sdpa_options_init_sized(&copts, C.sizeof_hwyattn_sdpa_options)
	if opts.Scale != nil {
		s := *opts.Scale
		if s == 0 {
			return copts, invalidf("opts.Scale is 0: explicit zero is rejected because the C ABI reads " +
				"scale 0 as the default 1/sqrt(head_dim), while in PyTorch scale=0 means uniform " +
				"weights; leave Scale nil for the default")
		}
		if math.IsNaN(float64(s)) || math.IsInf(float64(s), 0) {
			return copts, invalidf("opts.Scale is %g; must be finite (nil = 1/sqrt(head_dim))", s)
		}
		copts.scale = C.float(s)
	}
	copts.causal = C.hwyattn_causal(opts.Causal)
	copts.window_left = C.int64_t(opts.WindowLeft)
	copts.window_right = C.int64_t(opts.WindowRight)
	copts.softcap = C.float(opts.Softcap)
	copts.precision = C.hwyattn_precision(opts.Precision)
	return copts, nil
}

// perHead is the C pointer to values, which must hold n per-head values (nil
// for nil values).
func perHead(name string, values []float32, n int64) (*C.float, error) {
	if values == nil {
		return nil, nil
	}
	if int64(len(values)) < n {
		return nil, invalidf("%s has %d values; there are %d query heads", name, len(values), n)
	}
	return (*C.float)(unsafe.Pointer(&values[0])), nil
}

// errorBufferSize holds any hwyattn_last_error() message (the library's own
// buffer is 512 bytes).
const errorBufferSize = 512

// statusError is nil for HWYATTN_OK, else an *Error with the message the
// shim copied.
func statusError(s C.hwyattn_status, msg *[errorBufferSize]C.char) error {
	if s == C.HWYATTN_OK {
		return nil
	}
	return &Error{Status: Status(s), Message: C.GoString(&msg[0])}
}
