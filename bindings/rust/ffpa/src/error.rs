//! Status codes and the error type every fallible function returns.

use std::ffi::CStr;
use std::fmt;

use crate::sys;

/// A libffpa status code (`ffpaStatus_t`).
///
/// Codes are grouped by thousands into categories ([`Status::category`]). This is a newtype
/// rather than an enum because a newer library may return codes these bindings do not name.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Status(u32);

macro_rules! statuses {
    ($($(#[$doc:meta])* $name:ident = $c_name:ident,)*) => {
        impl Status {
            $($(#[$doc])* pub const $name: Status = Status(sys::ffpaStatus::$c_name.0);)*
        }
    };
}

statuses! {
    /// The call succeeded.
    SUCCESS = FFPA_STATUS_SUCCESS,
    /// Category: the library or the device could not be initialized.
    NOT_INITIALIZED = FFPA_STATUS_NOT_INITIALIZED,
    /// No usable CUDA device or driver, or a handle made by [`Handle::for_device`] was asked to
    /// execute.
    ///
    /// [`Handle::for_device`]: crate::Handle::for_device
    NOT_INITIALIZED_NO_DEVICE = FFPA_STATUS_NOT_INITIALIZED_NO_DEVICE,
    /// A CUDA library libffpa depends on (cuBLASLt) failed to initialize.
    NOT_INITIALIZED_LIBRARY = FFPA_STATUS_NOT_INITIALIZED_LIBRARY,
    /// Category: an argument is wrong; the message names it and what is allowed.
    BAD_PARAM = FFPA_STATUS_BAD_PARAM,
    /// A required pointer is null.
    BAD_PARAM_NULL_POINTER = FFPA_STATUS_BAD_PARAM_NULL_POINTER,
    /// A device pointer is misaligned (16 bytes for tensors, 256 for the workspace).
    BAD_PARAM_MISALIGNED_POINTER = FFPA_STATUS_BAD_PARAM_MISALIGNED_POINTER,
    /// A descriptor was used before it was set.
    BAD_PARAM_NOT_FINALIZED = FFPA_STATUS_BAD_PARAM_NOT_FINALIZED,
    /// A value is out of range, or an enumerator or knob is unknown.
    BAD_PARAM_OUT_OF_BOUND = FFPA_STATUS_BAD_PARAM_OUT_OF_BOUND,
    /// A workspace or output buffer is too small.
    BAD_PARAM_SIZE_INSUFFICIENT = FFPA_STATUS_BAD_PARAM_SIZE_INSUFFICIENT,
    /// The tensors of one call disagree in shape.
    BAD_PARAM_SHAPE_MISMATCH = FFPA_STATUS_BAD_PARAM_SHAPE_MISMATCH,
    /// The tensors of one call disagree in data type, or a tensor has the wrong type for its role.
    BAD_PARAM_TYPE_MISMATCH = FFPA_STATUS_BAD_PARAM_TYPE_MISMATCH,
    /// A value has the wrong type for the knob or attribute it is given to.
    BAD_PARAM_ATTRIBUTE_TYPE = FFPA_STATUS_BAD_PARAM_ATTRIBUTE_TYPE,
    /// Strides are invalid: non-positive, overlapping, or not unit on the last dimension.
    BAD_PARAM_STRIDE = FFPA_STATUS_BAD_PARAM_STRIDE,
    /// Two settings that exclude each other were both requested.
    BAD_PARAM_EXCLUSIVE_OPTIONS = FFPA_STATUS_BAD_PARAM_EXCLUSIVE_OPTIONS,
    /// A policy environment variable read when the handle was created is malformed.
    BAD_PARAM_ENVIRONMENT = FFPA_STATUS_BAD_PARAM_ENVIRONMENT,
    /// The handle or descriptor is not a live libffpa object.
    BAD_PARAM_INVALID_HANDLE = FFPA_STATUS_BAD_PARAM_INVALID_HANDLE,
    /// Category: valid arguments that this build or this device cannot serve.
    NOT_SUPPORTED = FFPA_STATUS_NOT_SUPPORTED,
    /// The shape is outside what the library supports.
    NOT_SUPPORTED_SHAPE = FFPA_STATUS_NOT_SUPPORTED_SHAPE,
    /// The data type is not supported for this operation.
    NOT_SUPPORTED_DATA_TYPE = FFPA_STATUS_NOT_SUPPORTED_DATA_TYPE,
    /// The memory layout (strides) is not supported.
    NOT_SUPPORTED_LAYOUT = FFPA_STATUS_NOT_SUPPORTED_LAYOUT,
    /// The device's compute capability is not supported, or no kernel was compiled for it.
    NOT_SUPPORTED_ARCH_MISMATCH = FFPA_STATUS_NOT_SUPPORTED_ARCH_MISMATCH,
    /// The requested kernel needs more shared memory than the device offers.
    NOT_SUPPORTED_SHARED_MEMORY = FFPA_STATUS_NOT_SUPPORTED_SHARED_MEMORY,
    /// The combination of policies is illegal for this problem, or not compiled in.
    NOT_SUPPORTED_KNOB_COMBINATION = FFPA_STATUS_NOT_SUPPORTED_KNOB_COMBINATION,
    /// Category: a bug or resource failure inside libffpa.
    INTERNAL_ERROR = FFPA_STATUS_INTERNAL_ERROR,
    /// Host memory could not be allocated.
    INTERNAL_ERROR_HOST_ALLOCATION_FAILED = FFPA_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED,
    /// Category: the GPU work could not be launched or failed.
    EXECUTION_FAILED = FFPA_STATUS_EXECUTION_FAILED,
    /// A CUDA runtime call failed; the message carries CUDA's error name.
    EXECUTION_FAILED_CUDA = FFPA_STATUS_EXECUTION_FAILED_CUDA,
    /// A cuBLASLt call failed; the message carries cuBLAS's status name.
    EXECUTION_FAILED_CUBLAS = FFPA_STATUS_EXECUTION_FAILED_CUBLAS,
    /// The sanity check policy found NaN or infinity in an input or output.
    EXECUTION_FAILED_NON_FINITE = FFPA_STATUS_EXECUTION_FAILED_NON_FINITE,
    /// An NCCL call of a context-parallel call failed; the message carries NCCL's error string.
    EXECUTION_FAILED_NCCL = FFPA_STATUS_EXECUTION_FAILED_NCCL,
}

impl Status {
    /// The status with this C value, known to these bindings or not.
    pub const fn from_raw(raw: u32) -> Status {
        Status(raw)
    }

    /// The C value of this status.
    pub const fn raw(self) -> u32 {
        self.0
    }

    /// The category of this status, as `FFPA_STATUS_CATEGORY` computes it: one of
    /// [`SUCCESS`](Status::SUCCESS), [`NOT_INITIALIZED`](Status::NOT_INITIALIZED),
    /// [`BAD_PARAM`](Status::BAD_PARAM), [`NOT_SUPPORTED`](Status::NOT_SUPPORTED),
    /// [`INTERNAL_ERROR`](Status::INTERNAL_ERROR) or
    /// [`EXECUTION_FAILED`](Status::EXECUTION_FAILED).
    pub const fn category(self) -> Status {
        // The macro divides as int32_t; the casts keep that for every value.
        Status((self.0 as i32 / 1000 * 1000) as u32)
    }

    /// The library's name of this status, e.g. `"FFPA_STATUS_BAD_PARAM_NULL_POINTER"`
    /// (`"FFPA_STATUS_UNKNOWN"` for a value it does not know).
    pub fn name(self) -> &'static str {
        // SAFETY: ffpaGetErrorString accepts any value and returns a static NUL-terminated string.
        let name = unsafe { CStr::from_ptr(sys::ffpaGetErrorString(sys::ffpaStatus(self.0))) };
        name.to_str().unwrap_or("FFPA_STATUS_UNKNOWN")
    }
}

impl fmt::Debug for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}({})", self.name(), self.0)
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A failed call: its status and the library's detailed message.
///
/// The message names the function, the argument and the allowed values, e.g. `ffpaSetPolicy:
/// FFPA_POLICY_STAGES: 7 is out of range; allowed: an integer from 0 to 4 (0 = auto)`.
/// Errors these bindings detect themselves, before calling the library, carry a status of the
/// same meaning and a message that starts with the Rust function's name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error {
    /// What went wrong, as a status code.
    pub status: Status,
    /// The detailed message; may be empty when the library gave none.
    pub message: String,
}

impl Error {
    /// An error detected by these bindings rather than by the library.
    pub(crate) fn new(status: Status, message: impl Into<String>) -> Error {
        Error { status, message: message.into() }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.message.is_empty() {
            write!(f, "{}", self.status)
        } else {
            write!(f, "{}: {}", self.status, self.message)
        }
    }
}

impl std::error::Error for Error {}

/// The result of every fallible function of this crate.
pub type Result<T> = std::result::Result<T, Error>;

/// Turns the status of the libffpa call just made into a `Result`.
///
/// Must run right after that call and on its thread: the message is thread-local, and the next
/// failing call on the thread replaces it.
pub(crate) fn check(status: sys::ffpaStatus_t) -> Result<()> {
    if status == sys::ffpaStatus::FFPA_STATUS_SUCCESS {
        return Ok(());
    }
    Err(Error { status: Status(status.0), message: last_error_message() })
}

/// The thread-local message of the last failing libffpa call.
fn last_error_message() -> String {
    crate::text::read_c_string(|buffer, size| {
        // SAFETY: the buffer holds `size` bytes (null only when `size` is 0).
        Ok(unsafe { sys::ffpaGetLastErrorString(buffer, size) })
    })
    .unwrap_or_default()
}
