package ffpa

/*
#include <ffpa/ffpa.h>
#include <stdint.h>

// Device addresses cross from Go as integers and become pointers only here, so
// that Go never holds an unsafe.Pointer to memory it does not own.
static ffpaStatus_t goForward(ffpaHandle_t h, ffpaAttentionDescriptor_t a,
    ffpaTensorDescriptor_t qd, uintptr_t q, ffpaTensorDescriptor_t kd, uintptr_t k,
    ffpaTensorDescriptor_t vd, uintptr_t v, ffpaTensorDescriptor_t od, uintptr_t o,
    ffpaTensorDescriptor_t ld, uintptr_t lse, uintptr_t ws, size_t wsSize) {
  return ffpaAttentionForward(h, a, qd, (const void*)q, kd, (const void*)k, vd, (const void*)v,
                              od, (void*)o, ld, (float*)lse, (void*)ws, wsSize);
}

static ffpaStatus_t goBackward(ffpaHandle_t h, ffpaAttentionDescriptor_t a,
    ffpaTensorDescriptor_t qd, uintptr_t q, ffpaTensorDescriptor_t kd, uintptr_t k,
    ffpaTensorDescriptor_t vd, uintptr_t v, ffpaTensorDescriptor_t od, uintptr_t o,
    ffpaTensorDescriptor_t dod, uintptr_t dO, ffpaTensorDescriptor_t ld, uintptr_t lse,
    ffpaTensorDescriptor_t dqd, uintptr_t dq, ffpaTensorDescriptor_t dkd, uintptr_t dk,
    ffpaTensorDescriptor_t dvd, uintptr_t dv, uintptr_t ws, size_t wsSize) {
  return ffpaAttentionBackward(h, a, qd, (const void*)q, kd, (const void*)k, vd, (const void*)v,
                               od, (const void*)o, dod, (const void*)dO, ld, (const float*)lse,
                               dqd, (void*)dq, dkd, (void*)dk, dvd, (void*)dv, (void*)ws, wsSize);
}
*/
import "C"

import (
	"runtime"
	"unsafe"
)

// DevicePtr is an address in device memory, from the caller's CUDA allocator.
// It is an integer rather than an unsafe.Pointer because it points outside Go
// memory; convert a void* from cgo with DevicePtr(uintptr(p)).
type DevicePtr uintptr

// ForwardProblem describes a forward pass: Q [B, Hq, Nq, Dqk], K [B, Hkv, Nkv, Dqk],
// V [B, Hkv, Nkv, Dv], O [B, Hq, Nq, Dv] and, when wanted, the fp32
// log-sum-exp [B, Hq, Nq]. Hq is a multiple of Hkv.
type ForwardProblem struct {
	Attention  AttentionDesc
	Q, K, V, O TensorDesc
	LSE        *TensorDesc // nil when the log-sum-exp is not wanted
}

// ForwardBuffers holds the device memory of one forward pass. Pointers are
// aligned to 16 bytes, the workspace to 256; outputs overlap nothing.
type ForwardBuffers struct {
	Q, K, V       DevicePtr
	O             DevicePtr // written
	LSE           DevicePtr // written; 0 exactly when the problem's LSE is nil
	Workspace     DevicePtr // may be 0 when WorkspaceSize is 0
	WorkspaceSize int       // at least ForwardWorkspaceSize's answer
}

// BackwardProblem describes a backward pass: the forward's tensors, its output
// O and log-sum-exp, the output gradient DO, and the gradients DQ, DK, DV,
// which have the shapes and types of Q, K and V (their strides may differ).
type BackwardProblem struct {
	Attention                       AttentionDesc // as for the forward
	Q, K, V, O, DO, LSE, DQ, DK, DV TensorDesc
}

// BackwardBuffers holds the device memory of one backward pass, with the
// alignment rules of ForwardBuffers.
type BackwardBuffers struct {
	Q, K, V, O, DO, LSE DevicePtr
	DQ, DK, DV          DevicePtr // written
	Workspace           DevicePtr
	WorkspaceSize       int
}

// tensorsFunc is a C call that takes an attention descriptor and tensor
// descriptors, in the order of the problem's roles.
type tensorsFunc func(a C.ffpaAttentionDescriptor_t, t []C.ffpaTensorDescriptor_t) C.ffpaStatus_t

// describedCall makes the C descriptors of a problem on a locked thread and
// runs f with them; f's status and message are read on the same thread.
func describedCall(attn *AttentionDesc, roles []string, descs []*TensorDesc, f tensorsFunc) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var s descriptors
	defer s.release()
	a, err := s.attention(attn)
	if err != nil {
		return err
	}
	t := make([]C.ffpaTensorDescriptor_t, len(descs))
	for i := range t {
		if t[i], err = s.tensor(roles[i], descs[i]); err != nil {
			return err
		}
	}
	return errorOf(f(a, t))
}

var (
	forwardRoles  = []string{"Q", "K", "V", "O", "LSE"}
	backwardRoles = []string{"Q", "K", "V", "O", "DO", "LSE", "DQ", "DK", "DV"}
)

// forwardCall runs f with the descriptors Q, K, V, O, LSE (NULL when absent).
func forwardCall(p *ForwardProblem, f tensorsFunc) error {
	return describedCall(&p.Attention, forwardRoles, []*TensorDesc{&p.Q, &p.K, &p.V, &p.O, p.LSE}, f)
}

// backwardCall runs f with the descriptors Q, K, V, O, DO, LSE, DQ, DK, DV.
func backwardCall(p *BackwardProblem, f tensorsFunc) error {
	return describedCall(&p.Attention, backwardRoles,
		[]*TensorDesc{&p.Q, &p.K, &p.V, &p.O, &p.DO, &p.LSE, &p.DQ, &p.DK, &p.DV}, f)
}

// ForwardWorkspaceSize returns the bytes of workspace Forward needs for p. It
// plans the problem and caches the plan, taking planning off the execute path.
func (h *Handle) ForwardWorkspaceSize(p *ForwardProblem) (int, error) {
	var n C.size_t
	err := forwardCall(p, func(a C.ffpaAttentionDescriptor_t, t []C.ffpaTensorDescriptor_t) C.ffpaStatus_t {
		return C.ffpaGetAttentionForwardWorkspaceSize(h.h, a, t[0], t[1], t[2], t[3], t[4], &n)
	})
	return int(n), err
}

// Forward enqueues O = softmax(scale·Q·Kᵀ + mask)·V (and the log-sum-exp when
// p.LSE is set) on the handle's stream and returns without waiting. The
// buffers must stay allocated until the stream has run the work.
func (h *Handle) Forward(p *ForwardProblem, b *ForwardBuffers) error {
	return forwardCall(p, func(a C.ffpaAttentionDescriptor_t, t []C.ffpaTensorDescriptor_t) C.ffpaStatus_t {
		return C.goForward(h.h, a, t[0], C.uintptr_t(b.Q), t[1], C.uintptr_t(b.K), t[2], C.uintptr_t(b.V),
			t[3], C.uintptr_t(b.O), t[4], C.uintptr_t(b.LSE), C.uintptr_t(b.Workspace), C.size_t(b.WorkspaceSize))
	})
}

// DescribeForwardPlan explains the plan of p: one "name: value" line each for
// kernel, config and workspace, and one "skipped" line per kernel passed over.
// It plans and caches like ForwardWorkspaceSize.
func (h *Handle) DescribeForwardPlan(p *ForwardProblem) (string, error) {
	return readText(func(buf *C.char, size C.size_t, length *C.size_t) error {
		return forwardCall(p, func(a C.ffpaAttentionDescriptor_t, t []C.ffpaTensorDescriptor_t) C.ffpaStatus_t {
			return C.ffpaDescribeAttentionForwardPlan(h.h, a, t[0], t[1], t[2], t[3], t[4], buf, size, length)
		})
	})
}

// BackwardWorkspaceSize returns the bytes of workspace Backward needs for p
// (and plans and caches it).
func (h *Handle) BackwardWorkspaceSize(p *BackwardProblem) (int, error) {
	var n C.size_t
	err := backwardCall(p, func(a C.ffpaAttentionDescriptor_t, t []C.ffpaTensorDescriptor_t) C.ffpaStatus_t {
		return C.ffpaGetAttentionBackwardWorkspaceSize(h.h, a, t[0], t[1], t[2], t[3], t[4], t[5], t[6], t[7], t[8], &n)
	})
	return int(n), err
}

// Backward enqueues the gradients DQ, DK and DV on the handle's stream and
// returns without waiting; the buffers must stay allocated until the stream
// has run the work.
func (h *Handle) Backward(p *BackwardProblem, b *BackwardBuffers) error {
	return backwardCall(p, func(a C.ffpaAttentionDescriptor_t, t []C.ffpaTensorDescriptor_t) C.ffpaStatus_t {
		return C.goBackward(h.h, a, t[0], C.uintptr_t(b.Q), t[1], C.uintptr_t(b.K), t[2], C.uintptr_t(b.V),
			t[3], C.uintptr_t(b.O), t[4], C.uintptr_t(b.DO), t[5], C.uintptr_t(b.LSE),
			t[6], C.uintptr_t(b.DQ), t[7], C.uintptr_t(b.DK), t[8], C.uintptr_t(b.DV),
			C.uintptr_t(b.Workspace), C.size_t(b.WorkspaceSize))
	})
}

// DescribeBackwardPlan explains the plan of a backward problem, as
// DescribeForwardPlan does for the forward.
func (h *Handle) DescribeBackwardPlan(p *BackwardProblem) (string, error) {
	return readText(func(buf *C.char, size C.size_t, length *C.size_t) error {
		return backwardCall(p, func(a C.ffpaAttentionDescriptor_t, t []C.ffpaTensorDescriptor_t) C.ffpaStatus_t {
			return C.ffpaDescribeAttentionBackwardPlan(h.h, a, t[0], t[1], t[2], t[3], t[4], t[5], t[6], t[7], t[8], buf, size, length)
		})
	})
}

// readText runs a call that copies a text into a buffer and reports its whole
// length, growing the buffer until the text fits.
func readText(f func(buf *C.char, size C.size_t, length *C.size_t) error) (string, error) {
	buf := make([]byte, 1024)
	for {
		var length C.size_t
		if err := f((*C.char)(unsafe.Pointer(&buf[0])), C.size_t(len(buf)), &length); err != nil {
			return "", err
		}
		if int(length) < len(buf) {
			return string(buf[:int(length)]), nil
		}
		buf = make([]byte, int(length)+1)
	}
}
