package ffpa

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"unsafe"
)

// describedRing returns a context-parallel object for a description, closed
// when the test ends.
func describedRing(t *testing.T, h *Handle, ranks, rank int32, s Sharding) *ContextParallel {
	t.Helper()
	cp, err := h.NewContextParallelForDescription(ranks, rank, s)
	if err != nil {
		t.Fatalf("NewContextParallelForDescription(%d, %d, %v): %v", ranks, rank, s, err)
	}
	t.Cleanup(func() {
		if err := cp.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return cp
}

func TestContextParallelInfoAndShards(t *testing.T) {
	h := describedHandle(t)
	zigzag := describedRing(t, h, 4, 1, ShardingZigzag)
	info, err := zigzag.Info()
	if err != nil || info != (ContextParallelInfo{Ranks: 4, Rank: 1, Sharding: ShardingZigzag}) {
		t.Fatalf("Info = %+v, %v", info, err)
	}
	// Chunks 1 and 6 of 8 chunks of 512 tokens.
	shard, err := zigzag.Shard(1024)
	if want := []TokenRange{{512, 1024}, {3072, 3584}}; err != nil || !reflect.DeepEqual(shard, want) {
		t.Errorf("zigzag Shard(1024) = %v, %v; want %v", shard, err, want)
	}
	_, err = zigzag.Shard(1023)
	wantError(t, err, StatusBadParamShapeMismatch, "localLength is 1023", "must be even")
	_, err = zigzag.Shard(0)
	wantError(t, err, StatusBadParamOutOfBound, "localLength is 0")

	contiguous := describedRing(t, h, 4, 3, ShardingContiguous)
	if info, err := contiguous.Info(); err != nil || info.Sharding != ShardingContiguous || info.Rank != 3 {
		t.Errorf("contiguous Info = %+v, %v", info, err)
	}
	shard, err = contiguous.Shard(1000)
	if want := []TokenRange{{3000, 4000}}; err != nil || !reflect.DeepEqual(shard, want) {
		t.Errorf("contiguous Shard(1000) = %v, %v; want %v", shard, err, want)
	}

	if ShardingContiguous.String() != "contiguous" || ShardingZigzag.String() != "zigzag" ||
		Sharding(7).String() != "Sharding(7)" {
		t.Error("Sharding.String")
	}
}

func TestContextParallelCreationErrors(t *testing.T) {
	h := describedHandle(t)
	noRing := func(cp *ContextParallel, err error) error {
		t.Helper()
		if cp != nil {
			t.Errorf("a failed creation returned %+v", cp)
		}
		return err
	}
	wantError(t, noRing(h.NewContextParallelForDescription(0, 0, ShardingZigzag)),
		StatusBadParamOutOfBound, "ranks is 0", "1 to 65536")
	wantError(t, noRing(h.NewContextParallelForDescription(4, 4, ShardingZigzag)),
		StatusBadParamOutOfBound, "rank is 4", "0 to ranks - 1 (3)")
	wantError(t, noRing(h.NewContextParallelForDescription(4, 0, Sharding(7))),
		StatusBadParamOutOfBound, "sharding is 7", "FFPA_SHARDING_ZIGZAG (1)")
	// A real one needs a communicator, and a handle that executes.
	wantError(t, noRing(h.NewContextParallel(nil, ShardingZigzag)), StatusBadParamNullPointer, "comm")
	var fake [64]byte // never read: the described handle is refused first
	wantError(t, noRing(h.NewContextParallel(unsafe.Pointer(&fake[0]), ShardingZigzag)),
		StatusNotInitializedNoDevice)
}

func TestContextParallelCloseIsIdempotentAndLaterCallsFail(t *testing.T) {
	h := describedHandle(t)
	cp, err := h.NewContextParallelForDescription(2, 0, ShardingContiguous)
	if err != nil {
		t.Fatal(err)
	}
	if err := cp.Close(); err != nil {
		t.Fatal(err)
	}
	if err := cp.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	var none *ContextParallel
	if err := none.Close(); err != nil {
		t.Errorf("Close of nil: %v", err)
	}
	_, err = cp.Info()
	wantError(t, err, StatusBadParamInvalidHandle, "closed")
	_, err = cp.Shard(16)
	wantError(t, err, StatusBadParamInvalidHandle, "closed")
	p := forwardProblem(BFloat16, 1, 2, 2, 64, 64, 128)
	p.Attention = AttentionDesc{Causal: CausalBottomRight, ContextParallel: cp}
	_, err = h.DescribeForwardPlan(p)
	wantError(t, err, StatusBadParamInvalidHandle, "AttentionDesc.ContextParallel was closed")
}

func TestCausalZigzagRingPlans(t *testing.T) {
	h := describedHandle(t)
	p := forwardProblem(BFloat16, 1, 8, 8, 1024, 1024, 512) // the local shards
	p.Attention.Causal = CausalBottomRight
	plain, err := h.DescribeForwardPlan(p)
	if err != nil {
		t.Fatal(err)
	}
	plainBytes, err := h.ForwardWorkspaceSize(p)
	if err != nil {
		t.Fatal(err)
	}

	p.Attention.ContextParallel = describedRing(t, h, 4, 1, ShardingZigzag)
	ring, err := h.DescribeForwardPlan(p)
	if err != nil {
		t.Fatal(err)
	}
	ringBytes, err := h.ForwardWorkspaceSize(p)
	if err != nil {
		t.Fatal(err)
	}
	// Step 1 holds rank 0 (chunks 0 and 7): both of this rank's chunks see chunk 0.
	for _, want := range []string{
		"context parallel: rank 1 of 4, zigzag sharding, 4 ring steps",
		"step 1: K/V of rank 0\n  queries [0, 1024) keys [0, 512) full: ",
		fmt.Sprintf("workspace: %d bytes", ringBytes),
	} {
		if !strings.Contains(ring, want) {
			t.Errorf("ring plan lacks %q:\n%s", want, ring)
		}
	}
	if ringBytes <= plainBytes {
		t.Errorf("ring workspace %d bytes, not more than the plain call's %d", ringBytes, plainBytes)
	}

	b := backwardProblem(BFloat16, 1, 8, 8, 1024, 1024, 512)
	b.Attention = p.Attention
	backward, err := h.DescribeBackwardPlan(b)
	if err != nil {
		t.Fatal(err)
	}
	if want := "step 1: K/V of rank 0"; !strings.Contains(backward, want) {
		t.Errorf("backward ring plan lacks %q:\n%s", want, backward)
	}

	// Detached, the problem plans the plain call again.
	p.Attention.ContextParallel = nil
	if again, err := h.DescribeForwardPlan(p); err != nil || again != plain || strings.Contains(again, "context parallel") {
		t.Errorf("detached plan (%v):\n%s\nwant:\n%s", err, again, plain)
	}
}

func TestSlicesMaskTheWholeSequenceOfARing(t *testing.T) {
	h := describedHandle(t)
	s, err := h.NewAttentionSlices()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// Two causal documents of the whole sequence of 2 x 256 tokens: [0, 200) and [200, 512).
	if err := s.SetFromOffsets([]int32{0, 200, 512}, nil, SliceCausal); err != nil {
		t.Fatal(err)
	}
	p := forwardProblem(BFloat16, 1, 8, 8, 256, 256, 512)
	// Rank 0 of a zigzag ring holds global tokens [0, 128) and [384, 512).
	p.Attention = AttentionDesc{Slices: s, ContextParallel: describedRing(t, h, 2, 0, ShardingZigzag)}
	text, err := h.DescribeForwardPlan(p)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"step 0: K/V of rank 0\n  queries [0, 256) keys [0, 256) 2 slices: ",
		// Chunk 3's rows see document 1's keys [200, 384) of rank 1: local keys [72, 256).
		"step 1: K/V of rank 1\n  queries [128, 256) keys [72, 256) 2 slices: ",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("sliced ring plan lacks %q:\n%s", want, text)
		}
	}
	// The slices may reach past the local rows, not past the whole sequence.
	if err := s.SetFromOffsets([]int32{0, 200, 513}, nil, SliceCausal); err != nil {
		t.Fatal(err)
	}
	_, err = h.ForwardWorkspaceSize(p)
	wantError(t, err, StatusBadParamShapeMismatch, "on each of 2 context-parallel ranks")
}
