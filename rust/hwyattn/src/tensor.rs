// SPDX-License-Identifier: Apache-2.0
//
// Tensor views: a slice with a shape and strides that the view checks fit.

use crate::error::{Error, Result};
use hwyattn_sys as sys;
use std::os::raw::c_void;

mod sealed {
    pub trait Sealed {}
}

/// An element type the C ABI knows (`hwyattn_dtype`). Sealed: `f32`, [`F16`],
/// [`Bf16`] and `bool` (for masks).
pub trait Element: Copy + sealed::Sealed {
    /// The C dtype of this element.
    const DTYPE: sys::hwyattn_dtype;
}

/// IEEE binary16, as its bits (`HWYATTN_F16`).
#[repr(transparent)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct F16(pub u16);

/// bfloat16, as its bits (`HWYATTN_BF16`).
#[repr(transparent)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Bf16(pub u16);

impl Bf16 {
    /// Rounds to the nearest bfloat16 (ties to even); NaN stays NaN.
    pub fn from_f32(x: f32) -> Bf16 {
        let bits = x.to_bits();
        if x.is_nan() {
            return Bf16(((bits >> 16) | 0x40) as u16);
        }
        let rounding = 0x7fff + ((bits >> 16) & 1);
        Bf16((bits.wrapping_add(rounding) >> 16) as u16)
    }
    /// The exact f32 value.
    pub fn to_f32(self) -> f32 {
        f32::from_bits((self.0 as u32) << 16)
    }
}

impl sealed::Sealed for f32 {}
impl sealed::Sealed for F16 {}
impl sealed::Sealed for Bf16 {}
impl sealed::Sealed for bool {}
impl Element for f32 {
    const DTYPE: sys::hwyattn_dtype = sys::HWYATTN_F32;
}
impl Element for F16 {
    const DTYPE: sys::hwyattn_dtype = sys::HWYATTN_F16;
}
impl Element for Bf16 {
    const DTYPE: sys::hwyattn_dtype = sys::HWYATTN_BF16;
}
/// A Rust `bool` is one byte holding 0 or 1: a valid `HWYATTN_BOOL` (`u8`,
/// nonzero = true).
impl Element for bool {
    const DTYPE: sys::hwyattn_dtype = sys::HWYATTN_BOOL;
}

/// Shape and strides (in elements) of a view, checked against its slice.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Layout {
    rank: usize,
    shape: [usize; 4],
    strides: [usize; 4],
}

impl Layout {
    /// Checks rank 1..4, sizes >= 1, and that the furthest element the shape
    /// and strides reach is inside `len` elements (all in int64).
    pub(crate) fn new(len: usize, shape: &[usize], strides: Option<&[usize]>) -> Result<Layout> {
        let rank = shape.len();
        if !(1..=4).contains(&rank) {
            return Err(Error::invalid(format!(
                "tensor view: rank {} (shape {:?}); must be 1..4",
                rank, shape
            )));
        }
        if let Some(i) = shape.iter().position(|&s| s == 0) {
            return Err(Error::invalid(format!(
                "tensor view: shape[{}] is 0 (shape {:?}); hwyattn needs every size >= 1",
                i, shape
            )));
        }
        let too_big = || Error::invalid(format!("tensor view: shape {:?} overflows int64", shape));
        let mut st = [0usize; 4];
        match strides {
            Some(s) => {
                if s.len() != rank {
                    return Err(Error::invalid(format!(
                        "tensor view: {} strides for a shape of rank {} ({:?})",
                        s.len(),
                        rank,
                        shape
                    )));
                }
                st[..rank].copy_from_slice(s);
            }
            None => {
                let mut step = 1usize;
                for i in (0..rank).rev() {
                    st[i] = step;
                    step = step.checked_mul(shape[i]).ok_or_else(too_big)?;
                }
            }
        }
        // The last element reached, plus one: 1 + sum (shape[i] - 1) * stride[i].
        let mut span: usize = 1;
        for i in 0..rank {
            span = (shape[i] - 1)
                .checked_mul(st[i])
                .and_then(|x| x.checked_add(span))
                .ok_or_else(too_big)?;
        }
        if span > i64::MAX as usize
            || st
                .iter()
                .chain(shape.iter())
                .any(|&x| x > i64::MAX as usize)
        {
            return Err(too_big());
        }
        if len < span {
            return Err(Error::invalid(format!(
                "tensor view: the slice has {} elements but shape {:?} with strides {:?} reaches {}",
                len,
                shape,
                &st[..rank],
                span
            )));
        }
        let mut sh = [1usize; 4];
        sh[..rank].copy_from_slice(shape);
        Ok(Layout {
            rank,
            shape: sh,
            strides: st,
        })
    }

    /// Size of logical dimension `d` of the four (right-aligned: a rank-r
    /// shape is the last r of them, the leading ones being 1).
    pub(crate) fn dim4(&self, d: usize) -> usize {
        let lead = 4 - self.rank;
        if d < lead {
            1
        } else {
            self.shape[d - lead]
        }
    }

    /// One past the furthest element the shape and strides reach:
    /// 1 + sum (shape[i] - 1) * stride[i] (checked to fit in int64 by new()).
    pub(crate) fn span(&self) -> usize {
        (0..self.rank).fold(1, |acc, i| acc + (self.shape[i] - 1) * self.strides[i])
    }

    /// The product of every dimension but the last two (the batch of an
    /// [B, L, E] activation; an upper bound on it for a higher rank).
    pub(crate) fn leading(&self) -> usize {
        self.shape[..self.rank.saturating_sub(2)].iter().product()
    }

    pub(crate) fn raw(&self, data: *mut c_void, dtype: sys::hwyattn_dtype) -> sys::hwyattn_tensor {
        let mut t = sys::hwyattn_tensor {
            data,
            dtype,
            rank: self.rank as i32,
            shape: [1; 4],
            stride: [0; 4],
        };
        for i in 0..self.rank {
            // Checked to fit in int64 by new().
            t.shape[i] = self.shape[i] as i64;
            t.stride[i] = self.strides[i] as i64;
        }
        t
    }
}

/// A read-only tensor: a slice, a shape (rank 1..4, right-aligned like
/// numpy's broadcasting: `[L, D]` is one batch and one head) and strides in
/// elements (row-major by default; 0 broadcasts a dimension). Construction
/// checks that every element the shape and strides reach is in the slice.
#[derive(Debug, Clone, Copy)]
pub struct Tensor<'a, T: Element = f32> {
    data: &'a [T],
    layout: Layout,
}

impl<'a, T: Element> Tensor<'a, T> {
    /// A dense row-major view of `data` with `shape`.
    pub fn new(data: &'a [T], shape: &[usize]) -> Result<Self> {
        Ok(Tensor {
            data,
            layout: Layout::new(data.len(), shape, None)?,
        })
    }
    /// A view with explicit strides (in elements, one per dimension).
    pub fn with_strides(data: &'a [T], shape: &[usize], strides: &[usize]) -> Result<Self> {
        Ok(Tensor {
            data,
            layout: Layout::new(data.len(), shape, Some(strides))?,
        })
    }
    /// The shape, as given.
    pub fn shape(&self) -> &[usize] {
        &self.layout.shape[..self.layout.rank]
    }
    /// The strides, in elements.
    pub fn strides(&self) -> &[usize] {
        &self.layout.strides[..self.layout.rank]
    }
    pub(crate) fn layout(&self) -> &Layout {
        &self.layout
    }
    /// The C descriptor. The library never writes through an input's pointer.
    pub(crate) fn raw(&self) -> sys::hwyattn_tensor {
        self.layout.raw(self.data.as_ptr() as *mut c_void, T::DTYPE)
    }
}

/// The element types of outputs: `f32` (lse and weights too), and [`F16`]
/// or [`Bf16`] for `out` of [`sdpa`](crate::sdpa) and
/// [`kv_attention`](crate::kv_attention) (the fp32 result rounded once to
/// nearest even: the same bits as rounding an f32 output).
pub trait OutputElement: Element {}
impl OutputElement for f32 {}
impl OutputElement for F16 {}
impl OutputElement for Bf16 {}

/// A writable tensor (outputs): as [`Tensor`], over a mutable slice; f32
/// unless the call says otherwise.
#[derive(Debug)]
pub struct TensorMut<'a, T: OutputElement = f32> {
    data: &'a mut [T],
    layout: Layout,
}

impl<'a, T: OutputElement> TensorMut<'a, T> {
    /// A dense row-major view of `data` with `shape`.
    pub fn new(data: &'a mut [T], shape: &[usize]) -> Result<Self> {
        let layout = Layout::new(data.len(), shape, None)?;
        Ok(TensorMut { data, layout })
    }
    /// A view with explicit strides (in elements, one per dimension).
    pub fn with_strides(data: &'a mut [T], shape: &[usize], strides: &[usize]) -> Result<Self> {
        let layout = Layout::new(data.len(), shape, Some(strides))?;
        Ok(TensorMut { data, layout })
    }
    /// The shape, as given.
    pub fn shape(&self) -> &[usize] {
        &self.layout.shape[..self.layout.rank]
    }
    /// The strides, in elements.
    pub fn strides(&self) -> &[usize] {
        &self.layout.strides[..self.layout.rank]
    }
    /// The elements.
    pub fn data(&self) -> &[T] {
        self.data
    }
    /// The C descriptor of this output, for a call that borrows it mutably.
    pub(crate) fn raw(&mut self) -> sys::hwyattn_tensor {
        self.layout
            .raw(self.data.as_mut_ptr() as *mut c_void, T::DTYPE)
    }
    /// The C descriptor, taking the view (and its mutable borrow of the
    /// slice, for 'a) into whatever keeps the pointer.
    pub(crate) fn into_raw(self) -> sys::hwyattn_tensor {
        self.layout
            .raw(self.data.as_mut_ptr() as *mut c_void, T::DTYPE)
    }
}
