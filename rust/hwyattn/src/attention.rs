// SPDX-License-Identifier: Apache-2.0
//
// sdpa and merge_states over tensor views.

use crate::error::{Error, Result};
use crate::options::SdpaOptions;
use crate::tensor::{Element, OutputElement, Tensor, TensorMut};
use hwyattn_sys as sys;
use std::ptr;

/// Scaled dot-product attention, `out = softmax(q k^T * scale + mask) v`
/// per batch and query head (`hwyattn_sdpa`):
///
/// ```text
/// q   [B, Hq,  Lq, D ]  f32, F16 or Bf16
/// k   [B, Hkv, Lk, D ]  batch may be 1 (shared by all B)
/// v   [B, Hkv, Lk, Dv]
/// out [B, Hq,  Lq, Dv]  f32, F16 or Bf16, written (rounded once)
/// ```
///
/// Shapes are right-aligned (`[L, D]` is one batch and one head). GQA/MQA:
/// Hq a multiple of Hkv. A row whose keys are all blocked gets zeros. On
/// error nothing is written and the [`Error`] names the argument.
/// Thread-safe.
pub fn sdpa<Q: Element, K: Element, V: Element, O: OutputElement>(
    q: &Tensor<'_, Q>,
    k: &Tensor<'_, K>,
    v: &Tensor<'_, V>,
    out: &mut TensorMut<'_, O>,
    opts: &SdpaOptions<'_>,
) -> Result<()> {
    let raw_opts = opts.to_raw(q.layout().dim4(0), q.layout().dim4(1))?;
    let (tq, tk, tv) = (q.raw(), k.raw(), v.raw());
    let mut to = out.raw();
    // SAFETY: every descriptor covers only elements inside its slice (checked
    // when the views were made); the per-batch and per-head arrays were
    // checked by to_raw; out and the options' outputs are borrowed mutably,
    // so they alias nothing else; the library keeps no pointer after return.
    Error::check(unsafe { sys::hwyattn_sdpa(&tq, &tk, &tv, &mut to, &raw_opts) })
}

/// Merges attention results over disjoint shards of the keys into the result
/// over all of them (`hwyattn_merge_states`): per row, with
/// `L = log(sum_i exp(lses[i]) + exp(sinks[h]))`,
/// `out = sum_i exp(lses[i] - L) * outs[i]` and `lse_out = L`.
///
/// ```text
/// outs[i]  [B, H, L, Dv]  f32, the partial outputs (all the same shape)
/// lses[i]  [B, H, L]      f32, their log-sum-exps (SdpaOptions::lse)
/// sinks    [H]            optional attention sinks, applied once here
/// out      [B, H, L, Dv]  written
/// lse_out  [B, H, L]      optional, written
/// ```
pub fn merge_states(
    outs: &[Tensor<'_, f32>],
    lses: &[Tensor<'_, f32>],
    sinks: Option<&[f32]>,
    out: &mut TensorMut<'_>,
    lse_out: Option<&mut TensorMut<'_>>,
) -> Result<()> {
    if outs.is_empty() || outs.len() != lses.len() {
        return Err(Error::invalid(format!(
            "outs has {} partials and lses {}; need the same number, at least 1",
            outs.len(),
            lses.len()
        )));
    }
    let n = i32::try_from(outs.len()).map_err(|_| {
        Error::invalid(format!("outs has {} partials; more than int32", outs.len()))
    })?;
    if let Some(s) = sinks {
        // The heads axis of outs[0]: the C library reads sinks[0..H].
        let heads = outs[0].layout().dim4(1);
        if s.len() < heads {
            return Err(Error::invalid(format!(
                "sinks has {} elements but outs[0] has {} heads",
                s.len(),
                heads
            )));
        }
    }
    let to: Vec<sys::hwyattn_tensor> = outs.iter().map(|t| t.raw()).collect();
    let tl: Vec<sys::hwyattn_tensor> = lses.iter().map(|t| t.raw()).collect();
    let po: Vec<*const sys::hwyattn_tensor> = to.iter().map(|t| t as *const _).collect();
    let pl: Vec<*const sys::hwyattn_tensor> = tl.iter().map(|t| t as *const _).collect();
    let mut tout = out.raw();
    let mut tlse = lse_out.map(|t| t.raw());
    let plse = tlse.as_mut().map_or(ptr::null_mut(), |t| t as *mut _);
    let psinks = sinks.map_or(ptr::null(), |s| s.as_ptr());
    // SAFETY: as in sdpa: views checked against their slices, the sinks
    // against outs[0]'s heads, outputs borrowed mutably.
    Error::check(unsafe {
        sys::hwyattn_merge_states(n, po.as_ptr(), pl.as_ptr(), psinks, &mut tout, plse)
    })
}
