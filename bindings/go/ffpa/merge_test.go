package ffpa

import "testing"

func TestMergeAndSinksCheckArgumentsFirst(t *testing.T) {
	h := describedHandle(t)
	lse := LogSumExp(2, 4, 100)
	p := &MergeProblem{PartialO: PackedBHND(BFloat16, 2, 4, 100, 512), PartialLSE: lse,
		O: PackedBHND(Float32, 2, 4, 100, 512), LSE: &lse}
	// Addresses that are never dereferenced: the described handle stops after its checks.
	base := DevicePtr(1 << 40)
	b := &MergeBuffers{PartialO: []DevicePtr{base, base + 1<<30, base + 2<<30},
		PartialLSE: []DevicePtr{base + 3<<30, base + 4<<30, base + 5<<30}, O: base + 6<<30, LSE: base + 7<<30}
	wantError(t, h.Merge(p, b), StatusNotInitializedNoDevice, "described device")

	none := *b
	none.PartialO, none.PartialLSE = nil, nil
	wantError(t, h.Merge(p, &none), StatusBadParamOutOfBound, "count is 0")
	short := *b
	short.PartialLSE = short.PartialLSE[:2]
	wantError(t, h.Merge(p, &short), StatusBadParamNullPointer, "partialLse[2] is NULL")
	overlapping := *b
	overlapping.O = base + 64
	wantError(t, h.Merge(p, &overlapping), StatusBadParam, "overlaps")
	noLSE := *p
	noLSE.LSE = nil
	withoutLSE := *b
	withoutLSE.LSE = 0
	wantError(t, h.Merge(&noLSE, &withoutLSE), StatusNotInitializedNoDevice)

	o := PackedBHND(Float16, 1, 8, 64, 256)
	l := LogSumExp(1, 8, 64)
	wantError(t, h.ApplySinks(base, &o, base+1<<30, &l, base+2<<30), StatusNotInitializedNoDevice)
	wantError(t, h.ApplySinks(0, &o, base+1<<30, &l, base+2<<30), StatusBadParamNullPointer, "sinks is NULL")
	wantError(t, h.SinksBackward(base, &o, base+1<<30, &o, base+2<<30, &l, base+3<<30, base+4<<30),
		StatusNotInitializedNoDevice)
	wantError(t, h.SinksBackward(base, &o, base+1<<30, &o, base+2<<30, &l, base+3<<30, base+3<<30+16),
		StatusBadParam, "dSinks overlaps lse")
}
