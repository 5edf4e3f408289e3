package ffpa

// #include <ffpa/ffpa.h>
import "C"

import (
	"unsafe"
)

// Handle is a libffpa context bound to one CUDA device: its stream, policies and
// plan cache. Create it with [New] or [NewForDevice] and release it with
// [Handle.Close]; see the package documentation for threads and finalizers.
type Handle struct {
	h C.ffpaHandle_t
}

// DeviceDesc holds the properties of a device that decide plans
// (ffpaDeviceDesc_t). [Handle.Device] reports them; [NewForDevice] plans for a
// described device that need not be present.
type DeviceDesc struct {
	// Ordinal is the CUDA device ordinal, at least 0.
	Ordinal int32
	// SMVersion is the compute capability as major*10 + minor, at least 80.
	SMVersion int32
	// SMCount is the number of streaming multiprocessors, at least 1.
	SMCount int32
	// SharedMemPerBlockOptin is the shared memory in bytes one block may use
	// after opting in, at least 48 KiB.
	SharedMemPerBlockOptin int64
	// SharedMemPerSM is the shared memory in bytes per multiprocessor, at least
	// SharedMemPerBlockOptin.
	SharedMemPerSM int64
	// GlobalMemBytes is the size of device memory in bytes, at least 1.
	GlobalMemBytes int64
	// Name is the device name; at most 255 bytes are kept.
	Name string
}

func (d *DeviceDesc) toC() C.ffpaDeviceDesc_t {
	var c C.ffpaDeviceDesc_t
	c.structSize = C.uint32_t(unsafe.Sizeof(c))
	c.ordinal = C.int32_t(d.Ordinal)
	c.smVersion = C.int32_t(d.SMVersion)
	c.smCount = C.int32_t(d.SMCount)
	c.sharedMemPerBlockOptin = C.int64_t(d.SharedMemPerBlockOptin)
	c.sharedMemPerSm = C.int64_t(d.SharedMemPerSM)
	c.globalMemBytes = C.int64_t(d.GlobalMemBytes)
	name := d.Name
	if len(name) >= len(c.name) {
		name = name[:len(c.name)-1] // leaves the NUL of the zeroed array
	}
	for i := 0; i < len(name); i++ {
		c.name[i] = C.char(name[i])
	}
	return c
}

func deviceFromC(c *C.ffpaDeviceDesc_t) DeviceDesc {
	return DeviceDesc{
		Ordinal:                int32(c.ordinal),
		SMVersion:              int32(c.smVersion),
		SMCount:                int32(c.smCount),
		SharedMemPerBlockOptin: int64(c.sharedMemPerBlockOptin),
		SharedMemPerSM:         int64(c.sharedMemPerSm),
		GlobalMemBytes:         int64(c.globalMemBytes),
		Name:                   C.GoString(&c.name[0]),
	}
}

// New creates a handle bound to the calling thread's current CUDA device
// (ffpaCreate). It reads the policy environment variables. Without a usable GPU
// it fails with StatusNotInitializedNoDevice.
func New() (*Handle, error) {
	var h C.ffpaHandle_t
	if err := call(func() C.ffpaStatus_t { return C.ffpaCreate(&h) }); err != nil {
		return nil, err
	}
	return &Handle{h: h}, nil
}

// NewForDevice creates a handle that plans for the described device
// (ffpaCreateForDevice). It reports workspace sizes and plans and keeps policies
// like any handle, but Forward and Backward fail with
// StatusNotInitializedNoDevice after checking their arguments.
func NewForDevice(device DeviceDesc) (*Handle, error) {
	var h C.ffpaHandle_t
	c := device.toC()
	if err := call(func() C.ffpaStatus_t { return C.ffpaCreateForDevice(&h, &c) }); err != nil {
		return nil, err
	}
	return &Handle{h: h}, nil
}

// Close destroys the handle and its plan cache without waiting for enqueued
// work. Closing twice, or closing a nil *Handle, does nothing.
func (h *Handle) Close() error {
	if h == nil || h.h == nil {
		return nil
	}
	err := call(func() C.ffpaStatus_t { return C.ffpaDestroy(h.h) })
	h.h = nil
	return err
}

// SetStream sets the CUDA stream (a cudaStream_t or CUstream) the handle's work
// is enqueued on; nil is the legacy default stream.
func (h *Handle) SetStream(stream unsafe.Pointer) error {
	return call(func() C.ffpaStatus_t { return C.ffpaSetStream(h.h, C.ffpaStream_t(stream)) })
}

// Stream returns the stream set with SetStream (nil for the default stream).
func (h *Handle) Stream() (unsafe.Pointer, error) {
	var s C.ffpaStream_t
	err := call(func() C.ffpaStatus_t { return C.ffpaGetStream(h.h, &s) })
	return unsafe.Pointer(s), err
}

// Device describes the device the handle is bound to or was created for.
func (h *Handle) Device() (DeviceDesc, error) {
	var c C.ffpaDeviceDesc_t
	c.structSize = C.uint32_t(unsafe.Sizeof(c))
	if err := call(func() C.ffpaStatus_t { return C.ffpaGetDeviceDesc(h.h, &c) }); err != nil {
		return DeviceDesc{}, err
	}
	return deviceFromC(&c), nil
}
