// SPDX-License-Identifier: Apache-2.0

package hwyattn

// A naive float64 oracle for the tests, independent of the library: the
// rules of include/hwyattn.h written out loop by loop.

import (
	"math"
	"math/rand"
)

// dense4 is a dense row-major float64 tensor of exactly four dimensions.
type dense4 struct {
	shape [4]int
	data  []float64
}

func (t dense4) at(a, b, c, d int) float64 {
	s := t.shape
	return t.data[((a*s[1]+b)*s[2]+c)*s[3]+d]
}

// refOptions mirror Options for the oracle. A nil func / slice is off.
type refOptions struct {
	scale        float64 // 0 = 1/sqrt(D)
	causal       Causal
	allowed      func(b, h, i, j int) bool    // a BOOL mask
	additive     func(b, h, i, j int) float64 // an F32 mask
	kvLen        []int32
	windowLeft   int
	windowRight  int
	softcap      float64
	alibi, sinks []float64
}

// refSDPA returns out [B, Hq, Lq, Dv], weights [B, Hq, Lq, Lk] and lse
// [B, Hq, Lq]. k and v may have batch 1 (shared).
func refSDPA(q, k, v dense4, o refOptions) (out, weights, lse []float64) {
	B, Hq, Lq, D := q.shape[0], q.shape[1], q.shape[2], q.shape[3]
	Hkv, Lk, Dv := k.shape[1], k.shape[2], v.shape[3]
	group := Hq / Hkv
	scale := o.scale
	if scale == 0 {
		scale = 1 / math.Sqrt(float64(D))
	}
	out = make([]float64, B*Hq*Lq*Dv)
	weights = make([]float64, B*Hq*Lq*Lk)
	lse = make([]float64, B*Hq*Lq)
	s := make([]float64, Lk)
	ok := make([]bool, Lk)
	for b := 0; b < B; b++ {
		kb := b
		if k.shape[0] == 1 {
			kb = 0
		}
		for h := 0; h < Hq; h++ {
			hk := h / group
			for i := 0; i < Lq; i++ {
				p := i
				if o.causal == CausalBottomRight {
					p = i + Lk - Lq
				}
				m := math.Inf(-1)
				if o.sinks != nil {
					m = o.sinks[h]
				}
				for j := 0; j < Lk; j++ {
					allowed := (o.causal == CausalNone || j <= p) &&
						(o.windowLeft == 0 || j > p-o.windowLeft) &&
						(o.windowRight == 0 || j < p+o.windowRight) &&
						(o.kvLen == nil || j < int(o.kvLen[b])) &&
						(o.allowed == nil || o.allowed(b, h, i, j))
					dot := 0.0
					for d := 0; d < D; d++ {
						dot += q.at(b, h, i, d) * k.at(kb, hk, j, d)
					}
					x := dot * scale
					if o.softcap > 0 {
						x = o.softcap * math.Tanh(x/o.softcap)
					}
					if o.alibi != nil {
						x += o.alibi[h] * float64(j-p)
					}
					if o.additive != nil {
						x += o.additive(b, h, i, j)
					}
					if math.IsInf(x, -1) {
						allowed = false
					}
					s[j], ok[j] = x, allowed
					if allowed && x > m {
						m = x
					}
				}
				row := (b*Hq+h)*Lq + i
				if math.IsInf(m, -1) { // every key blocked, no sink
					lse[row] = m
					continue
				}
				sum := 0.0
				if o.sinks != nil {
					sum = math.Exp(o.sinks[h] - m)
				}
				for j := 0; j < Lk; j++ {
					if ok[j] {
						sum += math.Exp(s[j] - m)
					}
				}
				lse[row] = m + math.Log(sum)
				for j := 0; j < Lk; j++ {
					if !ok[j] {
						continue
					}
					w := math.Exp(s[j] - lse[row])
					weights[row*Lk+j] = w
					for d := 0; d < Dv; d++ {
						out[row*Dv+d] += w * v.at(kb, hk, j, d)
					}
				}
			}
		}
	}
	return out, weights, lse
}

// random returns a dense [shape] Tensor of values in [-1, 1) and its float64
// copy (rank-4 shapes only for the copy).
func random(r *rand.Rand, shape ...int64) (Tensor, dense4) {
	t := NewTensor(shape...)
	for i := range t.Data {
		t.Data[i] = float32(2*r.Float64() - 1)
	}
	return t, toDense(t)
}

// toDense is a dense Tensor as a float64 dense4, right-aligning its shape.
func toDense(t Tensor) dense4 {
	var d dense4
	for i := 0; i < 4; i++ {
		d.shape[i] = int(dim4(t.Shape, i))
	}
	d.data = make([]float64, len(t.Data))
	for i, x := range t.Data {
		d.data[i] = float64(x)
	}
	return d
}

// relErr is max |got - want| / max |want| over finite wants; a NaN or a
// mismatch in infinities is +Inf.
func relErr(got []float32, want []float64) float64 {
	if len(got) != len(want) {
		return math.Inf(1)
	}
	maxRef, maxDiff := 0.0, 0.0
	for i := range want {
		g, w := float64(got[i]), want[i]
		if math.IsInf(w, 0) || math.IsInf(g, 0) {
			if g != w {
				return math.Inf(1)
			}
			continue
		}
		if math.IsNaN(g) {
			return math.Inf(1)
		}
		maxRef = math.Max(maxRef, math.Abs(w))
		maxDiff = math.Max(maxDiff, math.Abs(g-w))
	}
	if maxRef == 0 {
		return maxDiff
	}
	return maxDiff / maxRef
}
