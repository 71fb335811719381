// SPDX-License-Identifier: Apache-2.0

package hwyattn

// #include "shim.h"
import "C"

import (
	"math"
	"strings"
	"unsafe"
)

// CacheDType is the element type of a KVCache's pages.
type CacheDType int32

const (
	// CacheF32: float32 pages (F32Pages).
	CacheF32 CacheDType = C.HWYATTN_F32
	// CacheF16: IEEE binary16 pages, as bits (F16Pages).
	CacheF16 CacheDType = C.HWYATTN_F16
	// CacheBF16: bfloat16 pages, as bits (BF16Pages).
	CacheBF16 CacheDType = C.HWYATTN_BF16
	// CacheI8: symmetric int8 pages (I8Pages), value = x * scale, with
	// KVCache.KScale and VScale.
	CacheI8 CacheDType = C.HWYATTN_I8
	// CacheF8E4M3: OCP fp8 E4M3 ("fn": max 448, no infinities) pages, as
	// bits (F8E4M3Pages), value = x * scale; KScale and VScale optional
	// (both nil: scale 1).
	CacheF8E4M3 CacheDType = C.HWYATTN_F8E4M3
	// CacheF8E5M2: OCP fp8 E5M2 (IEEE-like, max 57344) pages, as bits
	// (F8E5M2Pages); scales as CacheF8E4M3's.
	CacheF8E5M2 CacheDType = C.HWYATTN_F8E5M2

	// ggml's block formats, byte for byte (llama.cpp's -ctk / -ctv cache
	// types; include/hwyattn.h has the layouts): blocks of 32 elements of
	// a row, each an fp16 scale d (and offset m) and the numbers; no scale
	// tensors. D and Dv must be multiples of 32. Their pages are bytes
	// (Q8_0Pages, ...), RowLen(dtype, D) = D / 32 * BlockBytes(dtype) of
	// them per row; KVCacheWrite quantizes as ggml's reference quantizers
	// do (the same bytes).

	// CacheQ8_0: 34 bytes per 32 elements, d * q (Q8_0Pages).
	CacheQ8_0 CacheDType = C.HWYATTN_Q8_0
	// CacheQ4_0: 18 bytes per 32 elements, d * (nibble - 8) (Q4_0Pages).
	CacheQ4_0 CacheDType = C.HWYATTN_Q4_0
	// CacheQ4_1: 20 bytes per 32 elements, d * nibble + m (Q4_1Pages).
	CacheQ4_1 CacheDType = C.HWYATTN_Q4_1
	// CacheQ5_0: 22 bytes per 32 elements, d * (q5 - 16) (Q5_0Pages).
	CacheQ5_0 CacheDType = C.HWYATTN_Q5_0
	// CacheQ5_1: 24 bytes per 32 elements, d * q5 + m (Q5_1Pages).
	CacheQ5_1 CacheDType = C.HWYATTN_Q5_1
	// CacheIQ4_NL: 18 bytes per 32 elements, d * level[nibble] (IQ4_NLPages).
	CacheIQ4_NL CacheDType = C.HWYATTN_IQ4_NL

	// CacheI4: signed int4 in [-8, 7], two per byte (element 2i the low
	// nibble of byte i) (I4Pages); value = x * scale with KScale and VScale
	// as for CacheI8 (required; KIVI: per-channel K, per-token V). A row of
	// D elements takes (D + 1) / 2 bytes.
	CacheI4 CacheDType = C.HWYATTN_I4
)

// Pages is the memory of a cache's K or V pages: one of F32Pages,
// F16Pages, BF16Pages, I8Pages, F8E4M3Pages or F8E5M2Pages (Go has no
// half-precision or fp8 type: those pages hold the bits), or the bytes of
// a packed dtype: Q8_0Pages, Q4_0Pages, Q4_1Pages, Q5_0Pages, Q5_1Pages,
// IQ4_NLPages (ggml's blocks) or I4Pages (int4 pairs).
type Pages interface {
	// pages is the first element, the slice's length (elements, or bytes
	// of a packed dtype) and the C dtype.
	pages() (unsafe.Pointer, int, C.hwyattn_dtype)
}

// F32Pages are float32 pages.
type F32Pages []float32

// F16Pages are IEEE binary16 pages, as their bits.
type F16Pages []uint16

// BF16Pages are bfloat16 pages, as their bits.
type BF16Pages []uint16

// I8Pages are symmetric int8 pages (value = x * scale).
type I8Pages []int8

// F8E4M3Pages are OCP fp8 E4M3 pages, as their bits.
type F8E4M3Pages []uint8

// F8E5M2Pages are OCP fp8 E5M2 pages, as their bits.
type F8E5M2Pages []uint8

// Q8_0Pages are ggml Q8_0 pages, as their bytes (34 per 32 elements).
type Q8_0Pages []byte

// Q4_0Pages are ggml Q4_0 pages, as their bytes (18 per 32 elements).
type Q4_0Pages []byte

// Q4_1Pages are ggml Q4_1 pages, as their bytes (20 per 32 elements).
type Q4_1Pages []byte

// Q5_0Pages are ggml Q5_0 pages, as their bytes (22 per 32 elements).
type Q5_0Pages []byte

// Q5_1Pages are ggml Q5_1 pages, as their bytes (24 per 32 elements).
type Q5_1Pages []byte

// IQ4_NLPages are ggml IQ4_NL pages, as their bytes (18 per 32 elements).
type IQ4_NLPages []byte

// I4Pages are int4 pages, two numbers a byte (value = x * scale).
type I4Pages []byte

func first[T any](s []T) unsafe.Pointer {
	if len(s) == 0 {
		return nil
	}
	return unsafe.Pointer(&s[0])
}

func (p F32Pages) pages() (unsafe.Pointer, int, C.hwyattn_dtype) {
	return first(p), len(p), C.HWYATTN_F32
}
func (p F16Pages) pages() (unsafe.Pointer, int, C.hwyattn_dtype) {
	return first(p), len(p), C.HWYATTN_F16
}
func (p BF16Pages) pages() (unsafe.Pointer, int, C.hwyattn_dtype) {
	return first(p), len(p), C.HWYATTN_BF16
}
func (p I8Pages) pages() (unsafe.Pointer, int, C.hwyattn_dtype) {
	return first(p), len(p), C.HWYATTN_I8
}
func (p F8E4M3Pages) pages() (unsafe.Pointer, int, C.hwyattn_dtype) {
	return first(p), len(p), C.HWYATTN_F8E4M3
}
func (p F8E5M2Pages) pages() (unsafe.Pointer, int, C.hwyattn_dtype) {
	return first(p), len(p), C.HWYATTN_F8E5M2
}
func (p Q8_0Pages) pages() (unsafe.Pointer, int, C.hwyattn_dtype) {
	return first(p), len(p), C.HWYATTN_Q8_0
}
func (p Q4_0Pages) pages() (unsafe.Pointer, int, C.hwyattn_dtype) {
	return first(p), len(p), C.HWYATTN_Q4_0
}
func (p Q4_1Pages) pages() (unsafe.Pointer, int, C.hwyattn_dtype) {
	return first(p), len(p), C.HWYATTN_Q4_1
}
func (p Q5_0Pages) pages() (unsafe.Pointer, int, C.hwyattn_dtype) {
	return first(p), len(p), C.HWYATTN_Q5_0
}
func (p Q5_1Pages) pages() (unsafe.Pointer, int, C.hwyattn_dtype) {
	return first(p), len(p), C.HWYATTN_Q5_1
}
func (p IQ4_NLPages) pages() (unsafe.Pointer, int, C.hwyattn_dtype) {
	return first(p), len(p), C.HWYATTN_IQ4_NL
}
func (p I4Pages) pages() (unsafe.Pointer, int, C.hwyattn_dtype) {
	return first(p), len(p), C.HWYATTN_I4
}

// packing is how a dtype's slice holds elements: elems elements in each
// unit of bytes bytes (32 in 34 for Q8_0, 2 in 1 for I4); bytes 0: one
// element per slice entry.
func packing(dtype CacheDType) (elems, bytes int64) {
	switch dtype {
	case CacheQ8_0:
		return 32, 34
	case CacheQ4_0, CacheIQ4_NL:
		return 32, 18
	case CacheQ4_1:
		return 32, 20
	case CacheQ5_0:
		return 32, 22
	case CacheQ5_1:
		return 32, 24
	case CacheI4:
		return 2, 1
	}
	return 1, 0
}

// BlockBytes is the bytes of one block of 32 elements of a block format
// (34 for CacheQ8_0, 18 for CacheQ4_0 and CacheIQ4_NL, 20, 22, 24 for
// CacheQ4_1, CacheQ5_0, CacheQ5_1); 0 for the other dtypes.
func BlockBytes(dtype CacheDType) int64 {
	if elems, bytes := packing(dtype); elems == 32 {
		return bytes
	}
	return 0
}

// RowLen is the length of the Pages slice that holds a row of dim elements
// of dtype: dim for the number types (F32Pages ... F8E5M2Pages), its bytes
// for the packed ones: dim / 32 * BlockBytes(dtype) (dim a multiple of 32,
// else an error) or (dim + 1) / 2 for CacheI4.
func RowLen(dtype CacheDType, dim int64) (int64, error) {
	if dim < 1 {
		return 0, invalidf("RowLen: dim is %d; must be >= 1", dim)
	}
	elems, bytes := packing(dtype)
	if bytes == 0 {
		return dim, nil
	}
	if elems == 32 && dim%32 != 0 {
		return 0, invalidf("RowLen: a row of %d elements is not whole blocks of 32 (dtype %d)", dim, dtype)
	}
	return (dim + elems - 1) / elems * bytes, nil
}

// PagesLen is the length of the Pages slice of dense pages [numPages,
// kvHeads, pageSize, dim] of dtype (elements, or bytes of a packed dtype):
// numPages * kvHeads * pageSize * RowLen(dtype, dim).
func PagesLen(dtype CacheDType, numPages, kvHeads, pageSize, dim int64) (int, error) {
	n, err := RowLen(dtype, dim)
	if err != nil {
		return 0, err
	}
	for _, d := range []int64{numPages, kvHeads, pageSize} {
		if d < 1 {
			return 0, invalidf("PagesLen: sizes [%d, %d, %d, %d]; each must be >= 1", numPages, kvHeads, pageSize, dim)
		}
		if n > math.MaxInt/d {
			return 0, invalidf("PagesLen: [%d, %d, %d, %d] has too many elements", numPages, kvHeads, pageSize, dim)
		}
		n *= d
	}
	return int(n), nil
}

// describePages is describe for a cache's K or V: a packed dtype's Data
// counts bytes while Shape and Strides count elements, and nil Strides are
// dense rows of whole bytes (an odd D of I4 pads each row's last byte).
func describePages(name string, p *PageTensor) (C.hwyattn_tensor, unsafe.Pointer, error) {
	ptr, n, dtype := p.Data.pages()
	elems, bytes := packing(CacheDType(dtype))
	if bytes == 0 {
		d, err := describe(name, n, p.Shape, p.Strides, dtype)
		return d, ptr, err
	}
	strides := p.Strides
	if strides == nil && len(p.Shape) >= 1 && len(p.Shape) <= 4 {
		row, err := RowLen(CacheDType(dtype), p.Shape[len(p.Shape)-1])
		if err != nil {
			return C.hwyattn_tensor{}, nil, invalidf("%s: %s", name, err.(*Error).Message)
		}
		strides = make([]int64, len(p.Shape))
		acc := row / bytes * elems // the elements of a row, padding included
		strides[len(strides)-1] = 1
		for i := len(p.Shape) - 2; i >= 0; i-- {
			strides[i] = acc
			if p.Shape[i] > 0 && acc > math.MaxInt64/p.Shape[i] {
				return C.hwyattn_tensor{}, nil, invalidf("%s: shape %v has more than 2^63 elements", name, p.Shape)
			}
			acc *= p.Shape[i]
		}
	}
	d, err := describe(name, math.MaxInt, p.Shape, strides, dtype) // the shape and strides alone
	if err != nil {
		return d, nil, err
	}
	last := int64(0)
	for i := 0; i < int(d.rank); i++ {
		last += (int64(d.shape[i]) - 1) * int64(d.stride[i])
	}
	if need := (last/elems + 1) * bytes; int64(n) < need {
		return d, nil, invalidf("%s: data has %d bytes but shape %v with strides %v needs %d (%d bytes per %d elements)",
			name, n, p.Shape, strides, need, bytes, elems)
	}
	return d, ptr, nil
}

// PageTensor is a cache's K or V: [num_pages, Hkv, page_size, D] over Data,
// with Shape and Strides as in Tensor (Strides nil = dense, vLLM's layout;
// FlashAttention's [pages, page, Hkv, D] memory is Strides {page*Hkv*D, D,
// Hkv*D, 1}). Shape and Strides count elements for every dtype, also when
// Data holds the bytes of a packed one (ggml's blocks: strides multiples
// of 32; I4: even strides; Strides nil: dense rows of RowLen bytes each).
type PageTensor struct {
	Data    Pages
	Shape   []int64
	Strides []int64
}

// KVCache is a paged KV cache in Go memory (the C ABI's hwyattn_kv_cache):
// a pool of pages that KVCacheWrite writes and KVAttention reads. Slot s is
// offset s % page_size of page s / page_size. include/hwyattn.h documents
// every rule.
type KVCache struct {
	// K [num_pages, Hkv, page_size, D] and V [num_pages, Hkv, page_size, Dv],
	// of one dtype.
	K, V PageTensor
	// KScale, VScale: I8 (required) and fp8 (optional) caches only, nil
	// otherwise; float32: per token [num_pages, Hkv, page_size, 1]
	// (KVCacheWrite computes and stores them), or per channel [1, Hkv, 1, D]
	// ([1, Hkv, 1, Dv] for VScale), per kv head [1, Hkv, 1, 1] or per tensor
	// [1] (vLLM's k_scale), fixed by the caller.
	KScale, VScale *Tensor
	// BlockTable [num_seqs * BlockTableStride], optional: row s lists the
	// pages of sequence s of a KVAttention batch in order (only its first
	// ceil(kv_len / page_size) entries are read). nil: sequence s is page s
	// (a padded contiguous cache, page_size = each sequence's capacity).
	BlockTable       []int32
	BlockTableStride int64
}

// NewKVCache allocates a zero cache of numPages pages of pageSize slots in
// vLLM's dense layout: K [numPages, kvHeads, pageSize, headDim], V [..,
// valueDim] (PagesLen entries each: the packed dtypes' bytes). An I8 or I4
// cache gets per-token scales [numPages, kvHeads, pageSize, 1], an fp8
// cache none (scale 1), a block format none (its scales are in the
// blocks); for other scales, set KScale and VScale yourself.
func NewKVCache(dtype CacheDType, numPages, kvHeads, pageSize, headDim, valueDim int64) (*KVCache, error) {
	count := func(last int64) (int64, error) {
		for _, d := range []int64{numPages, kvHeads, pageSize, last} {
			if d < 1 {
				return 0, invalidf("NewKVCache: sizes %v; each must be >= 1",
					[]int64{numPages, kvHeads, pageSize, headDim, valueDim})
			}
		}
		n, err := PagesLen(dtype, numPages, kvHeads, pageSize, last)
		if err != nil {
			msg := strings.TrimPrefix(strings.TrimPrefix(err.(*Error).Message, "PagesLen: "), "RowLen: ")
			return 0, invalidf("NewKVCache: %s", msg)
		}
		return int64(n), nil
	}
	n, err := count(headDim)
	if err != nil {
		return nil, err
	}
	nv, err := count(valueDim)
	if err != nil {
		return nil, err
	}
	c := &KVCache{
		K: PageTensor{Shape: []int64{numPages, kvHeads, pageSize, headDim}},
		V: PageTensor{Shape: []int64{numPages, kvHeads, pageSize, valueDim}},
	}
	switch dtype {
	case CacheF32:
		c.K.Data, c.V.Data = make(F32Pages, n), make(F32Pages, nv)
	case CacheF16:
		c.K.Data, c.V.Data = make(F16Pages, n), make(F16Pages, nv)
	case CacheBF16:
		c.K.Data, c.V.Data = make(BF16Pages, n), make(BF16Pages, nv)
	case CacheI8:
		c.K.Data, c.V.Data = make(I8Pages, n), make(I8Pages, nv)
		ks := NewTensor(numPages, kvHeads, pageSize, 1)
		vs := NewTensor(numPages, kvHeads, pageSize, 1)
		c.KScale, c.VScale = &ks, &vs
	case CacheF8E4M3:
		c.K.Data, c.V.Data = make(F8E4M3Pages, n), make(F8E4M3Pages, nv)
	case CacheF8E5M2:
		c.K.Data, c.V.Data = make(F8E5M2Pages, n), make(F8E5M2Pages, nv)
	case CacheQ8_0:
		c.K.Data, c.V.Data = make(Q8_0Pages, n), make(Q8_0Pages, nv)
	case CacheQ4_0:
		c.K.Data, c.V.Data = make(Q4_0Pages, n), make(Q4_0Pages, nv)
	case CacheQ4_1:
		c.K.Data, c.V.Data = make(Q4_1Pages, n), make(Q4_1Pages, nv)
	case CacheQ5_0:
		c.K.Data, c.V.Data = make(Q5_0Pages, n), make(Q5_0Pages, nv)
	case CacheQ5_1:
		c.K.Data, c.V.Data = make(Q5_1Pages, n), make(Q5_1Pages, nv)
	case CacheIQ4_NL:
		c.K.Data, c.V.Data = make(IQ4_NLPages, n), make(IQ4_NLPages, nv)
	case CacheI4:
		c.K.Data, c.V.Data = make(I4Pages, n), make(I4Pages, nv)
		ks := NewTensor(numPages, kvHeads, pageSize, 1)
		vs := NewTensor(numPages, kvHeads, pageSize, 1)
		c.KScale, c.VScale = &ks, &vs
	default:
		return nil, invalidf("NewKVCache: dtype %d; must be CacheF32, CacheF16, CacheBF16, CacheI8, "+
			"CacheF8E4M3, CacheF8E5M2, CacheQ8_0, CacheQ4_0, CacheQ4_1, CacheQ5_0, CacheQ5_1, "+
			"CacheIQ4_NL or CacheI4", dtype)
	}
	return c, nil
}

// KVBatch is the sequences of one KVAttention call (the C ABI's
// hwyattn_kv_batch): sequence s owns query tokens [QStart[s], QStart[s+1])
// of q [T, Hq, D] and has KVLen[s] keys in the cache, this step's included.
// QPos, optional, is the position of each sequence's first query token; nil
// = KVLen - q_len (the new tokens are the last ones of the cache).
type KVBatch struct {
	QStart []int32 // [num_seqs + 1]: 0, non-decreasing, T last
	KVLen  []int32 // [num_seqs]
	QPos   []int32 // nil or [num_seqs]
}

// describe describes the cache's tensors into descs and data (the scales'
// bits in present), after checking each against its slice.
func (c *KVCache) describe(descs *[C.HWYATTN_GO_KV_NUM_SLOTS]C.hwyattn_tensor,
	data *[C.HWYATTN_GO_KV_NUM_SLOTS]unsafe.Pointer, present *C.uint32_t) error {
	if c == nil {
		return invalidf("cache is nil")
	}
	for _, p := range []struct {
		slot int
		name string
		t    *PageTensor
	}{{C.HWYATTN_GO_KV_K, "cache.K", &c.K}, {C.HWYATTN_GO_KV_V, "cache.V", &c.V}} {
		if p.t.Data == nil {
			return invalidf("%s.Data is nil", p.name)
		}
		d, ptr, err := describePages(p.name, p.t)
		if err != nil {
			return err
		}
		descs[p.slot], data[p.slot] = d, ptr
	}
	for _, s := range []struct {
		slot int
		name string
		t    *Tensor
	}{{C.HWYATTN_GO_KV_K_SCALE, "cache.KScale", c.KScale}, {C.HWYATTN_GO_KV_V_SCALE, "cache.VScale", c.VScale}} {
		if s.t == nil {
			continue
		}
		d, err := s.t.describe(s.name)
		if err != nil {
			return err
		}
		descs[s.slot], data[s.slot] = d, unsafe.Pointer(&s.t.Data[0])
		*present |= 1 << s.slot
	}
	return nil
}

// KVCacheWrite writes token t of kNew [T, Hkv, D] and vNew [T, Hkv, Dv]
// into slot slots[t] of the cache (page slots[t] / page_size, offset
// slots[t] % page_size, every kv head; a negative slot skips the token),
// converting to the cache's dtype: F32 exactly, F16 and BF16 rounded to
// nearest even, I8 and I4 quantized (per-token scales max|x| / 127 or / 7
// stored at the token's slot, or the caller's per-channel scales), ggml's
// block formats as ggml's reference quantizers do. slots has exactly T
// entries; a slot written twice in one call is an error. On error nothing
// is written. Call it before KVAttention, with KVLen counting the written
// tokens.
func KVCacheWrite(cache *KVCache, kNew, vNew Tensor, slots []int64) error {
	var descs [C.HWYATTN_GO_KV_NUM_SLOTS]C.hwyattn_tensor
	var data [C.HWYATTN_GO_KV_NUM_SLOTS]unsafe.Pointer
	var present C.uint32_t
	if err := cache.describe(&descs, &data, &present); err != nil {
		return err
	}
	for _, x := range []struct {
		slot int
		name string
		t    *Tensor
	}{{C.HWYATTN_GO_KV_X, "kNew", &kNew}, {C.HWYATTN_GO_KV_Y, "vNew", &vNew}} {
		d, err := x.t.describe(x.name)
		if err != nil {
			return err
		}
		descs[x.slot], data[x.slot] = d, unsafe.Pointer(&x.t.Data[0])
	}
	tokens := dim4(kNew.Shape, 1) // [T, Hkv, D], right-aligned
	if int64(len(slots)) != tokens {
		return invalidf("slots has %d entries but kNew has %d tokens", len(slots), tokens)
	}
	var msg [errorBufferSize]C.char
	status := C.hwyattn_go_kv_write(&descs[0], present, data[C.HWYATTN_GO_KV_K],
		data[C.HWYATTN_GO_KV_V], data[C.HWYATTN_GO_KV_K_SCALE], data[C.HWYATTN_GO_KV_V_SCALE],
		data[C.HWYATTN_GO_KV_X], data[C.HWYATTN_GO_KV_Y], (*C.int64_t)(unsafe.Pointer(&slots[0])),
		&msg[0], C.size_t(len(msg)))
	return statusError(status, &msg)
}

// KVAttention is attention of the packed varlen queries q [T, Hq, D] of
// batch over the cache, into out [T, Hq, Dv]: prefill, chunked prefill and
// decode rows in one call (the C ABI's hwyattn_kv_attention). Per sequence
// s, query token i has position QPos[s] + i and key t position t; the
// options compare these positions:
//
//   - Causal: any value but CausalNone keeps keys at positions <= the
//     query's (usually CausalBottomRight);
//   - Scale (nil = 1/sqrt(D); an explicit 0 is an error), WindowLeft,
//     WindowRight, Softcap, ALiBiSlopes and Sinks [Hq], Precision;
//   - LSE, an output [T, Hq].
//
// Mask, BoolMask, KVLen and Weights must be unset (the batch has its own
// lengths, and a mask has no dense shape in a varlen batch). Every slice is
// checked against its shape and the batch before the C call; the library
// checks the rest (page ids, positions, q_start). On error nothing is
// written.
func KVAttention(q Tensor, cache *KVCache, batch KVBatch, out Output, opts *Options) error {
	if out == nil {
		return invalidf("out is nil")
	}
	if opts == nil {
		opts = &Options{}
	}
	switch {
	case opts.Mask != nil || opts.BoolMask != nil:
		return invalidf("opts: KVAttention takes no Mask or BoolMask (a mask has no dense shape in a varlen batch)")
	case opts.KVLen != nil:
		return invalidf("opts.KVLen: KVAttention takes the lengths from batch.KVLen")
	case opts.Weights != nil:
		return invalidf("opts.Weights: KVAttention has no weights output")
	}
	copts, err := scalarOptions(opts)
	if err != nil {
		return err
	}
	var descs [C.HWYATTN_GO_KV_NUM_SLOTS]C.hwyattn_tensor
	var data [C.HWYATTN_GO_KV_NUM_SLOTS]unsafe.Pointer
	var present C.uint32_t
	if err := cache.describe(&descs, &data, &present); err != nil {
		return err
	}
	for _, x := range []struct {
		slot int
		name string
		t    *Tensor
	}{{C.HWYATTN_GO_KV_X, "q", &q}, {C.HWYATTN_GO_KV_LSE, "opts.LSE", opts.LSE}} {
		if x.t == nil {
			continue
		}
		d, err := x.t.describe(x.name)
		if err != nil {
			return err
		}
		descs[x.slot], data[x.slot] = d, unsafe.Pointer(&x.t.Data[0])
		present |= 1 << x.slot
	}
	d, p, err := out.describeOut("out")
	if err != nil {
		return err
	}
	descs[C.HWYATTN_GO_KV_Y], data[C.HWYATTN_GO_KV_Y] = d, p
	present |= 1 << C.HWYATTN_GO_KV_Y

	// The library reads q_start[0..n], kv_len[0..n), q_pos[0..n) and the
	// block table's rows through bare pointers: their lengths stop here.
	n := len(batch.KVLen)
	if n < 1 || n > math.MaxInt32 {
		return invalidf("batch.KVLen has %d entries; need 1 .. 2^31 - 1 sequences", n)
	}
	if len(batch.QStart) != n+1 {
		return invalidf("batch.QStart has %d entries for %d sequences; need num_seqs + 1 = %d",
			len(batch.QStart), n, n+1)
	}
	var qPos *C.int32_t
	if batch.QPos != nil {
		if len(batch.QPos) != n {
			return invalidf("batch.QPos has %d entries for %d sequences; need one each (or nil)",
				len(batch.QPos), n)
		}
		qPos = (*C.int32_t)(unsafe.Pointer(&batch.QPos[0]))
	}
	var table *C.int32_t
	if cache.BlockTable != nil {
		st := cache.BlockTableStride
		if st < 1 || int64(n) > int64(len(cache.BlockTable))/st {
			return invalidf("cache.BlockTable has %d entries; %d sequences with BlockTableStride %d need %d rows of it "+
				"(BlockTableStride >= 1; nil for no table)", len(cache.BlockTable), n, st, n)
		}
		table = (*C.int32_t)(unsafe.Pointer(&cache.BlockTable[0]))
	}
	heads := dim4(q.Shape, 2) // [T, Hq, D], right-aligned
	slopes, err := perHead("opts.ALiBiSlopes", opts.ALiBiSlopes, heads)
	if err != nil {
		return err
	}
	sinks, err := perHead("opts.Sinks", opts.Sinks, heads)
	if err != nil {
		return err
	}

	var msg [errorBufferSize]C.char
	status := C.hwyattn_go_kv_attention(&descs[0], present, &copts, data[C.HWYATTN_GO_KV_K],
		data[C.HWYATTN_GO_KV_V], data[C.HWYATTN_GO_KV_K_SCALE], data[C.HWYATTN_GO_KV_V_SCALE],
		table, C.int64_t(cache.BlockTableStride), data[C.HWYATTN_GO_KV_X], data[C.HWYATTN_GO_KV_Y],
		data[C.HWYATTN_GO_KV_LSE], C.int32_t(n), (*C.int32_t)(unsafe.Pointer(&batch.QStart[0])),
		(*C.int32_t)(unsafe.Pointer(&batch.KVLen[0])), qPos, slopes, sinks, &msg[0], C.size_t(len(msg)))
	return statusError(status, &msg)
}
