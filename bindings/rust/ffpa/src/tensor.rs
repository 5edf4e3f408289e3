//! Tensor descriptors.

use std::fmt;
use std::ptr::{self, NonNull};

use crate::error::{check, Error, Result, Status};
use crate::sys;
use crate::types::DataType;

/// A strided tensor's element type, dimensions and strides (`ffpaTensorDescriptor_t`).
///
/// Attention tensors have 4 dimensions in the order `[B, H, N, D]` (batch, heads, sequence, head
/// dimension) whatever their memory layout; `BHND` and `BNHD` storage differ only in strides.
/// The log-sum-exp tensor has 3 dimensions `[B, H, N]`. Strides count elements; they may leave
/// gaps but must not make two elements overlap.
pub struct TensorDesc {
    raw: NonNull<sys::ffpaTensorStruct>,
}

// The header allows descriptors to be used from several threads as long as none modifies one
// while another reads it; `set` takes `&mut self`, so the borrow rules guarantee exactly that.
unsafe impl Send for TensorDesc {}
unsafe impl Sync for TensorDesc {}

impl TensorDesc {
    /// A descriptor of `dims` with `strides` in elements (`None`: packed row-major, the last
    /// dimension contiguous). The library checks the values; its message names the faulty one.
    pub fn new(dtype: DataType, dims: &[i64], strides: Option<&[i64]>) -> Result<TensorDesc> {
        let mut raw = ptr::null_mut();
        // SAFETY: `raw` is a valid place for the new descriptor.
        check(unsafe { sys::ffpaCreateTensorDescriptor(&mut raw) })?;
        let raw = NonNull::new(raw).ok_or_else(|| {
            Error::new(
                Status::INTERNAL_ERROR,
                "TensorDesc: the library reported success but gave no descriptor",
            )
        })?;
        // From here on, dropping `desc` on an error destroys the C descriptor.
        let mut desc = TensorDesc { raw };
        desc.set(dtype, dims, strides)?;
        Ok(desc)
    }

    /// A packed `[B, H, N, D]` tensor stored in that order (`BHND`, PyTorch's default for
    /// attention).
    pub fn bhnd(dtype: DataType, b: i64, h: i64, n: i64, d: i64) -> Result<TensorDesc> {
        TensorDesc::new(dtype, &[b, h, n, d], None)
    }

    /// A `[B, H, N, D]` tensor stored packed as `[B, N, H, D]` (`BNHD`, the layout of a
    /// projection's output before any transpose).
    pub fn bnhd(dtype: DataType, b: i64, h: i64, n: i64, d: i64) -> Result<TensorDesc> {
        let hd = h.checked_mul(d);
        let nhd = hd.and_then(|hd| hd.checked_mul(n));
        match (hd, nhd) {
            (Some(hd), Some(nhd)) => TensorDesc::new(dtype, &[b, h, n, d], Some(&[nhd, d, hd, 1])),
            _ => Err(Error::new(
                Status::BAD_PARAM_OUT_OF_BOUND,
                format!("TensorDesc::bnhd: strides of [{b}, {h}, {n}, {d}] overflow 64 bits"),
            )),
        }
    }

    /// The fp32 log-sum-exp tensor `[B, H, N]`, packed.
    pub fn lse(b: i64, h: i64, n: i64) -> Result<TensorDesc> {
        TensorDesc::new(DataType::Float32, &[b, h, n], None)
    }

    /// Sets the descriptor anew (`ffpaSetTensorDescriptor`); on failure it is left unchanged.
    pub fn set(&mut self, dtype: DataType, dims: &[i64], strides: Option<&[i64]>) -> Result<()> {
        if let Some(strides) = strides {
            if strides.len() != dims.len() {
                return Err(Error::new(
                    Status::BAD_PARAM_STRIDE,
                    format!(
                        "TensorDesc::set: {} strides for {} dimensions",
                        strides.len(),
                        dims.len()
                    ),
                ));
            }
        }
        // A count that does not fit is out of range for the library as well (3 or 4 allowed).
        let count = i32::try_from(dims.len()).unwrap_or(i32::MAX);
        let strides = strides.map_or(ptr::null(), <[i64]>::as_ptr);
        // SAFETY: `dims` and `strides` (when not null) hold `count` elements.
        check(unsafe {
            sys::ffpaSetTensorDescriptor(self.as_raw(), dtype.to_c(), count, dims.as_ptr(), strides)
        })
    }

    /// The element type.
    pub fn dtype(&self) -> Result<DataType> {
        self.read().map(|(dtype, _, _)| dtype)
    }

    /// The dimensions, `[B, H, N, D]` or `[B, H, N]`.
    pub fn dims(&self) -> Result<Vec<i64>> {
        self.read().map(|(_, dims, _)| dims)
    }

    /// The strides in elements (computed by the library when the descriptor was set packed).
    pub fn strides(&self) -> Result<Vec<i64>> {
        self.read().map(|(_, _, strides)| strides)
    }

    fn read(&self) -> Result<(DataType, Vec<i64>, Vec<i64>)> {
        const MAX: usize = sys::FFPA_MAX_TENSOR_DIMS as usize;
        let mut dtype = sys::ffpaDataType(0);
        let mut count = 0i32;
        let mut dims = [0i64; MAX];
        let mut strides = [0i64; MAX];
        // SAFETY: `dims` and `strides` hold MAX elements, the capacity passed.
        check(unsafe {
            sys::ffpaGetTensorDescriptor(
                self.as_raw(),
                &mut dtype,
                MAX as i32,
                &mut count,
                dims.as_mut_ptr(),
                strides.as_mut_ptr(),
            )
        })?;
        let count = (count.max(0) as usize).min(MAX);
        Ok((DataType::from_c(dtype)?, dims[..count].to_vec(), strides[..count].to_vec()))
    }

    /// The C descriptor, for calls these bindings do not wrap. It stays owned by `self`.
    pub fn as_raw(&self) -> sys::ffpaTensorDescriptor_t {
        self.raw.as_ptr()
    }
}

impl Drop for TensorDesc {
    fn drop(&mut self) {
        // SAFETY: the descriptor is live and no borrow of it remains.
        unsafe { sys::ffpaDestroyTensorDescriptor(self.as_raw()) };
    }
}

impl fmt::Debug for TensorDesc {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.read() {
            Ok((dtype, dims, strides)) => f
                .debug_struct("TensorDesc")
                .field("dtype", &dtype)
                .field("dims", &dims)
                .field("strides", &strides)
                .finish(),
            Err(_) => f.debug_tuple("TensorDesc").field(&self.raw).finish(),
        }
    }
}
