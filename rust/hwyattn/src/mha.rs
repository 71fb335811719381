// SPDX-License-Identifier: Apache-2.0
//
// MultiheadAttention: an owned hwyattn_mha module.

use crate::error::{Error, Result};
use crate::options::SdpaOptions;
use crate::tensor::{Tensor, TensorMut};
use hwyattn_sys as sys;
use std::mem::{size_of, MaybeUninit};
use std::ptr::{self, NonNull};

/// The shape of a multi-head attention layer (`hwyattn_mha_config`).
/// `None` fields take the C defaults; `Some(0)` is rejected (C reads 0 as
/// the default, so it would be silently replaced).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MhaConfig {
    /// Width of the query input and of the output (d_model).
    pub embed_dim: usize,
    /// Query heads.
    pub num_heads: usize,
    /// None = embed_dim / num_heads (must divide).
    pub head_dim: Option<usize>,
    /// None = num_heads; fewer = GQA (must divide num_heads).
    pub num_kv_heads: Option<usize>,
    /// Width of the key input; None = embed_dim.
    pub kdim: Option<usize>,
    /// Width of the value input; None = embed_dim.
    pub vdim: Option<usize>,
}

impl MhaConfig {
    /// `embed_dim` and `num_heads`, every other field its default.
    pub fn new(embed_dim: usize, num_heads: usize) -> Self {
        MhaConfig {
            embed_dim,
            num_heads,
            head_dim: None,
            num_kv_heads: None,
            kdim: None,
            vdim: None,
        }
    }
}

/// The four projections' biases, each `[out_features]`.
#[derive(Debug, Clone, Copy)]
pub struct MhaBiases<'a> {
    pub b_q: &'a [f32],
    pub b_k: &'a [f32],
    pub b_v: &'a [f32],
    pub b_o: &'a [f32],
}

/// Weights in the torch `nn.Linear` layout, row-major `[out, in]`
/// (`hwyattn_mha_weights`); copied by [`MultiheadAttention::new`].
#[derive(Debug, Clone, Copy)]
pub struct MhaWeights<'a> {
    /// `[num_heads * head_dim, embed_dim]`
    pub w_q: &'a [f32],
    /// `[num_kv_heads * head_dim, kdim]`
    pub w_k: &'a [f32],
    /// `[num_kv_heads * head_dim, vdim]`
    pub w_v: &'a [f32],
    /// `[embed_dim, num_heads * head_dim]`
    pub w_o: &'a [f32],
    /// None: no biases.
    pub biases: Option<MhaBiases<'a>>,
}

/// A multi-head attention layer with its weights packed (`hwyattn_mha`):
/// `out = (softmax(Q K^T * scale + mask) V) W_o^T + b_o` with
/// `Q = query W_q^T + b_q` etc., split into heads. Dropping it destroys the
/// module.
///
/// `Send` and `Sync`: the header makes the module immutable after creation
/// and "safe to use from many threads at once" (`hwyattn_mha_forward` takes a
/// const pointer), and `hwyattn_mha_destroy` has no thread affinity.
#[derive(Debug)]
pub struct MultiheadAttention {
    raw: NonNull<sys::hwyattn_mha>,
    num_heads: usize,
}

// SAFETY: see the type's documentation (include/hwyattn.h, hwyattn_mha).
unsafe impl Send for MultiheadAttention {}
unsafe impl Sync for MultiheadAttention {}

fn resolve(name: &str, v: Option<usize>, default: usize) -> Result<usize> {
    match v {
        None => Ok(default),
        Some(0) => Err(Error::invalid(format!(
            "{} is Some(0); the C ABI reads 0 as the default, use None for it",
            name
        ))),
        Some(x) => Ok(x),
    }
}

fn to_i64(name: &str, v: usize) -> Result<i64> {
    i64::try_from(v).map_err(|_| Error::invalid(format!("{} is {}; exceeds int64", name, v)))
}

fn check_weight(name: &str, w: &[f32], rows: usize, cols: usize) -> Result<()> {
    let need = rows
        .checked_mul(cols)
        .ok_or_else(|| Error::invalid(format!("{}: [{}, {}] overflows", name, rows, cols)))?;
    if w.len() < need {
        return Err(Error::invalid(format!(
            "{} has {} elements but [{}, {}] needs {}",
            name,
            w.len(),
            rows,
            cols,
            need
        )));
    }
    Ok(())
}

impl MultiheadAttention {
    /// Validates the configuration, checks every weight slice's length,
    /// copies and packs the weights.
    pub fn new(config: &MhaConfig, weights: &MhaWeights<'_>) -> Result<Self> {
        let e = config.embed_dim;
        let h = config.num_heads;
        if e == 0 || h == 0 {
            return Err(Error::invalid(format!(
                "embed_dim is {} and num_heads {}; both must be >= 1",
                e, h
            )));
        }
        if config.head_dim.is_none() && e % h != 0 {
            return Err(Error::invalid(format!(
                "embed_dim {} is not a multiple of num_heads {} (set head_dim)",
                e, h
            )));
        }
        let d = resolve("head_dim", config.head_dim, e / h)?;
        let hkv = resolve("num_kv_heads", config.num_kv_heads, h)?;
        let kdim = resolve("kdim", config.kdim, e)?;
        let vdim = resolve("vdim", config.vdim, e)?;
        let overflow = || Error::invalid(format!("num_heads * head_dim ({} * {}) overflows", h, d));
        let inner = h.checked_mul(d).ok_or_else(overflow)?;
        let kv_inner = hkv.checked_mul(d).ok_or_else(overflow)?;
        check_weight("w_q", weights.w_q, inner, e)?;
        check_weight("w_k", weights.w_k, kv_inner, kdim)?;
        check_weight("w_v", weights.w_v, kv_inner, vdim)?;
        check_weight("w_o", weights.w_o, e, inner)?;

        let mut cfg = MaybeUninit::<sys::hwyattn_mha_config>::uninit();
        // SAFETY: init_sized writes exactly size_of bytes: every field.
        let mut cfg = unsafe {
            sys::hwyattn_mha_config_init_sized(
                cfg.as_mut_ptr(),
                size_of::<sys::hwyattn_mha_config>(),
            );
            cfg.assume_init()
        };
        cfg.embed_dim = to_i64("embed_dim", e)?;
        cfg.num_heads = to_i64("num_heads", h)?;
        cfg.head_dim = to_i64("head_dim", d)?;
        cfg.num_kv_heads = to_i64("num_kv_heads", hkv)?;
        cfg.kdim = to_i64("kdim", kdim)?;
        cfg.vdim = to_i64("vdim", vdim)?;
        let mut w = sys::hwyattn_mha_weights {
            w_q: weights.w_q.as_ptr(),
            w_k: weights.w_k.as_ptr(),
            w_v: weights.w_v.as_ptr(),
            w_o: weights.w_o.as_ptr(),
            b_q: ptr::null(),
            b_k: ptr::null(),
            b_v: ptr::null(),
            b_o: ptr::null(),
        };
        if let Some(b) = &weights.biases {
            check_weight("b_q", b.b_q, inner, 1)?;
            check_weight("b_k", b.b_k, kv_inner, 1)?;
            check_weight("b_v", b.b_v, kv_inner, 1)?;
            check_weight("b_o", b.b_o, e, 1)?;
            cfg.has_bias = 1;
            w.b_q = b.b_q.as_ptr();
            w.b_k = b.b_k.as_ptr();
            w.b_v = b.b_v.as_ptr();
            w.b_o = b.b_o.as_ptr();
        }
        let mut m: *mut sys::hwyattn_mha = ptr::null_mut();
        // SAFETY: the weight slices cover the sizes this config reads (checked
        // above); the library copies them before returning.
        Error::check(unsafe { sys::hwyattn_mha_create(&cfg, &w, &mut m) })?;
        let raw = NonNull::new(m).ok_or_else(|| {
            Error::internal("hwyattn_mha_create returned OK but no module".to_string())
        })?;
        Ok(MultiheadAttention { raw, num_heads: h })
    }

    /// Runs the layer (batch_first, as `nn.MultiheadAttention(batch_first=True)`):
    ///
    /// ```text
    /// query [B, Lq, embed_dim]
    /// key   [B, Lk, kdim]      } key_value = None: self-attention
    /// value [B, Lk, vdim]      } (needs kdim == vdim == embed_dim)
    /// out   [B, Lq, embed_dim] written
    /// ```
    ///
    /// `opts` applies to the attention inside (scale, causal, a mask
    /// broadcastable to `[B, num_heads, Lq, Lk]`, kv_len `[B]`, the modifiers
    /// with `[num_heads]` slopes and sinks, weights `[B, num_heads, Lq, Lk]`
    /// and lse `[B, num_heads, Lq]`). Thread-safe.
    pub fn forward(
        &self,
        query: &Tensor<'_, f32>,
        key_value: Option<(&Tensor<'_, f32>, &Tensor<'_, f32>)>,
        out: &mut TensorMut<'_>,
        opts: &SdpaOptions<'_>,
    ) -> Result<()> {
        let raw_opts = opts.to_raw(query.layout().leading(), self.num_heads)?;
        let tq = query.raw();
        let kv = key_value.map(|(k, v)| (k.raw(), v.raw()));
        let (pk, pv) = match &kv {
            Some((k, v)) => (k as *const _, v as *const _),
            None => (ptr::null(), ptr::null()),
        };
        let mut to = out.raw();
        // SAFETY: as in sdpa (views checked against their slices, per-batch
        // and per-head arrays by to_raw, out borrowed mutably); the module is
        // alive for &self.
        Error::check(unsafe {
            sys::hwyattn_mha_forward(self.raw.as_ptr(), &tq, pk, pv, &mut to, &raw_opts)
        })
    }
}

impl Drop for MultiheadAttention {
    fn drop(&mut self) {
        // SAFETY: the pointer came from hwyattn_mha_create and is freed once.
        unsafe { sys::hwyattn_mha_destroy(self.raw.as_ptr()) }
    }
}
