#include "sm90/sliced_tiles.h"

#include "core/slice_table.h"

namespace ffpa::sm90 {

int64_t ctasAlong(const AttentionProblem& p, const TensorArgs& tensors, OwnedAxis axis, int clusterSize,
                  SlicedTiles& sliced) {
  static_assert(kRows == kKeys, "one tile length on both axes");
  const bool queries = axis == OwnedAxis::queries;
  const int64_t length = queries ? p.seqQ : p.seqKv;
  if (p.slices == nullptr) return (length + kRows - 1) / kRows * clusterSize;
  const slices::SlicedAxis owned =
      queries ? slices::slicedAxis(tensors.slices.queries, kRows, length, p.slices->queryExtent())
              : slices::slicedAxis(tensors.slices.keys, kKeys, length, p.slices->keyExtent());
  sliced = {tensors.slices, owned.tiles, owned.tileCount};
  return int64_t(owned.ctas) * clusterSize;
}

}  // namespace ffpa::sm90
