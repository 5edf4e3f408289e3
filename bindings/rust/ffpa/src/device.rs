//! The properties of a device that decide plans.

use std::os::raw::c_char;

use crate::error::{Error, Result, Status};
use crate::sys;

/// The properties of a CUDA device that decide plans (`ffpaDeviceDesc_t`).
///
/// [`Handle::device`](crate::Handle::device) reports the handle's device;
/// [`Handle::for_device`](crate::Handle::for_device) plans for a described device that need not
/// be present. The library checks every field.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceDesc {
    /// CUDA device ordinal (>= 0).
    pub ordinal: i32,
    /// Compute capability as `major * 10 + minor` (80, 86, 89, 90, 100, 120); at least 80.
    pub sm_version: i32,
    /// Number of streaming multiprocessors, at least 1.
    pub sm_count: i32,
    /// Bytes of shared memory one block may use after opt-in, at least 48 KiB.
    pub shared_mem_per_block_optin: i64,
    /// Bytes of shared memory per multiprocessor, at least `shared_mem_per_block_optin`.
    pub shared_mem_per_sm: i64,
    /// Bytes of device memory, at least 1.
    pub global_mem_bytes: i64,
    /// Device name as CUDA reports it: at most 255 bytes, no NUL.
    pub name: String,
}

impl DeviceDesc {
    pub(crate) fn to_c(&self) -> Result<sys::ffpaDeviceDesc_t> {
        let mut raw = empty_c();
        if self.name.len() >= raw.name.len() || self.name.contains('\0') {
            return Err(Error::new(
                Status::BAD_PARAM_OUT_OF_BOUND,
                format!(
                    "DeviceDesc::name has {} bytes; allowed: at most {} bytes, no NUL",
                    self.name.len(),
                    raw.name.len() - 1
                ),
            ));
        }
        for (dst, src) in raw.name.iter_mut().zip(self.name.bytes()) {
            *dst = src as c_char;
        }
        raw.ordinal = self.ordinal;
        raw.smVersion = self.sm_version;
        raw.smCount = self.sm_count;
        raw.sharedMemPerBlockOptin = self.shared_mem_per_block_optin;
        raw.sharedMemPerSm = self.shared_mem_per_sm;
        raw.globalMemBytes = self.global_mem_bytes;
        Ok(raw)
    }

    pub(crate) fn from_c(raw: &sys::ffpaDeviceDesc_t) -> DeviceDesc {
        let name: Vec<u8> = raw.name.iter().take_while(|&&c| c != 0).map(|&c| c as u8).collect();
        DeviceDesc {
            ordinal: raw.ordinal,
            sm_version: raw.smVersion,
            sm_count: raw.smCount,
            shared_mem_per_block_optin: raw.sharedMemPerBlockOptin,
            shared_mem_per_sm: raw.sharedMemPerSm,
            global_mem_bytes: raw.globalMemBytes,
            name: String::from_utf8_lossy(&name).into_owned(),
        }
    }
}

/// A zeroed descriptor whose `structSize` is this binding's size, as the library requires.
pub(crate) fn empty_c() -> sys::ffpaDeviceDesc_t {
    sys::ffpaDeviceDesc_t {
        structSize: std::mem::size_of::<sys::ffpaDeviceDesc_t>() as u32,
        ordinal: 0,
        smVersion: 0,
        smCount: 0,
        sharedMemPerBlockOptin: 0,
        sharedMemPerSm: 0,
        globalMemBytes: 0,
        name: [0; 256],
    }
}
