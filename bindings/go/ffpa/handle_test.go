package ffpa

import (
	"testing"
)

func TestNewWithoutGPU(t *testing.T) {
	h, err := New()
	if err == nil {
		h.Close()
		t.Skip("a GPU is present: New succeeded")
	}
	wantError(t, err, StatusNotInitializedNoDevice, "ffpaCreate")
	if e := err.(*Error); e.Message == "" || e.Status.Category() != StatusNotInitialized {
		t.Errorf("error %v: want a message and category NOT_INITIALIZED", e)
	}
}

func TestDescribedDeviceRoundTrip(t *testing.T) {
	h := describedHandle(t)
	got, err := h.Device()
	if err != nil {
		t.Fatal(err)
	}
	if got != a100 {
		t.Errorf("Device() = %+v, want %+v", got, a100)
	}
	s, err := h.Stream()
	if err != nil || s != nil {
		t.Errorf("Stream() = %v, %v; want the default stream", s, err)
	}
	if err := h.SetStream(nil); err != nil {
		t.Errorf("SetStream(nil): %v", err)
	}
}

func TestNewForDeviceChecksFields(t *testing.T) {
	d := a100
	d.SMCount = 0
	_, err := NewForDevice(d)
	wantError(t, err, StatusBadParamOutOfBound, "smCount")

	d = a100
	d.SMVersion = 75
	_, err = NewForDevice(d)
	wantError(t, err, StatusNotSupportedArchMismatch)
}

func TestLongDeviceNameIsCut(t *testing.T) {
	d := a100
	long := make([]byte, 400)
	for i := range long {
		long[i] = 'x'
	}
	d.Name = string(long)
	h, err := NewForDevice(d)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	got, err := h.Device()
	if err != nil || len(got.Name) != 255 {
		t.Errorf("name of %d bytes, %v; want 255 bytes", len(got.Name), err)
	}
}

func TestCloseIsIdempotentAndLaterCallsFail(t *testing.T) {
	h, err := NewForDevice(a100)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	if err := h.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	var nilHandle *Handle
	if err := nilHandle.Close(); err != nil {
		t.Errorf("Close of a nil *Handle: %v", err)
	}
	_, err = h.PlanCacheStats()
	wantError(t, err, StatusBadParamNullPointer)
}
