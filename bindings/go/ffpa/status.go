package ffpa

// #cgo pkg-config: ffpa
// #include <ffpa/ffpa.h>
import "C"

import (
	"runtime"
	"unsafe"
)

// Status is the result code of a libffpa call (ffpaStatus_t). Codes are grouped
// by thousands into categories; see [Status.Category].
type Status int32

// The status codes of ffpa.h, with the same values.
const (
	StatusSuccess                     Status = C.FFPA_STATUS_SUCCESS
	StatusNotInitialized              Status = C.FFPA_STATUS_NOT_INITIALIZED
	StatusNotInitializedNoDevice      Status = C.FFPA_STATUS_NOT_INITIALIZED_NO_DEVICE
	StatusNotInitializedLibrary       Status = C.FFPA_STATUS_NOT_INITIALIZED_LIBRARY
	StatusBadParam                    Status = C.FFPA_STATUS_BAD_PARAM
	StatusBadParamNullPointer         Status = C.FFPA_STATUS_BAD_PARAM_NULL_POINTER
	StatusBadParamMisalignedPointer   Status = C.FFPA_STATUS_BAD_PARAM_MISALIGNED_POINTER
	StatusBadParamNotFinalized        Status = C.FFPA_STATUS_BAD_PARAM_NOT_FINALIZED
	StatusBadParamOutOfBound          Status = C.FFPA_STATUS_BAD_PARAM_OUT_OF_BOUND
	StatusBadParamSizeInsufficient    Status = C.FFPA_STATUS_BAD_PARAM_SIZE_INSUFFICIENT
	StatusBadParamShapeMismatch       Status = C.FFPA_STATUS_BAD_PARAM_SHAPE_MISMATCH
	StatusBadParamTypeMismatch        Status = C.FFPA_STATUS_BAD_PARAM_TYPE_MISMATCH
	StatusBadParamAttributeType       Status = C.FFPA_STATUS_BAD_PARAM_ATTRIBUTE_TYPE
	StatusBadParamStride              Status = C.FFPA_STATUS_BAD_PARAM_STRIDE
	StatusBadParamExclusiveOptions    Status = C.FFPA_STATUS_BAD_PARAM_EXCLUSIVE_OPTIONS
	StatusBadParamEnvironment         Status = C.FFPA_STATUS_BAD_PARAM_ENVIRONMENT
	StatusBadParamInvalidHandle       Status = C.FFPA_STATUS_BAD_PARAM_INVALID_HANDLE
	StatusNotSupported                Status = C.FFPA_STATUS_NOT_SUPPORTED
	StatusNotSupportedShape           Status = C.FFPA_STATUS_NOT_SUPPORTED_SHAPE
	StatusNotSupportedDataType        Status = C.FFPA_STATUS_NOT_SUPPORTED_DATA_TYPE
	StatusNotSupportedLayout          Status = C.FFPA_STATUS_NOT_SUPPORTED_LAYOUT
	StatusNotSupportedArchMismatch    Status = C.FFPA_STATUS_NOT_SUPPORTED_ARCH_MISMATCH
	StatusNotSupportedSharedMemory    Status = C.FFPA_STATUS_NOT_SUPPORTED_SHARED_MEMORY
	StatusNotSupportedKnobCombination Status = C.FFPA_STATUS_NOT_SUPPORTED_KNOB_COMBINATION
	StatusInternalError               Status = C.FFPA_STATUS_INTERNAL_ERROR
	StatusInternalErrorHostAllocation Status = C.FFPA_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED
	StatusExecutionFailed             Status = C.FFPA_STATUS_EXECUTION_FAILED
	StatusExecutionFailedCUDA         Status = C.FFPA_STATUS_EXECUTION_FAILED_CUDA
	StatusExecutionFailedCUBLAS       Status = C.FFPA_STATUS_EXECUTION_FAILED_CUBLAS
	StatusExecutionFailedNonFinite    Status = C.FFPA_STATUS_EXECUTION_FAILED_NON_FINITE
	StatusExecutionFailedNccl         Status = C.FFPA_STATUS_EXECUTION_FAILED_NCCL
)

// Category returns the category of s: StatusSuccess, StatusNotInitialized,
// StatusBadParam, StatusNotSupported, StatusInternalError or
// StatusExecutionFailed (FFPA_STATUS_CATEGORY).
func (s Status) Category() Status {
	return s / 1000 * 1000
}

// String returns the name of the code as the library spells it, for example
// "FFPA_STATUS_BAD_PARAM_NULL_POINTER"; unknown codes give "FFPA_STATUS_UNKNOWN".
func (s Status) String() string {
	return C.GoString(C.ffpaGetErrorString(C.ffpaStatus_t(s)))
}

// Error is a failed libffpa call: its status and the detailed message the
// library left for it.
type Error struct {
	// Status is the code the call returned; never StatusSuccess.
	Status Status
	// Message names the function, the argument and the allowed values; it may be
	// empty when the library gave none.
	Message string
}

// Error formats the status name followed by the message.
func (e *Error) Error() string {
	if e.Message == "" {
		return e.Status.String()
	}
	return e.Status.String() + ": " + e.Message
}

// lastErrorString reads the calling thread's last message. The caller must hold
// the OS thread (runtime.LockOSThread) since the failing call.
func lastErrorString() string {
	buf := make([]byte, 512)
	for {
		n := int(C.ffpaGetLastErrorString((*C.char)(unsafe.Pointer(&buf[0])), C.size_t(len(buf))))
		if n < len(buf) {
			return string(buf[:n])
		}
		buf = make([]byte, n+1)
	}
}

// errorOf turns a status into nil or an *Error with the thread's message. It
// must run on the thread of the call that returned s.
func errorOf(s C.ffpaStatus_t) error {
	if s == C.FFPA_STATUS_SUCCESS {
		return nil
	}
	return &Error{Status: Status(s), Message: lastErrorString()}
}

// call runs one C call on a locked OS thread, so that the thread-local message
// read after a failure belongs to that call and not to one made by another
// goroutine that ran on the same thread in between.
func call(f func() C.ffpaStatus_t) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	return errorOf(f())
}
