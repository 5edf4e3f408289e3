// A checked list of attention slices (see common/slice_mask.h for the rule) with the segments of
// its query and key axes, on the host and, once uploaded, in device memory. Immutable after construction but
// for the one upload; shared by the slices object and the attention descriptors it was attached
// to, so that neither outlives the device copy the other's calls read.
#pragma once

#include "common/slice_mask.h"

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

namespace ffpa::slices {

class SliceTable {
 public:
  // Checks `list` (every range, every mask, no key given twice to a row) and builds the segments.
  // Throws ffpa::Error naming the slice (`queryRanges[i]`, ...) at fault.
  explicit SliceTable(std::vector<SliceRange> list);
  ~SliceTable();
  SliceTable(const SliceTable&) = delete;
  SliceTable& operator=(const SliceTable&) = delete;

  // Copies the table to device `ordinal` (synchronously). Once, before the table is shared.
  void upload(int32_t ordinal);
  // The device the table was copied to, or -1 (made for a handle without a device).
  int32_t deviceOrdinal() const { return deviceOrdinal_; }

  // Data derived from this table under `key` (a context-parallel ring's slices per step, for one
  // ring shape), made by `make()` on first use and then kept as long as the table: calls that
  // read the table, graphs captured with it included, may read these too. Thread-safe; `make`
  // runs under the table's lock and may throw (nothing is kept then).
  using DerivedKey = std::array<int64_t, 6>;
  std::shared_ptr<const void> derived(const DerivedKey& key,
                                      const std::function<std::shared_ptr<const void>()>& make) const;

  const std::vector<SliceRange>& slices() const { return slices_; }
  int64_t queryExtent() const { return queryExtent_; }
  int64_t keyExtent() const { return keyExtent_; }
  int64_t visiblePairs() const { return visiblePairs_; }

  SliceView hostView() const;
  // The device copy's view. Throws BAD_PARAM naming `argument` when the table was not uploaded
  // to device `ordinal`.
  SliceView deviceView(int32_t ordinal, const char* argument) const;

 private:
  // One axis: segment starts, the slices covering each segment, its tiles of every size.
  struct Axis {
    std::vector<int32_t> segmentStarts;
    std::vector<int32_t> coverOffsets;
    std::vector<int32_t> cover;
    std::vector<AxisTile> tiles[kTileSizes];

    int32_t segments() const { return static_cast<int32_t>(segmentStarts.size()) - 1; }
    AxisView view() const;
  };
  // The axis of the ranges `range(slice)` gives ([q0, q1) or [k0, k1)), each cover sorted by
  // `before`.
  template <class Range, class Before>
  Axis buildAxis(Range range, Before before) const;
  void checkNoKeyTwice() const;
  void countVisiblePairs();

  std::vector<SliceRange> slices_;
  Axis queries_;
  Axis keys_;
  int64_t queryExtent_ = 0;
  int64_t keyExtent_ = 0;
  int64_t visiblePairs_ = 0;
  mutable std::mutex derivedMutex_;
  mutable std::vector<std::pair<DerivedKey, std::shared_ptr<const void>>> derived_;
  void* device_ = nullptr;  // slices, segment starts, cover offsets, cover: one allocation
  SliceView deviceView_;
  int32_t deviceOrdinal_ = -1;
};

// One axis of a sliced call as a tiled kernel walks it in tiles of `length` indices: the axis'
// table for that length, and the CTAs along x (the tiles, then the CTAs for the indices from the
// slices' extent to the axis' `size`; see ctaTile in common/slice_mask.h).
struct SlicedAxis {
  const AxisTile* tiles;
  int32_t tileCount;
  uint32_t ctas;
};
// `axis`: the query or key axis of a table's view (host or device); `extent`: its queryExtent()
// or keyExtent(). Throws INTERNAL_ERROR when no table is built for `length`.
SlicedAxis slicedAxis(const AxisView& axis, int length, int64_t size, int64_t extent);

// Slices from the arrays of ffpaSetAttentionSlices (masks may be null: all full), checked.
std::vector<SliceRange> slicesFromRanges(int32_t count, const int32_t* queryRanges,
                                         const int32_t* keyRanges, const int32_t* masks);
// One slice per non-empty sequence of a packed batch (ffpaSetAttentionSlicesFromOffsets).
std::vector<SliceRange> slicesFromOffsets(int32_t sequences, const int32_t* queryOffsets,
                                          const int32_t* keyOffsets, int32_t mask);

}  // namespace ffpa::slices
