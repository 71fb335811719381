// SPDX-License-Identifier: Apache-2.0
//
//! Raw declarations of hwyattn's C ABI, written by hand from
//! `include/hwyattn.h` (version 0.2, `HWYATTN_ABI_VERSION` 1).
//!
//! Every type and function here mirrors the header one for one, under the
//! same name; the header's comments are the manual. `tests/abi.rs` compiles a
//! small C program against the header and compares every struct's size and
//! every field's offset with these declarations, and the list of functions
//! with the header's, so the two cannot drift apart silently.
//!
//! The header's `*_init` macros expand to the `*_init_sized` functions with
//! `sizeof(*p)`; from Rust call those with `core::mem::size_of`:
//!
//! ```no_run
//! use hwyattn_sys::*;
//! let mut opts = std::mem::MaybeUninit::<hwyattn_sdpa_options>::uninit();
//! let opts = unsafe {
//!     hwyattn_sdpa_options_init_sized(opts.as_mut_ptr(),
//!                                     std::mem::size_of::<hwyattn_sdpa_options>());
//!     opts.assume_init()
//! };
//! assert_eq!(opts.struct_size as usize, std::mem::size_of::<hwyattn_sdpa_options>());
//! ```
//!
//! Linking: `build.rs` takes `HWYATTN_LIB_DIR`, else `pkg-config --libs
//! hwyattn`, else plain `-lhwyattn` (see the crate's README).
//!
//! C enums are declared as `c_uint` type aliases with their values as
//! constants (GCC and Clang give an enum without negative values the type
//! `unsigned int`): a value a later library returns is then still a valid
//! Rust value, where a Rust `enum` would make it undefined behaviour.

#![allow(non_camel_case_types)]

use std::os::raw::{c_char, c_int, c_uint, c_void};

// ---------------------------------------------------------------------------
// Version and errors
// ---------------------------------------------------------------------------

pub const HWYATTN_VERSION_MAJOR: u32 = 0;
pub const HWYATTN_VERSION_MINOR: u32 = 4;
pub const HWYATTN_VERSION_PATCH: u32 = 0;
/// The ABI these declarations describe; compare with `hwyattn_abi_version()`.
pub const HWYATTN_ABI_VERSION: u32 = 1;

/// `enum hwyattn_status`.
pub type hwyattn_status = c_uint;
pub const HWYATTN_OK: hwyattn_status = 0;
pub const HWYATTN_INVALID_ARGUMENT: hwyattn_status = 1;
pub const HWYATTN_UNSUPPORTED: hwyattn_status = 2;
pub const HWYATTN_OUT_OF_MEMORY: hwyattn_status = 3;
pub const HWYATTN_INTERNAL_ERROR: hwyattn_status = 4;

/// `enum hwyattn_dtype`.
pub type hwyattn_dtype = c_uint;
pub const HWYATTN_F32: hwyattn_dtype = 0;
/// IEEE binary16, stored as `u16`.
pub const HWYATTN_F16: hwyattn_dtype = 1;
/// bfloat16, stored as `u16`.
pub const HWYATTN_BF16: hwyattn_dtype = 2;
/// `u8`, nonzero = true.
pub const HWYATTN_BOOL: hwyattn_dtype = 3;
/// `i8`, symmetric: value = x * scale; only as the K/V of an `hwyattn_kv_cache`.
pub const HWYATTN_I8: hwyattn_dtype = 4;
/// OCP FP8 E4M3 ("fn": max 448, no infinities), stored as `u8`; only as the
/// K/V of an `hwyattn_kv_cache` (value = x * scale, scale 1 without scales).
pub const HWYATTN_F8E4M3: hwyattn_dtype = 5;
/// OCP FP8 E5M2 (IEEE-like, max 57344), stored as `u8`; as `HWYATTN_F8E4M3`.
pub const HWYATTN_F8E5M2: hwyattn_dtype = 6;
/// ggml's Q8_0 block (llama.cpp's `-ctk q8_0`): 32 elements of the last
/// dimension in 34 bytes, an fp16 d in the machine's byte order then
/// `i8 qs[32]`, value d * q. The block formats (`HWYATTN_Q8_0` ..
/// `HWYATTN_IQ4_NL`) are accepted as k/v of `hwyattn_sdpa` and as the pages
/// of an `hwyattn_kv_cache` (no scale tensors); the last dimension a
/// multiple of 32 with stride 1, the other strides (in elements) multiples
/// of 32. The header has the layouts.
pub const HWYATTN_Q8_0: hwyattn_dtype = 7;
/// ggml's Q4_0 block: d, `u8 qs[16]` (18 bytes), value d * (nibble - 8).
pub const HWYATTN_Q4_0: hwyattn_dtype = 8;
/// ggml's Q4_1 block: d, m, `u8 qs[16]` (20 bytes), value d * nibble + m.
pub const HWYATTN_Q4_1: hwyattn_dtype = 9;
/// ggml's Q5_0 block: d, `u8 qh[4]`, `u8 qs[16]` (22 bytes), value d * (q5 - 16).
pub const HWYATTN_Q5_0: hwyattn_dtype = 10;
/// ggml's Q5_1 block: d, m, `u8 qh[4]`, `u8 qs[16]` (24 bytes), value d * q5 + m.
pub const HWYATTN_Q5_1: hwyattn_dtype = 11;
/// ggml's IQ4_NL block: d, `u8 qs[16]` (18 bytes), value `d * level[nibble]`.
pub const HWYATTN_IQ4_NL: hwyattn_dtype = 12;
/// Signed int4 in [-8, 7], two per byte (element 2i the low nibble of byte
/// i), value x * scale with I8's scale layouts; only as the pages of an
/// `hwyattn_kv_cache` (K and V both I4). Strides count elements: the last
/// is 1, the others even.
pub const HWYATTN_I4: hwyattn_dtype = 13;

/// `enum hwyattn_causal`.
pub type hwyattn_causal = c_uint;
pub const HWYATTN_CAUSAL_NONE: hwyattn_causal = 0;
/// Query i sees keys j <= i (PyTorch `is_causal=True`).
pub const HWYATTN_CAUSAL_TOP_LEFT: hwyattn_causal = 1;
/// Query i sees keys j <= i + (Lk - Lq) (the decode / KV-cache convention).
pub const HWYATTN_CAUSAL_BOTTOM_RIGHT: hwyattn_causal = 2;

/// `enum hwyattn_precision`.
pub type hwyattn_precision = c_uint;
pub const HWYATTN_PRECISION_F32: hwyattn_precision = 0;
pub const HWYATTN_PRECISION_BF16: hwyattn_precision = 1;
/// Integer Q K^T for a quantized K (I8, I4, ggml blocks): the query
/// quantized per block of 32 as ggml's `quantize_row_q8_0`; float K: F32.
pub const HWYATTN_PRECISION_INT8: hwyattn_precision = 2;

// ---------------------------------------------------------------------------
// Structs
// ---------------------------------------------------------------------------

/// `hwyattn_task_fn`: runs work item `index` of a parallel phase.
pub type hwyattn_task_fn = Option<unsafe extern "C" fn(task_ctx: *mut c_void, index: i64)>;

/// `struct hwyattn_parallel`: the caller's thread pool (`opts.parallel`).
/// Initialise with `hwyattn_parallel_init_sized(p, size_of::<hwyattn_parallel>())`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct hwyattn_parallel {
    pub struct_size: u32,
    pub num_workers: i32,
    pub pool: *mut c_void,
    pub parallel_for: Option<
        unsafe extern "C" fn(
            pool: *mut c_void,
            n: i64,
            task: hwyattn_task_fn,
            task_ctx: *mut c_void,
        ),
    >,
}

/// `struct hwyattn_tensor`: a data pointer, a dtype, a rank (1..4) and
/// right-aligned sizes and strides counted in elements.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct hwyattn_tensor {
    pub data: *mut c_void,
    pub dtype: hwyattn_dtype,
    pub rank: i32,
    pub shape: [i64; 4],
    pub stride: [i64; 4],
}

/// `struct hwyattn_sdpa_options` (0.2). Initialise with
/// `hwyattn_sdpa_options_init_sized(p, size_of::<hwyattn_sdpa_options>())`:
/// every zero field means "off" or "the default" (`scale` 0 = 1/sqrt(D)).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct hwyattn_sdpa_options {
    pub struct_size: u32,
    pub scale: f32,
    pub causal: hwyattn_causal,
    pub mask: *const hwyattn_tensor,
    pub kv_len: *const i32,
    pub weights: *mut hwyattn_tensor,
    pub lse: *mut hwyattn_tensor,
    // 0.2
    pub window_left: i64,
    pub window_right: i64,
    pub softcap: f32,
    pub alibi_slopes: *const f32,
    pub sinks: *const f32,
    pub parallel: *const hwyattn_parallel,
    pub precision: hwyattn_precision,
    pub reserved0: i32,
}

/// `struct hwyattn_mha`: opaque module handle.
#[repr(C)]
pub struct hwyattn_mha {
    _private: [u8; 0],
}

/// `struct hwyattn_mha_config`. Initialise with
/// `hwyattn_mha_config_init_sized(p, size_of::<hwyattn_mha_config>())`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct hwyattn_mha_config {
    pub struct_size: u32,
    pub embed_dim: i64,
    pub num_heads: i64,
    pub head_dim: i64,
    pub num_kv_heads: i64,
    pub kdim: i64,
    pub vdim: i64,
    pub has_bias: i32,
    pub reserved0: i32,
    /// `HWYATTN_F32` (0) or `HWYATTN_BF16`: the packed weights' storage.
    pub weight_dtype: hwyattn_dtype,
    pub reserved1: i32,
}

/// `struct hwyattn_mha_weights`: row-major `[out_features, in_features]` F32
/// (torch `nn.Linear` layout); biases NULL unless `has_bias`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct hwyattn_mha_weights {
    pub w_q: *const f32,
    pub w_k: *const f32,
    pub w_v: *const f32,
    pub w_o: *const f32,
    pub b_q: *const f32,
    pub b_k: *const f32,
    pub b_v: *const f32,
    pub b_o: *const f32,
}

/// `struct hwyattn_kv_cache`: a paged KV cache the caller owns. Initialise
/// with `hwyattn_kv_cache_init_sized(p, size_of::<hwyattn_kv_cache>())`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct hwyattn_kv_cache {
    pub struct_size: u32,
    pub reserved0: i32,
    pub k: hwyattn_tensor,
    pub v: hwyattn_tensor,
    pub k_scale: *const hwyattn_tensor,
    pub v_scale: *const hwyattn_tensor,
    pub block_table: *const i32,
    pub block_table_stride: i64,
}

/// `struct hwyattn_kv_batch`: the sequences of one `hwyattn_kv_attention`
/// call. Initialise with `hwyattn_kv_batch_init_sized(p, size_of::<hwyattn_kv_batch>())`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct hwyattn_kv_batch {
    pub struct_size: u32,
    pub num_seqs: i32,
    pub q_start: *const i32,
    pub kv_len: *const i32,
    pub q_pos: *const i32,
}

// ---------------------------------------------------------------------------
// Functions
// ---------------------------------------------------------------------------

extern "C" {
    pub fn hwyattn_abi_version() -> u32;
    pub fn hwyattn_version() -> *const c_char;
    pub fn hwyattn_status_string(s: hwyattn_status) -> *const c_char;
    /// This thread's last failure; valid until this thread's next hwyattn call.
    pub fn hwyattn_last_error() -> *const c_char;

    pub fn hwyattn_simd_target() -> *const c_char;
    pub fn hwyattn_set_num_threads(n: c_int) -> hwyattn_status;
    pub fn hwyattn_get_num_threads() -> c_int;

    pub fn hwyattn_parallel_init_sized(p: *mut hwyattn_parallel, size: usize);

    pub fn hwyattn_tensor_contiguous(
        t: *mut hwyattn_tensor,
        data: *mut c_void,
        dtype: hwyattn_dtype,
        rank: i32,
        shape: *const i64,
    ) -> hwyattn_status;

    pub fn hwyattn_sdpa_options_init_sized(opts: *mut hwyattn_sdpa_options, size: usize);
    /// The frozen 0.1 entry point: writes exactly the 48 bytes of the 0.1
    /// struct and sets `struct_size` to 48. New code calls
    /// `hwyattn_sdpa_options_init_sized`.
    pub fn hwyattn_sdpa_options_init(opts: *mut hwyattn_sdpa_options);
    /// Reads a caller's options by their `struct_size` (the library's rule
    /// for extensible structs) into `dst`, a struct of this header's size.
    pub fn hwyattn_sdpa_options_copy(
        dst: *mut hwyattn_sdpa_options,
        src: *const hwyattn_sdpa_options,
    ) -> hwyattn_status;

    pub fn hwyattn_sdpa(
        q: *const hwyattn_tensor,
        k: *const hwyattn_tensor,
        v: *const hwyattn_tensor,
        out: *mut hwyattn_tensor,
        opts: *const hwyattn_sdpa_options,
    ) -> hwyattn_status;

    pub fn hwyattn_merge_states(
        n: i32,
        outs: *const *const hwyattn_tensor,
        lses: *const *const hwyattn_tensor,
        sinks: *const f32,
        out: *mut hwyattn_tensor,
        lse_out: *mut hwyattn_tensor,
    ) -> hwyattn_status;

    pub fn hwyattn_mha_config_init_sized(cfg: *mut hwyattn_mha_config, size: usize);
    /// The frozen 0.1 entry point (zeroes the 64 bytes of the 0.1 struct).
    /// New code calls `hwyattn_mha_config_init_sized`.
    pub fn hwyattn_mha_config_init(cfg: *mut hwyattn_mha_config);
    pub fn hwyattn_mha_create(
        cfg: *const hwyattn_mha_config,
        w: *const hwyattn_mha_weights,
        out: *mut *mut hwyattn_mha,
    ) -> hwyattn_status;
    pub fn hwyattn_mha_destroy(m: *mut hwyattn_mha);
    pub fn hwyattn_mha_forward(
        m: *const hwyattn_mha,
        query: *const hwyattn_tensor,
        key: *const hwyattn_tensor,
        value: *const hwyattn_tensor,
        out: *mut hwyattn_tensor,
        opts: *const hwyattn_sdpa_options,
    ) -> hwyattn_status;

    pub fn hwyattn_kv_cache_init_sized(c: *mut hwyattn_kv_cache, size: usize);
    pub fn hwyattn_kv_batch_init_sized(b: *mut hwyattn_kv_batch, size: usize);
    pub fn hwyattn_kv_attention(
        q: *const hwyattn_tensor,
        cache: *const hwyattn_kv_cache,
        batch: *const hwyattn_kv_batch,
        out: *mut hwyattn_tensor,
        opts: *const hwyattn_sdpa_options,
    ) -> hwyattn_status;
    pub fn hwyattn_kv_cache_write(
        cache: *const hwyattn_kv_cache,
        k_new: *const hwyattn_tensor,
        v_new: *const hwyattn_tensor,
        slot: *const i64,
        opts: *const hwyattn_sdpa_options,
    ) -> hwyattn_status;
}
