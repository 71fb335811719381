// SPDX-License-Identifier: Apache-2.0

package hwyattn

// KVCacheWrite and KVAttention against a float64 oracle written here from
// include/hwyattn.h's rules: the pages the write leaves (exact F32, BF16
// rounded by hand, I8 and I4 within half a quantization step, ggml's block
// formats decoded here from their bytes), and attention of mixed batches
// (chunked prefill, decode, full prefill) over paged and contiguous caches,
// and PrecisionInt8 against PrecisionF32 (the header's bound; PrecisionF32's
// bits on a float K).

import (
	"errors"
	"math"
	"math/rand"
	"strings"
	"testing"
	"unsafe"
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
	if _, err := NewKVCache(CacheI4+1, 1, 1, 1, 1, 1); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("NewKVCache with a bad dtype: %v", err)
	}
}

// f16Value is an IEEE binary16's value.
func f16Value(b uint16) float64 {
	e, m := int(b>>10)&31, float64(b&1023)
	var v float64
	switch {
	case e == 0:
		v = math.Ldexp(m, -24)
	case e == 31 && m == 0:
		v = math.Inf(1)
	case e == 31:
		v = math.NaN()
	default:
		v = math.Ldexp(1+m/1024, e-15)
	}
	if b>>15 != 0 {
		v = -v
	}
	return v
}

var iq4NLLevels = [16]float64{-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113}

// blockElement is element j of ggml block b of dtype, from
// include/hwyattn.h's table: an fp16 d (and m) in the machine's byte order,
// element j < 16 the low nibble of qs[j], j + 16 its high nibble, Q5's
// fifth bit j bit j of the little-endian 32-bit qh.
func blockElement(dtype CacheDType, b []byte, j int) float64 {
	half := func(at int) float64 {
		if isLittleEndian() {
			return f16Value(uint16(b[at]) | uint16(b[at+1])<<8)
		}
		return f16Value(uint16(b[at])<<8 | uint16(b[at+1]))
	}
	d := half(0)
	if dtype == CacheQ8_0 {
		return d * float64(int8(b[2+j]))
	}
	qs := b[len(b)-16:]
	q := int(qs[j%16] & 15)
	if j >= 16 {
		q = int(qs[j-16] >> 4)
	}
	if dtype == CacheQ5_0 || dtype == CacheQ5_1 {
		at := 2
		if dtype == CacheQ5_1 {
			at = 4
		}
		qh := uint32(b[at]) | uint32(b[at+1])<<8 | uint32(b[at+2])<<16 | uint32(b[at+3])<<24
		q |= int((qh>>j)&1) << 4
	}
	switch dtype {
	case CacheQ4_0:
		return d * float64(q-8)
	case CacheQ5_0:
		return d * float64(q-16)
	case CacheIQ4_NL:
		return d * iq4NLLevels[q]
	}
	return float64(float32(d*float64(q) + half(2))) // Q4_1, Q5_1: d * q + m rounded once to fp32
}

// pagesBytes is the bytes of a packed Pages value.
func pagesBytes(p Pages) []byte {
	switch x := p.(type) {
	case Q8_0Pages:
		return x
	case Q4_0Pages:
		return x
	case Q4_1Pages:
		return x
	case Q5_0Pages:
		return x
	case Q5_1Pages:
		return x
	case IQ4_NLPages:
		return x
	case I4Pages:
		return x
	}
	return nil
}

func isLittleEndian() bool {
	x := uint16(1)
	return *(*byte)(unsafe.Pointer(&x)) == 1
}

// Every block format, paged: the write, attention of a mixed batch, and the
// oracle over the pages decoded here (each value within a step of its
// block's largest input magnitude).
func TestKVBlockFormats(t *testing.T) {
	for i, f := range []struct {
		name  string
		dtype CacheDType
		bb    int
		step  float64
	}{
		{"Q8_0", CacheQ8_0, 34, 1.0 / 127}, {"Q4_0", CacheQ4_0, 18, 1.0 / 7}, {"Q4_1", CacheQ4_1, 20, 1.0 / 7},
		{"Q5_0", CacheQ5_0, 22, 1.0 / 15}, {"Q5_1", CacheQ5_1, 24, 1.0 / 28}, {"IQ4_NL", CacheIQ4_NL, 18, 1.0 / 7},
	} {
		t.Run(f.name, func(t *testing.T) {
			r := rand.New(rand.NewSource(int64(31 + i)))
			const Hq, Hkv, D, Dv, P, S = 4, 2, 64, 32, 11, 4
			st := newKVStep(r, Hq, Hkv, D, Dv, []int32{9, 6, 1, 7}, []int32{3, 1, 1, 7})
			if BlockBytes(f.dtype) != int64(f.bb) {
				t.Fatalf("BlockBytes %d, want %d", BlockBytes(f.dtype), f.bb)
			}
			cache, err := NewKVCache(f.dtype, P, Hkv, S, D, Dv)
			if err != nil {
				t.Fatal(err)
			}
			kb, vb := pagesBytes(cache.K.Data), pagesBytes(cache.V.Data)
			if len(kb) != P*Hkv*S*D/32*f.bb || len(vb) != P*Hkv*S*Dv/32*f.bb {
				t.Fatalf("pages of %d and %d bytes", len(kb), len(vb))
			}
			table, stride := paging(r, st.kvLen, S, P)
			cache.BlockTable, cache.BlockTableStride = table, int64(stride)
			slot := func(s, tok int) int64 { return int64(table[s*stride+tok/S])*S + int64(tok%S) }
			st.write(t, cache, slot)
			element := func(b []byte, dim, s, tok, h, d int) float64 {
				sl := int(slot(s, tok))
				row := (sl/S*Hkv+h)*S + sl%S
				at := (row*dim/32 + d/32) * f.bb
				return blockElement(f.dtype, b[at:at+f.bb], d%32)
			}
			key := func(s, tok, h, d int) float64 { return element(kb, D, s, tok, h, d) }
			val := func(s, tok, h, d int) float64 { return element(vb, Dv, s, tok, h, d) }
			for s := range st.kvLen {
				for tok := 0; tok < int(st.kvLen[s]); tok++ {
					for h := 0; h < Hkv; h++ {
						for c0 := 0; c0 < D; c0 += 32 {
							amax := 0.0
							for d := c0; d < c0+32; d++ {
								amax = math.Max(amax, math.Abs(st.raw(0, s, tok, h, d)))
							}
							for d := c0; d < c0+32; d++ {
								if e := math.Abs(key(s, tok, h, d) - st.raw(0, s, tok, h, d)); e > amax*f.step*1.01 {
									t.Fatalf("seq %d token %d head %d k[%d]: off by %g (block max %g)", s, tok, h, d, e, amax)
								}
							}
						}
					}
				}
			}
			out := NewTensor(int64(st.T), Hq, Dv)
			lse := NewTensor(int64(st.T), Hq)
			if err := KVAttention(Tensor{Data: st.q, Shape: []int64{int64(st.T), Hq, D}}, cache,
				KVBatch{QStart: st.qStart, KVLen: st.kvLen}, &out, &Options{Causal: CausalBottomRight, LSE: &lse}); err != nil {
				t.Fatal(err)
			}
			wantOut, wantLSE := refKVAttention(st.q, st.T, Hq, Hkv, D, Dv, key, val, st.qStart, st.kvLen, nil,
				kvRefOptions{causal: true})
			if e := maxRelErr(out.Data, wantOut); e > tolerance {
				t.Errorf("out: relative error %g", e)
			}
			if e := maxRelErr(lse.Data, wantLSE); e > tolerance {
				t.Errorf("lse: relative error %g", e)
			}
		})
	}
}

// i4Case: an I4 cache with K scales per token (kChannel nil) or per
// channel [1, Hkv, 1, D], V scales per token; odd D pads each row's last
// byte. The numbers the write leaves, and attention against the oracle.
func i4Case(t *testing.T, seed int64, D, Dv int, kChannel []float32) {
	r := rand.New(rand.NewSource(seed))
	const Hq, Hkv, P, S = 4, 2, 11, 4
	st := newKVStep(r, Hq, Hkv, D, Dv, []int32{9, 6, 1, 7}, []int32{3, 1, 1, 7})
	cache, err := NewKVCache(CacheI4, P, Hkv, S, int64(D), int64(Dv))
	if err != nil {
		t.Fatal(err)
	}
	krow, vrow := (D+1)/2, (Dv+1)/2
	if n, _ := PagesLen(CacheI4, P, Hkv, S, int64(D)); n != P*Hkv*S*krow || len(cache.K.Data.(I4Pages)) != n {
		t.Fatalf("PagesLen %d; want %d", n, P*Hkv*S*krow)
	}
	if kChannel != nil {
		cache.KScale = &Tensor{Data: kChannel, Shape: []int64{1, Hkv, 1, int64(D)}}
	}
	table, stride := paging(r, st.kvLen, S, P)
	cache.BlockTable, cache.BlockTableStride = table, int64(stride)
	slot := func(s, tok int) int64 { return int64(table[s*stride+tok/S])*S + int64(tok%S) }
	st.write(t, cache, slot)
	kp, vp := cache.K.Data.(I4Pages), cache.V.Data.(I4Pages)
	row := func(s, tok, h int) int { sl := int(slot(s, tok)); return (sl/S*Hkv+h)*S + sl%S }
	number := func(p I4Pages, rowBytes, s, tok, h, d int) float64 {
		b := p[row(s, tok, h)*rowBytes+d/2]
		x := int(b & 15)
		if d%2 == 1 {
			x = int(b >> 4)
		}
		if x >= 8 {
			x -= 16
		}
		return float64(x)
	}
	kScale := func(s, tok, h, d int) float64 {
		if kChannel != nil {
			return float64(kChannel[h*D+d])
		}
		return float64(cache.KScale.Data[row(s, tok, h)])
	}
	for s := range st.kvLen {
		for tok := 0; tok < int(st.kvLen[s]); tok++ {
			for h := 0; h < Hkv; h++ {
				amax := 0.0
				for d := 0; d < Dv; d++ {
					amax = math.Max(amax, math.Abs(st.raw(1, s, tok, h, d)))
				}
				if got, want := cache.VScale.Data[row(s, tok, h)], float32(amax)/7; got != want {
					t.Errorf("seq %d token %d head %d: v scale %g, want %g", s, tok, h, got, want)
				}
				for d := 0; d < D; d++ {
					x := float64(float32(st.raw(0, s, tok, h, d)) / float32(kScale(s, tok, h, d)))
					want := math.Max(-8, math.Min(7, math.RoundToEven(x)))
					if got := number(kp, krow, s, tok, h, d); got != want {
						t.Errorf("seq %d token %d head %d k[%d]: %g, want %g (x / scale = %g)", s, tok, h, d, got, want, x)
					}
				}
				if D%2 == 1 && kp[row(s, tok, h)*krow+krow-1]>>4 != 0 {
					t.Errorf("seq %d token %d head %d: the padding nibble is set", s, tok, h)
				}
			}
		}
	}
	key := func(s, tok, h, d int) float64 { return number(kp, krow, s, tok, h, d) * kScale(s, tok, h, d) }
	val := func(s, tok, h, d int) float64 {
		return number(vp, vrow, s, tok, h, d) * float64(cache.VScale.Data[row(s, tok, h)])
	}
	out := NewTensor(int64(st.T), Hq, int64(Dv))
	if err := KVAttention(Tensor{Data: st.q, Shape: []int64{int64(st.T), Hq, int64(D)}}, cache,
		KVBatch{QStart: st.qStart, KVLen: st.kvLen}, &out, &Options{Scale: Scale(0.4), Causal: CausalBottomRight}); err != nil {
		t.Fatal(err)
	}
	want, _ := refKVAttention(st.q, st.T, Hq, Hkv, D, Dv, key, val, st.qStart, st.kvLen, nil,
		kvRefOptions{scale: float64(float32(0.4)), causal: true})
	if e := maxRelErr(out.Data, want); e > tolerance {
		t.Errorf("out: relative error %g", e)
	}
}

func TestKVI4PerTokenScales(t *testing.T) { i4Case(t, 61, 16, 12, nil) }

// KIVI's layout (per-channel K, per-token V) with odd D and Dv.
func TestKVI4ChannelKTokenVOddDims(t *testing.T) {
	ch := make([]float32, 2*17)
	for i := range ch {
		ch[i] = 0.15 + 0.01*float32(i)
	}
	i4Case(t, 62, 17, 9, ch)
}

func TestKVPackedSizes(t *testing.T) {
	for _, c := range []struct {
		dtype CacheDType
		dim   int64
		want  int64
	}{{CacheQ8_0, 64, 68}, {CacheQ4_0, 32, 18}, {CacheQ5_1, 96, 72}, {CacheIQ4_NL, 128, 72},
		{CacheI4, 17, 9}, {CacheF32, 17, 17}, {CacheF8E4M3, 5, 5}} {
		if got, err := RowLen(c.dtype, c.dim); err != nil || got != c.want {
			t.Errorf("RowLen(%d, %d) = %d, %v; want %d", c.dtype, c.dim, got, err, c.want)
		}
	}
	if _, err := RowLen(CacheQ4_1, 48); !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), "not whole blocks of 32") {
		t.Errorf("RowLen of 48 Q4_1 elements: %v", err)
	}
	if _, err := NewKVCache(CacheQ8_0, 2, 1, 4, 40, 32); !errors.Is(err, ErrInvalidArgument) ||
		!strings.Contains(err.Error(), "NewKVCache: a row of 40 elements") {
		t.Errorf("NewKVCache with D 40: %v", err)
	}

	// A Q8_0 pool one block short: the Go side refuses it, naming bytes.
	q := Tensor{Data: make([]float32, 4*64), Shape: []int64{1, 4, 64}}
	out := NewTensor(1, 4, 32)
	cache, err := NewKVCache(CacheQ8_0, 2, 2, 4, 64, 32)
	if err != nil {
		t.Fatal(err)
	}
	batch := KVBatch{QStart: []int32{0, 1}, KVLen: []int32{1}}
	if err := KVAttention(q, cache, batch, &out, nil); err != nil {
		t.Fatalf("the right sizes: %v", err)
	}
	short := *cache
	short.K.Data = cache.K.Data.(Q8_0Pages)[:2*2*4*68-34]
	err = KVAttention(q, &short, batch, &out, nil)
	if !errors.Is(err, ErrInvalidArgument) ||
		!strings.Contains(err.Error(), "cache.K: data has 1054 bytes but shape [2 2 4 64] with strides [512 256 64 1] needs 1088 (34 bytes per 32 elements)") {
		t.Errorf("short Q8_0 pages: %v", err)
	}
	kn := Tensor{Data: make([]float32, 2*64), Shape: []int64{1, 2, 64}}
	vn := Tensor{Data: make([]float32, 2*32), Shape: []int64{1, 2, 32}}
	short = *cache
	short.V.Data = Q8_0Pages(make([]byte, 2*2*4*34-1))
	if err := KVCacheWrite(&short, kn, vn, []int64{0}); !errors.Is(err, ErrInvalidArgument) ||
		!strings.Contains(err.Error(), "cache.V: data has 543 bytes") {
		t.Errorf("short Q8_0 V pages: %v", err)
	}
	// Rows that are not whole blocks (the library's rule: strides multiples of 32).
	odd := *cache
	odd.K.Strides = []int64{512, 256, 40, 1}
	if err := KVAttention(q, &odd, batch, &out, nil); !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), "32") {
		t.Errorf("Q8_0 rows of 40 elements: %v", err)
	}

	// An I4 pool one byte short of [2, 2, 4, 17]: rows of 9 bytes.
	c4, err := NewKVCache(CacheI4, 2, 2, 4, 17, 17)
	if err != nil {
		t.Fatal(err)
	}
	c4.K.Data = c4.K.Data.(I4Pages)[:2*2*4*9-1]
	q17 := Tensor{Data: make([]float32, 4*17), Shape: []int64{1, 4, 17}}
	out17 := NewTensor(1, 4, 17)
	if err := KVAttention(q17, c4, batch, &out17, nil); !errors.Is(err, ErrInvalidArgument) ||
		!strings.Contains(err.Error(), "cache.K: data has 143 bytes but shape [2 2 4 17] with strides [144 72 18 1] needs 144 (1 bytes per 2 elements)") {
		t.Errorf("short I4 pages: %v", err)
	}
}

// runAt is KVAttention of st over cache (scale 0.2, bottom-right causal) at
// the given precision, on the queries q [T, Hq, D]: out and lse.
func (st *kvStep) runAt(t *testing.T, q []float32, cache *KVCache, p Precision) (out, lse Tensor) {
	t.Helper()
	out = NewTensor(int64(st.T), int64(st.Hq), int64(st.Dv))
	lse = NewTensor(int64(st.T), int64(st.Hq))
	if err := KVAttention(Tensor{Data: q, Shape: []int64{int64(st.T), int64(st.Hq), int64(st.D)}}, cache,
		KVBatch{QStart: st.qStart, KVLen: st.kvLen}, &out,
		&Options{Scale: Scale(0.2), Causal: CausalBottomRight, Precision: p, LSE: &lse}); err != nil {
		t.Fatalf("KVAttention at precision %d: %v", p, err)
	}
	return out, lse
}

// PrecisionInt8 (HWYATTN_PRECISION_INT8) on an I4 cache with per-token K
// and V scales (D = 40: a second block of 8 dims, zero-padded), in a batch
// of two decodes (2 query rows per kv head: the integer dot products) and a
// prefill of 7 (14 rows: fp32 tiles on the quantized query). Against
// PrecisionF32, out moves (the query is quantized) by at most what
// include/hwyattn.h's accuracy statement allows: each score by
//
//	E = scale * sum over blocks of (max|q| over the block / 254) * sum |k|
//
// over the block (k the dequantized key: number * the token's scale), so
// lse by at most E_row (the row's largest E) and each weight by a factor
// within exp(+-2 E_row): out by at most max|v| (exp(2 E_row) - 1). And
// PrecisionInt8 is PrecisionF32 on the query quantized and dequantized by
// hand (ggml's quantize_row_q8_0), within fp32 rounding.
func TestPrecisionInt8OnAnI4Cache(t *testing.T) {
	r := rand.New(rand.NewSource(71))
	const Hq, Hkv, D, Dv, P, S = 4, 2, 40, 24, 8, 4
	st := newKVStep(r, Hq, Hkv, D, Dv, []int32{9, 6, 7}, []int32{1, 1, 7})
	cache, err := NewKVCache(CacheI4, P, Hkv, S, D, Dv)
	if err != nil {
		t.Fatal(err)
	}
	table, stride := paging(r, st.kvLen, S, P)
	cache.BlockTable, cache.BlockTableStride = table, int64(stride)
	slot := func(s, tok int) int64 { return int64(table[s*stride+tok/S])*S + int64(tok%S) }
	st.write(t, cache, slot)
	// The query as INT8 sees it (K's scales are per token: s_d = 1).
	qd := make([]float32, len(st.q))
	for row := 0; row < st.T*Hq; row++ {
		for c0 := 0; c0 < D; c0 += 32 {
			c1 := c0 + 32
			if c1 > D {
				c1 = D
			}
			var amax float32
			for c := c0; c < c1; c++ {
				if a := float32(math.Abs(float64(st.q[row*D+c]))); a > amax {
					amax = a
				}
			}
			step := amax / 127
			var inv float32
			if step != 0 {
				inv = 1 / step
			}
			for c := c0; c < c1; c++ {
				// math.Round: half away from zero, as roundf.
				qd[row*D+c] = step * float32(math.Round(float64(st.q[row*D+c]*inv)))
			}
		}
	}
	out32, lse32 := st.runAt(t, st.q, cache, PrecisionF32)
	out8, lse8 := st.runAt(t, st.q, cache, PrecisionInt8)
	outQ, _ := st.runAt(t, qd, cache, PrecisionF32)

	kp, vp := cache.K.Data.(I4Pages), cache.V.Data.(I4Pages)
	row := func(s, tok, h int) int { sl := int(slot(s, tok)); return (sl/S*Hkv+h)*S + sl%S }
	nibble := func(b byte, d int) float64 {
		x := int(b & 15)
		if d%2 == 1 {
			x = int(b >> 4)
		}
		if x >= 8 {
			x -= 16
		}
		return float64(x)
	}
	key := func(s, tok, h, d int) float64 {
		return nibble(kp[row(s, tok, h)*(D/2)+d/2], d) * float64(cache.KScale.Data[row(s, tok, h)])
	}
	vmax := 0.0
	for i := 0; i < P*Hkv*S*Dv; i++ {
		vmax = math.Max(vmax, math.Abs(nibble(vp[i/Dv*(Dv/2)+i%Dv/2], i%Dv)*float64(cache.VScale.Data[i/Dv])))
	}

	same := true
	maxDiff := 0.0
	for s := range st.kvLen {
		q0 := int(st.qStart[s])
		for i := 0; i < int(st.qStart[s+1])-q0; i++ {
			for h := 0; h < Hq; h++ {
				hk, ri := h/(Hq/Hkv), (q0+i)*Hq+h
				eRow := 0.0
				for tok := 0; tok < int(st.kvLen[s]); tok++ {
					e := 0.0
					for c0 := 0; c0 < D; c0 += 32 {
						amax, ksum := 0.0, 0.0
						for c := c0; c < c0+32 && c < D; c++ {
							amax = math.Max(amax, math.Abs(float64(st.q[ri*D+c])))
							ksum += math.Abs(key(s, tok, hk, c))
						}
						e += amax / 254 * ksum
					}
					eRow = math.Max(eRow, float64(float32(0.2))*e)
				}
				bound := vmax*math.Expm1(2*eRow) + 1e-5
				for c := 0; c < Dv; c++ {
					a, b := out8.Data[ri*Dv+c], out32.Data[ri*Dv+c]
					same = same && a == b
					diff := math.Abs(float64(a) - float64(b))
					maxDiff = math.Max(maxDiff, diff)
					if diff > bound {
						t.Fatalf("seq %d query %d head %d out[%d]: moved %g > %g", s, i, h, c, diff, bound)
					}
				}
				if dl := math.Abs(float64(lse8.Data[ri]) - float64(lse32.Data[ri])); dl > eRow+1e-5 {
					t.Errorf("seq %d query %d head %d: lse moved %g > %g", s, i, h, dl, eRow)
				}
			}
		}
	}
	if same || maxDiff == 0 {
		t.Errorf("PrecisionInt8 gave PrecisionF32's output: the query was not quantized")
	}
	want := make([]float64, len(outQ.Data))
	for i, x := range outQ.Data {
		want[i] = float64(x)
	}
	if e := maxRelErr(out8.Data, want); e > tolerance {
		t.Errorf("PrecisionInt8 against PrecisionF32 on the quantized query: relative error %g", e)
	}
}

// On a float K, PrecisionInt8 is PrecisionF32: the same bits of out and lse
// (F32 and BF16 pages, the same mixed batch).
func TestPrecisionInt8OnAFloatCacheIsF32(t *testing.T) {
	for i, dtype := range []CacheDType{CacheF32, CacheBF16} {
		r := rand.New(rand.NewSource(int64(73 + i)))
		const Hq, Hkv, D, Dv, P, S = 4, 2, 40, 24, 8, 4
		st := newKVStep(r, Hq, Hkv, D, Dv, []int32{9, 6, 7}, []int32{1, 1, 7})
		cache, err := NewKVCache(dtype, P, Hkv, S, D, Dv)
		if err != nil {
			t.Fatal(err)
		}
		table, stride := paging(r, st.kvLen, S, P)
		cache.BlockTable, cache.BlockTableStride = table, int64(stride)
		st.write(t, cache, func(s, tok int) int64 { return int64(table[s*stride+tok/S])*S + int64(tok%S) })
		out32, lse32 := st.runAt(t, st.q, cache, PrecisionF32)
		out8, lse8 := st.runAt(t, st.q, cache, PrecisionInt8)
		for j := range out32.Data {
			if math.Float32bits(out8.Data[j]) != math.Float32bits(out32.Data[j]) {
				t.Fatalf("dtype %d out[%d]: %g under PrecisionInt8, %g under PrecisionF32", dtype, j, out8.Data[j], out32.Data[j])
			}
		}
		for j := range lse32.Data {
			if math.Float32bits(lse8.Data[j]) != math.Float32bits(lse32.Data[j]) {
				t.Fatalf("dtype %d lse[%d]: %g under PrecisionInt8, %g under PrecisionF32", dtype, j, lse8.Data[j], lse32.Data[j])
			}
		}
	}
}
