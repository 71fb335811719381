// SPDX-License-Identifier: Apache-2.0

package hwyattn

// KVCacheWrite and KVAttention against a float64 oracle written here from
// include/hwyattn.h's rules: the pages the write leaves (exact F32, BF16
// rounded by hand, I8 within half a quantization step), and attention of
// mixed batches (chunked prefill, decode, full prefill) over paged and
// contiguous caches.

import (
	"errors"
	"math"
	"math/rand"
	"strings"
	"testing"
)

// kvRefOptions are the rules the oracle applies; scale 0 = 1/sqrt(D).
type kvRefOptions struct {
	scale                   float64
	causal                  bool
	windowLeft, windowRight int
	softcap                 float64
	alibi, sinks            []float64
}

// refKVAttention: q [T, Hq, D]; key(s, t, h, d) and val(s, t, h, d) are the
// (dequantized) cache values of sequence s's key t at kv head h.
func refKVAttention(q []float32, T, Hq, Hkv, D, Dv int, key, val func(s, t, h, d int) float64,
	qStart, kvLen, qPos []int32, o kvRefOptions) (out, lse []float64) {
	scale := o.scale
	if scale == 0 {
		scale = 1 / math.Sqrt(float64(D))
	}
	out = make([]float64, T*Hq*Dv)
	lse = make([]float64, T*Hq)
	for s := range kvLen {
		q0, qLen, n := int(qStart[s]), int(qStart[s+1]-qStart[s]), int(kvLen[s])
		firstPos := n - qLen
		if qPos != nil {
			firstPos = int(qPos[s])
		}
		for h := 0; h < Hq; h++ {
			hk := h / (Hq / Hkv)
			sink := math.Inf(-1)
			if o.sinks != nil {
				sink = o.sinks[h]
			}
			for i := 0; i < qLen; i++ {
				pos := firstPos + i
				var keys []int
				var sc []float64
				for t := 0; t < n; t++ {
					if (o.causal && t > pos) || (o.windowLeft > 0 && t <= pos-o.windowLeft) ||
						(o.windowRight > 0 && t >= pos+o.windowRight) {
						continue
					}
					dot := 0.0
					for d := 0; d < D; d++ {
						dot += float64(q[((q0+i)*Hq+h)*D+d]) * key(s, t, hk, d)
					}
					x := scale * dot
					if o.softcap > 0 {
						x = o.softcap * math.Tanh(x/o.softcap)
					}
					if o.alibi != nil {
						x += o.alibi[h] * float64(t-pos)
					}
					keys = append(keys, t)
					sc = append(sc, x)
				}
				row := (q0+i)*Hq + h
				if len(keys) == 0 {
					lse[row] = sink
					continue
				}
				m := sink
				for _, x := range sc {
					m = math.Max(m, x)
				}
				sum := 0.0
				if !math.IsInf(sink, -1) {
					sum = math.Exp(sink - m)
				}
				for _, x := range sc {
					sum += math.Exp(x - m)
				}
				lse[row] = m + math.Log(sum)
				for j, t := range keys {
					w := math.Exp(sc[j] - lse[row])
					for d := 0; d < Dv; d++ {
						out[row*Dv+d] += w * val(s, t, hk, d)
					}
				}
			}
		}
	}
	return out, lse
}

// kvStep is one step: sequences with kvLen keys (this step's included) of
// which qLen are new, their raw keys/values [len, Hkv, D] and the queries.
type kvStep struct {
	Hq, Hkv, D, Dv int
	kvLen, qLen    []int32
	qStart         []int32
	k, v           [][]float32
	q              []float32
	T              int
}

func newKVStep(r *rand.Rand, hq, hkv, d, dv int, kvLen, qLen []int32) *kvStep {
	st := &kvStep{Hq: hq, Hkv: hkv, D: d, Dv: dv, kvLen: kvLen, qLen: qLen, qStart: []int32{0}}
	for s := range kvLen {
		st.k = append(st.k, randSlice(r, int(kvLen[s])*hkv*d, 2))
		st.v = append(st.v, randSlice(r, int(kvLen[s])*hkv*dv, 2))
		st.T += int(qLen[s])
		st.qStart = append(st.qStart, int32(st.T))
	}
	st.q = randSlice(r, st.T*hq*d, 1)
	return st
}

func randSlice(r *rand.Rand, n int, amp float64) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32((2*r.Float64() - 1) * amp)
	}
	return x
}

// write puts every token into the cache through KVCacheWrite: the history
// in one call, this step's tokens in a second, each with a skipped token.
func (st *kvStep) write(t *testing.T, c *KVCache, slot func(s, t int) int64) {
	t.Helper()
	for pass := 0; pass < 2; pass++ {
		var kn, vn []float32
		var slots []int64
		for s := range st.kvLen {
			firstNew := int(st.kvLen[s] - st.qLen[s])
			from, to := 0, firstNew
			if pass == 1 {
				from, to = firstNew, int(st.kvLen[s])
			}
			for tok := from; tok < to; tok++ {
				kn = append(kn, st.k[s][tok*st.Hkv*st.D:(tok+1)*st.Hkv*st.D]...)
				vn = append(vn, st.v[s][tok*st.Hkv*st.Dv:(tok+1)*st.Hkv*st.Dv]...)
				slots = append(slots, slot(s, tok))
			}
		}
		for i := 0; i < st.Hkv*st.D; i++ {
			kn = append(kn, 1e6)
		}
		for i := 0; i < st.Hkv*st.Dv; i++ {
			vn = append(vn, 1e6)
		}
		slots = append(slots, -1)
		n := int64(len(slots))
		err := KVCacheWrite(c, Tensor{Data: kn, Shape: []int64{n, int64(st.Hkv), int64(st.D)}},
			Tensor{Data: vn, Shape: []int64{n, int64(st.Hkv), int64(st.Dv)}}, slots)
		if err != nil {
			t.Fatalf("KVCacheWrite: %v", err)
		}
	}
}

func (st *kvStep) raw(kind int, s, tok, h, d int) float64 {
	if kind == 0 {
		return float64(st.k[s][(tok*st.Hkv+h)*st.D+d])
	}
	return float64(st.v[s][(tok*st.Hkv+h)*st.Dv+d])
}

// paging assigns each sequence's pages from a shuffled pool; the block
// table has a spare column.
func paging(r *rand.Rand, kvLen []int32, pageSize, numPages int) (table []int32, stride int) {
	for _, n := range kvLen {
		if p := (int(n) + pageSize - 1) / pageSize; p > stride {
			stride = p
		}
	}
	stride++
	pool := r.Perm(numPages)
	table = make([]int32, len(kvLen)*stride)
	for i := range table {
		table[i] = -1
	}
	next := 0
	for s, n := range kvLen {
		for j := 0; j < (int(n)+pageSize-1)/pageSize; j++ {
			table[s*stride+j] = int32(pool[next])
			next++
		}
	}
	return table, stride
}

func maxRelErr(got []float32, want []float64) float64 {
	errMax, mag := 0.0, 0.0
	for i := range want {
		errMax = math.Max(errMax, math.Abs(float64(got[i])-want[i]))
		mag = math.Max(mag, math.Abs(want[i]))
	}
	if mag > 0 {
		return errMax / mag
	}
	return errMax
}

func TestKVPagedF32MixedBatch(t *testing.T) {
	r := rand.New(rand.NewSource(17))
	// A chunked prefill (3 new of 9), a decode, a one-token prompt, a full
	// prefill; GQA 4 over 2 heads, D 8, Dv 6, pages of 4.
	st := newKVStep(r, 4, 2, 8, 6, []int32{9, 6, 1, 7}, []int32{3, 1, 1, 7})
	const P, S = 11, 4
	cache, err := NewKVCache(CacheF32, P, 2, S, 8, 6)
	if err != nil {
		t.Fatal(err)
	}
	table, stride := paging(r, st.kvLen, S, P)
	cache.BlockTable, cache.BlockTableStride = table, int64(stride)
	slot := func(s, tok int) int64 { return int64(table[s*stride+tok/S])*S + int64(tok%S) }
	st.write(t, cache, slot)

	kp, vp := cache.K.Data.(F32Pages), cache.V.Data.(F32Pages)
	written := 0
	for s := range st.kvLen {
		for tok := 0; tok < int(st.kvLen[s]); tok++ {
			page, off := int(slot(s, tok)/S), int(slot(s, tok)%S)
			for h := 0; h < 2; h++ {
				for d := 0; d < 8; d++ {
					if got := float64(kp[((page*2+h)*S+off)*8+d]); got != st.raw(0, s, tok, h, d) {
						t.Fatalf("k of seq %d token %d head %d [%d]: %g, want %g", s, tok, h, d, got, st.raw(0, s, tok, h, d))
					}
				}
				for d := 0; d < 6; d++ {
					if got := float64(vp[((page*2+h)*S+off)*6+d]); got != st.raw(1, s, tok, h, d) {
						t.Fatalf("v of seq %d token %d: %g, want %g", s, tok, got, st.raw(1, s, tok, h, d))
					}
				}
			}
			written++
		}
	}
	nonzero := 0
	for _, x := range kp {
		if x != 0 {
			nonzero++
		}
	}
	if nonzero != written*2*8 {
		t.Errorf("%d nonzero key elements; %d tokens were written (the skipped token must not be)", nonzero, written)
	}

	key := func(s, tok, h, d int) float64 { return st.raw(0, s, tok, h, d) }
	val := func(s, tok, h, d int) float64 { return st.raw(1, s, tok, h, d) }
	batch := KVBatch{QStart: st.qStart, KVLen: st.kvLen}
	out := NewTensor(int64(st.T), 4, 6)
	lse := NewTensor(int64(st.T), 4)
	opts := &Options{Scale: Scale(0.3), Causal: CausalBottomRight, WindowLeft: 5, Softcap: 1.5,
		ALiBiSlopes: []float32{0.25, -0.5, 0.125, 0}, Sinks: []float32{0.5, -1, 2, -3}, LSE: &lse}
	if err := KVAttention(Tensor{Data: st.q, Shape: []int64{int64(st.T), 4, 8}}, cache, batch, &out, opts); err != nil {
		t.Fatal(err)
	}
	wantOut, wantLSE := refKVAttention(st.q, st.T, 4, 2, 8, 6, key, val, st.qStart, st.kvLen, nil,
		kvRefOptions{scale: float64(float32(0.3)), causal: true, windowLeft: 5, softcap: 1.5,
			alibi: []float64{0.25, -0.5, 0.125, 0}, sinks: []float64{0.5, -1, 2, -3}})
	if e := maxRelErr(out.Data, wantOut); e > tolerance {
		t.Errorf("out: relative error %g", e)
	}
	if e := maxRelErr(lse.Data, wantLSE); e > tolerance {
		t.Errorf("lse: relative error %g", e)
	}

	// Defaults (Scale nil = 1/sqrt(D), no causal rule) with explicit positions.
	batch.QPos = []int32{2, 5, 0, 0}
	if err := KVAttention(Tensor{Data: st.q, Shape: []int64{int64(st.T), 4, 8}}, cache, batch, &out,
		&Options{WindowRight: 2}); err != nil {
		t.Fatal(err)
	}
	wantOut, _ = refKVAttention(st.q, st.T, 4, 2, 8, 6, key, val, st.qStart, st.kvLen, batch.QPos,
		kvRefOptions{windowRight: 2})
	if e := maxRelErr(out.Data, wantOut); e > tolerance {
		t.Errorf("out with q_pos: relative error %g", e)
	}
}

// bf16 by hand: round to nearest, ties to even (finite values).
func toBF16(x float32) uint16 {
	b := math.Float32bits(x)
	return uint16((b + 0x7FFF + (b>>16)&1) >> 16)
}

func fromBF16(b uint16) float64 { return float64(math.Float32frombits(uint32(b) << 16)) }

func TestKVContiguousBF16FlashLayout(t *testing.T) {
	r := rand.New(rand.NewSource(18))
	st := newKVStep(r, 6, 3, 16, 16, []int32{12, 4, 7}, []int32{2, 1, 7})
	const P, S, H, D = 3, 12, 3, 16
	// No block table: sequence s is page s. Memory [pages, slot, Hkv, D].
	strides := []int64{S * H * D, D, H * D, 1}
	kp, vp := make(BF16Pages, P*S*H*D), make(BF16Pages, P*S*H*D)
	cache := &KVCache{
		K: PageTensor{Data: kp, Shape: []int64{P, H, S, D}, Strides: strides},
		V: PageTensor{Data: vp, Shape: []int64{P, H, S, D}, Strides: strides},
	}
	st.write(t, cache, func(s, tok int) int64 { return int64(s*S + tok) })
	at := func(s, tok, h, d int) int { return ((s*S+tok)*H+h)*D + d }
	for s := range st.kvLen {
		for tok := 0; tok < int(st.kvLen[s]); tok++ {
			for h := 0; h < H; h++ {
				for d := 0; d < D; d++ {
					if kp[at(s, tok, h, d)] != toBF16(float32(st.raw(0, s, tok, h, d))) ||
						vp[at(s, tok, h, d)] != toBF16(float32(st.raw(1, s, tok, h, d))) {
						t.Fatalf("seq %d token %d head %d [%d]: not the input rounded to bf16", s, tok, h, d)
					}
				}
			}
		}
	}
	key := func(s, tok, h, d int) float64 { return fromBF16(kp[at(s, tok, h, d)]) }
	val := func(s, tok, h, d int) float64 { return fromBF16(vp[at(s, tok, h, d)]) }
	out := NewTensor(int64(st.T), 6, 16)
	if err := KVAttention(Tensor{Data: st.q, Shape: []int64{int64(st.T), 6, 16}}, cache,
		KVBatch{QStart: st.qStart, KVLen: st.kvLen}, &out, &Options{Causal: CausalTopLeft}); err != nil {
		t.Fatal(err)
	}
	want, _ := refKVAttention(st.q, st.T, 6, 3, 16, 16, key, val, st.qStart, st.kvLen, nil,
		kvRefOptions{causal: true})
	if e := maxRelErr(out.Data, want); e > tolerance {
		t.Errorf("out: relative error %g", e)
	}
}

func TestKVPagedI8Scales(t *testing.T) {
	r := rand.New(rand.NewSource(19))
	st := newKVStep(r, 2, 1, 8, 4, []int32{10, 3}, []int32{1, 3})
	const P, S = 6, 4
	cache, err := NewKVCache(CacheI8, P, 1, S, 8, 4) // per-token scales
	if err != nil {
		t.Fatal(err)
	}
	// Values: per-channel scales, fixed here.
	vs := Tensor{Data: []float32{0.004, 0.008, 0.012, 0.016}, Shape: []int64{1, 1, 1, 4}}
	cache.VScale = &vs
	table, stride := paging(r, st.kvLen, S, P)
	cache.BlockTable, cache.BlockTableStride = table, int64(stride)
	slot := func(s, tok int) int64 { return int64(table[s*stride+tok/S])*S + int64(tok%S) }
	st.write(t, cache, slot)

	kp, vp, ks := cache.K.Data.(I8Pages), cache.V.Data.(I8Pages), cache.KScale.Data
	for s := range st.kvLen {
		for tok := 0; tok < int(st.kvLen[s]); tok++ {
			sl := int(slot(s, tok))
			amax := 0.0
			for d := 0; d < 8; d++ {
				amax = math.Max(amax, math.Abs(st.raw(0, s, tok, 0, d)))
			}
			if got, want := ks[sl], float32(amax)/127; got != want {
				t.Errorf("seq %d token %d: scale %g, want %g", s, tok, got, want)
			}
			for d := 0; d < 8; d++ {
				if e := math.Abs(float64(kp[sl*8+d])*float64(ks[sl]) - st.raw(0, s, tok, 0, d)); e > amax/254*1.0001 {
					t.Errorf("seq %d token %d k[%d]: off by %g, more than half a step", s, tok, d, e)
				}
			}
			for d := 0; d < 4; d++ {
				want := math.Max(-127, math.Min(127, math.RoundToEven(st.raw(1, s, tok, 0, d)/float64(vs.Data[d]))))
				if float64(vp[sl*4+d]) != want {
					t.Errorf("seq %d token %d v[%d]: %d, want %g", s, tok, d, vp[sl*4+d], want)
				}
			}
		}
	}
	key := func(s, tok, h, d int) float64 {
		sl := int(slot(s, tok))
		return float64(kp[sl*8+d]) * float64(ks[sl])
	}
	val := func(s, tok, h, d int) float64 { return float64(vp[int(slot(s, tok))*4+d]) * float64(vs.Data[d]) }
	out := NewTensor(int64(st.T), 2, 4)
	if err := KVAttention(Tensor{Data: st.q, Shape: []int64{int64(st.T), 2, 8}}, cache,
		KVBatch{QStart: st.qStart, KVLen: st.kvLen}, &out, &Options{Scale: Scale(0.5), Causal: CausalBottomRight}); err != nil {
		t.Fatal(err)
	}
	want, _ := refKVAttention(st.q, st.T, 2, 1, 8, 4, key, val, st.qStart, st.kvLen, nil,
		kvRefOptions{scale: 0.5, causal: true})
	if e := maxRelErr(out.Data, want); e > tolerance {
		t.Errorf("out: relative error %g", e)
	}
}

// fp8E4M3 is an E4M3 number's value from its fields (NaN for S.1111.111).
func fp8E4M3(b uint8) float64 {
	e, m := int(b>>3)&15, float64(b&7)
	v := math.Ldexp(1+m/8, e-7)
	if e == 0 {
		v = math.Ldexp(m/8, -6)
	}
	if b&0x7F == 0x7F {
		v = math.NaN()
	}
	if b&0x80 != 0 {
		v = -v
	}
	return v
}

// An E4M3 cache with vLLM's two per-tensor scales: the write's bytes are
// each value / scale rounded to the nearest E4M3 number (checked by
// search), and attention matches the reference over the decoded pages.
func TestKVPagedFp8PerTensorScales(t *testing.T) {
	r := rand.New(rand.NewSource(23))
	st := newKVStep(r, 2, 1, 8, 4, []int32{10, 3}, []int32{1, 3})
	const P, S = 6, 4
	cache, err := NewKVCache(CacheF8E4M3, P, 1, S, 8, 4)
	if err != nil {
		t.Fatal(err)
	}
	ks := Tensor{Data: []float32{0.005}, Shape: []int64{1}}
	vs := Tensor{Data: []float32{0.004}, Shape: []int64{1}}
	cache.KScale, cache.VScale = &ks, &vs
	table, stride := paging(r, st.kvLen, S, P)
	cache.BlockTable, cache.BlockTableStride = table, int64(stride)
	slot := func(s, tok int) int64 { return int64(table[s*stride+tok/S])*S + int64(tok%S) }
	st.write(t, cache, slot)
	kp, vp := cache.K.Data.(F8E4M3Pages), cache.V.Data.(F8E4M3Pages)
	nearest := func(x float64) uint8 { // the nearest finite E4M3 number, ties to the even pattern
		best := uint8(0)
		for c := 1; c <= 0x7E; c++ {
			e, be := math.Abs(fp8E4M3(uint8(c))-math.Abs(x)), math.Abs(fp8E4M3(best)-math.Abs(x))
			if e < be || (e == be && c%2 == 0) {
				best = uint8(c)
			}
		}
		if math.Signbit(x) {
			best |= 0x80
		}
		return best
	}
	for s := range st.kvLen {
		for tok := 0; tok < int(st.kvLen[s]); tok++ {
			sl := int(slot(s, tok))
			for d := 0; d < 8; d++ {
				x := float64(float32(st.raw(0, s, tok, 0, d)) / ks.Data[0])
				if got, want := kp[sl*8+d], nearest(x); got != want {
					t.Errorf("seq %d token %d k[%d]: %#x, want %#x", s, tok, d, got, want)
				}
			}
		}
	}
	key := func(s, tok, h, d int) float64 { return fp8E4M3(kp[int(slot(s, tok))*8+d]) * float64(ks.Data[0]) }
	val := func(s, tok, h, d int) float64 { return fp8E4M3(vp[int(slot(s, tok))*4+d]) * float64(vs.Data[0]) }
	out := NewTensor(int64(st.T), 2, 4)
	if err := KVAttention(Tensor{Data: st.q, Shape: []int64{int64(st.T), 2, 8}}, cache,
		KVBatch{QStart: st.qStart, KVLen: st.kvLen}, &out, &Options{Causal: CausalBottomRight}); err != nil {
		t.Fatal(err)
	}
	want, _ := refKVAttention(st.q, st.T, 2, 1, 8, 4, key, val, st.qStart, st.kvLen, nil,
		kvRefOptions{scale: 1 / math.Sqrt(8), causal: true})
	if e := maxRelErr(out.Data, want); e > tolerance {
		t.Errorf("out: relative error %g", e)
	}
}

func TestKVErrors(t *testing.T) {
	cache, err := NewKVCache(CacheF32, 4, 1, 4, 4, 4)
	if err != nil {
		t.Fatal(err)
	}
	cache.BlockTable, cache.BlockTableStride = []int32{0, 1, 99, -1}, 2
	q := Tensor{Data: make([]float32, 2*2*4), Shape: []int64{2, 2, 4}}
	out := NewTensor(2, 2, 4)
	for i := range out.Data {
		out.Data[i] = -7
	}
	batch := KVBatch{QStart: []int32{0, 1, 2}, KVLen: []int32{5, 2}}
	untouched := func(what string) {
		t.Helper()
		for _, x := range out.Data {
			if x != -7 {
				t.Fatalf("%s: a failed call wrote out", what)
			}
		}
		for _, x := range cache.K.Data.(F32Pages) {
			if x != 0 {
				t.Fatalf("%s: a failed call wrote the cache", what)
			}
		}
	}

	// The library's message: a page outside the pool.
	err = KVAttention(q, cache, batch, &out, &Options{Causal: CausalBottomRight})
	var e *Error
	if !errors.As(err, &e) || e.Status != InvalidArgument || !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("page 99: %v", err)
	}
	if !strings.Contains(e.Message, "block_table[1][0]") || !strings.Contains(e.Message, "99") {
		t.Errorf("page 99: message %q", e.Message)
	}
	untouched("page 99")
	cache.BlockTable[2] = 2

	kn := Tensor{Data: []float32{1, 2, 3, 4, 5, 6, 7, 8}, Shape: []int64{2, 1, 4}}
	cases := []struct {
		name, want string
		call       func() error
	}{
		{"slot twice", "slot", func() error { return KVCacheWrite(cache, kn, kn, []int64{5, 5}) }},
		{"slot past the pool", "slot", func() error { return KVCacheWrite(cache, kn, kn, []int64{0, 16}) }},
		{"slots short", "slots has 1 entries but kNew has 2 tokens",
			func() error { return KVCacheWrite(cache, kn, kn, []int64{0}) }},
		{"zero scale", "opts.Scale is 0", func() error {
			return KVAttention(q, cache, batch, &out, &Options{Scale: Scale(0)})
		}},
		{"q_start", "batch.QStart has 2 entries for 2 sequences", func() error {
			return KVAttention(q, cache, KVBatch{QStart: []int32{0, 2}, KVLen: []int32{5, 2}}, &out, nil)
		}},
		{"q_pos", "batch.QPos has 1 entries", func() error {
			return KVAttention(q, cache, KVBatch{QStart: []int32{0, 1, 2}, KVLen: []int32{5, 2}, QPos: []int32{0}}, &out, nil)
		}},
		{"short table", "cache.BlockTable has 2 entries", func() error {
			c := *cache
			c.BlockTable = []int32{0, 1}
			return KVAttention(q, &c, batch, &out, nil)
		}},
		{"short pages", "cache.K: data has 3 elements", func() error {
			c := *cache
			c.K.Data = F32Pages{0, 0, 0}
			return KVAttention(q, &c, batch, &out, nil)
		}},
		{"mask", "opts: KVAttention takes no Mask", func() error {
			m := NewTensor(1)
			return KVAttention(q, cache, batch, &out, &Options{Mask: &m})
		}},
		{"short sinks", "opts.Sinks has 1 values", func() error {
			return KVAttention(q, cache, batch, &out, &Options{Sinks: []float32{0}})
		}},
		{"i8 without scales", "scale", func() error {
			c := *cache
			c.K.Data, c.V.Data = make(I8Pages, 64), make(I8Pages, 64)
			return KVAttention(q, &c, batch, &out, nil)
		}},
	}
	for _, c := range cases {
		err := c.call()
		if !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v; want an invalid argument naming %q", c.name, err, c.want)
		}
		untouched(c.name)
	}
	if _, err := NewKVCache(CacheF8E5M2+1, 1, 1, 1, 1, 1); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("NewKVCache with a bad dtype: %v", err)
	}
}
