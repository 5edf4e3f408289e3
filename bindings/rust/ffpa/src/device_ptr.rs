//! Device addresses, as the execute calls take them.

use std::os::raw::c_void;
use std::ptr;

/// Declares a device-address newtype over `*const c_void` or `*mut c_void`.
macro_rules! device_ptr {
    ($(#[$doc:meta])* $name:ident, $mutability:tt, $null:ident) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub struct $name(*$mutability c_void);

        // An address in the GPU's address space: the host never dereferences it, so moving or
        // sharing the number between threads cannot race. The execute calls' contracts cover
        // the memory itself.
        unsafe impl Send for $name {}
        unsafe impl Sync for $name {}

        impl $name {
            /// Wraps a device pointer (from `cudaMalloc`, a CUDA crate, or another library).
            pub fn new<T>(ptr: *$mutability T) -> $name {
                $name(ptr.cast())
            }

            /// Wraps a device address held as an integer (a driver-API `CUdeviceptr`).
            pub fn from_address(address: u64) -> $name {
                $name(address as usize as *$mutability c_void)
            }

            /// The null address, allowed only where the library allows NULL (a workspace of
            /// size 0).
            pub const fn null() -> $name {
                $name(ptr::$null())
            }

            /// The raw pointer.
            pub fn as_ptr(self) -> *$mutability c_void {
                self.0
            }
        }
    };
}

device_ptr! {
    /// A read-only device address. This crate never allocates or dereferences device memory: it
    /// passes the address to the library, whose execute calls are `unsafe` for that reason.
    DevicePtr, const, null
}

device_ptr! {
    /// A writable device address; see [`DevicePtr`].
    DevicePtrMut, mut, null_mut
}

impl DevicePtrMut {
    /// The same address, read-only (an output of one call that is an input of the next).
    pub fn as_const(self) -> DevicePtr {
        DevicePtr::new(self.0)
    }
}
