package ffpa

import (
	"strings"
	"testing"
)

func TestStatusCategoryAndName(t *testing.T) {
	cases := []struct {
		status, category Status
		name             string
	}{
		{StatusSuccess, StatusSuccess, "FFPA_STATUS_SUCCESS"},
		{StatusNotInitializedNoDevice, StatusNotInitialized, "FFPA_STATUS_NOT_INITIALIZED_NO_DEVICE"},
		{StatusBadParamNullPointer, StatusBadParam, "FFPA_STATUS_BAD_PARAM_NULL_POINTER"},
		{StatusNotSupportedKnobCombination, StatusNotSupported, "FFPA_STATUS_NOT_SUPPORTED_KNOB_COMBINATION"},
		{StatusInternalErrorHostAllocation, StatusInternalError, "FFPA_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED"},
		{StatusExecutionFailedNonFinite, StatusExecutionFailed, "FFPA_STATUS_EXECUTION_FAILED_NON_FINITE"},
	}
	for _, c := range cases {
		if got := c.status.Category(); got != c.category {
			t.Errorf("%v.Category() = %v, want %v", c.status, got, c.category)
		}
		if got := c.status.String(); got != c.name {
			t.Errorf("Status(%d).String() = %q, want %q", int32(c.status), got, c.name)
		}
	}
	if got := Status(4242).String(); got != "FFPA_STATUS_UNKNOWN" {
		t.Errorf("unknown status: %q", got)
	}
}

func TestErrorFormatsStatusAndMessage(t *testing.T) {
	e := &Error{Status: StatusBadParamStride, Message: "ffpaSetTensorDescriptor: strides[0] is 0"}
	if got := e.Error(); got != "FFPA_STATUS_BAD_PARAM_STRIDE: ffpaSetTensorDescriptor: strides[0] is 0" {
		t.Errorf("Error() = %q", got)
	}
	if got := (&Error{Status: StatusBadParam}).Error(); got != "FFPA_STATUS_BAD_PARAM" {
		t.Errorf("Error() without message = %q", got)
	}
}

func TestVersion(t *testing.T) {
	if Version() != HeaderVersion {
		t.Errorf("library %d, header %d: the tests run against the library of this tree", Version(), HeaderVersion)
	}
	if !IsCompatible(Version()) {
		t.Errorf("IsCompatible(%d) = false", Version())
	}
	major, minor := HeaderVersion/10000, HeaderVersion%10000/100
	for _, c := range []struct {
		runtime uint32
		want    bool
	}{
		{major*10000 + minor*100 + 7, true},
		{major*10000 + (minor+1)*100, true},
		{(major + 1) * 10000, false},
	} {
		if got := IsCompatible(c.runtime); got != c.want {
			t.Errorf("IsCompatible(%d) = %v", c.runtime, got)
		}
	}
	if minor > 0 && IsCompatible(major*10000+(minor-1)*100) {
		t.Error("an older minor version must not be compatible")
	}
	if info := BuildInfo(); !strings.Contains(info, "0.") {
		t.Errorf("BuildInfo() = %q", info)
	}
}
