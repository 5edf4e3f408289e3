// Attention slices: which keys a query sees through a list of (query range, key range, mask)
// slices (the `slices` group of ffpa/ffpa.h). The arithmetic is shared by the host checks, the
// reference kernels, the tiled kernels and the tests, so all of them apply the same rule. Plain
// C++ (no ffpa.h: the mask values are those of ffpaSliceMask_t, checked in core/slice_table.cpp).
//
// Within a slice with query rows [q0, q1) and keys [k0, k1) (nq = q1 - q0, nk = k1 - k0), query
// row i (relative i' = i - q0) sees key j (relative j' = j - k0) when
//   full:             always
//   causal:           j' <= i' + nk - nq   (the diagonal ends at the bottom-right corner)
//   inverse-causal:   j' >= i'             (the diagonal starts at the top-left corner)
//   bi-causal:        both
// so the keys a row sees through one slice are one contiguous span. A row sees the union of its
// slices' spans; the slices are checked never to give one key twice to a row.
//
// The query axis is cut at 0 and at every slice's q0 and q1 into segments: inside a segment the
// set of slices covering a row does not change, so a row finds its slices by one binary search,
// and a tile of rows inside one segment meets the same slices on every row. Rows from the last
// cut (the query extent) on belong to no segment and see no key.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define FFPA_SLICE_FN __host__ __device__ inline
#else
#define FFPA_SLICE_FN inline
#endif

namespace ffpa::slices {

// The values of ffpaSliceMask_t.
constexpr int32_t kMaskFull = 0;
constexpr int32_t kMaskCausal = 1;
constexpr int32_t kMaskInverseCausal = 2;
constexpr int32_t kMaskBicausal = 3;

struct SliceRange {
  int32_t q0, q1;  // query rows [q0, q1)
  int32_t k0, k1;  // keys [k0, k1)
  int32_t mask;    // an ffpaSliceMask_t
};

// Keys [begin, end) of one row; empty when end <= begin.
struct KeySpan {
  int64_t begin, end;
};

FFPA_SLICE_FN bool boundedAbove(int32_t mask) { return mask == kMaskCausal || mask == kMaskBicausal; }
FFPA_SLICE_FN bool boundedBelow(int32_t mask) { return mask == kMaskInverseCausal || mask == kMaskBicausal; }

// The keys row `row` (q0 <= row < q1) sees through slice `s`.
FFPA_SLICE_FN KeySpan keySpan(const SliceRange& s, int64_t row) {
  int64_t begin = s.k0;
  int64_t end = s.k1;
  // j' <= i' + nk - nq  <=>  j <= row + k1 - q1
  if (boundedAbove(s.mask) && row + s.k1 - s.q1 + 1 < end) end = row + s.k1 - s.q1 + 1;
  // j' >= i'  <=>  j >= k0 + row - q0
  if (boundedBelow(s.mask) && s.k0 + row - s.q0 > begin) begin = s.k0 + row - s.q0;
  if (end < begin) end = begin;
  return {begin, end};
}

// A tile of query rows for the tiled kernels: rows [rowBegin, rowEnd) of one segment (-1: rows
// no slice covers).
struct RowTile {
  int32_t rowBegin, rowEnd, segment;
};

// The row-tile tables are built for tiles of 16 << i rows, i < kRowTileSizes.
constexpr int kRowTileSizes = 4;

// Index of the table for tiles of `rows` rows, or -1 when none is built for that size.
FFPA_SLICE_FN int rowTileIndex(int rows) {
  for (int i = 0; i < kRowTileSizes; ++i) {
    if (rows == (16 << i)) return i;
  }
  return -1;
}

// The device (or host) form of a checked slice list.
struct SliceView {
  const SliceRange* slices = nullptr;     // null: no slices
  const int32_t* segmentStarts = nullptr; // [segments + 1]: 0, increasing; the last is the extent
  const int32_t* coverOffsets = nullptr;  // [segments + 1]: segment s's slices are
  const int32_t* cover = nullptr;         //   cover[coverOffsets[s] .. coverOffsets[s + 1])
  int32_t segments = 0;
  // Every segment cut into tiles of 16 << i rows (the last tile of a segment may be shorter).
  const RowTile* rowTiles[kRowTileSizes] = {};
  int32_t rowTileCounts[kRowTileSizes] = {};
};

// The smallest span holding the keys rows [firstRow, lastRow] of one slice see: the spans'
// begins and ends grow with the row, so it is [begin of the first row, end of the last), and
// empty exactly when every row's span is.
FFPA_SLICE_FN KeySpan keyHullOfRows(const SliceRange& s, int64_t firstRow, int64_t lastRow) {
  return {keySpan(s, firstRow).begin, keySpan(s, lastRow).end};
}

// Whether every one of rows [firstRow, lastRow] sees every key of [firstKey, lastKey] through
// slice `s` (so a tile of those keys needs no per-element mask).
FFPA_SLICE_FN bool seesWholeTile(const SliceRange& s, int64_t firstRow, int64_t lastRow, int64_t firstKey,
                                 int64_t lastKey) {
  return keySpan(s, lastRow).begin <= firstKey && keySpan(s, firstRow).end > lastKey;
}

// The segment holding `row`, or -1 for a row outside every segment (no slice covers it).
FFPA_SLICE_FN int32_t segmentOf(const SliceView& v, int64_t row) {
  if (v.segments == 0 || row < v.segmentStarts[0] || row >= v.segmentStarts[v.segments]) return -1;
  int32_t lo = 0;
  int32_t hi = v.segments;  // segmentStarts[lo] <= row < segmentStarts[hi]
  while (hi - lo > 1) {
    const int32_t mid = lo + (hi - lo) / 2;
    if (v.segmentStarts[mid] <= row) {
      lo = mid;
    } else {
      hi = mid;
    }
  }
  return lo;
}

// The smallest span holding every key `row` sees (empty when it sees none).
FFPA_SLICE_FN KeySpan keyHull(const SliceView& v, int32_t segment, int64_t row) {
  KeySpan hull{0, 0};
  if (segment < 0) return hull;
  bool any = false;
  for (int32_t c = v.coverOffsets[segment]; c < v.coverOffsets[segment + 1]; ++c) {
    const KeySpan span = keySpan(v.slices[v.cover[c]], row);
    if (span.end <= span.begin) continue;
    hull.begin = any && hull.begin < span.begin ? hull.begin : span.begin;
    hull.end = any && hull.end > span.end ? hull.end : span.end;
    any = true;
  }
  return hull;
}

// Whether `row` (in `segment`, from segmentOf) sees `key`.
FFPA_SLICE_FN bool sees(const SliceView& v, int32_t segment, int64_t row, int64_t key) {
  if (segment < 0) return false;
  for (int32_t c = v.coverOffsets[segment]; c < v.coverOffsets[segment + 1]; ++c) {
    const KeySpan span = keySpan(v.slices[v.cover[c]], row);
    if (key >= span.begin && key < span.end) return true;
  }
  return false;
}

}  // namespace ffpa::slices
