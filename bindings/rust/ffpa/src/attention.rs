//! Attention descriptors.

use std::fmt;
use std::mem::size_of;
use std::os::raw::c_void;
use std::ptr::{self, NonNull};

use crate::error::{check, Error, Result, Status};
use crate::sys;
use crate::types::CausalMode;

/// The softmax scale and causal mask of an attention operation (`ffpaAttentionDescriptor_t`).
///
/// The shapes come from the tensor descriptors passed with it: Q `[B, Hq, Nq, Dqk]`,
/// K `[B, Hkv, Nkv, Dqk]`, V `[B, Hkv, Nkv, Dv]`, O `[B, Hq, Nq, Dv]`, log-sum-exp
/// `[B, Hq, Nq]`; `Hq` is a multiple of `Hkv` (grouped-query attention).
pub struct AttentionDesc {
    raw: NonNull<sys::ffpaAttentionStruct>,
}

// As for tensor descriptors: the setters take `&mut self`, so no thread reads a descriptor
// another one is modifying, which is the header's only restriction.
unsafe impl Send for AttentionDesc {}
unsafe impl Sync for AttentionDesc {}

impl AttentionDesc {
    /// A descriptor with the defaults: scale `1 / sqrt(d_qk)`, no mask.
    pub fn new() -> Result<AttentionDesc> {
        let mut raw = ptr::null_mut();
        // SAFETY: `raw` is a valid place for the new descriptor.
        check(unsafe { sys::ffpaCreateAttentionDescriptor(&mut raw) })?;
        NonNull::new(raw).map(|raw| AttentionDesc { raw }).ok_or_else(|| {
            Error::new(
                Status::INTERNAL_ERROR,
                "AttentionDesc: the library reported success but gave no descriptor",
            )
        })
    }

    /// Sets the factor applied to Q·Kᵀ before the softmax; finite and > 0.
    pub fn set_scale(&mut self, scale: f32) -> Result<()> {
        self.set(sys::ffpaAttentionAttribute::FFPA_ATTENTION_SOFTMAX_SCALE, &scale)
    }

    /// The softmax scale, or `None` for the default `1 / sqrt(d_qk)`.
    pub fn scale(&self) -> Result<Option<f32>> {
        let mut scale = 0f32;
        self.get(sys::ffpaAttentionAttribute::FFPA_ATTENTION_SOFTMAX_SCALE, &mut scale)?;
        // The library reports 0 for "never set".
        Ok(if scale == 0.0 { None } else { Some(scale) })
    }

    /// Sets the causal mask.
    pub fn set_causal(&mut self, mode: CausalMode) -> Result<()> {
        self.set(sys::ffpaAttentionAttribute::FFPA_ATTENTION_CAUSAL_MODE, &(mode.to_c().0 as i32))
    }

    /// The causal mask.
    pub fn causal(&self) -> Result<CausalMode> {
        let mut mode = 0i32;
        self.get(sys::ffpaAttentionAttribute::FFPA_ATTENTION_CAUSAL_MODE, &mut mode)?;
        CausalMode::from_c(sys::ffpaCausalMode(mode as u32))
    }

    /// Sets the device address of `B` `i32` key counts, one per batch entry (entry `b` attends to
    /// keys `[0, L_b)` only: a KV cache filled to another length in each sequence), or detaches
    /// them with a null pointer. The library reads the counts on the device at each call; they
    /// must stay valid while calls that use them run.
    pub fn set_key_lengths(&mut self, counts: *const i32) -> Result<()> {
        self.set(sys::ffpaAttentionAttribute::FFPA_ATTENTION_KEY_LENGTHS, &counts)
    }

    /// The device address of the key counts, or null when every batch entry has all keys.
    pub fn key_lengths(&self) -> Result<*const i32> {
        let mut counts: *const i32 = std::ptr::null();
        self.get(sys::ffpaAttentionAttribute::FFPA_ATTENTION_KEY_LENGTHS, &mut counts)?;
        Ok(counts)
    }

    /// [`set_scale`](AttentionDesc::set_scale), for chaining after [`new`](AttentionDesc::new).
    pub fn with_scale(mut self, scale: f32) -> Result<AttentionDesc> {
        self.set_scale(scale)?;
        Ok(self)
    }

    /// [`set_causal`](AttentionDesc::set_causal), for chaining after [`new`](AttentionDesc::new).
    pub fn with_causal(mut self, mode: CausalMode) -> Result<AttentionDesc> {
        self.set_causal(mode)?;
        Ok(self)
    }

    /// The C descriptor, for calls these bindings do not wrap. It stays owned by `self`.
    pub fn as_raw(&self) -> sys::ffpaAttentionDescriptor_t {
        self.raw.as_ptr()
    }

    fn set<T>(&mut self, attr: sys::ffpaAttentionAttribute_t, value: &T) -> Result<()> {
        let value: *const c_void = (value as *const T).cast();
        // SAFETY: `value` points to a `T`, the attribute's type, of `size_of::<T>()` bytes.
        check(unsafe { sys::ffpaSetAttentionAttribute(self.as_raw(), attr, value, size_of::<T>()) })
    }

    fn get<T>(&self, attr: sys::ffpaAttentionAttribute_t, value: &mut T) -> Result<()> {
        let value: *mut c_void = (value as *mut T).cast();
        // SAFETY: `value` points to a writable `T`, the attribute's type.
        check(unsafe {
            sys::ffpaGetAttentionAttribute(
                self.as_raw(),
                attr,
                value,
                size_of::<T>(),
                ptr::null_mut(),
            )
        })
    }
}

impl Drop for AttentionDesc {
    fn drop(&mut self) {
        // SAFETY: the descriptor is live and no borrow of it remains.
        unsafe { sys::ffpaDestroyAttentionDescriptor(self.as_raw()) };
    }
}

impl fmt::Debug for AttentionDesc {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AttentionDesc")
            .field("scale", &self.scale().ok().flatten())
            .field("causal", &self.causal().ok())
            .finish()
    }
}
