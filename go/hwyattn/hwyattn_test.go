// SPDX-License-Identifier: Apache-2.0

package hwyattn

// The binding against the float64 oracle in reference_test.go. cgo's
// pointer checks are on (GODEBUG=cgocheck=1, the default), so a call that
// passes Go memory holding Go pointers panics here.

import (
	"errors"
	"fmt"
	"math"
	"math/rand"
	"regexp"
	"strings"
	"sync"
	"testing"
)

const tolerance = 1e-5

type sdpaCase struct {
	name                           string
	b, hq, hkv, lq, lk, d, dv, bkv int64
	opts                           func(r *rand.Rand, c *sdpaCase) (*Options, refOptions)
}

func TestSDPAMatchesReference(t *testing.T) {
	none := func(*rand.Rand, *sdpaCase) (*Options, refOptions) { return nil, refOptions{} }
	cases := []sdpaCase{
		{name: "plain", b: 2, hq: 4, hkv: 4, lq: 5, lk: 7, d: 8, dv: 6, opts: none},
		{name: "gqa", b: 2, hq: 6, hkv: 2, lq: 9, lk: 13, d: 16, dv: 16, opts: none},
		{name: "mqa_shared_kv", b: 3, hq: 4, hkv: 1, bkv: 1, lq: 4, lk: 20, d: 8, dv: 8, opts: none},
		{name: "prefill", b: 1, hq: 4, hkv: 2, lq: 130, lk: 150, d: 64, dv: 64, opts: none},
		{name: "causal_top_left", b: 2, hq: 2, hkv: 2, lq: 11, lk: 11, d: 8, dv: 8,
			opts: func(*rand.Rand, *sdpaCase) (*Options, refOptions) {
				return &Options{Causal: CausalTopLeft}, refOptions{causal: CausalTopLeft}
			}},
		{name: "causal_bottom_right_gqa", b: 1, hq: 8, hkv: 2, lq: 3, lk: 70, d: 32, dv: 32,
			opts: func(*rand.Rand, *sdpaCase) (*Options, refOptions) {
				return &Options{Causal: CausalBottomRight}, refOptions{causal: CausalBottomRight}
			}},
		{name: "explicit_scale", b: 1, hq: 2, hkv: 2, lq: 6, lk: 9, d: 8, dv: 8,
			opts: func(*rand.Rand, *sdpaCase) (*Options, refOptions) {
				return &Options{Scale: Scale(0.3)}, refOptions{scale: float64(float32(0.3))}
			}},
		{name: "modifiers", b: 2, hq: 4, hkv: 2, lq: 6, lk: 17, d: 8, dv: 8,
			opts: func(r *rand.Rand, c *sdpaCase) (*Options, refOptions) {
				o := &Options{Scale: Scale(4), Causal: CausalBottomRight, WindowLeft: 5, Softcap: 2,
					ALiBiSlopes: []float32{0.5, 0.25, 0.125, 0.0625}, Sinks: []float32{0.3, -1, float32(math.Inf(-1)), 2}}
				ro := refOptions{scale: 4, causal: CausalBottomRight, windowLeft: 5, softcap: 2,
					alibi: []float64{0.5, 0.25, 0.125, 0.0625}, sinks: []float64{0.3, -1, math.Inf(-1), 2}}
				return o, ro
			}},
		{name: "window_right", b: 1, hq: 2, hkv: 2, lq: 9, lk: 9, d: 8, dv: 8,
			opts: func(*rand.Rand, *sdpaCase) (*Options, refOptions) {
				return &Options{WindowLeft: 3, WindowRight: 2}, refOptions{windowLeft: 3, windowRight: 2}
			}},
		{name: "bool_mask_and_kv_len", b: 2, hq: 2, hkv: 2, lq: 5, lk: 8, d: 8, dv: 4,
			opts: func(r *rand.Rand, c *sdpaCase) (*Options, refOptions) {
				// [B, 1, Lq, Lk], broadcast over the heads; query row 2 of
				// batch 0 is fully blocked (zeros, lse -Inf).
				m := BoolTensor{Data: make([]bool, c.b*c.lq*c.lk), Shape: []int64{c.b, 1, c.lq, c.lk}}
				for i := range m.Data {
					m.Data[i] = r.Intn(3) != 0
				}
				for j := int64(0); j < c.lk; j++ {
					m.Data[2*c.lk+j] = false
				}
				allowed := func(b, h, i, j int) bool { return m.Data[(b*int(c.lq)+i)*int(c.lk)+j] }
				kv := []int32{5, 8}
				return &Options{BoolMask: &m, KVLen: kv}, refOptions{allowed: allowed, kvLen: kv}
			}},
		{name: "additive_mask", b: 1, hq: 3, hkv: 3, lq: 4, lk: 6, d: 8, dv: 8,
			opts: func(r *rand.Rand, c *sdpaCase) (*Options, refOptions) {
				// Rank 2: [Lq, Lk], broadcast to every batch and head.
				m := NewTensor(c.lq, c.lk)
				for i := range m.Data {
					m.Data[i] = float32(r.NormFloat64())
				}
				m.Data[1] = float32(math.Inf(-1))
				add := func(b, h, i, j int) float64 { return float64(m.Data[i*int(c.lk)+j]) }
				return &Options{Mask: &m}, refOptions{additive: add}
			}},
	}
	for _, c := range cases {
		c := c
		t.Run(c.name, func(t *testing.T) {
			r := rand.New(rand.NewSource(int64(len(c.name))))
			bkv := c.b
			if c.bkv != 0 {
				bkv = c.bkv
			}
			q, rq := random(r, c.b, c.hq, c.lq, c.d)
			k, rk := random(r, bkv, c.hkv, c.lk, c.d)
			v, rv := random(r, bkv, c.hkv, c.lk, c.dv)
			opts, ro := c.opts(r, &c)
			if opts == nil {
				opts = &Options{}
			}
			lse := NewTensor(c.b, c.hq, c.lq)
			weights := NewTensor(c.b, c.hq, c.lq, c.lk)
			opts.LSE, opts.Weights = &lse, &weights
			out := NewTensor(c.b, c.hq, c.lq, c.dv)
			if err := SDPA(q, k, v, &out, opts); err != nil {
				t.Fatal(err)
			}
			want, wantW, wantLse := refSDPA(rq, rk, rv, ro)
			if e := relErr(out.Data, want); e > tolerance {
				t.Errorf("out: relative error %g", e)
			}
			if e := relErr(weights.Data, wantW); e > tolerance {
				t.Errorf("weights: relative error %g", e)
			}
			if e := relErr(lse.Data, wantLse); e > tolerance {
				t.Errorf("lse: relative error %g", e)
			}
		})
	}
}

// q, k, v and out in the [B, L, H, D] layout many engines keep, described
// by strides instead of copied.
func TestSDPAStridedViews(t *testing.T) {
	r := rand.New(rand.NewSource(7))
	const B, L, H, D = 2, 9, 4, 16
	bshd := func(data []float32) Tensor {
		return Tensor{Data: data, Shape: []int64{B, H, L, D}, Strides: []int64{L * H * D, D, H * D, 1}}
	}
	mk := func() []float32 {
		x := make([]float32, B*L*H*D)
		for i := range x {
			x[i] = float32(r.NormFloat64())
		}
		return x
	}
	dense := func(x []float32) dense4 { // [B, L, H, D] -> [B, H, L, D]
		d := dense4{shape: [4]int{B, H, L, D}, data: make([]float64, len(x))}
		for b := 0; b < B; b++ {
			for l := 0; l < L; l++ {
				for h := 0; h < H; h++ {
					for e := 0; e < D; e++ {
						d.data[((b*H+h)*L+l)*D+e] = float64(x[((b*L+l)*H+h)*D+e])
					}
				}
			}
		}
		return d
	}
	qd, kd, vd := mk(), mk(), mk()
	out := bshd(make([]float32, B*L*H*D))
	if err := SDPA(bshd(qd), bshd(kd), bshd(vd), &out, &Options{Causal: CausalTopLeft}); err != nil {
		t.Fatal(err)
	}
	want, _, _ := refSDPA(dense(qd), dense(kd), dense(vd), refOptions{causal: CausalTopLeft})
	got := dense(out.Data)
	maxDiff := 0.0
	for i := range want {
		maxDiff = math.Max(maxDiff, math.Abs(got.data[i]-want[i]))
	}
	if maxDiff > 1e-5 {
		t.Errorf("max difference %g", maxDiff)
	}
}

func asError(t *testing.T, err error) *Error {
	t.Helper()
	if err == nil {
		t.Fatal("no error")
	}
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("%v (%T) is not an *Error", err, err)
	}
	return e
}

func TestScaleZeroRejected(t *testing.T) {
	q, k, v, out := NewTensor(1, 2, 4), NewTensor(1, 3, 4), NewTensor(1, 3, 4), NewTensor(1, 2, 4)
	err := SDPA(q, k, v, &out, &Options{Scale: Scale(0)})
	e := asError(t, err)
	if e.Status != InvalidArgument || !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("status %v", e.Status)
	}
	for _, want := range []string{"opts.Scale", "PyTorch", "uniform", "nil"} {
		if !strings.Contains(e.Message, want) {
			t.Errorf("message %q lacks %q", e.Message, want)
		}
	}
	err = SDPA(q, k, v, &out, &Options{Scale: Scale(float32(math.NaN()))})
	if e := asError(t, err); !strings.Contains(e.Message, "finite") {
		t.Errorf("NaN scale: %v", err)
	}
	// nil is the default 1/sqrt(D), and equals an explicit 1/sqrt(D).
	r := rand.New(rand.NewSource(3))
	q, _ = random(r, 1, 2, 4)
	k, _ = random(r, 1, 3, 4)
	v, _ = random(r, 1, 3, 4)
	out2 := NewTensor(1, 2, 4)
	if err := SDPA(q, k, v, &out, nil); err != nil {
		t.Fatal(err)
	}
	if err := SDPA(q, k, v, &out2, &Options{Scale: Scale(0.5)}); err != nil {
		t.Fatal(err)
	}
	for i := range out.Data {
		if out.Data[i] != out2.Data[i] {
			t.Fatalf("default scale %v != explicit 1/sqrt(4) %v", out.Data, out2.Data)
		}
	}
}

func TestErrors(t *testing.T) {
	r := rand.New(rand.NewSource(5))
	q, _ := random(r, 1, 2, 3, 8)
	k, _ := random(r, 1, 2, 5, 8)
	v, _ := random(r, 1, 2, 5, 8)
	cases := []struct {
		name    string
		call    func(out *Tensor) error
		status  Status
		mention []string
	}{
		{"head_dim_mismatch", func(out *Tensor) error {
			k48 := NewTensor(1, 2, 5, 4)
			return SDPA(q, k48, v, out, nil)
		}, InvalidArgument, []string{"k", "4", "8"}},
		{"short_slice", func(out *Tensor) error {
			short := Tensor{Data: q.Data[:40], Shape: q.Shape}
			return SDPA(short, k, v, out, nil)
		}, InvalidArgument, []string{"q: data has 40 elements", "48"}},
		{"short_strided_view", func(out *Tensor) error {
			view := Tensor{Data: k.Data, Shape: []int64{1, 2, 5, 8}, Strides: []int64{0, 41, 8, 1}}
			return SDPA(q, view, v, out, nil)
		}, InvalidArgument, []string{"k: data has 80 elements", "strides [0 41 8 1]", "needs 81"}},
		{"rank_5", func(out *Tensor) error {
			return SDPA(Tensor{Data: q.Data, Shape: []int64{1, 1, 2, 3, 8}}, k, v, out, nil)
		}, InvalidArgument, []string{"q: rank is 5"}},
		{"negative_stride", func(out *Tensor) error {
			return SDPA(q, k, Tensor{Data: v.Data, Shape: v.Shape, Strides: []int64{80, 40, 8, -1}}, out, nil)
		}, InvalidArgument, []string{"v: stride[3] is -1"}},
		{"nil_out", func(*Tensor) error { return SDPA(q, k, v, nil, nil) }, InvalidArgument, []string{"out"}},
		{"short_slopes", func(out *Tensor) error {
			return SDPA(q, k, v, out, &Options{ALiBiSlopes: []float32{1}})
		}, InvalidArgument, []string{"opts.ALiBiSlopes has 1", "2 query heads"}},
		{"short_kv_len", func(out *Tensor) error {
			return SDPA(q, k, v, out, &Options{KVLen: []int32{}})
		}, InvalidArgument, []string{"opts.KVLen has 0 values", "batch is 1"}},
		{"kv_len_out_of_range", func(out *Tensor) error {
			return SDPA(q, k, v, out, &Options{KVLen: []int32{6}})
		}, InvalidArgument, []string{"kv_len[0] is 6"}},
		{"nan_sink", func(out *Tensor) error {
			return SDPA(q, k, v, out, &Options{Sinks: []float32{0, float32(math.NaN())}})
		}, InvalidArgument, []string{"sinks[1]"}},
		{"negative_window", func(out *Tensor) error {
			return SDPA(q, k, v, out, &Options{WindowLeft: -2})
		}, InvalidArgument, []string{"window_left is -2"}},
		{"two_masks", func(out *Tensor) error {
			m := NewTensor(3, 5)
			bm := BoolTensor{Data: make([]bool, 15), Shape: []int64{3, 5}}
			return SDPA(q, k, v, out, &Options{Mask: &m, BoolMask: &bm})
		}, InvalidArgument, []string{"Mask and BoolMask"}},
		{"out_overlaps_q", func(out *Tensor) error {
			alias := q
			return SDPA(q, k, v, &alias, nil)
		}, InvalidArgument, []string{"out"}},
		{"bad_precision", func(out *Tensor) error {
			return SDPA(q, k, v, out, &Options{Precision: Precision(7)})
		}, InvalidArgument, []string{"precision is 7"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out := NewTensor(1, 2, 3, 8)
			for i := range out.Data {
				out.Data[i] = 42
			}
			e := asError(t, c.call(&out))
			if e.Status != c.status {
				t.Errorf("status %v, want %v (%v)", e.Status, c.status, e)
			}
			for _, m := range c.mention {
				if !strings.Contains(e.Message, m) {
					t.Errorf("message %q lacks %q", e.Message, m)
				}
			}
			if !strings.HasPrefix(e.Error(), "hwyattn: "+c.status.String()+": ") {
				t.Errorf("Error() is %q", e.Error())
			}
			for i, x := range out.Data {
				if x != 42 {
					t.Fatalf("out[%d] written on failure: %v", i, x)
				}
			}
		})
	}
	if errors.Is(&Error{Status: Unsupported}, ErrInvalidArgument) {
		t.Error("errors.Is matched another status")
	}
}

// hwyattn_last_error is per thread and goroutines move between threads: the
// message of each failure must be its own, with many failing at once.
func TestConcurrentErrorMessages(t *testing.T) {
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			q, v := NewTensor(2, 3, 16), NewTensor(2, 5, 16)
			for it := 0; it < 100; it++ {
				out := NewTensor(2, 3, 16)
				if g%2 == 0 {
					// out is q: the library's overlap check.
					err := SDPA(q, v, v, &q, nil)
					if e := asErrorNoT(err); e == nil || !strings.HasPrefix(e.Message, "out") {
						errs <- fmt.Errorf("goroutine %d: out = q gave %v", g, err)
						return
					}
					continue
				}
				d := int64(g + 1) // a head_dim of its own, to find in the message
				k := NewTensor(2, 5, d)
				err := SDPA(q, k, v, &out, nil)
				e := asErrorNoT(err)
				want := regexp.MustCompile(fmt.Sprintf(`\b%d\b`, d))
				if e == nil || !strings.HasPrefix(e.Message, "k") || !want.MatchString(e.Message) {
					errs <- fmt.Errorf("goroutine %d: got %v, want a message about k's %d", g, err, d)
					return
				}
			}
		}(g)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func asErrorNoT(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return nil
}

// Keys split into shards (strided views of k and v, no copies), each an SDPA
// call with its lse, merged: the unsplit result, with sinks given once.
func TestMergeStates(t *testing.T) {
	r := rand.New(rand.NewSource(11))
	const B, H, Lq, Lk, D = 2, 3, 4, 40, 8
	q, rq := random(r, B, H, Lq, D)
	k, rk := random(r, B, H, Lk, D)
	v, rv := random(r, B, H, Lk, D)
	sinks := []float32{0.5, float32(math.Inf(-1)), -2}
	want, _, wantLse := refSDPA(rq, rk, rv, refOptions{sinks: []float64{0.5, math.Inf(-1), -2}})
	for _, shards := range []int{1, 2, 10} { // 10 > HWYATTN_GO_MERGE_DIRECT: copies
		t.Run(fmt.Sprint(shards), func(t *testing.T) {
			var outs, lses []Tensor
			for s := 0; s < shards; s++ {
				lo, hi := s*Lk/shards, (s+1)*Lk/shards
				view := func(x Tensor) Tensor {
					return Tensor{Data: x.Data[lo*D:], Shape: []int64{B, H, int64(hi - lo), D},
						Strides: []int64{H * Lk * D, Lk * D, D, 1}}
				}
				out, lse := NewTensor(B, H, Lq, D), NewTensor(B, H, Lq)
				if err := SDPA(q, view(k), view(v), &out, &Options{LSE: &lse}); err != nil {
					t.Fatal(err)
				}
				outs, lses = append(outs, out), append(lses, lse)
			}
			// In place: the result lands in the first shard's buffers.
			out0, lse0 := outs[0], lses[0]
			if err := MergeStates(outs, lses, sinks, &out0, &lse0); err != nil {
				t.Fatal(err)
			}
			if e := relErr(out0.Data, want); e > tolerance {
				t.Errorf("out: relative error %g", e)
			}
			if e := relErr(lse0.Data, wantLse); e > tolerance {
				t.Errorf("lse: relative error %g", e)
			}
		})
	}
	t.Run("errors", func(t *testing.T) {
		out := NewTensor(B, H, Lq, D)
		e := asError(t, MergeStates(nil, nil, nil, &out, nil))
		if !strings.Contains(e.Message, "n is 0") {
			t.Errorf("n = 0: %v", e)
		}
		o, l := NewTensor(B, H, Lq, D), NewTensor(B, H, Lq)
		e = asError(t, MergeStates([]Tensor{o}, []Tensor{l, l}, nil, &out, nil))
		if !strings.Contains(e.Message, "lses has 2") {
			t.Errorf("count mismatch: %v", e)
		}
		e = asError(t, MergeStates([]Tensor{o}, []Tensor{l}, []float32{0}, &out, nil))
		if !strings.Contains(e.Message, "sinks has 1") {
			t.Errorf("short sinks: %v", e)
		}
		short := Tensor{Data: l.Data[:5], Shape: l.Shape}
		e = asError(t, MergeStates([]Tensor{o}, []Tensor{short}, nil, &out, nil))
		if !strings.Contains(e.Message, "lses[0]: data has 5") {
			t.Errorf("short lse: %v", e)
		}
		wrong := NewTensor(B, H, Lq+1, D)
		e = asError(t, MergeStates([]Tensor{o}, []Tensor{l}, nil, &wrong, nil))
		if !strings.Contains(e.Message, "out") {
			t.Errorf("out shape: %v", e)
		}
	})
}

// refLinear is x [rows, in] W^T + b with W [out, in], in float64.
func refLinear(x []float64, rows, in int, w []float32, b []float32, outW int) []float64 {
	y := make([]float64, rows*outW)
	for r := 0; r < rows; r++ {
		for o := 0; o < outW; o++ {
			s := 0.0
			if b != nil {
				s = float64(b[o])
			}
			for i := 0; i < in; i++ {
				s += x[r*in+i] * float64(w[o*in+i])
			}
			y[r*outW+o] = s
		}
	}
	return y
}

// heads is [B, L, H*hd] as a dense4 [B, H, L, hd].
func heads(x []float64, B, L, H, hd int) dense4 {
	d := dense4{shape: [4]int{B, H, L, hd}, data: make([]float64, len(x))}
	for b := 0; b < B; b++ {
		for l := 0; l < L; l++ {
			for h := 0; h < H; h++ {
				for e := 0; e < hd; e++ {
					d.data[((b*H+h)*L+l)*hd+e] = x[((b*L+l)*H+h)*hd+e]
				}
			}
		}
	}
	return d
}

func randomSlice(r *rand.Rand, n int, scale float64) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(scale * (2*r.Float64() - 1))
	}
	return x
}

func TestMultiheadAttention(t *testing.T) {
	r := rand.New(rand.NewSource(13))
	const E, H, Hkv, hd, kdim, vdim = 16, 4, 2, 4, 12, 10
	const B, Lq, Lk = 2, 5, 7
	cfg := MHAConfig{EmbedDim: E, NumHeads: H, NumKVHeads: Hkv, KDim: kdim, VDim: vdim}
	w := MHAWeights{
		WQ: randomSlice(r, H*hd*E, 0.5), WK: randomSlice(r, Hkv*hd*kdim, 0.5),
		WV: randomSlice(r, Hkv*hd*vdim, 0.5), WO: randomSlice(r, E*H*hd, 0.5),
		BQ: randomSlice(r, H*hd, 0.1), BK: randomSlice(r, Hkv*hd, 0.1),
		BV: randomSlice(r, Hkv*hd, 0.1), BO: randomSlice(r, E, 0.1),
	}
	m, err := NewMultiheadAttention(cfg, w)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()

	query, rq := random(r, B, Lq, E)
	key, rk := random(r, B, Lk, kdim)
	value, rv := random(r, B, Lk, vdim)
	sinks := []float32{0, 1, -1, float32(math.Inf(-1))}
	out := NewTensor(B, Lq, E)
	opts := &Options{Causal: CausalBottomRight, Sinks: sinks}
	if err := m.Forward(query, &key, &value, &out, opts); err != nil {
		t.Fatal(err)
	}
	Q := refLinear(rq.data, B*Lq, E, w.WQ, w.BQ, H*hd)
	K := refLinear(rk.data, B*Lk, kdim, w.WK, w.BK, Hkv*hd)
	V := refLinear(rv.data, B*Lk, vdim, w.WV, w.BV, Hkv*hd)
	att, _, _ := refSDPA(heads(Q, B, Lq, H, hd), heads(K, B, Lk, Hkv, hd), heads(V, B, Lk, Hkv, hd),
		refOptions{causal: CausalBottomRight, sinks: []float64{0, 1, -1, math.Inf(-1)}})
	concat := make([]float64, B*Lq*H*hd) // [B, H, Lq, hd] -> [B, Lq, H*hd]
	for b := 0; b < B; b++ {
		for h := 0; h < H; h++ {
			for l := 0; l < Lq; l++ {
				for e := 0; e < hd; e++ {
					concat[((b*Lq+l)*H+h)*hd+e] = att[((b*H+h)*Lq+l)*hd+e]
				}
			}
		}
	}
	want := refLinear(concat, B*Lq, H*hd, w.WO, w.BO, E)
	if e := relErr(out.Data, want); e > tolerance {
		t.Errorf("cross-attention: relative error %g", e)
	}

	// Self-attention needs kdim = vdim = embed_dim: the library says so.
	e := asError(t, m.Forward(query, nil, nil, &out, nil))
	if !strings.Contains(e.Message, "kdim") {
		t.Errorf("self-attention on a cross layer: %v", e)
	}
	// Sinks are per head of the layer.
	e = asError(t, m.Forward(query, &key, &value, &out, &Options{Sinks: sinks[:3]}))
	if !strings.Contains(e.Message, "opts.Sinks has 3") {
		t.Errorf("short sinks: %v", e)
	}
	e = asError(t, m.Forward(query, &key, &value, &out, &Options{KVLen: []int32{7}}))
	if !strings.Contains(e.Message, "opts.KVLen has 1") {
		t.Errorf("short KVLen: %v", e)
	}

	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if err := m.Close(); err != nil {
		t.Fatal("second Close:", err)
	}
	e = asError(t, m.Forward(query, &key, &value, &out, nil))
	if !strings.Contains(e.Message, "closed") {
		t.Errorf("Forward after Close: %v", e)
	}
}

func TestMultiheadAttentionSelf(t *testing.T) {
	r := rand.New(rand.NewSource(17))
	const E, H, B, L = 8, 2, 3, 6
	hd := E / H
	w := MHAWeights{WQ: randomSlice(r, E*E, 0.5), WK: randomSlice(r, E*E, 0.5),
		WV: randomSlice(r, E*E, 0.5), WO: randomSlice(r, E*E, 0.5)}
	m, err := NewMultiheadAttention(MHAConfig{EmbedDim: E, NumHeads: H}, w)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	x, rx := random(r, B, L, E)
	out := NewTensor(B, L, E)
	kv := []int32{6, 3, 1}
	if err := m.Forward(x, nil, nil, &out, &Options{Causal: CausalTopLeft, KVLen: kv}); err != nil {
		t.Fatal(err)
	}
	P := func(wm []float32) dense4 { return heads(refLinear(rx.data, B*L, E, wm, nil, E), B, L, H, hd) }
	att, _, _ := refSDPA(P(w.WQ), P(w.WK), P(w.WV), refOptions{causal: CausalTopLeft, kvLen: kv})
	concat := make([]float64, B*L*E)
	for b := 0; b < B; b++ {
		for h := 0; h < H; h++ {
			for l := 0; l < L; l++ {
				for e := 0; e < hd; e++ {
					concat[((b*L+l)*H+h)*hd+e] = att[((b*H+h)*L+l)*hd+e]
				}
			}
		}
	}
	if e := relErr(out.Data, refLinear(concat, B*L, E, w.WO, nil, E)); e > tolerance {
		t.Errorf("self-attention: relative error %g", e)
	}
}

func TestNewMultiheadAttentionErrors(t *testing.T) {
	good := func() MHAWeights {
		return MHAWeights{WQ: make([]float32, 64), WK: make([]float32, 64), WV: make([]float32, 64),
			WO: make([]float32, 64)}
	}
	cfg := MHAConfig{EmbedDim: 8, NumHeads: 2}
	w := good()
	w.WK = w.WK[:63]
	if e := asError(t, nilMHA(NewMultiheadAttention(cfg, w))); !strings.Contains(e.Message, "w.WK has 63 elements") {
		t.Errorf("short WK: %v", e)
	}
	w = good()
	w.BQ = make([]float32, 8)
	if e := asError(t, nilMHA(NewMultiheadAttention(cfg, w))); !strings.Contains(e.Message, "w.BK is nil") {
		t.Errorf("one bias: %v", e)
	}
	// Rejected by the library, whose message names the field.
	if e := asError(t, nilMHA(NewMultiheadAttention(MHAConfig{EmbedDim: 10, NumHeads: 4}, good()))); !strings.Contains(e.Message, "embed_dim") {
		t.Errorf("indivisible embed_dim: %v", e)
	}
	if e := asError(t, nilMHA(NewMultiheadAttention(MHAConfig{EmbedDim: 8, NumHeads: 2, NumKVHeads: -1}, good()))); !strings.Contains(e.Message, "num_kv_heads") {
		t.Errorf("negative num_kv_heads: %v", e)
	}
}

func nilMHA(m *MultiheadAttention, err error) error {
	if m != nil {
		m.Close()
		return errors.New("created a layer from a bad config")
	}
	return err
}

func TestRuntime(t *testing.T) {
	if ABIVersion() != HeaderABIVersion {
		t.Errorf("library ABI %d, header %d", ABIVersion(), HeaderABIVersion)
	}
	if !regexp.MustCompile(`^\d+\.\d+\.\d+$`).MatchString(Version()) {
		t.Errorf("Version() is %q", Version())
	}
	if SIMDTarget() == "" {
		t.Error("no SIMD target")
	}
	before := NumThreads()
	defer SetNumThreads(before)
	if err := SetNumThreads(2); err != nil || NumThreads() != 2 {
		t.Errorf("SetNumThreads(2): %v, NumThreads %d", err, NumThreads())
	}
	e := asError(t, SetNumThreads(-1))
	if e.Status != InvalidArgument || !strings.Contains(e.Message, "-1") {
		t.Errorf("SetNumThreads(-1): %v", e)
	}
}

// An F16's exact value (the test's own decoding).
func fromF16(h uint16) float64 {
	exp, mant := int(h>>10)&0x1F, float64(h&0x3FF)
	mag := math.Ldexp(mant, -24)
	if exp != 0 {
		mag = math.Ldexp(1+mant/1024, exp-15)
	}
	if h&0x8000 != 0 {
		return -mag
	}
	return mag
}

// HalfTensor outputs: BF16 bits are the float32 result rounded to nearest
// even (toBF16, by hand), F16 bits the nearest binary16 (no closer
// neighbour); strided, through SDPA and a wrong-size slice refused.
func TestSDPAHalfOutputs(t *testing.T) {
	r := rand.New(rand.NewSource(11))
	const B, H, L, D = 2, 4, 5, 24
	mk := func() Tensor {
		x := NewTensor(B, H, L, D)
		for i := range x.Data {
			x.Data[i] = float32(r.NormFloat64())
		}
		return x
	}
	q, k, v := mk(), mk(), mk()
	opts := &Options{Causal: CausalBottomRight}
	want := NewTensor(B, H, L, D)
	if err := SDPA(q, k, v, &want, opts); err != nil {
		t.Fatal(err)
	}
	// [B, L, H, D] memory viewed as [B, H, L, D].
	strides := []int64{L * H * D, D, H * D, 1}
	at := func(b, h, l, d int) (int, int) { return ((b*H+h)*L+l)*D + d, ((b*L+l)*H+h)*D + d }
	for _, bf16 := range []bool{true, false} {
		out := &HalfTensor{Data: make([]uint16, B*H*L*D), Shape: []int64{B, H, L, D}, Strides: strides, BF16: bf16}
		if err := SDPA(q, k, v, out, opts); err != nil {
			t.Fatal(err)
		}
		for b := 0; b < B; b++ {
			for h := 0; h < H; h++ {
				for l := 0; l < L; l++ {
					for d := 0; d < D; d++ {
						i, j := at(b, h, l, d)
						w, got := want.Data[i], out.Data[j]
						if bf16 {
							if got != toBF16(w) {
								t.Fatalf("bf16 out[%d] = %#x; the rounded %g is %#x", i, got, w, toBF16(w))
							}
							continue
						}
						e := math.Abs(fromF16(got) - float64(w))
						if e > math.Abs(fromF16(got+1)-float64(w)) || e > math.Abs(fromF16(got-1)-float64(w)) {
							t.Fatalf("f16 out[%d] = %g is not the nearest binary16 to %g", i, fromF16(got), w)
						}
					}
				}
			}
		}
	}
	short := &HalfTensor{Data: make([]uint16, 7), Shape: []int64{B, H, L, D}, BF16: true}
	if err := SDPA(q, k, v, short, opts); err == nil || !strings.Contains(err.Error(), "out: data has 7 elements") {
		t.Fatalf("a short HalfTensor: %v", err)
	}
	var none *HalfTensor
	if err := SDPA(q, k, v, none, opts); err == nil || !strings.Contains(err.Error(), "out is nil") {
		t.Fatalf("a nil HalfTensor: %v", err)
	}
}
