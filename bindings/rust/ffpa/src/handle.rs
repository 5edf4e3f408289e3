//! The library context: device, stream, policies and plan cache.

use std::fmt;
use std::mem::size_of;
use std::os::raw::c_void;
use std::ptr::{self, NonNull};

use crate::device::{self, DeviceDesc};
use crate::error::{check, Error, Result, Status};
use crate::policy::{policy_info, PolicyKnob, PolicyValue};
use crate::sys;
use crate::types::{PolicySource, PolicyType};

/// A libffpa handle (`ffpaHandle_t`): bound to one CUDA device, it holds the stream, the policy
/// knobs and the plan cache. Destroyed when dropped.
pub struct Handle {
    raw: NonNull<sys::ffpaContext>,
}

// The header allows handles to be used from several threads at once: policies and the stream are
// snapshotted at the start of each call, and the plan cache is thread-safe. Destroying a handle
// while another thread uses it is the one forbidden case, and `Drop` needs the handle to be
// unborrowed, so shared references can go to other threads (Sync) and so can the handle (Send).
unsafe impl Send for Handle {}
unsafe impl Sync for Handle {}

impl Handle {
    /// Creates a handle bound to the current CUDA device (`ffpaCreate`); work goes to the legacy
    /// default stream until [`set_stream`](Handle::set_stream).
    ///
    /// Reads the policy environment variables. Fails with
    /// [`Status::NOT_INITIALIZED_NO_DEVICE`] without a usable GPU or driver, and with
    /// [`Status::BAD_PARAM_ENVIRONMENT`] for a malformed variable (the message names it).
    pub fn new() -> Result<Handle> {
        let mut raw = ptr::null_mut();
        // SAFETY: `raw` is a valid place for the new handle.
        check(unsafe { sys::ffpaCreate(&mut raw) })?;
        Handle::from_created(raw)
    }

    /// Creates a handle that plans for a described device, present or not
    /// (`ffpaCreateForDevice`).
    ///
    /// It reports workspace sizes and plans and keeps policies and a plan cache like any handle,
    /// but cannot execute: [`forward`](Handle::forward) and [`backward`](Handle::backward) fail
    /// with [`Status::NOT_INITIALIZED_NO_DEVICE`] after checking their arguments.
    pub fn for_device(device: &DeviceDesc) -> Result<Handle> {
        let desc = device.to_c()?;
        let mut raw = ptr::null_mut();
        // SAFETY: `raw` is a valid place for the handle; `desc` is initialized, structSize set.
        check(unsafe { sys::ffpaCreateForDevice(&mut raw, &desc) })?;
        Handle::from_created(raw)
    }

    fn from_created(raw: sys::ffpaHandle_t) -> Result<Handle> {
        NonNull::new(raw).map(|raw| Handle { raw }).ok_or_else(|| {
            Error::new(
                Status::INTERNAL_ERROR,
                "Handle: the library reported success but gave no handle",
            )
        })
    }

    /// The C handle, for calls these bindings do not wrap. It stays owned by `self`.
    pub fn as_raw(&self) -> sys::ffpaHandle_t {
        self.raw.as_ptr()
    }

    /// Sets the stream the handle's work is enqueued on (`ffpaSetStream`); null is the legacy
    /// default stream. Calls that start afterwards use it.
    ///
    /// # Safety
    /// `stream` is null or a live `cudaStream_t` of the handle's device, and stays alive as long
    /// as the handle executes work on it.
    pub unsafe fn set_stream(&self, stream: *mut c_void) -> Result<()> {
        check(sys::ffpaSetStream(self.as_raw(), stream.cast()))
    }

    /// The stream set by [`set_stream`](Handle::set_stream) (null for the default stream).
    pub fn stream(&self) -> Result<*mut c_void> {
        let mut stream = ptr::null_mut();
        // SAFETY: `stream` is a valid place for the result.
        check(unsafe { sys::ffpaGetStream(self.as_raw(), &mut stream) })?;
        Ok(stream.cast())
    }

    /// The device the handle is bound to, or the one it was created for (`ffpaGetDeviceDesc`).
    pub fn device(&self) -> Result<DeviceDesc> {
        let mut raw = device::empty_c();
        // SAFETY: `raw` is initialized and its structSize is its size.
        check(unsafe { sys::ffpaGetDeviceDesc(self.as_raw(), &mut raw) })?;
        Ok(DeviceDesc::from_c(&raw))
    }

    /// Sets one knob (`ffpaSetPolicy`); calls that start afterwards see it.
    ///
    /// The value's variant must match the knob's [`PolicyType`]: a mismatch fails with
    /// [`Status::BAD_PARAM_ATTRIBUTE_TYPE`] before the library is called, since a bool, an int32
    /// and an enum have the same size and the library could not tell them apart. The library
    /// checks the bounds ([`Status::BAD_PARAM_OUT_OF_BOUND`] with the allowed values).
    pub fn set_policy(&self, knob: PolicyKnob, value: impl Into<PolicyValue>) -> Result<()> {
        let value = value.into();
        let info = policy_info(knob)?;
        if info.value_type != value.value_type() {
            return Err(Error::new(
                Status::BAD_PARAM_ATTRIBUTE_TYPE,
                format!(
                    "Handle::set_policy: {} takes {:?} values; given {:?}",
                    info.name, info.value_type, value
                ),
            ));
        }
        let set = |value: *const c_void, size: usize| {
            // SAFETY: `value` points to `size` readable bytes of the knob's type.
            check(unsafe { sys::ffpaSetPolicy(self.as_raw(), knob.to_c(), value, size) })
        };
        match value {
            PolicyValue::Bool(v) => set(value_ptr(&i32::from(v)), size_of::<i32>()),
            PolicyValue::Int32(v) | PolicyValue::Enum(v) => set(value_ptr(&v), size_of::<i32>()),
            PolicyValue::Int64(v) => set(value_ptr(&v), size_of::<i64>()),
            PolicyValue::String(text) => {
                if text.contains('\0') {
                    return Err(Error::new(
                        Status::BAD_PARAM_OUT_OF_BOUND,
                        format!(
                            "Handle::set_policy: {}: the string contains a NUL byte",
                            info.name
                        ),
                    ));
                }
                let mut bytes = text.into_bytes();
                bytes.push(0);
                set(bytes.as_ptr().cast(), bytes.len())
            }
        }
    }

    /// The current value of one knob: setter, else environment, else default (`ffpaGetPolicy`).
    pub fn policy(&self, knob: PolicyKnob) -> Result<PolicyValue> {
        let value_type = policy_info(knob)?.value_type;
        match value_type {
            PolicyType::Int64 => {
                let mut v = 0i64;
                self.get_policy_raw(knob, value_ptr_mut(&mut v), size_of::<i64>())?;
                return Ok(PolicyValue::Int64(v));
            }
            PolicyType::String => return self.policy_string(knob).map(PolicyValue::String),
            _ => {}
        }
        let mut v = 0i32;
        self.get_policy_raw(knob, value_ptr_mut(&mut v), size_of::<i32>())?;
        Ok(match value_type {
            PolicyType::Bool => PolicyValue::Bool(v != 0),
            PolicyType::Int32 => PolicyValue::Int32(v),
            _ => PolicyValue::Enum(v),
        })
    }

    fn policy_string(&self, knob: PolicyKnob) -> Result<String> {
        loop {
            let mut needed = 0usize;
            // SAFETY: a size of 0 with a null value only asks for the size.
            check(unsafe {
                sys::ffpaGetPolicy(self.as_raw(), knob.to_c(), ptr::null_mut(), 0, &mut needed)
            })?;
            let mut buffer = vec![0u8; needed.max(1)];
            match self.get_policy_raw(knob, buffer.as_mut_ptr().cast(), buffer.len()) {
                Ok(()) => {
                    let end = buffer.iter().position(|&b| b == 0).unwrap_or(buffer.len());
                    buffer.truncate(end);
                    return Ok(String::from_utf8_lossy(&buffer).into_owned());
                }
                // Another thread set a longer string between the two calls: ask again.
                Err(e) if e.status == Status::BAD_PARAM_SIZE_INSUFFICIENT => continue,
                Err(e) => return Err(e),
            }
        }
    }

    fn get_policy_raw(&self, knob: PolicyKnob, value: *mut c_void, size: usize) -> Result<()> {
        // SAFETY: `value` points to `size` writable bytes.
        check(unsafe {
            sys::ffpaGetPolicy(self.as_raw(), knob.to_c(), value, size, ptr::null_mut())
        })
    }

    /// Where the current value of one knob comes from (`ffpaGetPolicySource`).
    pub fn policy_source(&self, knob: PolicyKnob) -> Result<PolicySource> {
        let mut source = sys::ffpaPolicySource(0);
        // SAFETY: `source` is a valid place for the result.
        check(unsafe { sys::ffpaGetPolicySource(self.as_raw(), knob.to_c(), &mut source) })?;
        PolicySource::from_c(source)
    }

    /// The counters of the handle's plan cache (`ffpaGetPlanCacheStats`).
    pub fn plan_cache_stats(&self) -> Result<PlanCacheStats> {
        let mut raw = sys::ffpaPlanCacheStats_t {
            structSize: size_of::<sys::ffpaPlanCacheStats_t>() as u32,
            reserved: 0,
            hits: 0,
            misses: 0,
            evictions: 0,
            size: 0,
            capacity: 0,
        };
        // SAFETY: `raw` is initialized and its structSize is its size.
        check(unsafe { sys::ffpaGetPlanCacheStats(self.as_raw(), &mut raw) })?;
        Ok(PlanCacheStats {
            hits: raw.hits,
            misses: raw.misses,
            evictions: raw.evictions,
            size: raw.size,
            capacity: raw.capacity,
        })
    }

    /// Drops every cached plan and resets the counters (`ffpaClearPlanCache`). Calls in flight
    /// on other threads keep the plans they hold.
    pub fn clear_plan_cache(&self) -> Result<()> {
        // SAFETY: the handle is live.
        check(unsafe { sys::ffpaClearPlanCache(self.as_raw()) })
    }
}

impl Drop for Handle {
    fn drop(&mut self) {
        // Work already enqueued is not waited for, as in C. The status can only say that the
        // handle is not live, which ownership rules out.
        // SAFETY: the handle is live and no borrow of it remains.
        unsafe { sys::ffpaDestroy(self.as_raw()) };
    }
}

impl fmt::Debug for Handle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Handle").field(&self.raw).finish()
    }
}

/// Counters of a handle's plan cache.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct PlanCacheStats {
    /// Lookups that found a plan.
    pub hits: u64,
    /// Lookups that had to plan.
    pub misses: u64,
    /// Plans dropped because the cache was full.
    pub evictions: u64,
    /// Plans held now.
    pub size: u64,
    /// Plans it may hold ([`PolicyKnob::PLAN_CACHE_CAPACITY`]).
    pub capacity: u64,
}

fn value_ptr<T>(value: &T) -> *const c_void {
    (value as *const T).cast()
}

fn value_ptr_mut<T>(value: &mut T) -> *mut c_void {
    (value as *mut T).cast()
}
