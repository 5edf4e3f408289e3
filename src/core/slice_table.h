// A checked list of attention slices (see common/slice_mask.h for the rule) with its query-axis
// segments, on the host and, once uploaded, in device memory. Immutable after construction but
// for the one upload; shared by the slices object and the attention descriptors it was attached
// to, so that neither outlives the device copy the other's calls read.
#pragma once

#include "common/slice_mask.h"

#include <cstdint>
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

  const std::vector<SliceRange>& slices() const { return slices_; }
  int64_t queryExtent() const { return queryExtent_; }
  int64_t keyExtent() const { return keyExtent_; }
  int64_t visiblePairs() const { return visiblePairs_; }
  int32_t segments() const { return static_cast<int32_t>(segmentStarts_.size()) - 1; }

  SliceView hostView() const;
  // The device copy's view. Throws BAD_PARAM naming `argument` when the table was not uploaded
  // to device `ordinal`.
  SliceView deviceView(int32_t ordinal, const char* argument) const;

 private:
  void buildSegments();
  void buildRowTiles();
  void checkNoKeyTwice() const;
  void countVisiblePairs();

  std::vector<SliceRange> slices_;
  std::vector<int32_t> segmentStarts_;
  std::vector<int32_t> coverOffsets_;
  std::vector<int32_t> cover_;
  std::vector<RowTile> rowTiles_[kRowTileSizes];
  int64_t queryExtent_ = 0;
  int64_t keyExtent_ = 0;
  int64_t visiblePairs_ = 0;
  void* device_ = nullptr;  // slices, segment starts, cover offsets, cover: one allocation
  SliceView deviceView_;
  int32_t deviceOrdinal_ = -1;
};

// Slices from the arrays of ffpaSetAttentionSlices (masks may be null: all full), checked.
std::vector<SliceRange> slicesFromRanges(int32_t count, const int32_t* queryRanges,
                                         const int32_t* keyRanges, const int32_t* masks);
// One slice per non-empty sequence of a packed batch (ffpaSetAttentionSlicesFromOffsets).
std::vector<SliceRange> slicesFromOffsets(int32_t sequences, const int32_t* queryOffsets,
                                          const int32_t* keyOffsets, int32_t mask);

}  // namespace ffpa::slices
