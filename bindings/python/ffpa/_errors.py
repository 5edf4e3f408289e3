"""Status codes, and the exceptions that carry them with the library's message."""

import ctypes
import enum

from ._library import library


class Status(enum.IntEnum):
    """The result codes of ffpa.h (ffpaStatus_t), grouped by thousands into categories."""
    SUCCESS = 0
    NOT_INITIALIZED = 1000
    NOT_INITIALIZED_NO_DEVICE = 1001
    NOT_INITIALIZED_LIBRARY = 1002
    BAD_PARAM = 2000
    BAD_PARAM_NULL_POINTER = 2002
    BAD_PARAM_MISALIGNED_POINTER = 2003
    BAD_PARAM_NOT_FINALIZED = 2004
    BAD_PARAM_OUT_OF_BOUND = 2005
    BAD_PARAM_SIZE_INSUFFICIENT = 2006
    BAD_PARAM_SHAPE_MISMATCH = 2008
    BAD_PARAM_TYPE_MISMATCH = 2009
    BAD_PARAM_ATTRIBUTE_TYPE = 2010
    BAD_PARAM_STRIDE = 2011
    BAD_PARAM_EXCLUSIVE_OPTIONS = 2012
    BAD_PARAM_ENVIRONMENT = 2013
    BAD_PARAM_INVALID_HANDLE = 2014
    NOT_SUPPORTED = 3000
    NOT_SUPPORTED_SHAPE = 3002
    NOT_SUPPORTED_DATA_TYPE = 3003
    NOT_SUPPORTED_LAYOUT = 3004
    NOT_SUPPORTED_ARCH_MISMATCH = 3007
    NOT_SUPPORTED_SHARED_MEMORY = 3010
    NOT_SUPPORTED_KNOB_COMBINATION = 3011
    INTERNAL_ERROR = 4000
    INTERNAL_ERROR_HOST_ALLOCATION_FAILED = 4001
    EXECUTION_FAILED = 5000
    EXECUTION_FAILED_CUDA = 5001
    EXECUTION_FAILED_CUBLAS = 5002
    EXECUTION_FAILED_NON_FINITE = 5003
    EXECUTION_FAILED_NCCL = 5004

    @property
    def category(self):
        """The category of this code: SUCCESS, NOT_INITIALIZED, BAD_PARAM, NOT_SUPPORTED,
        INTERNAL_ERROR or EXECUTION_FAILED."""
        return category(self)


def category(status):
    """The category of any status value (FFPA_STATUS_CATEGORY), as a :class:`Status` when known."""
    return _as_status(int(status) // 1000 * 1000)


def _as_status(value):
    """A :class:`Status`, or the plain int for a code newer than this package."""
    try:
        return Status(value)
    except ValueError:
        return value


def status_name(status):
    """The library's name of a status, e.g. ``"FFPA_STATUS_BAD_PARAM_NULL_POINTER"``."""
    return library().ffpaGetErrorString(int(status)).decode()


class FfpaError(Exception):
    """A libffpa call failed. ``status`` is its code, ``message`` the library's detailed message
    (naming the argument at fault and the allowed values). Subclasses group codes by category."""

    def __init__(self, status, message):
        self.status = _as_status(status)
        self.message = message
        name = status_name(status)
        super().__init__(f"{name}: {message}" if message else name)


class NotInitializedError(FfpaError):
    """No usable device or CUDA library (category NOT_INITIALIZED)."""


class BadParamError(FfpaError, ValueError):
    """An argument is wrong (category BAD_PARAM)."""


class NotSupportedError(FfpaError):
    """Valid arguments this build or device cannot serve (category NOT_SUPPORTED)."""


class InternalError(FfpaError):
    """A bug or resource failure inside libffpa (category INTERNAL_ERROR)."""


class ExecutionFailedError(FfpaError):
    """The GPU work could not be launched or failed (category EXECUTION_FAILED)."""


_BY_CATEGORY = {
    Status.NOT_INITIALIZED: NotInitializedError,
    Status.BAD_PARAM: BadParamError,
    Status.NOT_SUPPORTED: NotSupportedError,
    Status.INTERNAL_ERROR: InternalError,
    Status.EXECUTION_FAILED: ExecutionFailedError,
}


def last_error_message():
    """The detailed message of the last failing libffpa call on the calling thread."""
    lib = library()
    size = 512
    while True:
        buffer = ctypes.create_string_buffer(size)
        length = lib.ffpaGetLastErrorString(buffer, size)
        if length < size:
            return buffer.value.decode(errors="replace")
        size = length + 1


def check(status):
    """Raises the :class:`FfpaError` subclass of ``status`` unless it is SUCCESS. Call it right
    after the C call, on the same thread: the message is the thread's last one."""
    if status != 0:
        error_class = _BY_CATEGORY.get(category(status), FfpaError)
        raise error_class(status, last_error_message())
