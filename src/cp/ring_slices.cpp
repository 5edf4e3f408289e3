#include "cp/ring_slices.h"

#include <algorithm>
#include <limits>

namespace ffpa::cp {

using slices::SliceRange;

std::vector<SliceRange> clipSlice(const SliceRange& s, RowRange rows, RowRange keys) {
  const int64_t a = std::max<int64_t>(s.q0, rows.begin), b = std::min<int64_t>(s.q1, rows.end);
  const int64_t c = std::max<int64_t>(s.k0, keys.begin), e = std::min<int64_t>(s.k1, keys.end);
  if (a >= b || c >= e) return {};
  const bool upper = slices::boundedAbove(s.mask);  // j <= i + above
  const bool lower = slices::boundedBelow(s.mask);  // j >= i + below
  const int64_t above = int64_t{s.k1} - s.q1;
  const int64_t below = int64_t{s.k0} - s.q0;
  // Rows [a, upperEnd) have their last key (i + above) left of e: the causal bound limits them.
  // Rows [lowerBegin, b) have their first key (i + below) at or right of c: the inverse bound
  // limits them.
  const int64_t upperEnd = upper ? std::clamp(e - above, a, b) : a;
  const int64_t lowerBegin = lower ? std::clamp(c - below, a, b) : b;
  int64_t cuts[4] = {a, std::min(upperEnd, lowerBegin), std::max(upperEnd, lowerBegin), b};
  std::vector<SliceRange> pieces;
  for (int i = 0; i < 3; ++i) {
    const int64_t p0 = cuts[i], p1 = cuts[i + 1];
    if (p0 >= p1) continue;
    const bool limitedAbove = p1 <= upperEnd;
    const bool limitedBelow = p0 >= lowerBegin;
    // The piece's corners on the original diagonals: k1' - p1 = above, k0' - p0 = below.
    const int64_t k0 = limitedBelow ? p0 + below : c;
    const int64_t k1 = limitedAbove ? p1 + above : e;
    if (k0 >= k1) continue;  // no row of the piece sees a key
    const int32_t mask = limitedAbove && limitedBelow ? slices::kMaskBicausal
                         : limitedAbove               ? slices::kMaskCausal
                         : limitedBelow               ? slices::kMaskInverseCausal
                                                      : slices::kMaskFull;
    pieces.push_back({static_cast<int32_t>(p0), static_cast<int32_t>(p1), static_cast<int32_t>(k0),
                      static_cast<int32_t>(k1), mask});
  }
  return pieces;
}

StepSlices stepSlices(const std::vector<SliceRange>& global, const RingShape& shape, int32_t source) {
  const auto queryChunks = shardRanges(shape.sharding, shape.ranks, shape.rank, shape.localQueries);
  const auto keyChunks = shardRanges(shape.sharding, shape.ranks, source, shape.localKeys);
  StepSlices step;
  int64_t localQuery = 0;
  for (const RowRange& q : queryChunks) {
    int64_t localKey = 0;
    for (const RowRange& k : keyChunks) {
      // Global (row, key) of this rectangle to local: a translation.
      const int64_t rowShift = localQuery - q.begin, keyShift = localKey - k.begin;
      for (const SliceRange& s : global) {
        for (SliceRange piece : clipSlice(s, q, k)) {
          piece.q0 = static_cast<int32_t>(piece.q0 + rowShift);
          piece.q1 = static_cast<int32_t>(piece.q1 + rowShift);
          piece.k0 = static_cast<int32_t>(piece.k0 + keyShift);
          piece.k1 = static_cast<int32_t>(piece.k1 + keyShift);
          step.slices.push_back(piece);
        }
      }
      localKey += k.size();
    }
    localQuery += q.size();
  }
  if (step.slices.empty()) return step;
  // The call covers the rows and keys the slices reach, the slices relative to its corner.
  int32_t q0 = std::numeric_limits<int32_t>::max(), k0 = q0, q1 = 0, k1 = 0;
  for (const SliceRange& s : step.slices) {
    q0 = std::min(q0, s.q0);
    q1 = std::max(q1, s.q1);
    k0 = std::min(k0, s.k0);
    k1 = std::max(k1, s.k1);
  }
  for (SliceRange& s : step.slices) {
    s.q0 -= q0;
    s.q1 -= q0;
    s.k0 -= k0;
    s.k1 -= k0;
  }
  step.queries = {q0, q1};
  step.keys = {k0, k1};
  return step;
}

}  // namespace ffpa::cp
