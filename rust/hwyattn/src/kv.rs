// SPDX-License-Identifier: Apache-2.0
//
// The paged KV cache: KvCache, KvBatch, kv_cache_write and kv_attention
// (hwyattn_kv_cache, hwyattn_kv_batch, hwyattn_kv_cache_write,
// hwyattn_kv_attention).

use crate::error::{Error, Result};
use crate::options::SdpaOptions;
use crate::tensor::{Bf16, Element, Layout, OutputElement, Tensor, TensorMut, F16};
use hwyattn_sys as sys;
use std::mem::{size_of, MaybeUninit};
use std::os::raw::c_void;
use std::ptr;

mod sealed {
    pub trait Sealed {}
}

/// The element type of a cache's pages: `f32`, [`F16`], [`Bf16`], `i8`
/// (symmetric int8, value = x * scale, with [`KvScale`]s), [`F8E4M3`] or
/// [`F8E5M2`] (OCP fp8, value = x * scale, scales optional); or an item
/// that packs several elements: one of ggml's blocks of 32 ([`BlockQ8_0`],
/// [`BlockQ4_0`], [`BlockQ4_1`], [`BlockQ5_0`], [`BlockQ5_1`],
/// [`BlockIQ4NL`]: llama.cpp's quantized KV caches, no scales) or a byte
/// of two int4 numbers ([`I4x2`], value = x * scale, with [`KvScale`]s).
/// Shapes and strides always count elements; a slice of a packed type
/// holds [`CacheElement::row_len`] items per row. Sealed.
pub trait CacheElement: Copy + sealed::Sealed {
    /// The C dtype of the pages.
    const DTYPE: sys::hwyattn_dtype;
    /// The elements one item holds: 1, 32 for a block, 2 for [`I4x2`].
    const ELEMENTS: usize = 1;

    /// The items that hold a row of `dim` elements: `dim` numbers, `dim /
    /// 32` blocks (`dim` a multiple of 32, else an error) or `(dim + 1) / 2`
    /// [`I4x2`] bytes (an odd `dim` leaves the last high nibble as padding).
    fn row_len(dim: usize) -> Result<usize> {
        if Self::ELEMENTS == 32 && dim % 32 != 0 {
            return Err(Error::invalid(format!(
                "a row of {} elements is not whole {} blocks of {}",
                dim,
                short_type_name::<Self>(),
                Self::ELEMENTS
            )));
        }
        Ok((dim + Self::ELEMENTS - 1) / Self::ELEMENTS)
    }

    /// The slice length of dense pages `[num_pages, kv_heads, page_size,
    /// dim]` (what [`KvCache::new`] needs): `num_pages * kv_heads *
    /// page_size * row_len(dim)` items (`size_of::<Self>()` bytes each).
    fn pages_len(num_pages: usize, kv_heads: usize, page_size: usize, dim: usize) -> Result<usize> {
        let row = Self::row_len(dim)?;
        [num_pages, kv_heads, page_size]
            .iter()
            .try_fold(row, |n, &d| n.checked_mul(d))
            .filter(|&n| {
                n.checked_mul(size_of::<Self>())
                    .map_or(false, |b| b <= isize::MAX as usize)
            })
            .ok_or_else(|| {
                Error::invalid(format!(
                    "pages [{}, {}, {}, {}] of {} overflow the address space",
                    num_pages,
                    kv_heads,
                    page_size,
                    dim,
                    short_type_name::<Self>()
                ))
            })
    }
}

/// The type's own name, without its path ("BlockQ8_0").
fn short_type_name<T: ?Sized>() -> &'static str {
    let full = std::any::type_name::<T>();
    full.rsplit("::").next().unwrap_or(full)
}
impl sealed::Sealed for f32 {}
impl sealed::Sealed for F16 {}
impl sealed::Sealed for Bf16 {}
impl sealed::Sealed for i8 {}
impl sealed::Sealed for F8E4M3 {}
impl sealed::Sealed for F8E5M2 {}
impl CacheElement for f32 {
    const DTYPE: sys::hwyattn_dtype = sys::HWYATTN_F32;
}
impl CacheElement for F16 {
    const DTYPE: sys::hwyattn_dtype = sys::HWYATTN_F16;
}
impl CacheElement for Bf16 {
    const DTYPE: sys::hwyattn_dtype = sys::HWYATTN_BF16;
}
impl CacheElement for i8 {
    const DTYPE: sys::hwyattn_dtype = sys::HWYATTN_I8;
}
impl CacheElement for F8E4M3 {
    const DTYPE: sys::hwyattn_dtype = sys::HWYATTN_F8E4M3;
}
impl CacheElement for F8E5M2 {
    const DTYPE: sys::hwyattn_dtype = sys::HWYATTN_F8E5M2;
}

macro_rules! ggml_block {
    ($name:ident, $bytes:expr, $dtype:ident, $doc:expr) => {
        #[doc = $doc]
        ///
        /// Its bytes as ggml lays them out (include/hwyattn.h): an fp16 `d`
        /// in the machine's byte order first; in the 4- and 5-bit formats
        /// element j < 16 is the low nibble of `qs[j]` and element j + 16 its
        /// high nibble, and Q5's fifth bit of element j is bit j of the
        /// little-endian 32-bit `qh`. [`kv_cache_write`] quantizes as ggml's
        /// reference quantizers do (the same bytes). A cache page of these
        /// holds `D / 32` blocks per row.
        #[repr(transparent)]
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub struct $name(pub [u8; $bytes]);

        impl $name {
            /// The bytes of one block.
            pub const BYTES: usize = $bytes;

            /// The blocks of a byte buffer (an engine's pool, an mmap'ed
            /// file), in place: its length must be a whole number of blocks.
            pub fn from_bytes_mut(bytes: &mut [u8]) -> Result<&mut [$name]> {
                if bytes.len() % $bytes != 0 {
                    return Err(Error::invalid(format!(
                        "{} bytes are not a whole number of {} blocks of {} bytes",
                        bytes.len(),
                        stringify!($name),
                        $bytes
                    )));
                }
                // SAFETY: $name is repr(transparent) over [u8; $bytes]
                // (alignment 1, no padding, every bit pattern valid), and the
                // slice covers exactly the buffer, borrowed mutably.
                Ok(unsafe {
                    std::slice::from_raw_parts_mut(
                        bytes.as_mut_ptr() as *mut $name,
                        bytes.len() / $bytes,
                    )
                })
            }

            /// The bytes of a slice of blocks.
            pub fn as_bytes(blocks: &[$name]) -> &[u8] {
                // SAFETY: as in from_bytes_mut; u8 has no invalid values.
                unsafe {
                    std::slice::from_raw_parts(blocks.as_ptr() as *const u8, blocks.len() * $bytes)
                }
            }
        }

        impl Default for $name {
            fn default() -> Self {
                $name([0; $bytes])
            }
        }

        impl sealed::Sealed for $name {}
        impl CacheElement for $name {
            const DTYPE: sys::hwyattn_dtype = sys::$dtype;
            const ELEMENTS: usize = 32;
        }
    };
}

ggml_block!(
    BlockQ8_0,
    34,
    HWYATTN_Q8_0,
    "ggml's Q8_0 block (llama.cpp's `-ctk q8_0`, `HWYATTN_Q8_0`): 32 elements in 34 bytes, \
     `d: f16, qs: [i8; 32]`, value d * q."
);
ggml_block!(
    BlockQ4_0,
    18,
    HWYATTN_Q4_0,
    "ggml's Q4_0 block (`-ctk q4_0`, `HWYATTN_Q4_0`): 32 elements in 18 bytes, \
     `d: f16, qs: [u8; 16]`, value d * (nibble - 8)."
);
ggml_block!(
    BlockQ4_1,
    20,
    HWYATTN_Q4_1,
    "ggml's Q4_1 block (`-ctk q4_1`, `HWYATTN_Q4_1`): 32 elements in 20 bytes, \
     `d: f16, m: f16, qs: [u8; 16]`, value d * nibble + m (rounded once to f32)."
);
ggml_block!(
    BlockQ5_0,
    22,
    HWYATTN_Q5_0,
    "ggml's Q5_0 block (`-ctk q5_0`, `HWYATTN_Q5_0`): 32 elements in 22 bytes, \
     `d: f16, qh: [u8; 4], qs: [u8; 16]`, value d * (q5 - 16)."
);
ggml_block!(
    BlockQ5_1,
    24,
    HWYATTN_Q5_1,
    "ggml's Q5_1 block (`-ctk q5_1`, `HWYATTN_Q5_1`): 32 elements in 24 bytes, \
     `d: f16, m: f16, qh: [u8; 4], qs: [u8; 16]`, value d * q5 + m (rounded once to f32)."
);
ggml_block!(
    BlockIQ4NL,
    18,
    HWYATTN_IQ4_NL,
    "ggml's IQ4_NL block (`-ctk iq4_nl`, `HWYATTN_IQ4_NL`): 32 elements in 18 bytes, \
     `d: f16, qs: [u8; 16]`, value `d * level[nibble]` (levels -127 -104 -83 -65 -49 -35 -22 \
     -10 1 13 25 38 53 69 89 113)."
);

/// Two signed int4 numbers in [-8, 7] in one byte (`HWYATTN_I4`): element
/// 2i of a row is the low nibble of byte i, element 2i + 1 the high nibble
/// (two's complement). The pages of a [`KvCache`] only, K and V both; the
/// value is x * scale with [`KvScale`]s as for `i8` ([`kv_cache_write`]:
/// per-token scale max |x| / 7, x / scale rounded to nearest even and
/// saturated to [-8, 7]). A row of D elements takes `(D + 1) / 2` bytes.
#[repr(transparent)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct I4x2(pub u8);

impl I4x2 {
    /// The byte of `lo` (element 2i) and `hi` (element 2i + 1), each
    /// wrapped to its low 4 bits.
    pub fn new(lo: i8, hi: i8) -> I4x2 {
        I4x2((lo as u8 & 15) | (hi as u8) << 4)
    }
    /// Element 2i: the low nibble, sign-extended.
    pub fn lo(self) -> i8 {
        ((self.0 << 4) as i8) >> 4
    }
    /// Element 2i + 1: the high nibble, sign-extended.
    pub fn hi(self) -> i8 {
        (self.0 as i8) >> 4
    }
}

impl sealed::Sealed for I4x2 {}
impl CacheElement for I4x2 {
    const DTYPE: sys::hwyattn_dtype = sys::HWYATTN_I4;
    const ELEMENTS: usize = 2;
}

/// OCP fp8 E4M3 ("fn": bias 7, no infinities, S.1111.111 is NaN, largest
/// 448), as its bits (`HWYATTN_F8E4M3`): the pages of a [`KvCache`] only.
#[repr(transparent)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct F8E4M3(pub u8);

/// OCP fp8 E5M2 (bias 15, IEEE-like, largest 57344), as its bits
/// (`HWYATTN_F8E5M2`): the pages of a [`KvCache`] only.
#[repr(transparent)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct F8E5M2(pub u8);

/// The value of an fp8 number with `mbits` mantissa bits and exponent
/// `bias` (NaN patterns: E4M3's S.1111.111, E5M2's exponent 31).
fn fp8_value(bits: u8, mbits: u32, bias: i32, ieee: bool) -> f32 {
    let e = ((bits & 0x7f) >> mbits) as i32;
    let m = (bits & ((1u8 << mbits) - 1)) as f32;
    let scale = (1u32 << mbits) as f32;
    let mag = if !ieee && bits & 0x7f == 0x7f {
        f32::NAN
    } else if ieee && e == 31 {
        if m == 0.0 {
            f32::INFINITY
        } else {
            f32::NAN
        }
    } else if e == 0 {
        m / scale * 2f32.powi(1 - bias)
    } else {
        (1.0 + m / scale) * 2f32.powi(e - bias)
    };
    if bits & 0x80 != 0 {
        -mag
    } else {
        mag
    }
}

impl F8E4M3 {
    /// The exact f32 value.
    pub fn to_f32(self) -> f32 {
        fp8_value(self.0, 3, 7, false)
    }
}

impl F8E5M2 {
    /// The exact f32 value.
    pub fn to_f32(self) -> f32 {
        fp8_value(self.0, 2, 15, true)
    }
}

/// The scales of a quantized (int8, int4 or fp8) cache's K or V (f32, dense).
#[derive(Debug)]
pub enum KvScale<'a> {
    /// `[num_pages, Hkv, page_size]`: one scale per token and kv head, at the
    /// token's slot; [`kv_cache_write`] computes and stores it (max |x| /
    /// 127, 7, 448 or 57344).
    PerToken(&'a mut [f32]),
    /// `[Hkv, D]` (or `[Hkv, Dv]` for V): one scale per kv head and channel,
    /// fixed by the caller (calibrated), each finite and > 0.
    PerChannel(&'a [f32]),
    /// `[Hkv]`: one scale per kv head, fixed, finite and > 0.
    PerHead(&'a [f32]),
    /// `[1]`: one scale for the tensor (vLLM's `k_scale`), fixed, finite
    /// and > 0.
    PerTensor(&'a [f32]),
}

/// A scale tensor: its layout and its first element.
#[derive(Debug)]
struct ScaleView {
    layout: Layout,
    data: *mut f32,
}

/// A paged KV cache in the caller's memory (`hwyattn_kv_cache`): a pool of
/// `num_pages` pages of `page_size` token slots; slot s is offset
/// `s % page_size` of page `s / page_size`.
///
/// ```text
/// k  [num_pages, Hkv, page_size, D ]
/// v  [num_pages, Hkv, page_size, Dv]   same element type
/// ```
///
/// [`KvCache::new`] takes dense slices (vLLM's layout);
/// [`KvCache::with_strides`] any strides (FlashAttention's
/// `[pages, page, Hkv, D]` memory is the strides
/// `[page * Hkv * D, D, Hkv * D, 1]`). Shapes and strides count elements
/// for every type: pages of ggml blocks (D and Dv multiples of 32, strides
/// multiples of 32) or of [`I4x2`] (even strides) hold
/// [`CacheElement::row_len`] items per row, and
/// [`CacheElement::pages_len`] is the length of dense pages, e.g.
/// `vec![BlockQ8_0::default(); BlockQ8_0::pages_len(p, hkv, s, d)?]`.
/// The cache borrows the pages mutably
/// for `'a` ([`kv_cache_write`] writes them). An `i8` or [`I4x2`] cache needs
/// [`KvCache::scales`]; [`KvCache::block_table`] lists each sequence's pages
/// (without one, sequence s is page s: a padded contiguous cache whose
/// `page_size` is each sequence's capacity).
#[derive(Debug)]
pub struct KvCache<'a, T: CacheElement> {
    k: &'a mut [T],
    v: &'a mut [T],
    k_layout: Layout,
    v_layout: Layout,
    scales: Option<(ScaleView, ScaleView)>,
    block_table: Option<(&'a [i32], usize)>,
    // The scales' slices, borrowed for 'a.
    _scales: std::marker::PhantomData<&'a mut [f32]>,
}

// SAFETY: the raw pointers of the scale views come from borrows the cache
// keeps for 'a (a unique borrow for per-token scales, a shared one of Sync
// f32 for per-channel ones), as the slices it holds; moving or sharing the
// cache moves or shares those borrows, as the references would.
unsafe impl<T: CacheElement + Send> Send for KvCache<'_, T> {}
unsafe impl<T: CacheElement + Sync> Sync for KvCache<'_, T> {}

fn named(name: &str, e: Error) -> Error {
    Error::invalid(format!("{}: {}", name, e.message()))
}

impl<'a, T: CacheElement> KvCache<'a, T> {
    /// Dense pages: `k` holds `[num_pages, kv_heads, page_size, head_dim]`,
    /// `v` `[num_pages, kv_heads, page_size, value_dim]` (exactly, or more):
    /// at least [`CacheElement::pages_len`] items.
    pub fn new(
        k: &'a mut [T],
        v: &'a mut [T],
        num_pages: usize,
        kv_heads: usize,
        page_size: usize,
        head_dim: usize,
        value_dim: usize,
    ) -> Result<Self> {
        let ks = [num_pages, kv_heads, page_size, head_dim];
        let vs = [num_pages, kv_heads, page_size, value_dim];
        if T::ELEMENTS == 1 {
            return Self::build(k, &ks, None, v, &vs, None);
        }
        // Rows of whole items: an odd D of I4x2 pads each row to a byte.
        let dense = |name: &str, dim: usize| -> Result<[usize; 4]> {
            let row = T::row_len(dim).map_err(|e| named(name, e))? * T::ELEMENTS;
            let page = page_size.checked_mul(row);
            match page.and_then(|p| p.checked_mul(kv_heads)) {
                Some(all) => Ok([all, page.unwrap_or(0), row, 1]),
                None => Err(Error::invalid(format!(
                    "{}: [{}, {}, {}, {}] overflows",
                    name, num_pages, kv_heads, page_size, dim
                ))),
            }
        };
        let (kst, vst) = (dense("k", head_dim)?, dense("v", value_dim)?);
        Self::build(k, &ks, Some(&kst), v, &vs, Some(&vst))
    }

    /// Pages of any shape and strides (in elements, one per dimension):
    /// `k_shape` `[num_pages, Hkv, page_size, D]`, `v_shape` with `Dv`.
    pub fn with_strides(
        k: &'a mut [T],
        k_shape: &[usize],
        k_strides: &[usize],
        v: &'a mut [T],
        v_shape: &[usize],
        v_strides: &[usize],
    ) -> Result<Self> {
        Self::build(k, k_shape, Some(k_strides), v, v_shape, Some(v_strides))
    }

    fn build(
        k: &'a mut [T],
        k_shape: &[usize],
        k_strides: Option<&[usize]>,
        v: &'a mut [T],
        v_shape: &[usize],
        v_strides: Option<&[usize]>,
    ) -> Result<Self> {
        let k_layout = pages_layout::<T>("k", k.len(), k_shape, k_strides)?;
        let v_layout = pages_layout::<T>("v", v.len(), v_shape, v_strides)?;
        Ok(KvCache {
            k,
            v,
            k_layout,
            v_layout,
            scales: None,
            block_table: None,
            _scales: std::marker::PhantomData,
        })
    }

    /// The scales of an `i8` or [`I4x2`] cache (required there) or an fp8
    /// one (optional: scale 1 without), refused by the library for other
    /// element types. K and V may use different layouts (KIVI's int4:
    /// per-channel K, per-token V).
    pub fn scales(mut self, k_scale: KvScale<'a>, v_scale: KvScale<'a>) -> Result<Self> {
        let k = self.scale_view("k_scale", k_scale, &self.k_layout)?;
        let v = self.scale_view("v_scale", v_scale, &self.v_layout)?;
        self.scales = Some((k, v));
        Ok(self)
    }

    fn scale_view(&self, name: &str, s: KvScale<'a>, pages: &Layout) -> Result<ScaleView> {
        let (p, h, sz, d) = (pages.dim4(0), pages.dim4(1), pages.dim4(2), pages.dim4(3));
        let (len, data, shape) = match s {
            KvScale::PerToken(x) => (x.len(), x.as_mut_ptr(), [p, h, sz, 1]),
            KvScale::PerChannel(x) => (x.len(), x.as_ptr() as *mut f32, [1, h, 1, d]),
            KvScale::PerHead(x) => (x.len(), x.as_ptr() as *mut f32, [1, h, 1, 1]),
            KvScale::PerTensor(x) => (x.len(), x.as_ptr() as *mut f32, [1, 1, 1, 1]),
        };
        let layout = Layout::new(len, &shape, None).map_err(|e| named(name, e))?;
        Ok(ScaleView { layout, data })
    }

    /// The block table, int32 `[num_seqs, stride]`: row s lists the pages of
    /// sequence s of a batch in order (only its first
    /// `ceil(kv_len[s] / page_size)` entries are read). It must hold
    /// `num_seqs` whole rows for each [`kv_attention`] (checked there).
    pub fn block_table(mut self, table: &'a [i32], stride: usize) -> Self {
        self.block_table = Some((table, stride));
        self
    }

    /// The page shape `[num_pages, Hkv, page_size, D]` of K.
    pub fn k_shape(&self) -> [usize; 4] {
        let l = &self.k_layout;
        [l.dim4(0), l.dim4(1), l.dim4(2), l.dim4(3)]
    }

    /// The pages of K and V, to read them.
    pub fn pages(&self) -> (&[T], &[T]) {
        (self.k, self.v)
    }

    /// The C struct. Its pointers point into the borrowed pages, scales and
    /// table, and to the scale descriptors in `holder`.
    fn raw(&self, holder: &mut [sys::hwyattn_tensor; 2]) -> sys::hwyattn_kv_cache {
        let mut c = MaybeUninit::<sys::hwyattn_kv_cache>::uninit();
        // SAFETY: init_sized writes exactly size_of bytes: every field.
        let mut c = unsafe {
            sys::hwyattn_kv_cache_init_sized(c.as_mut_ptr(), size_of::<sys::hwyattn_kv_cache>());
            c.assume_init()
        };
        c.k = self.k_layout.raw(self.k.as_ptr() as *mut c_void, T::DTYPE);
        c.v = self.v_layout.raw(self.v.as_ptr() as *mut c_void, T::DTYPE);
        if let Some((k, v)) = &self.scales {
            holder[0] = k.layout.raw(k.data as *mut c_void, sys::HWYATTN_F32);
            holder[1] = v.layout.raw(v.data as *mut c_void, sys::HWYATTN_F32);
            c.k_scale = &holder[0];
            c.v_scale = &holder[1];
        }
        if let Some((t, stride)) = self.block_table {
            c.block_table = t.as_ptr();
            c.block_table_stride = stride as i64; // <= t.len(), checked by the caller
        }
        c
    }
}

/// The layout of pages of `T` over a slice of `len` items: the shape and
/// strides count elements, each item holds `T::ELEMENTS` of them, so the
/// slice must reach the item of the furthest element.
fn pages_layout<T: CacheElement>(
    name: &str,
    len: usize,
    shape: &[usize],
    strides: Option<&[usize]>,
) -> Result<Layout> {
    if T::ELEMENTS == 1 {
        return Layout::new(len, shape, strides).map_err(|e| named(name, e));
    }
    let layout = Layout::new(i64::MAX as usize, shape, strides).map_err(|e| named(name, e))?;
    let need = (layout.span() + T::ELEMENTS - 1) / T::ELEMENTS;
    if len < need {
        let strides = strides.map_or(String::new(), |s| format!(" with strides {:?}", s));
        return Err(Error::invalid(format!(
            "{}: the slice has {} {} ({} elements, {} bytes each) but shape {:?}{} needs {}",
            name,
            len,
            short_type_name::<T>(),
            T::ELEMENTS,
            size_of::<T>(),
            shape,
            strides,
            need
        )));
    }
    Ok(layout)
}

/// The sequences of one [`kv_attention`] call (`hwyattn_kv_batch`): sequence
/// s owns the query tokens `q_start[s]..q_start[s + 1]` of q `[T, Hq, D]`
/// and has `kv_len[s]` keys in the cache, this step's included. Its first
/// query token has position `q_pos[s]`, by default `kv_len[s] - q_len`
/// (the new tokens are the last ones of the cache).
#[derive(Debug, Clone, Copy)]
pub struct KvBatch<'a> {
    q_start: &'a [i32],
    kv_len: &'a [i32],
    q_pos: Option<&'a [i32]>,
}

impl<'a> KvBatch<'a> {
    /// `kv_len.len()` sequences (at least one) and `q_start` one more entry.
    pub fn new(q_start: &'a [i32], kv_len: &'a [i32]) -> Result<Self> {
        if kv_len.is_empty() || kv_len.len() > i32::MAX as usize {
            return Err(Error::invalid(format!(
                "kv_len has {} entries; need 1 .. 2^31 - 1 sequences",
                kv_len.len()
            )));
        }
        if q_start.len() != kv_len.len() + 1 {
            return Err(Error::invalid(format!(
                "q_start has {} entries for {} sequences; need num_seqs + 1 = {}",
                q_start.len(),
                kv_len.len(),
                kv_len.len() + 1
            )));
        }
        Ok(KvBatch {
            q_start,
            kv_len,
            q_pos: None,
        })
    }

    /// Explicit positions of each sequence's first query token, one per
    /// sequence.
    pub fn q_pos(mut self, q_pos: &'a [i32]) -> Result<Self> {
        if q_pos.len() != self.kv_len.len() {
            return Err(Error::invalid(format!(
                "q_pos has {} entries for {} sequences; need one each",
                q_pos.len(),
                self.kv_len.len()
            )));
        }
        self.q_pos = Some(q_pos);
        Ok(self)
    }

    /// The number of sequences.
    pub fn num_seqs(&self) -> usize {
        self.kv_len.len()
    }

    fn raw(&self) -> sys::hwyattn_kv_batch {
        let mut b = MaybeUninit::<sys::hwyattn_kv_batch>::uninit();
        // SAFETY: init_sized writes exactly size_of bytes: every field.
        let mut b = unsafe {
            sys::hwyattn_kv_batch_init_sized(b.as_mut_ptr(), size_of::<sys::hwyattn_kv_batch>());
            b.assume_init()
        };
        b.num_seqs = self.kv_len.len() as i32; // checked by new()
        b.q_start = self.q_start.as_ptr();
        b.kv_len = self.kv_len.as_ptr();
        b.q_pos = self.q_pos.map_or(ptr::null(), |p| p.as_ptr());
        b
    }
}

/// Writes token t of `k_new` `[T, Hkv, D]` and `v_new` `[T, Hkv, Dv]` (f32,
/// F16 or Bf16) into slot `slots[t]` of the cache (page
/// `slots[t] / page_size`, offset `slots[t] % page_size`, every kv head; a
/// negative slot skips the token), converting to the cache's type
/// (`hwyattn_kv_cache_write`): f32 exactly, F16/Bf16 rounded to nearest
/// even, i8 and [`I4x2`] quantized (per-token scales max |x| / 127 or / 7,
/// stored at the slot, or the caller's per-channel scales), the ggml
/// blocks as ggml's reference quantizers do (the same bytes). `slots` has
/// exactly T entries; a slot written twice in one call is an error.
/// Nothing is written on error.
pub fn kv_cache_write<T: CacheElement, K: Element, V: Element>(
    cache: &mut KvCache<'_, T>,
    k_new: &Tensor<'_, K>,
    v_new: &Tensor<'_, V>,
    slots: &[i64],
) -> Result<()> {
    let tokens = k_new.layout().dim4(1); // [T, Hkv, D], right-aligned
    if slots.len() != tokens {
        return Err(Error::invalid(format!(
            "slots has {} entries but k_new has {} tokens",
            slots.len(),
            tokens
        )));
    }
    let mut holder = [empty_tensor(); 2];
    let c = cache.raw(&mut holder);
    let (tk, tv) = (k_new.raw(), v_new.raw());
    // SAFETY: every descriptor covers only elements of its slice (checked
    // when the views were made); slots has the T entries the library reads;
    // the cache's pages and per-token scales are borrowed mutably through
    // `cache`, so the inputs cannot alias them; no pointer is kept.
    Error::check(unsafe { sys::hwyattn_kv_cache_write(&c, &tk, &tv, slots.as_ptr(), ptr::null()) })
}

/// Attention of the packed varlen queries `q` `[T, Hq, D]` (f32, F16 or
/// Bf16) of `batch` over the cache into `out` `[T, Hq, Dv]`: prefill,
/// chunked prefill and decode rows in one call (`hwyattn_kv_attention`).
/// `out` is f32, F16 or Bf16 (the fp32 result rounded once).
///
/// Options that apply: `scale` (None = 1/sqrt(D); `Some(0.0)` is an
/// error), `causal` (any rule but [`Causal::None`](crate::Causal::None):
/// key position <= query position), `window_left`, `window_right`,
/// `softcap`, `alibi_slopes` and `sinks` `[Hq]`, `precision`, and `lse`
/// (an f32 `[T, Hq]` output). `mask`, `kv_len` and `weights` must be unset
/// (the library refuses them). The block table must hold `num_seqs` whole
/// rows. Nothing is written on error.
pub fn kv_attention<T: CacheElement, Q: Element, O: OutputElement>(
    q: &Tensor<'_, Q>,
    cache: &KvCache<'_, T>,
    batch: &KvBatch<'_>,
    out: &mut TensorMut<'_, O>,
    opts: &SdpaOptions<'_>,
) -> Result<()> {
    let n = batch.num_seqs();
    if let Some((t, stride)) = cache.block_table {
        // The library reads row s at s * stride, at most stride entries.
        if stride == 0 || stride > i64::MAX as usize || t.len() / stride < n {
            return Err(Error::invalid(format!(
                "block_table has {} entries; {} sequences with stride {} need {} whole rows \
                 (stride >= 1)",
                t.len(),
                n,
                stride,
                n
            )));
        }
    }
    // kv_len (refused by the library here) would be read for one batch.
    let raw_opts = opts.to_raw(1, q.layout().dim4(2))?;
    let mut holder = [empty_tensor(); 2];
    let c = cache.raw(&mut holder);
    let b = batch.raw();
    let tq = q.raw();
    let mut to = out.raw();
    // SAFETY: views checked against their slices, the batch's arrays against
    // num_seqs, the block table's rows above, the per-head arrays by to_raw;
    // out and lse are borrowed mutably, so they alias nothing else; the
    // library validates indices (pages, positions) before reading through
    // them and keeps no pointer.
    Error::check(unsafe { sys::hwyattn_kv_attention(&tq, &c, &b, &mut to, &raw_opts) })
}

fn empty_tensor() -> sys::hwyattn_tensor {
    sys::hwyattn_tensor {
        data: ptr::null_mut(),
        dtype: sys::HWYATTN_F32,
        rank: 1,
        shape: [1; 4],
        stride: [0; 4],
    }
}
