//! C strings coming out of the library.

use std::ffi::CStr;
use std::os::raw::c_char;

use crate::error::Result;

/// Copies a NUL-terminated string the library owns; null gives "".
///
/// # Safety
/// `ptr` is null or points to a NUL-terminated string valid for the duration of the call.
pub(crate) unsafe fn from_c(ptr: *const c_char) -> String {
    if ptr.is_null() {
        return String::new();
    }
    CStr::from_ptr(ptr).to_string_lossy().into_owned()
}

/// Reads a string through an snprintf-style call: `fill(buffer, size)` copies at most `size`
/// bytes including the NUL and returns the whole length without it.
///
/// Retries with a larger buffer while the text does not fit: a plan description can grow between
/// two calls when another thread changes a policy.
pub(crate) fn read_c_string(
    mut fill: impl FnMut(*mut c_char, usize) -> Result<usize>,
) -> Result<String> {
    let mut buffer: Vec<u8> = vec![0; 256];
    loop {
        let length = fill(buffer.as_mut_ptr().cast(), buffer.len())?;
        if length < buffer.len() {
            buffer.truncate(length);
            return Ok(String::from_utf8_lossy(&buffer).into_owned());
        }
        buffer = vec![0; length + 1];
    }
}
