package ffpa

import (
	"errors"
	"strings"
	"testing"
)

// a100 describes an A100 40 GB, so that planning tests need no GPU.
var a100 = DeviceDesc{
	Ordinal:                0,
	SMVersion:              80,
	SMCount:                108,
	SharedMemPerBlockOptin: 163 * 1024,
	SharedMemPerSM:         164 * 1024,
	GlobalMemBytes:         40 << 30,
	Name:                   "NVIDIA A100-SXM4-40GB (described)",
}

// describedHandle returns a handle for a100, closed when the test ends.
func describedHandle(t *testing.T) *Handle {
	t.Helper()
	h, err := NewForDevice(a100)
	if err != nil {
		t.Fatalf("NewForDevice: %v", err)
	}
	t.Cleanup(func() {
		if err := h.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return h
}

// wantError checks that err is an *Error with the given status whose message
// contains every fragment.
func wantError(t *testing.T, err error, status Status, fragments ...string) *Error {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("want an *Error with %v, got %v", status, err)
	}
	if e.Status != status {
		t.Fatalf("want %v, got %v", status, e)
	}
	for _, f := range fragments {
		if !strings.Contains(e.Message, f) {
			t.Errorf("message %q lacks %q", e.Message, f)
		}
	}
	return e
}

// forwardProblem is a packed [B, H, N, D] forward problem with log-sum-exp.
func forwardProblem(dt DataType, b, hq, hkv, nq, nkv, d int64) *ForwardProblem {
	lse := LogSumExp(b, hq, nq)
	return &ForwardProblem{
		Q:   PackedBHND(dt, b, hq, nq, d),
		K:   PackedBHND(dt, b, hkv, nkv, d),
		V:   PackedBHND(dt, b, hkv, nkv, d),
		O:   PackedBHND(dt, b, hq, nq, d),
		LSE: &lse,
	}
}

// backwardProblem is the backward pass of forwardProblem's problem.
func backwardProblem(dt DataType, b, hq, hkv, nq, nkv, d int64) *BackwardProblem {
	f := forwardProblem(dt, b, hq, hkv, nq, nkv, d)
	return &BackwardProblem{
		Q: f.Q, K: f.K, V: f.V, O: f.O, DO: f.O, LSE: *f.LSE, DQ: f.Q, DK: f.K, DV: f.V,
	}
}
