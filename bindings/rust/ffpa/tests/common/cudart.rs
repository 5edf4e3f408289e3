//! The few CUDA runtime functions the GPU tests and the example need, looked up at run time.
//!
//! libffpa links the CUDA runtime, so once it is loaded these functions are in the process:
//! finding them with `dlsym` needs no CUDA path or link flag at build time, and no CUDA crate.

use std::ffi::CStr;
use std::mem::{size_of, transmute};
use std::os::raw::{c_char, c_int, c_void};
use std::ptr;

use ffpa::{DevicePtr, DevicePtrMut};

extern "C" {
    fn dlsym(handle: *mut c_void, symbol: *const c_char) -> *mut c_void;
}

/// glibc's RTLD_DEFAULT: search every object loaded into the process.
const RTLD_DEFAULT: *mut c_void = ptr::null_mut();
const HOST_TO_DEVICE: c_int = 1;
const DEVICE_TO_HOST: c_int = 2;

type Malloc = unsafe extern "C" fn(*mut *mut c_void, usize) -> c_int;
type Free = unsafe extern "C" fn(*mut c_void) -> c_int;
type Memcpy = unsafe extern "C" fn(*mut c_void, *const c_void, usize, c_int) -> c_int;
type Synchronize = unsafe extern "C" fn() -> c_int;
type ErrorName = unsafe extern "C" fn(c_int) -> *const c_char;

/// cudaMalloc, cudaFree, cudaMemcpy, cudaDeviceSynchronize and cudaGetErrorName.
pub struct Cudart {
    malloc: Malloc,
    free: Free,
    memcpy: Memcpy,
    synchronize: Synchronize,
    error_name: ErrorName,
}

fn lookup(name: &CStr) -> Result<*mut c_void, String> {
    // SAFETY: `name` is NUL-terminated; RTLD_DEFAULT is a valid pseudo-handle.
    let symbol = unsafe { dlsym(RTLD_DEFAULT, name.as_ptr()) };
    if symbol.is_null() {
        Err(format!("{name:?} is not in the process (libffpa should have loaded libcudart)"))
    } else {
        Ok(symbol)
    }
}

impl Cudart {
    /// Finds the functions; call after libffpa is loaded (any ffpa call, e.g. `Handle::new`).
    pub fn load() -> Result<Cudart, String> {
        let cstr = |bytes: &'static [u8]| CStr::from_bytes_with_nul(bytes).unwrap();
        // SAFETY: each symbol is the CUDA runtime function of the signature it is cast to.
        unsafe {
            Ok(Cudart {
                malloc: transmute::<*mut c_void, Malloc>(lookup(cstr(b"cudaMalloc\0"))?),
                free: transmute::<*mut c_void, Free>(lookup(cstr(b"cudaFree\0"))?),
                memcpy: transmute::<*mut c_void, Memcpy>(lookup(cstr(b"cudaMemcpy\0"))?),
                synchronize: transmute::<*mut c_void, Synchronize>(lookup(cstr(
                    b"cudaDeviceSynchronize\0",
                ))?),
                error_name: transmute::<*mut c_void, ErrorName>(lookup(cstr(
                    b"cudaGetErrorName\0",
                ))?),
            })
        }
    }

    fn check(&self, what: &str, code: c_int) -> Result<(), String> {
        if code == 0 {
            return Ok(());
        }
        // SAFETY: cudaGetErrorName returns a static string for any code.
        let name = unsafe { CStr::from_ptr((self.error_name)(code)) };
        Err(format!("{what} failed: {}", name.to_string_lossy()))
    }

    /// Device memory for `count` elements of `T`.
    pub fn alloc<T>(&self, count: usize) -> Result<DeviceBuffer<'_>, String> {
        let bytes = count * size_of::<T>();
        let mut ptr = ptr::null_mut();
        // SAFETY: `ptr` is a valid place for the address.
        self.check("cudaMalloc", unsafe { (self.malloc)(&mut ptr, bytes.max(1)) })?;
        Ok(DeviceBuffer { cuda: self, ptr, bytes })
    }

    /// Device memory holding a copy of `host`.
    pub fn upload<T: Copy>(&self, host: &[T]) -> Result<DeviceBuffer<'_>, String> {
        let buffer = self.alloc::<T>(host.len())?;
        // SAFETY: both ranges hold `buffer.bytes` bytes.
        let code = unsafe {
            (self.memcpy)(buffer.ptr, host.as_ptr().cast(), buffer.bytes, HOST_TO_DEVICE)
        };
        self.check("cudaMemcpy to the device", code)?;
        Ok(buffer)
    }

    /// Waits for all work of the device, and reports the first error it hit.
    pub fn synchronize(&self) -> Result<(), String> {
        // SAFETY: no arguments.
        self.check("cudaDeviceSynchronize", unsafe { (self.synchronize)() })
    }
}

/// Memory from cudaMalloc, freed when dropped.
pub struct DeviceBuffer<'a> {
    cuda: &'a Cudart,
    ptr: *mut c_void,
    bytes: usize,
}

impl DeviceBuffer<'_> {
    /// The address, for inputs.
    pub fn input(&self) -> DevicePtr {
        DevicePtr::new(self.ptr)
    }

    /// The address, for outputs.
    pub fn output(&self) -> DevicePtrMut {
        DevicePtrMut::new(self.ptr)
    }

    /// Copies the whole buffer to the host as elements of `T`.
    pub fn download<T: Copy + Default>(&self) -> Result<Vec<T>, String> {
        let mut host = vec![T::default(); self.bytes / size_of::<T>()];
        // SAFETY: both ranges hold at least `host.len() * size_of::<T>()` bytes.
        let code = unsafe {
            (self.cuda.memcpy)(
                host.as_mut_ptr().cast(),
                self.ptr,
                host.len() * size_of::<T>(),
                DEVICE_TO_HOST,
            )
        };
        self.cuda.check("cudaMemcpy to the host", code)?;
        Ok(host)
    }
}

impl Drop for DeviceBuffer<'_> {
    fn drop(&mut self) {
        // SAFETY: `ptr` came from cudaMalloc and is freed once.
        unsafe { (self.cuda.free)(self.ptr) };
    }
}
