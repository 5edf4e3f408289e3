package ffpa

// #include <ffpa/ffpa.h>
import "C"

import (
	"runtime"
	"strconv"
)

// SliceMask says how the keys of one attention slice are masked
// (ffpaSliceMask_t). With the slice's nq queries and nk keys, relative query i
// sees relative key j:
type SliceMask int32

// The slice masks.
const (
	SliceFull          SliceMask = C.FFPA_SLICE_MASK_FULL           // always
	SliceCausal        SliceMask = C.FFPA_SLICE_MASK_CAUSAL         // when j <= i + nk - nq (bottom-right)
	SliceInverseCausal SliceMask = C.FFPA_SLICE_MASK_INVERSE_CAUSAL // when j >= i (top-left)
	SliceBicausal      SliceMask = C.FFPA_SLICE_MASK_BICAUSAL       // when both hold: a band
)

// MaxSlices is the most slices one list holds (FFPA_MAX_SLICES).
const MaxSlices = C.FFPA_MAX_SLICES

// Slice lets queries [Q0, Q1) see keys [K0, K1) under Mask.
type Slice struct {
	Q0, Q1, K0, K1 int32
	Mask           SliceMask
}

// SlicesInfo is what [AttentionSlices.Info] reports.
type SlicesInfo struct {
	Count        int32 // slices
	QueryExtent  int64 // one past the last query row covered: Nq must be at least this
	KeyExtent    int64 // one past the last key covered: Nkv must be at least this
	VisiblePairs int64 // (query, key) pairs that attend, per batch entry and head
}

// AttentionSlices is a checked list of attention slices, copied to the device
// of the handle it was made with (ffpaAttentionSlices_t): the mask of packed
// variable-length batches, shared prefixes, sliding windows and block-sparse
// patterns. Put it in [AttentionDesc.Slices]; release it with Close.
type AttentionSlices struct {
	s C.ffpaAttentionSlices_t
}

// NewAttentionSlices creates an empty slice list for h's device
// (ffpaCreateAttentionSlices).
func (h *Handle) NewAttentionSlices() (*AttentionSlices, error) {
	var s C.ffpaAttentionSlices_t
	if err := call(func() C.ffpaStatus_t { return C.ffpaCreateAttentionSlices(h.h, &s) }); err != nil {
		return nil, err
	}
	return &AttentionSlices{s: s}, nil
}

// Set replaces the slices (ffpaSetAttentionSlices): checked, a key given twice
// to a row refused, then copied to the device. On failure the list keeps its
// previous slices.
func (a *AttentionSlices) Set(slices []Slice) error {
	queries := make([]C.int32_t, 0, 2*len(slices)+1)
	keys := make([]C.int32_t, 0, 2*len(slices)+1)
	masks := make([]C.int32_t, 0, len(slices)+1)
	for _, s := range slices {
		queries = append(queries, C.int32_t(s.Q0), C.int32_t(s.Q1))
		keys = append(keys, C.int32_t(s.K0), C.int32_t(s.K1))
		masks = append(masks, C.int32_t(s.Mask))
	}
	// Never an empty array: the library refuses the count before it reads one.
	queries, keys, masks = append(queries, 0), append(keys, 0), append(masks, 0)
	err := call(func() C.ffpaStatus_t {
		return C.ffpaSetAttentionSlices(a.s, C.int32_t(len(slices)), &queries[0], &keys[0], &masks[0])
	})
	runtime.KeepAlive(a)
	return err
}

// SetFromOffsets sets one slice per sequence of a packed batch from cumulative
// offsets starting at 0 (ffpaSetAttentionSlicesFromOffsets); nil keyOffsets
// uses the query offsets.
func (a *AttentionSlices) SetFromOffsets(queryOffsets, keyOffsets []int32, mask SliceMask) error {
	if keyOffsets != nil && len(keyOffsets) != len(queryOffsets) {
		return &Error{Status: StatusBadParamShapeMismatch, Message: strconv.Itoa(len(queryOffsets)) +
			" query offsets but " + strconv.Itoa(len(keyOffsets)) + " key offsets"}
	}
	sequences := len(queryOffsets) - 1
	if sequences < 0 {
		sequences = 0
	}
	q := append(append([]C.int32_t{}, toC32(queryOffsets)...), 0)
	var k *C.int32_t
	if keyOffsets != nil {
		keys := append(toC32(keyOffsets), 0)
		k = &keys[0]
	}
	err := call(func() C.ffpaStatus_t {
		return C.ffpaSetAttentionSlicesFromOffsets(a.s, C.int32_t(sequences), &q[0], k, C.ffpaSliceMask_t(mask))
	})
	runtime.KeepAlive(a)
	return err
}

func toC32(values []int32) []C.int32_t {
	out := make([]C.int32_t, len(values))
	for i, v := range values {
		out[i] = C.int32_t(v)
	}
	return out
}

// Info reports the slice count, extents and visible pairs
// (ffpaGetAttentionSlicesInfo).
func (a *AttentionSlices) Info() (SlicesInfo, error) {
	var count C.int32_t
	var queryExtent, keyExtent, pairs C.int64_t
	err := call(func() C.ffpaStatus_t {
		return C.ffpaGetAttentionSlicesInfo(a.s, &count, &queryExtent, &keyExtent, &pairs)
	})
	runtime.KeepAlive(a)
	return SlicesInfo{int32(count), int64(queryExtent), int64(keyExtent), int64(pairs)}, err
}

// Close destroys the list. Descriptors made from it earlier keep their copy.
// Closing twice, or closing a nil *AttentionSlices, does nothing.
func (a *AttentionSlices) Close() error {
	if a == nil || a.s == nil {
		return nil
	}
	err := call(func() C.ffpaStatus_t { return C.ffpaDestroyAttentionSlices(a.s) })
	a.s = nil
	return err
}
