// SPDX-License-Identifier: Apache-2.0

package hwyattn

// #include "shim.h"
import "C"

import (
	"math"
	"runtime"
	"sync"
	"unsafe"
)

// MHAConfig describes a multi-head attention layer (the C ABI's
// hwyattn_mha_config). Zero fields take their defaults.
type MHAConfig struct {
	EmbedDim   int64 // width of the query input and of the output (d_model)
	NumHeads   int64 // query heads
	HeadDim    int64 // 0 = EmbedDim / NumHeads (must divide); the inner width is NumHeads*HeadDim
	NumKVHeads int64 // 0 = NumHeads; fewer = GQA (must divide NumHeads)
	KDim       int64 // width of the key input; 0 = EmbedDim
	VDim       int64 // width of the value input; 0 = EmbedDim
}

// MHAWeights are the layer's weights in the torch nn.Linear layout:
// row-major [out_features, in_features]. Each slice must have exactly the
// length its shape needs. The biases are either all nil (no bias) or all
// given. A PyTorch nn.MultiheadAttention with in_proj_weight p ([3E, E])
// loads as WQ = p[:E*E], WK = p[E*E:2*E*E], WV = p[2*E*E:], WO =
// out_proj.weight (biases likewise from in_proj_bias and out_proj.bias).
type MHAWeights struct {
	WQ []float32 // [NumHeads*HeadDim, EmbedDim]
	WK []float32 // [NumKVHeads*HeadDim, KDim]
	WV []float32 // [NumKVHeads*HeadDim, VDim]
	WO []float32 // [EmbedDim, NumHeads*HeadDim]
	BQ []float32 // [NumHeads*HeadDim]
	BK []float32 // [NumKVHeads*HeadDim]
	BV []float32 // [NumKVHeads*HeadDim]
	BO []float32 // [EmbedDim]
}

// MultiheadAttention is a layer whose weights the library has copied and
// packed: out = (softmax(Q K^T * scale + mask) V) W_o^T + b_o, with
// Q = query W_q^T + b_q and so on, split into heads. Forward is safe for
// concurrent use. Call Close to free the C memory it holds; a finalizer
// frees it if Close is never called, but a layer holds its weights' size
// again in C memory the Go collector does not see, so do not rely on it.
type MultiheadAttention struct {
	mu       sync.RWMutex // Forward holds it for reading, Close for writing
	handle   *C.hwyattn_mha
	numHeads int64
}

// NewMultiheadAttention creates a layer from cfg and w; the weights are
// copied, so w may be changed or dropped afterwards.
func NewMultiheadAttention(cfg MHAConfig, w MHAWeights) (*MultiheadAttention, error) {
	var ccfg C.hwyattn_mha_config
	C.hwyattn_mha_config_init_sized(&ccfg, C.sizeof_hwyattn_mha_config)
	ccfg.embed_dim = C.int64_t(cfg.EmbedDim)
	ccfg.num_heads = C.int64_t(cfg.NumHeads)
	ccfg.head_dim = C.int64_t(cfg.HeadDim)
	ccfg.num_kv_heads = C.int64_t(cfg.NumKVHeads)
	ccfg.kdim = C.int64_t(cfg.KDim)
	ccfg.vdim = C.int64_t(cfg.VDim)

	biases := []struct {
		name string
		b    []float32
	}{{"BQ", w.BQ}, {"BK", w.BK}, {"BV", w.BV}, {"BO", w.BO}}
	given := 0
	for _, b := range biases {
		if b.b != nil {
			given++
		}
	}
	if given != 0 && given != 4 {
		for _, b := range biases {
			if b.b == nil {
				return nil, invalidf("w.%s is nil but other biases are given; give all four or none", b.name)
			}
		}
	}
	if given == 4 {
		ccfg.has_bias = 1
	}

	// The lengths each weight must have. A config the library will reject
	// (which is all that sizes() refuses) is passed on with no weights, so
	// that its message names the field; it reads no weight then.
	var ptrs [8]*C.float
	if sizes, ok := cfg.sizes(); ok {
		slices := []struct {
			name string
			s    []float32
			want int64
		}{
			{"WQ", w.WQ, sizes.q}, {"WK", w.WK, sizes.kv * sizes.kdim},
			{"WV", w.WV, sizes.kv * sizes.vdim}, {"WO", w.WO, sizes.q},
			{"BQ", w.BQ, sizes.inner}, {"BK", w.BK, sizes.kv},
			{"BV", w.BV, sizes.kv}, {"BO", w.BO, cfg.EmbedDim},
		}
		for i, s := range slices {
			if s.s == nil && i >= 4 {
				continue
			}
			if int64(len(s.s)) != s.want {
				return nil, invalidf("w.%s has %d elements; the config needs %d", s.name, len(s.s), s.want)
			}
			ptrs[i] = (*C.float)(unsafe.Pointer(&s.s[0]))
		}
	}

	var handle *C.hwyattn_mha
	var msg [errorBufferSize]C.char
	status := C.hwyattn_go_mha_create(&ccfg, ptrs[0], ptrs[1], ptrs[2], ptrs[3], ptrs[4],
		ptrs[5], ptrs[6], ptrs[7], &handle, &msg[0], C.size_t(len(msg)))
	if err := statusError(status, &msg); err != nil {
		return nil, err
	}
	m := &MultiheadAttention{handle: handle, numHeads: cfg.NumHeads}
	runtime.SetFinalizer(m, (*MultiheadAttention).Close)
	return m, nil
}

// mhaSizes are a config's resolved element counts.
type mhaSizes struct {
	inner      int64 // NumHeads*HeadDim
	kv         int64 // NumKVHeads*HeadDim
	q          int64 // inner*EmbedDim (WQ and WO)
	kdim, vdim int64
}

// sizes resolves the defaults of cfg as the library does; ok is false for a
// config the library rejects (or whose sizes overflow).
func (cfg MHAConfig) sizes() (mhaSizes, bool) {
	var s mhaSizes
	E, H, hd, hkv := cfg.EmbedDim, cfg.NumHeads, cfg.HeadDim, cfg.NumKVHeads
	if E < 1 || H < 1 || hd < 0 || hkv < 0 || cfg.KDim < 0 || cfg.VDim < 0 {
		return s, false
	}
	if hd == 0 {
		if E%H != 0 {
			return s, false
		}
		hd = E / H
	}
	if hkv == 0 {
		hkv = H
	}
	if H%hkv != 0 {
		return s, false
	}
	s.kdim, s.vdim = cfg.KDim, cfg.VDim
	if s.kdim == 0 {
		s.kdim = E
	}
	if s.vdim == 0 {
		s.vdim = E
	}
	mul := func(a, b int64) (int64, bool) {
		if a > math.MaxInt64/b {
			return 0, false
		}
		return a * b, true
	}
	var ok1, ok2, ok3, ok4, ok5 bool
	s.inner, ok1 = mul(H, hd)
	s.kv, ok2 = mul(hkv, hd)
	s.q, ok3 = mul(s.inner, E)
	_, ok4 = mul(s.kv, s.kdim)
	_, ok5 = mul(s.kv, s.vdim)
	return s, ok1 && ok2 && ok3 && ok4 && ok5
}

// Forward runs the layer (batch_first layout, like PyTorch's
// nn.MultiheadAttention(batch_first=True)):
//
//	query [B, Lq, EmbedDim]
//	key   [B, Lk, KDim], or nil: self-attention (key = value = query)
//	value [B, Lk, VDim], or nil together with key
//	out   [B, Lq, EmbedDim]  (written)
//
// opts (nil = defaults) applies to the attention inside: Mask broadcastable
// to [B, NumHeads, Lq, Lk], KVLen as PyTorch's key_padding_mask, Weights
// [B, NumHeads, Lq, Lk], LSE [B, NumHeads, Lq], and per-head slopes and
// sinks of [NumHeads].
func (m *MultiheadAttention) Forward(query Tensor, key, value, out *Tensor, opts *Options) error {
	if out == nil {
		return invalidf("out is nil")
	}
	// The batch KVLen must cover: every dimension before the last two
	// (exactly B for any query the library accepts).
	batch := int64(1)
	for i := 0; i+2 < len(query.Shape); i++ {
		if query.Shape[i] > 0 && batch <= math.MaxInt64/query.Shape[i] {
			batch *= query.Shape[i]
		}
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.handle == nil {
		return invalidf("the MultiheadAttention is closed")
	}
	return attend(m.handle, &query, key, value, out, opts, batch, m.numHeads)
}

// Close frees the layer. Further Forward calls return an error; Close again
// is a no-op. Close waits for Forward calls in progress.
func (m *MultiheadAttention) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.handle != nil {
		C.hwyattn_mha_destroy(m.handle)
		m.handle = nil
		runtime.SetFinalizer(m, nil)
	}
	return nil
}
