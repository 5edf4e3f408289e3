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
// so the keys a row sees through one slice are one contiguous span, and so are the rows that
// see one key. A row sees the union of its slices' spans; the slices are checked never to give
// one key twice to a row, so summing over the slices one by one, each with its own rule, counts
// every visible (row, key) pair exactly once.
//
// Each axis is cut into segments: the query axis at 0 and at every slice's q0 and q1, the key
// axis at 0 and at every k0 and k1. Inside a segment the set of slices covering an index does
// not change, so an index finds its slices by one binary search, and a tile of indices inside
// one segment meets the same slices everywhere. Indices from an axis' last cut (its extent) on
// belong to no segment: rows there see no key, keys there are seen by no row.
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

// A tile of one axis for the tiled kernels: indices [begin, end) of one segment (-1: indices no
// slice covers).
struct AxisTile {
  int32_t begin, end, segment;
};

// The tile tables are built for tiles of 16 << i indices, i < kTileSizes.
constexpr int kTileSizes = 4;

// Index of the table for tiles of `size` indices, or -1 when none is built for that size.
FFPA_SLICE_FN int tileTableIndex(int size) {
  for (int i = 0; i < kTileSizes; ++i) {
    if (size == (16 << i)) return i;
  }
  return -1;
}

// One axis of a checked slice list, cut into segments.
struct AxisView {
  const int32_t* segmentStarts = nullptr; // [segments + 1]: 0, increasing; the last is the extent
  const int32_t* coverOffsets = nullptr;  // [segments + 1]: segment s's slices are
  const int32_t* cover = nullptr;         //   cover[coverOffsets[s] .. coverOffsets[s + 1])
  int32_t segments = 0;
  // Every segment cut into tiles of 16 << i indices (the last tile of a segment may be shorter).
  const AxisTile* tiles[kTileSizes] = {};
  int32_t tileCounts[kTileSizes] = {};
};

// The device (or host) form of a checked slice list. The query axis' covers are sorted by k0,
// the key axis' by q0.
struct SliceView {
  const SliceRange* slices = nullptr;  // null: no slices
  AxisView queries;
  AxisView keys;
};

// The rows [begin, end) that see key `key` through slice `s` (empty for a key outside [k0, k1)):
// the mirror of keySpan.
FFPA_SLICE_FN KeySpan querySpan(const SliceRange& s, int64_t key) {
  if (key < s.k0 || key >= s.k1) return {s.q0, s.q0};
  int64_t begin = s.q0;
  int64_t end = s.q1;
  // j <= i + k1 - q1  <=>  i >= j - k1 + q1
  if (boundedAbove(s.mask) && key - s.k1 + s.q1 > begin) begin = key - s.k1 + s.q1;
  // j >= k0 + i - q0  <=>  i <= j - k0 + q0
  if (boundedBelow(s.mask) && key - s.k0 + s.q0 + 1 < end) end = key - s.k0 + s.q0 + 1;
  if (end < begin) end = begin;
  return {begin, end};
}

// The smallest span holding the keys rows [firstRow, lastRow] of one slice see: the spans'
// begins and (clamped) ends grow with the row, so it is [begin of the first row, end of the
// last). It may hold keys no row sees (a bi-causal slice with nq > nk has an empty span on every
// row): the per-element mask hides them.
FFPA_SLICE_FN KeySpan keyHullOfRows(const SliceRange& s, int64_t firstRow, int64_t lastRow) {
  return {keySpan(s, firstRow).begin, keySpan(s, lastRow).end};
}

// Whether every one of rows [firstRow, lastRow] sees every key of [firstKey, lastKey] through
// slice `s` (so a tile of those keys needs no per-element mask).
FFPA_SLICE_FN bool seesWholeTile(const SliceRange& s, int64_t firstRow, int64_t lastRow, int64_t firstKey,
                                 int64_t lastKey) {
  return keySpan(s, lastRow).begin <= firstKey && keySpan(s, firstRow).end > lastKey;
}

// The smallest span holding the rows that see keys [firstKey, lastKey] (inside [k0, k1)) through
// slice `s`: the mirror of keyHullOfRows.
FFPA_SLICE_FN KeySpan queryHullOfKeys(const SliceRange& s, int64_t firstKey, int64_t lastKey) {
  return {querySpan(s, firstKey).begin, querySpan(s, lastKey).end};
}

// The segment of axis `a` holding `index`, or -1 for an index outside every segment.
FFPA_SLICE_FN int32_t segmentOf(const AxisView& a, int64_t index) {
  if (a.segments == 0 || index < a.segmentStarts[0] || index >= a.segmentStarts[a.segments]) return -1;
  int32_t lo = 0;
  int32_t hi = a.segments;  // segmentStarts[lo] <= index < segmentStarts[hi]
  while (hi - lo > 1) {
    const int32_t mid = lo + (hi - lo) / 2;
    if (a.segmentStarts[mid] <= index) {
      lo = mid;
    } else {
      hi = mid;
    }
  }
  return lo;
}

// The smallest span holding every key `row` sees (empty when it sees none); `segment` is the
// row's in the query axis.
FFPA_SLICE_FN KeySpan keyHull(const SliceView& v, int32_t segment, int64_t row) {
  KeySpan hull{0, 0};
  if (segment < 0) return hull;
  bool any = false;
  const AxisView& rows = v.queries;
  for (int32_t c = rows.coverOffsets[segment]; c < rows.coverOffsets[segment + 1]; ++c) {
    const KeySpan span = keySpan(v.slices[rows.cover[c]], row);
    if (span.end <= span.begin) continue;
    hull.begin = any && hull.begin < span.begin ? hull.begin : span.begin;
    hull.end = any && hull.end > span.end ? hull.end : span.end;
    any = true;
  }
  return hull;
}

// Whether `row` (in query segment `segment`, from segmentOf(v.queries, row)) sees `key`.
FFPA_SLICE_FN bool sees(const SliceView& v, int32_t segment, int64_t row, int64_t key) {
  if (segment < 0) return false;
  const AxisView& rows = v.queries;
  for (int32_t c = rows.coverOffsets[segment]; c < rows.coverOffsets[segment + 1]; ++c) {
    const KeySpan span = keySpan(v.slices[rows.cover[c]], row);
    if (key >= span.begin && key < span.end) return true;
  }
  return false;
}

// The tiled kernels' walks. A CTA owns a tile of one axis (rows for the forward and dQ kernels,
// keys for the dK/dV kernel) inside one segment; it visits, for each slice covering the segment
// in cover order, the hull of what its indices see through that slice on the other axis, in
// tiles of `length`, masking each tile by that slice's rule alone.

// The tile CTA x works on: tile x of `tiles` (the axis' table for its tile length), or for the
// CTAs after them the indices from the axis' extent on, which no slice covers, clipped to `size`.
FFPA_SLICE_FN AxisTile ctaTile(const AxisView& axis, const AxisTile* tiles, int32_t count, int32_t x,
                               int32_t length, int64_t size) {
  if (x < count) return tiles[x];
  const int32_t begin = axis.segmentStarts[axis.segments] + (x - count) * length;
  return {begin, static_cast<int32_t>(begin + length < size ? begin + length : size), -1};
}

// What indices [first, last] of the `rows` axis (else the key axis) see through slice `s`.
FFPA_SLICE_FN KeySpan hullThrough(const SliceRange& s, bool rows, int64_t first, int64_t last) {
  return rows ? keyHullOfRows(s, first, last) : queryHullOfKeys(s, first, last);
}

FFPA_SLICE_FN int32_t tilesOfSpan(const KeySpan& span, int32_t length) {
  return span.end > span.begin ? static_cast<int32_t>((span.end - span.begin + length - 1) / length) : 0;
}

// A tile of a walk: `length` indices of the other axis from `first`, seen through slice `slice`.
struct WalkTile {
  int64_t first;
  int32_t slice;
};

// The number of tiles of the walk of indices [first, last] of segment `segment` (of the query
// axis when `rows`, else of the key axis); 0 for segment -1.
FFPA_SLICE_FN int32_t walkTiles(const SliceView& v, bool rows, int32_t segment, int64_t first, int64_t last,
                                int32_t length) {
  if (segment < 0) return 0;
  const AxisView& axis = rows ? v.queries : v.keys;
  int32_t tiles = 0;
  for (int32_t c = axis.coverOffsets[segment]; c < axis.coverOffsets[segment + 1]; ++c) {
    tiles += tilesOfSpan(hullThrough(v.slices[axis.cover[c]], rows, first, last), length);
  }
  return tiles;
}

// Tile `tile` (< walkTiles(...)) of that walk.
FFPA_SLICE_FN WalkTile walkTile(const SliceView& v, bool rows, int32_t segment, int64_t first, int64_t last,
                                int32_t length, int32_t tile) {
  const AxisView& axis = rows ? v.queries : v.keys;
  for (int32_t c = axis.coverOffsets[segment]; c < axis.coverOffsets[segment + 1]; ++c) {
    const int32_t slice = axis.cover[c];
    const KeySpan hull = hullThrough(v.slices[slice], rows, first, last);
    const int32_t tiles = tilesOfSpan(hull, length);
    if (tile < tiles) return {hull.begin + int64_t(tile) * length, slice};
    tile -= tiles;
  }
  return {0, -1};  // not reached
}

}  // namespace ffpa::slices
