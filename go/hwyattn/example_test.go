// SPDX-License-Identifier: Apache-2.0

package hwyattn_test

import (
	"errors"
	"fmt"
	"log"

	"hwyattn.dev/hwyattn"
)

// Causal attention of three queries over three keys. The keys are all
// equal, so each query weighs the keys it sees equally: query i gets the
// mean of value rows 0..i.
func ExampleSDPA() {
	// Shapes are right-aligned: [L, D] is one batch and one head.
	q := hwyattn.Tensor{Data: []float32{1, 0, 0, 1, 1, 1}, Shape: []int64{3, 2}}
	k := hwyattn.Tensor{Data: []float32{0.5, 0.5, 0.5, 0.5, 0.5, 0.5}, Shape: []int64{3, 2}}
	v := hwyattn.Tensor{Data: []float32{1, 2, 3, 4, 5, 9}, Shape: []int64{3, 2}}
	out := hwyattn.NewTensor(3, 2)
	opts := &hwyattn.Options{Causal: hwyattn.CausalTopLeft}
	if err := hwyattn.SDPA(q, k, v, &out, opts); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%.3f\n", out.Data)
	// Output: [1.000 2.000 2.000 3.000 3.000 5.000]
}

// A self-attention layer with one head of width 2. With W_k = 0 every score
// is 0, so under a causal mask token i averages the values of tokens 0..i.
func ExampleMultiheadAttention() {
	identity := []float32{1, 0, 0, 1}
	m, err := hwyattn.NewMultiheadAttention(
		hwyattn.MHAConfig{EmbedDim: 2, NumHeads: 1},
		hwyattn.MHAWeights{WQ: identity, WK: make([]float32, 4), WV: identity, WO: identity})
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()
	x := hwyattn.Tensor{Data: []float32{1, 2, 3, 4, 5, 9}, Shape: []int64{1, 3, 2}} // [B, L, E]
	out := hwyattn.NewTensor(1, 3, 2)
	// key and value nil: self-attention.
	if err := m.Forward(x, nil, nil, &out, &hwyattn.Options{Causal: hwyattn.CausalTopLeft}); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%.3f\n", out.Data)
	// Output: [1.000 2.000 2.000 3.000 3.000 5.000]
}

// Errors are *hwyattn.Error values carrying the status and a message that
// names the argument.
func ExampleError() {
	q := hwyattn.NewTensor(1, 4, 64) // [H, L, D]
	k := hwyattn.NewTensor(1, 8, 48) // head_dim 48, not 64
	out := hwyattn.NewTensor(1, 4, 64)
	err := hwyattn.SDPA(q, k, k, &out, nil)
	var e *hwyattn.Error
	if errors.As(err, &e) {
		fmt.Println(e.Status, errors.Is(err, hwyattn.ErrInvalidArgument))
	}
	// An explicit zero scale is refused rather than read as the default.
	err = hwyattn.SDPA(q, q, q, &out, &hwyattn.Options{Scale: hwyattn.Scale(0)})
	fmt.Println(errors.Is(err, hwyattn.ErrInvalidArgument))
	// Output:
	// invalid argument true
	// true
}
