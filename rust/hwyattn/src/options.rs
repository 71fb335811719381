// SPDX-License-Identifier: Apache-2.0
//
// SdpaOptions: the builder behind hwyattn_sdpa_options, for sdpa and the MHA
// module's forward.

use crate::error::{Error, Result};
use crate::tensor::{Tensor, TensorMut};
use hwyattn_sys as sys;
use std::marker::PhantomData;
use std::mem::{size_of, MaybeUninit};

/// Which causal rule blocks keys (`hwyattn_causal`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Causal {
    /// No causal rule.
    #[default]
    None,
    /// Query i sees keys j <= i (PyTorch `is_causal=True`).
    TopLeft,
    /// Query i sees keys j <= i + (Lk - Lq): the decode / KV-cache convention
    /// (the last query sees every key).
    BottomRight,
}

/// Precision of the products Q K^T and P V (`hwyattn_precision`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Precision {
    /// fp32 products (F16/BF16 inputs widened exactly). The default.
    #[default]
    F32,
    /// bf16 products, fp32 accumulation (oneDNN's and PyTorch's CPU rule):
    /// Q K^T on q and k rounded to bf16, P V on p and v rounded; the
    /// softmax, lse and out stay fp32 (`HWYATTN_PRECISION_BF16`).
    Bf16,
    /// Integer Q K^T for a quantized K (`i8`, [`I4x2`](crate::I4x2) or a
    /// ggml block format such as [`BlockQ8_0`](crate::BlockQ8_0)): each query
    /// row quantized per block of 32 head dims as ggml's `quantize_row_q8_0`
    /// does, times the cache's integers with exact int32 sums; P V, the
    /// softmax and out stay fp32. On a float K it is [`F32`](Precision::F32)
    /// (`HWYATTN_PRECISION_INT8`; the header bounds its error).
    Int8,
}

/// A mask's element type: `bool` (true = attend), `f32` (added to the
/// scaled scores; `-inf` blocks) or [`F16`](crate::F16) (the same, read in
/// place and widened exactly: ggml's KQ mask).
pub trait MaskElement: crate::tensor::Element {}
impl MaskElement for bool {}
impl MaskElement for f32 {}
impl MaskElement for crate::tensor::F16 {}

/// Options of [`sdpa`](crate::sdpa) and
/// [`MultiheadAttention::forward`](crate::MultiheadAttention::forward), built
/// with chained calls from [`SdpaOptions::new`] (= every default). Each
/// setter documents its C field in `include/hwyattn.h`.
///
/// The options borrow their inputs (mask, kv_len, slopes, sinks) and, for
/// the optional outputs `lse` and `weights`, take a [`TensorMut`] view that
/// keeps its slice mutably borrowed until the options are dropped; each call
/// with these options writes them.
///
/// Zero is never a silent default here: the C ABI reads `scale = 0` as
/// 1/sqrt(D) and `softcap = 0` or a window of 0 as "off", so a Rust caller
/// leaves them unset for the default, and an explicit 0 is an error.
#[derive(Debug, Default)]
pub struct SdpaOptions<'a> {
    scale: Option<f32>,
    causal: Causal,
    mask: Option<sys::hwyattn_tensor>,
    kv_len: Option<&'a [i32]>,
    window_left: Option<usize>,
    window_right: Option<usize>,
    softcap: Option<f32>,
    alibi_slopes: Option<&'a [f32]>,
    sinks: Option<&'a [f32]>,
    precision: Precision,
    lse: Option<sys::hwyattn_tensor>,
    weights: Option<sys::hwyattn_tensor>,
    // The mask's slice and the outputs' slices, borrowed for 'a.
    _borrows: PhantomData<&'a mut [f32]>,
}

// SAFETY: every pointer the options hold comes from a borrow they keep for
// 'a: shared borrows of inputs (Sync element types) and unique borrows of the
// outputs, moved in with their TensorMut. Moving the options to another
// thread moves those borrows with them, as moving the references would. They
// are not Sync: two threads calling with one `&SdpaOptions` would both write
// its outputs.
unsafe impl Send for SdpaOptions<'_> {}

impl<'a> SdpaOptions<'a> {
    /// Every default: scale 1/sqrt(D), no causal rule, no mask, no extra output.
    pub fn new() -> Self {
        Self::default()
    }

    /// Multiplies Q K^T. `None` (the default) = 1/sqrt(head_dim); `Some(1.0)`
    /// = plain dot products. `Some(0.0)` is rejected when the options are
    /// used: the C ABI reads scale 0 as the default 1/sqrt(D), while
    /// PyTorch's `scale=0.0` means uniform weights, and passing it on would
    /// silently give the former. NaN and infinite scales are rejected by the
    /// library.
    pub fn scale(mut self, scale: Option<f32>) -> Self {
        self.scale = scale;
        self
    }

    /// The causal rule (default [`Causal::None`]).
    pub fn causal(mut self, causal: Causal) -> Self {
        self.causal = causal;
        self
    }

    /// A mask broadcastable to `[B, Hq, Lq, Lk]` (right-aligned; size-1 or
    /// stride-0 dimensions broadcast): `bool` (true = attend) or `f32` (added
    /// to the scaled scores, `-inf` blocks).
    pub fn mask<T: MaskElement>(mut self, mask: Tensor<'a, T>) -> Self {
        self.mask = Some(mask.raw());
        self
    }

    /// Per-batch key lengths `[B]` (PyTorch's key_padding_mask): keys at
    /// positions >= kv_len[b] are padding. Each value in [0, Lk].
    pub fn kv_len(mut self, kv_len: &'a [i32]) -> Self {
        self.kv_len = Some(kv_len);
        self
    }

    /// Sliding window: a query at position p sees only keys j > p - w
    /// (Mistral/Gemma `sliding_window = w`). `w >= 1`; unset = unbounded.
    pub fn window_left(mut self, w: usize) -> Self {
        self.window_left = Some(w);
        self
    }

    /// A query at position p sees only keys j < p + w (`w = 1` is a causal
    /// rule on positions). `w >= 1`; unset = unbounded.
    pub fn window_right(mut self, w: usize) -> Self {
        self.window_right = Some(w);
        self
    }

    /// Logit soft-capping (Gemma 2): every scaled score s becomes
    /// c * tanh(s / c). `c > 0`; unset = off.
    pub fn softcap(mut self, c: f32) -> Self {
        self.softcap = Some(c);
        self
    }

    /// ALiBi slopes `[Hq]`: slope[h] * (j - p) is added to head h's scores.
    pub fn alibi_slopes(mut self, slopes: &'a [f32]) -> Self {
        self.alibi_slopes = Some(slopes);
        self
    }

    /// Attention sinks `[Hq]` (gpt-oss): a per-head logit that joins every
    /// row's softmax denominator and has no value. `-inf` = off.
    pub fn sinks(mut self, sinks: &'a [f32]) -> Self {
        self.sinks = Some(sinks);
        self
    }

    /// The precision of the products (default [`Precision::F32`]).
    pub fn precision(mut self, precision: Precision) -> Self {
        self.precision = precision;
        self
    }

    /// Also write the natural-log log-sum-exp of each row, F32 `[B, Hq, Lq]`
    /// (for [`merge_states`](crate::merge_states)).
    pub fn lse(mut self, lse: TensorMut<'a>) -> Self {
        self.lse = Some(lse.into_raw());
        self
    }

    /// Also write the attention probabilities, F32 `[B, Hq, Lq, Lk]`.
    pub fn weights(mut self, weights: TensorMut<'a>) -> Self {
        self.weights = Some(weights.into_raw());
        self
    }

    /// The C struct for a call with batch `batch` and `heads` query heads,
    /// after the checks that only this side can make (slice lengths of the
    /// per-batch and per-head arrays, zeros that C would read as defaults).
    /// Its pointers point into `self`, which the caller keeps borrowed.
    pub(crate) fn to_raw(&self, batch: usize, heads: usize) -> Result<sys::hwyattn_sdpa_options> {
        let mut o = MaybeUninit::<sys::hwyattn_sdpa_options>::uninit();
        // SAFETY: init_sized writes exactly size_of bytes: every field.
        let mut o = unsafe {
            sys::hwyattn_sdpa_options_init_sized(
                o.as_mut_ptr(),
                size_of::<sys::hwyattn_sdpa_options>(),
            );
            o.assume_init()
        };
        if let Some(s) = self.scale {
            if s == 0.0 {
                return Err(Error::invalid(
                    "scale is Some(0.0): the C ABI reads scale 0 as the default 1/sqrt(head_dim), \
                     while PyTorch's scale=0.0 means uniform weights; pass None for the default \
                     (or a small nonzero scale for nearly uniform weights)"
                        .to_string(),
                ));
            }
            o.scale = s;
        }
        if let Some(c) = self.softcap {
            if c == 0.0 {
                return Err(Error::invalid(
                    "softcap is 0.0, which the C ABI reads as \"off\"; leave it unset for no cap \
                     (a cap must be > 0)"
                        .to_string(),
                ));
            }
            o.softcap = c;
        }
        for (name, w, field) in [
            ("window_left", self.window_left, &mut o.window_left),
            ("window_right", self.window_right, &mut o.window_right),
        ] {
            if let Some(w) = w {
                if w == 0 {
                    return Err(Error::invalid(format!(
                        "{} is 0, which the C ABI reads as unbounded; a window must be >= 1 \
                         (leave it unset for no window)",
                        name
                    )));
                }
                *field = i64::try_from(w)
                    .map_err(|_| Error::invalid(format!("{} is {}; exceeds int64", name, w)))?;
            }
        }
        o.causal = match self.causal {
            Causal::None => sys::HWYATTN_CAUSAL_NONE,
            Causal::TopLeft => sys::HWYATTN_CAUSAL_TOP_LEFT,
            Causal::BottomRight => sys::HWYATTN_CAUSAL_BOTTOM_RIGHT,
        };
        o.precision = match self.precision {
            Precision::F32 => sys::HWYATTN_PRECISION_F32,
            Precision::Bf16 => sys::HWYATTN_PRECISION_BF16,
            Precision::Int8 => sys::HWYATTN_PRECISION_INT8,
        };
        // The C library reads kv_len[0..B] and slopes/sinks[0..Hq] through
        // bare pointers: too short a slice must stop here.
        if let Some(kv) = self.kv_len {
            check_len("kv_len", kv.len(), batch, "the batch")?;
            o.kv_len = kv.as_ptr();
        }
        if let Some(s) = self.alibi_slopes {
            check_len("alibi_slopes", s.len(), heads, "the number of query heads")?;
            o.alibi_slopes = s.as_ptr();
        }
        if let Some(s) = self.sinks {
            check_len("sinks", s.len(), heads, "the number of query heads")?;
            o.sinks = s.as_ptr();
        }
        if let Some(m) = &self.mask {
            o.mask = m;
        }
        // The library writes the outputs' elements, never their descriptors.
        if let Some(t) = &self.lse {
            o.lse = t as *const sys::hwyattn_tensor as *mut sys::hwyattn_tensor;
        }
        if let Some(t) = &self.weights {
            o.weights = t as *const sys::hwyattn_tensor as *mut sys::hwyattn_tensor;
        }
        Ok(o)
    }
}

fn check_len(name: &str, len: usize, need: usize, what: &str) -> Result<()> {
    if len < need {
        return Err(Error::invalid(format!(
            "{} has {} elements but {} is {}",
            name, len, what, need
        )));
    }
    Ok(())
}
