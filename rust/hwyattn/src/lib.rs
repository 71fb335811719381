// SPDX-License-Identifier: Apache-2.0
//
//! Safe Rust API of hwyattn, portable SIMD CPU attention for transformer
//! inference, over its C ABI (`hwyattn-sys`, `include/hwyattn.h`).
//!
//! - [`sdpa`]: scaled dot-product attention over [`Tensor`] views (slices
//!   with shapes and optional strides), with [`SdpaOptions`] (causal, masks,
//!   key lengths, sliding windows, softcap, ALiBi, sinks, lse/weights).
//! - [`merge_states`]: combine results over shards of the keys.
//! - [`MultiheadAttention`]: a layer with packed weights, `Send + Sync`.
//! - [`KvCache`], [`KvBatch`], [`kv_cache_write`] and [`kv_attention`]: a
//!   paged KV cache in the caller's slices (f32, F16, Bf16, i8, fp8 pages,
//!   ggml's blocks such as [`BlockQ8_0`], or int4 pairs [`I4x2`]; a block
//!   table) and attention of prefill chunks and decodes of several
//!   sequences in one call.
//!
//! Every call returns `Result<_, Error>`; an [`Error`] carries the status and
//! a message naming the argument and the value. Slices too short for their
//! shapes are caught on the Rust side before any C call.
//!
//! ```no_run
//! use hwyattn::{sdpa, Causal, SdpaOptions, Tensor, TensorMut};
//! # fn main() -> Result<(), hwyattn::Error> {
//! let (b, h, l, d) = (1, 2, 3, 4);
//! let q = vec![0.5f32; b * h * l * d];
//! let k = vec![0.25f32; b * h * l * d];
//! let v = vec![1.0f32; b * h * l * d];
//! let mut o = vec![0.0f32; b * h * l * d];
//! let shape = [b, h, l, d];
//! sdpa(&Tensor::new(&q, &shape)?, &Tensor::new(&k, &shape)?, &Tensor::new(&v, &shape)?,
//!      &mut TensorMut::new(&mut o, &shape)?,
//!      &SdpaOptions::new().causal(Causal::TopLeft))?;
//! # Ok(()) }
//! ```

mod attention;
mod error;
mod kv;
mod mha;
mod options;
mod tensor;

pub use attention::{merge_states, sdpa};
pub use error::{Error, Result, Status};
pub use kv::{
    kv_attention, kv_cache_write, BlockIQ4NL, BlockQ4_0, BlockQ4_1, BlockQ5_0, BlockQ5_1,
    BlockQ8_0, CacheElement, I4x2, KvBatch, KvCache, KvScale, F8E4M3, F8E5M2,
};
pub use mha::{MhaBiases, MhaConfig, MhaWeights, MultiheadAttention};
pub use options::{Causal, MaskElement, Precision, SdpaOptions};
pub use tensor::{Bf16, Element, OutputElement, Tensor, TensorMut, F16};

use hwyattn_sys as sys;
use std::ffi::CStr;
use std::os::raw::c_char;

fn static_str(p: *const c_char) -> &'static str {
    // SAFETY: the callers pass the library's static, NUL-terminated strings.
    unsafe { CStr::from_ptr(p) }.to_str().unwrap_or("?")
}

/// The library's version, "MAJOR.MINOR.PATCH".
pub fn version() -> &'static str {
    // SAFETY: no arguments; returns static storage.
    static_str(unsafe { sys::hwyattn_version() })
}

/// The library's ABI version; equals `hwyattn_sys::HWYATTN_ABI_VERSION` when
/// the binding and the library match.
pub fn abi_version() -> u32 {
    // SAFETY: no arguments.
    unsafe { sys::hwyattn_abi_version() }
}

/// The SIMD target the kernels run on ("AVX3", "AVX2", "NEON", "EMU128", ...),
/// capped by the environment variable `HWYATTN_TARGET` at the first call.
pub fn simd_target() -> &'static str {
    // SAFETY: no arguments; returns static storage.
    static_str(unsafe { sys::hwyattn_simd_target() })
}

/// Sets how many threads later calls may use, process-wide: 1 = the calling
/// thread only, 0 = all cores (the OpenMP default). Results never depend on it.
pub fn set_num_threads(n: usize) -> Result<()> {
    let n = i32::try_from(n).map_err(|_| Error::invalid(format!("n is {}; more than int32", n)))?;
    // SAFETY: a plain value; the library validates it.
    Error::check(unsafe { sys::hwyattn_set_num_threads(n) })
}

/// The number of threads later calls may use.
pub fn num_threads() -> usize {
    // SAFETY: no arguments.
    unsafe { sys::hwyattn_get_num_threads() }.max(0) as usize
}
