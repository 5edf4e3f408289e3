package ffpa

import (
	"fmt"
	"strings"
	"testing"
)

func TestPackedLayouts(t *testing.T) {
	bhnd := PackedBHND(Float16, 2, 3, 5, 8)
	if fmt.Sprint(bhnd.Dims, bhnd.Strides) != "[2 3 5 8] [120 40 8 1]" {
		t.Errorf("PackedBHND: %v %v", bhnd.Dims, bhnd.Strides)
	}
	bnhd := PackedBNHD(BFloat16, 2, 3, 5, 8)
	if fmt.Sprint(bnhd.Dims, bnhd.Strides) != "[2 3 5 8] [120 8 24 1]" {
		t.Errorf("PackedBNHD: %v %v", bnhd.Dims, bnhd.Strides)
	}
	lse := LogSumExp(2, 3, 5)
	if lse.DataType != Float32 || fmt.Sprint(lse.Dims, lse.Strides) != "[2 3 5] [15 5 1]" {
		t.Errorf("LogSumExp: %+v", lse)
	}
	for _, d := range []TensorDesc{bhnd, bnhd, lse, {DataType: Float16, Dims: []int64{1, 2, 3, 4}}} {
		if err := d.Validate(); err != nil {
			t.Errorf("Validate(%+v): %v", d, err)
		}
	}
	if Float16.Size() != 2 || BFloat16.Size() != 2 || Float32.Size() != 4 || DataType(9).Size() != 0 {
		t.Error("DataType.Size")
	}
	if BFloat16.String() != "bf16" || DataType(9).String() != "DataType(9)" {
		t.Error("DataType.String")
	}
}

func TestTensorValidationErrors(t *testing.T) {
	wantError(t, TensorDesc{DataType: Float16, Dims: []int64{1, 2, 3, 4}, Strides: []int64{24, 12, 4, 0}}.Validate(),
		StatusBadParamStride)
	wantError(t, TensorDesc{DataType: Float16, Dims: []int64{1, 2, 3, 4, 5}}.Validate(), StatusBadParamOutOfBound)
	wantError(t, TensorDesc{DataType: Float16, Dims: []int64{1, 0, 3, 4}}.Validate(), StatusBadParamOutOfBound)
	wantError(t, TensorDesc{DataType: DataType(7), Dims: []int64{1, 2, 3, 4}}.Validate(), StatusBadParamOutOfBound)
	wantError(t, TensorDesc{DataType: Float16, Dims: []int64{1, 2, 3, 4}, Strides: []int64{1}}.Validate(),
		StatusBadParamOutOfBound, "4 dims but 1 strides")
}

func TestWorkspaceSizesAndPlans(t *testing.T) {
	h := describedHandle(t)
	// The reference path: the one that needs a workspace.
	if err := h.SetPolicyBool(KnobReferenceBackend, true); err != nil {
		t.Fatal(err)
	}
	p := forwardProblem(Float16, 1, 8, 8, 128, 128, 128)
	n, err := h.ForwardWorkspaceSize(p)
	if err != nil || n <= 0 {
		t.Fatalf("ForwardWorkspaceSize = %d, %v", n, err)
	}
	plan, err := h.DescribeForwardPlan(p)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"kernel: ", "config: ", fmt.Sprintf("workspace: %d bytes", n)} {
		if !strings.Contains(plan, want) {
			t.Errorf("forward plan lacks %q:\n%s", want, plan)
		}
	}

	b := backwardProblem(Float16, 1, 8, 8, 128, 128, 128)
	bn, err := h.BackwardWorkspaceSize(b)
	if err != nil || bn <= 0 {
		t.Fatalf("BackwardWorkspaceSize = %d, %v", bn, err)
	}
	bplan, err := h.DescribeBackwardPlan(b)
	if err != nil || !strings.Contains(bplan, fmt.Sprintf("workspace: %d bytes", bn)) {
		t.Errorf("backward plan (%v):\n%s", err, bplan)
	}

	// BNHD storage, grouped-query attention, Dv != Dqk, a mask and a scale.
	g := &ForwardProblem{
		Attention: AttentionDesc{Scale: 0.05, Causal: CausalBottomRight},
		Q:         PackedBNHD(BFloat16, 2, 8, 100, 192),
		K:         PackedBNHD(BFloat16, 2, 2, 300, 192),
		V:         PackedBNHD(BFloat16, 2, 2, 300, 128),
		O:         PackedBNHD(BFloat16, 2, 8, 100, 128),
	}
	if _, err := h.ForwardWorkspaceSize(g); err != nil {
		t.Errorf("GQA problem: %v", err)
	}

	// Key counts per batch entry: a device address, which planning never reads; the plan says so.
	g.Attention.KeyLengths = 0x7f0000001000
	kplan, err := h.DescribeForwardPlan(g)
	if err != nil || !strings.Contains(kplan, "key_lengths") {
		t.Errorf("plan with key lengths (%v):\n%s", err, kplan)
	}
}

func TestProblemErrors(t *testing.T) {
	h := describedHandle(t)
	p := forwardProblem(Float16, 1, 4, 4, 64, 64, 64)
	p.K = PackedBHND(Float16, 1, 4, 64, 32) // D disagrees with Q
	_, err := h.ForwardWorkspaceSize(p)
	wantError(t, err, StatusBadParamShapeMismatch, "kDesc is [1, 4, 64, 32]")

	p = forwardProblem(Float16, 1, 4, 4, 64, 64, 64)
	p.V.DataType = BFloat16
	_, err = h.ForwardWorkspaceSize(p)
	wantError(t, err, StatusBadParamTypeMismatch, "vDesc is bf16")

	p = forwardProblem(Float16, 1, 4, 4, 64, 64, 64)
	p.Q.Dims[1] = 0 // the descriptor itself is refused, and the error says which one
	_, err = h.ForwardWorkspaceSize(p)
	if e := wantError(t, err, StatusBadParamOutOfBound); !strings.HasPrefix(e.Message, "Q: ") {
		t.Errorf("message %q does not name the tensor", e.Message)
	}

	p = forwardProblem(Float16, 1, 4, 4, 64, 64, 2048)
	_, err = h.ForwardWorkspaceSize(p)
	wantError(t, err, StatusNotSupportedShape, "2048", "FFPA_MAX_HEAD_DIM")

	p = forwardProblem(Float16, 1, 4, 4, 64, 64, 64)
	p.Attention.Scale = -1
	_, err = h.ForwardWorkspaceSize(p)
	wantError(t, err, StatusBadParamOutOfBound)
}

func TestExecuteOnDescribedDeviceChecksArgumentsFirst(t *testing.T) {
	h := describedHandle(t)
	// The reference path: the one that needs a workspace.
	if err := h.SetPolicyBool(KnobReferenceBackend, true); err != nil {
		t.Fatal(err)
	}
	p := forwardProblem(Float16, 1, 2, 2, 32, 32, 64)
	n, err := h.ForwardWorkspaceSize(p)
	if err != nil {
		t.Fatal(err)
	}
	// Addresses that are never dereferenced: the described handle stops after
	// its checks, which see only their values (alignment, overlap).
	base := DevicePtr(1 << 40)
	b := &ForwardBuffers{Q: base, K: base + 1<<20, V: base + 2<<20, O: base + 3<<20, LSE: base + 4<<20,
		Workspace: base + 5<<20, WorkspaceSize: n}
	wantError(t, h.Forward(p, b), StatusNotInitializedNoDevice, "described device")

	small := *b
	small.WorkspaceSize = n - 1
	wantError(t, h.Forward(p, &small), StatusBadParamSizeInsufficient)
	misaligned := *b
	misaligned.Q += 2
	wantError(t, h.Forward(p, &misaligned), StatusBadParamMisalignedPointer)
	missing := *b
	missing.O = 0
	wantError(t, h.Forward(p, &missing), StatusBadParamNullPointer)

	bp := backwardProblem(Float16, 1, 2, 2, 32, 32, 64)
	bn, err := h.BackwardWorkspaceSize(bp)
	if err != nil {
		t.Fatal(err)
	}
	bb := &BackwardBuffers{Q: base, K: base + 1<<20, V: base + 2<<20, O: base + 3<<20, DO: base + 4<<20,
		LSE: base + 5<<20, DQ: base + 6<<20, DK: base + 7<<20, DV: base + 8<<20,
		Workspace: base + 9<<20, WorkspaceSize: bn}
	wantError(t, h.Backward(bp, bb), StatusNotInitializedNoDevice)
	overlap := *bb
	overlap.DQ = overlap.Q
	wantError(t, h.Backward(bp, &overlap), StatusBadParam, "dq overlaps q")
}

func TestPlanCacheStats(t *testing.T) {
	h := describedHandle(t)
	stats := func() PlanCacheStats {
		t.Helper()
		s, err := h.PlanCacheStats()
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	if s := stats(); s != (PlanCacheStats{Capacity: 1024}) {
		t.Errorf("fresh cache: %+v", s)
	}
	p := forwardProblem(Float16, 1, 4, 4, 64, 64, 64)
	for i := 0; i < 3; i++ {
		if _, err := h.ForwardWorkspaceSize(p); err != nil {
			t.Fatal(err)
		}
	}
	if s := stats(); s.Misses != 1 || s.Hits != 2 || s.Size != 1 {
		t.Errorf("after three queries of one problem: %+v", s)
	}
	if err := h.ClearPlanCache(); err != nil {
		t.Fatal(err)
	}
	if s := stats(); s != (PlanCacheStats{Capacity: 1024}) {
		t.Errorf("after ClearPlanCache: %+v", s)
	}
	if err := h.SetPolicyInt32(KnobPlanCacheCapacity, 1); err != nil {
		t.Fatal(err)
	}
	h.ForwardWorkspaceSize(p)
	h.ForwardWorkspaceSize(forwardProblem(Float16, 1, 4, 4, 96, 96, 64))
	if s := stats(); s.Capacity != 1 || s.Size != 1 || s.Evictions != 1 {
		t.Errorf("capacity 1, two problems: %+v", s)
	}
}
