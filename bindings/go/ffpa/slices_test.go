package ffpa

import (
	"strings"
	"testing"
)

func TestAttentionSlicesSetCheckedAndReadBack(t *testing.T) {
	h := describedHandle(t)
	s, err := h.NewAttentionSlices()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	_, err = s.Info()
	wantError(t, err, StatusBadParamNotFinalized, "never set")
	if err := s.SetFromOffsets([]int32{0, 5, 16, 32}, nil, SliceCausal); err != nil {
		t.Fatal(err)
	}
	info, err := s.Info()
	if err != nil || info != (SlicesInfo{3, 32, 32, 15 + 66 + 136}) {
		t.Fatalf("Info = %+v, %v", info, err)
	}
	square := []Slice{{0, 8, 0, 8, SliceCausal}, {0, 7, 1, 8, SliceInverseCausal}}
	if err := s.Set(square); err != nil {
		t.Fatal(err)
	}
	if info, _ := s.Info(); info.VisiblePairs != 64 {
		t.Errorf("visible pairs %d, want 64", info.VisiblePairs)
	}
	wantError(t, s.Set([]Slice{square[0], {0, 8, 0, 8, SliceInverseCausal}}), StatusBadParam, "both give query row 0 key 0")
	wantError(t, s.Set(nil), StatusBadParamOutOfBound, "count is 0")
	wantError(t, s.SetFromOffsets([]int32{0, 4}, []int32{0}, SliceFull), StatusBadParamShapeMismatch, "2 query offsets but 1 key offsets")
	wantError(t, s.SetFromOffsets([]int32{1, 4}, nil, SliceFull), StatusBadParamOutOfBound, "queryOffsets[0] is 1")
}

func TestPackedBatchPlansSm80ForwardAndBackward(t *testing.T) {
	h := describedHandle(t)
	const tokens, heads, dim = 32, 4, 512
	q := PackedBNHD(BFloat16, 1, heads, tokens, dim)
	lse := TensorDesc{DataType: Float32, Dims: []int64{1, heads, tokens}, Strides: []int64{tokens * heads, 1, heads}}
	p := &ForwardProblem{Q: q, K: q, V: q, O: q, LSE: &lse}
	plain, err := h.DescribeForwardPlan(p)
	if err != nil {
		t.Fatal(err)
	}
	s, err := h.NewAttentionSlices()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SetFromOffsets([]int32{0, 5, 16, 32}, nil, SliceCausal); err != nil {
		t.Fatal(err)
	}
	p.Attention.Slices = s
	sliced, err := h.DescribeForwardPlan(p)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"kernel: sm80.forward", "slices=3"} {
		if !strings.Contains(sliced, want) {
			t.Errorf("plan lacks %q:\n%s", want, sliced)
		}
	}
	b := &BackwardProblem{Attention: p.Attention, Q: q, K: q, V: q, O: q, DO: q, LSE: lse, DQ: q, DK: q, DV: q}
	backward, err := h.DescribeBackwardPlan(b)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(backward, "kernel: sm80.backward") {
		t.Errorf("backward plan lacks %q:\n%s", "kernel: sm80.backward", backward)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	_, err = h.DescribeForwardPlan(p)
	wantError(t, err, StatusBadParamInvalidHandle, "closed")
	p.Attention.Slices = nil
	if again, _ := h.DescribeForwardPlan(p); again != plain {
		t.Errorf("without slices the plan changed:\n%s\nvs\n%s", again, plain)
	}
}
