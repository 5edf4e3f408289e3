// Attention slices over a context-parallel sequence: the slice list of the whole sequence (global
// query rows and keys) cut, for one step of a rank's ring, into the slices of one attention call
// over the rank's local queries and the key/value block it holds. Pure host arithmetic, shared by
// the ring planner and the host tests.
//
// A rank's tokens are one or two runs of consecutive global tokens (its shard chunks), and so are
// the held block's. Inside one (query chunk, key chunk) rectangle the global-to-local map is a
// translation, and the slice rule (common/slice_mask.h), relative to a slice's corners, does not
// change under a translation. So each global slice is clipped to each rectangle, then moved.
#pragma once

#include "common/slice_mask.h"
#include "cp/ring_schedule.h"

#include <vector>

namespace ffpa::cp {

// The part of slice `s` inside query rows `rows` and keys `keys` (same coordinates as `s`): at
// most three slices giving exactly the (row, key) pairs of `s` inside the rectangle.
//
// Clipping keeps a slice's diagonals: a causal bound is `j - i <= k1 - q1`, an inverse-causal
// bound `j - i >= k0 - q0`. Inside the rectangle a bound limits the keys of some rows only (a
// causal bound the rows above the one whose last key reaches the rectangle's right edge, an
// inverse-causal bound the rows below the one whose first key passes its left edge), so the rows
// are cut where each bound starts or stops mattering, and each piece becomes a slice that carries
// the bounds that matter on it, with its corners placed on the original diagonals.
std::vector<slices::SliceRange> clipSlice(const slices::SliceRange& s, RowRange rows, RowRange keys);

// The slices of one step: queries [queries) of the rank's local rows against keys [keys) of the
// block held, the slices relative to (queries.begin, keys.begin), so that the step is one sliced
// attention call on those rows. No slices: the step sees nothing.
struct StepSlices {
  RowRange queries, keys;
  std::vector<slices::SliceRange> slices;
};

// The step of `shape`'s rank holding the K/V of rank `source`, for the slices `global` of the
// whole sequence (global query rows are the Q shards' tokens, keys the K/V shards').
StepSlices stepSlices(const std::vector<slices::SliceRange>& global, const RingShape& shape, int32_t source);

}  // namespace ffpa::cp
