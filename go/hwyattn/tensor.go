// SPDX-License-Identifier: Apache-2.0

package hwyattn

// #include "shim.h"
import "C"

import (
	"fmt"
	"math"
	"unsafe"
)

// Tensor is a float32 tensor over a Go slice: the C ABI's hwyattn_tensor
// with dtype F32.
//
// Shape has 1 to 4 sizes, each >= 1, right-aligned like numpy broadcasting:
// a rank-2 [L, D] tensor is [1, 1, L, D]. Strides, counted in elements, is
// either nil (dense row-major: the last dimension has stride 1) or one
// stride >= 0 per dimension; a stride of 0 broadcasts that dimension. Data
// must hold every element the shape and strides reach (it may hold more: a
// view into a larger buffer); the Go side checks this before any call, so a
// short slice is an error, never an out-of-bounds access.
type Tensor struct {
	Data    []float32
	Shape   []int64
	Strides []int64
}

// NewTensor returns a dense zero tensor of the given shape.
func NewTensor(shape ...int64) Tensor {
	n := int64(1)
	for _, s := range shape {
		if s > 0 {
			n *= s
		}
	}
	return Tensor{Data: make([]float32, n), Shape: append([]int64(nil), shape...)}
}

// HalfTensor is an IEEE binary16 (F16) or bfloat16 (BF16) tensor as its
// bits, since Go has no 16-bit floats; Shape and Strides as in Tensor. It
// is an Output: SDPA and KVAttention round their float32 result once to
// the nearest 16-bit number (ties to even) as they store it, the bits a
// float32 output rounded afterwards would have.
type HalfTensor struct {
	Data    []uint16
	Shape   []int64
	Strides []int64
	BF16    bool // bfloat16 bits; false: binary16
}

// Output is where SDPA and KVAttention write their result: a *Tensor
// (float32) or a *HalfTensor (F16 or BF16 bits).
type Output interface {
	// describeOut is the descriptor and the first element of the output
	// (an error for a nil pointer).
	describeOut(name string) (C.hwyattn_tensor, unsafe.Pointer, error)
}

func (t *Tensor) describeOut(name string) (C.hwyattn_tensor, unsafe.Pointer, error) {
	if t == nil {
		return C.hwyattn_tensor{}, nil, invalidf("%s is nil", name)
	}
	d, err := t.describe(name)
	if err != nil {
		return d, nil, err
	}
	return d, unsafe.Pointer(&t.Data[0]), nil
}

func (t *HalfTensor) describeOut(name string) (C.hwyattn_tensor, unsafe.Pointer, error) {
	if t == nil {
		return C.hwyattn_tensor{}, nil, invalidf("%s is nil", name)
	}
	dtype := C.hwyattn_dtype(C.HWYATTN_F16)
	if t.BF16 {
		dtype = C.HWYATTN_BF16
	}
	d, err := describe(name, len(t.Data), t.Shape, t.Strides, dtype)
	if err != nil {
		return d, nil, err
	}
	return d, unsafe.Pointer(&t.Data[0]), nil
}

// BoolTensor is a boolean tensor (the C ABI's BOOL dtype: true = attend),
// with Shape and Strides as in Tensor. Used for Options.BoolMask.
type BoolTensor struct {
	Data    []bool
	Shape   []int64
	Strides []int64
}

// dim4 is logical dimension i (0..3) of a right-aligned shape of rank <= 4.
func dim4(shape []int64, i int) int64 {
	j := i - (4 - len(shape))
	if j < 0 || j >= len(shape) {
		return 1
	}
	return shape[j]
}

// describe fills a descriptor (data NULL: the shim places the pointer) for
// a tensor of n elements, after checking that every element the shape and
// strides reach lies inside them. Only the checks memory safety needs are
// made here; the library checks the rest.
func describe(name string, n int, shape, strides []int64, dtype C.hwyattn_dtype) (C.hwyattn_tensor, error) {
	var t C.hwyattn_tensor
	rank := len(shape)
	if rank < 1 || rank > 4 {
		return t, invalidf("%s: rank is %d (shape %v); must be 1..4", name, rank, shape)
	}
	if strides != nil && len(strides) != rank {
		return t, invalidf("%s: %d strides for shape %v of rank %d", name, len(strides), shape, rank)
	}
	for i, s := range shape {
		if s < 1 {
			return t, invalidf("%s: shape[%d] is %d; must be >= 1", name, i, s)
		}
	}
	dense := strides == nil
	if dense {
		strides = make([]int64, rank)
		acc := int64(1)
		for i := rank - 1; i >= 0; i-- {
			strides[i] = acc
			if acc > math.MaxInt64/shape[i] {
				return t, invalidf("%s: shape %v has more than 2^63 elements", name, shape)
			}
			acc *= shape[i]
		}
	}
	// last = the offset of the last element reached; it must be < n.
	last := int64(0)
	for i := 0; i < rank; i++ {
		st := strides[i]
		if st < 0 {
			return t, invalidf("%s: stride[%d] is %d; must be >= 0", name, i, st)
		}
		if st > 0 && shape[i]-1 > (math.MaxInt64-last)/st {
			return t, invalidf("%s: shape %v with strides %v reaches past 2^63 elements", name, shape, strides)
		}
		last += (shape[i] - 1) * st
	}
	if last >= int64(n) {
		layout := fmt.Sprintf("shape %v", shape)
		if !dense {
			layout += fmt.Sprintf(" with strides %v", strides)
		}
		return t, invalidf("%s: data has %d elements but %s needs %d", name, n, layout, last+1)
	}
	t.dtype = dtype
	t.rank = C.int32_t(rank)
	for i := 0; i < rank; i++ {
		t.shape[i] = C.int64_t(shape[i])
		t.stride[i] = C.int64_t(strides[i])
	}
	return t, nil
}

func (t *Tensor) describe(name string) (C.hwyattn_tensor, error) {
	return describe(name, len(t.Data), t.Shape, t.Strides, C.HWYATTN_F32)
}

func (t *BoolTensor) describe(name string) (C.hwyattn_tensor, error) {
	return describe(name, len(t.Data), t.Shape, t.Strides, C.HWYATTN_BOOL)
}
