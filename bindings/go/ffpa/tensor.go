package ffpa

// #include <ffpa/ffpa.h>
import "C"

import (
	"runtime"
	"strconv"
	"unsafe"
)

// DataType is the element type of a tensor (ffpaDataType_t).
type DataType int32

// The element types.
const (
	Float16  DataType = C.FFPA_DATA_TYPE_FLOAT16  // IEEE half precision
	BFloat16 DataType = C.FFPA_DATA_TYPE_BFLOAT16 // bfloat16
	Float32  DataType = C.FFPA_DATA_TYPE_FLOAT32  // IEEE single precision (log-sum-exp; Q/K/V/O on the reference path)
)

// String returns "fp16", "bf16", "fp32" or "DataType(N)".
func (t DataType) String() string {
	switch t {
	case Float16:
		return "fp16"
	case BFloat16:
		return "bf16"
	case Float32:
		return "fp32"
	}
	return "DataType(" + strconv.Itoa(int(t)) + ")"
}

// Size returns the size of one element in bytes, or 0 for an unknown type.
func (t DataType) Size() int {
	switch t {
	case Float16, BFloat16:
		return 2
	case Float32:
		return 4
	}
	return 0
}

// TensorDesc describes a strided tensor: its element type, dimensions and
// strides in elements. Attention tensors have the dimensions [B, H, N, D]
// whatever their memory layout; the log-sum-exp has [B, H, N]. A nil Strides
// means packed row-major. The library checks a TensorDesc when a call uses it;
// [TensorDesc.Validate] checks it alone.
type TensorDesc struct {
	DataType DataType
	Dims     []int64
	Strides  []int64
}

// PackedBHND describes a tensor [B, H, N, D] stored in that order, packed.
func PackedBHND(t DataType, b, h, n, d int64) TensorDesc {
	return TensorDesc{DataType: t, Dims: []int64{b, h, n, d}, Strides: []int64{h * n * d, n * d, d, 1}}
}

// PackedBNHD describes a tensor [B, H, N, D] stored as [B, N, H, D], packed: the
// layout of a projection's output before the heads are transposed.
func PackedBNHD(t DataType, b, h, n, d int64) TensorDesc {
	return TensorDesc{DataType: t, Dims: []int64{b, h, n, d}, Strides: []int64{n * h * d, d, h * d, 1}}
}

// LogSumExp describes the packed fp32 log-sum-exp tensor [B, H, N].
func LogSumExp(b, h, n int64) TensorDesc {
	return TensorDesc{DataType: Float32, Dims: []int64{b, h, n}, Strides: []int64{h * n, n, 1}}
}

// Validate sets a C descriptor from d, which checks the element type, the
// dimensions and the strides on their own (not their role in a call).
func (d TensorDesc) Validate() error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var s descriptors
	defer s.release()
	_, err := s.tensor("", &d)
	return err
}

// CausalMode chooses which keys a query may attend to (ffpaCausalMode_t).
type CausalMode int32

// The masks. With Nq queries and Nkv keys, query i sees key j:
const (
	CausalNone        CausalMode = C.FFPA_CAUSAL_NONE         // always
	CausalTopLeft     CausalMode = C.FFPA_CAUSAL_TOP_LEFT     // when j <= i (PyTorch's is_causal)
	CausalBottomRight CausalMode = C.FFPA_CAUSAL_BOTTOM_RIGHT // when j <= i + Nkv - Nq (FlashAttention 2)
)

// AttentionDesc describes the attention operation itself. The zero value is
// the default: scale 1/sqrt(Dqk), no mask.
type AttentionDesc struct {
	// Scale multiplies Q·Kᵀ before the softmax; 0 means 1/sqrt(Dqk).
	Scale float32
	// Causal is the mask, unless Slices is set (Causal must then be CausalNone).
	Causal CausalMode
	// Slices, when not nil, is the mask: attention slices over packed sequences.
	Slices *AttentionSlices
	// ContextParallel, when not nil, makes each call that of one rank of a
	// context-parallel ring: the tensors describe the rank's local shards and
	// Causal, or Slices (global token positions, up to ranks * n), is the mask
	// over the whole sequence.
	ContextParallel *ContextParallel
	// KeyLengths, when not 0, is the device address of B int32 key counts, one
	// per batch entry: entry b attends to keys [0, L_b) only (a KV cache filled
	// to another length in each sequence). Read on the device by each call.
	KeyLengths uintptr
}

// descriptors holds the C descriptors of one call, so that every one is
// destroyed however the call ends. Its methods run on the locked OS thread of
// that call, since they read the thread's error message.
type descriptors struct {
	tensors []C.ffpaTensorDescriptor_t
	attn    C.ffpaAttentionDescriptor_t
}

func (s *descriptors) release() {
	for _, t := range s.tensors {
		C.ffpaDestroyTensorDescriptor(t)
	}
	if s.attn != nil {
		C.ffpaDestroyAttentionDescriptor(s.attn)
	}
}

// roleError prefixes a descriptor's error with the tensor it describes, since
// the library's message names only ffpaSetTensorDescriptor's arguments.
func roleError(err error, role string) error {
	if e, ok := err.(*Error); ok && role != "" {
		e.Message = role + ": " + e.Message
	}
	return err
}

// tensor makes a C descriptor of d, or returns NULL for a nil d (an absent
// optional tensor).
func (s *descriptors) tensor(role string, d *TensorDesc) (C.ffpaTensorDescriptor_t, error) {
	if d == nil {
		return nil, nil
	}
	var t C.ffpaTensorDescriptor_t
	if err := errorOf(C.ffpaCreateTensorDescriptor(&t)); err != nil {
		return nil, err
	}
	s.tensors = append(s.tensors, t)
	if len(d.Strides) != 0 && len(d.Strides) != len(d.Dims) {
		return nil, &Error{Status: StatusBadParamOutOfBound, Message: role + ": " +
			strconv.Itoa(len(d.Dims)) + " dims but " + strconv.Itoa(len(d.Strides)) + " strides"}
	}
	var dims, strides *C.int64_t
	if len(d.Dims) > 0 {
		dims = (*C.int64_t)(unsafe.Pointer(&d.Dims[0]))
	}
	if len(d.Strides) > 0 {
		strides = (*C.int64_t)(unsafe.Pointer(&d.Strides[0]))
	}
	st := C.ffpaSetTensorDescriptor(t, C.ffpaDataType_t(d.DataType), C.int32_t(len(d.Dims)), dims, strides)
	return t, roleError(errorOf(st), role)
}

// attention makes the C attention descriptor of a, leaving the scale at the
// library's default when a.Scale is 0.
func (s *descriptors) attention(a *AttentionDesc) (C.ffpaAttentionDescriptor_t, error) {
	if err := errorOf(C.ffpaCreateAttentionDescriptor(&s.attn)); err != nil {
		return nil, err
	}
	if a.Scale != 0 {
		scale := C.float(a.Scale)
		st := C.ffpaSetAttentionAttribute(s.attn, C.FFPA_ATTENTION_SOFTMAX_SCALE, unsafe.Pointer(&scale), C.size_t(unsafe.Sizeof(scale)))
		if err := errorOf(st); err != nil {
			return nil, err
		}
	}
	mode := C.int32_t(a.Causal)
	st := C.ffpaSetAttentionAttribute(s.attn, C.FFPA_ATTENTION_CAUSAL_MODE, unsafe.Pointer(&mode), C.size_t(unsafe.Sizeof(mode)))
	if err := errorOf(st); err != nil {
		return nil, err
	}
	if a.KeyLengths != 0 {
		// The address travels as the pointer-sized value the library expects.
		counts := C.uintptr_t(a.KeyLengths)
		st := C.ffpaSetAttentionAttribute(s.attn, C.FFPA_ATTENTION_KEY_LENGTHS, unsafe.Pointer(&counts), C.size_t(unsafe.Sizeof(counts)))
		if err := errorOf(st); err != nil {
			return nil, err
		}
	}
	if a.Slices != nil {
		if a.Slices.s == nil {
			return nil, &Error{Status: StatusBadParamInvalidHandle, Message: "AttentionDesc.Slices was closed"}
		}
		if err := errorOf(C.ffpaSetAttentionDescriptorSlices(s.attn, a.Slices.s)); err != nil {
			return nil, err
		}
	}
	if a.ContextParallel != nil {
		if err := a.ContextParallel.attach(s.attn); err != nil {
			return nil, err
		}
	}
	return s.attn, nil
}
