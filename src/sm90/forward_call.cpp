#include "sm90/forward_call.h"

#include "core/error.h"
#include "core/launch_grid.h"
#include "sm80/resolve_common.h"
#include "sm90/row_maps.h"
#include "sm90/sliced_tiles.h"

#include <cstdint>

namespace ffpa::sm90 {

int instanceHeadDimV(int64_t headDimV) {
  const int64_t multiple = kBlockColumns * clusterSizeFor(static_cast<int>(headDimV));
  const int64_t rounded = (headDimV + multiple - 1) / multiple * multiple;
  return static_cast<int>(rounded < 2 * kBlockColumns ? 2 * kBlockColumns : rounded);  // a block per consumer
}

int kvSharingFor(const AttentionProblem& p, bool multicast) {
  const bool applies = multicast && clusterSizeFor(static_cast<int>(p.headDimV)) == 1 && p.slices == nullptr &&
                       p.seqQ > kRows;
  return applies ? kKvSharingCtas : 1;
}

int64_t gridBlocksX(const AttentionProblem& p, int kvSharing) {
  const int64_t rowTiles = (p.seqQ + kRows - 1) / kRows;
  return (rowTiles + kvSharing - 1) / kvSharing * kvSharing * clusterSizeFor(static_cast<int>(p.headDimV));
}

std::string forwardRefusal(const AttentionProblem& p) {
  if (p.dtype != FFPA_DATA_TYPE_FLOAT16 && p.dtype != FFPA_DATA_TYPE_BFLOAT16) {
    return "the sm90 forward computes fp16 and bf16";
  }
  if (p.headDimV < kMinForwardHeadDimV || p.headDimV > kMaxForwardHeadDimV) {
    return cat("d_v = ", p.headDimV, " is outside the sm90 forward's ", kMinForwardHeadDimV, "..", kMaxForwardHeadDimV);
  }
  if (p.headDimV % 16 != 0) return cat("d_v = ", p.headDimV, " is not a multiple of 16");
  const int maxQk = maxHeadDimQk(clusterSizeFor(static_cast<int>(p.headDimV)));
  if (p.headDimQk % 16 != 0 || p.headDimQk > maxQk) {
    return cat("d_qk = ", p.headDimQk, " is not a multiple of 16 up to ", maxQk, " (with d_v = ", p.headDimV, ")");
  }
  if (std::string why = sizeRefusal(p); !why.empty()) return why;
  if (!rowMapAddressable(p.q, p.headDimQk, p.seqQ, p.headsQ, p.batch) ||
      !rowMapAddressable(p.k, p.headDimQk, p.seqKv, p.headsKv, p.batch) ||
      !rowMapAddressable(p.v, p.headDimV, p.seqKv, p.headsKv, p.batch)) {
    return "TMA needs Q, K and V strides (batch, head, row) that are positive multiples of 16 bytes";
  }
  // O is written in 4-byte element pairs, as by the mma.sync kernels.
  if (auto why = sm80::strideProblem({{"O", p.o, 2}})) return *why;
  return {};
}

bool overlapApplies(const AttentionProblem&, int kvSharing) { return kvSharing == 1; }

ForwardCall describeForwardCall(const AttentionProblem& p, const TensorArgs& tensors, bool gridDnhb,
                                int exp2Emulated, int kvSharing, int overlap) {
  ForwardCall call{};
  ForwardArguments& a = call.arguments;
  a.o = tensors.out;
  a.lse = p.hasLse ? tensors.lseOut : nullptr;
  for (int i = 0; i < 3; ++i) {
    a.oStrides[i] = p.o[i];
    a.lseStrides[i] = p.lse[i];
  }
  copyProblemSizes(p, a);
  a.gridDnhb = gridDnhb;
  a.exp2Emulated = exp2Emulated;
  require(overlap == 0 || overlapApplies(p, kvSharing), FFPA_STATUS_INTERNAL_ERROR,
          "the sm90 forward overlaps its consumers only in a kernel that shares no K and V");
  a.overlap = overlap;
  // The kernel that shares K and V walks the keys from 0: it serves no slices (kvSharingFor).
  require(kvSharing == 1 || p.slices == nullptr, FFPA_STATUS_INTERNAL_ERROR,
          "the sm90 forward shares K and V between row tiles only without attention slices");
  call.kvSharing = kvSharing;
  call.clusterSize = kvSharing > 1 ? kvSharing : clusterSizeFor(a.headDimV);
  forwardLayout(a);
  call.q = rowMap(tensors.q, p.headDimQk, p.seqQ, p.headsQ, p.batch, p.q);
  call.k = rowMap(tensors.k, p.headDimQk, p.seqKv, p.headsKv, p.batch, p.k);
  call.v = rowMap(tensors.v, p.headDimV, p.seqKv, p.headsKv, p.batch, p.v);
  // Sharing K and V (no slices): the row tiles in whole pairs, the last CTA maybe past the rows.
  const int64_t ctas = kvSharing > 1 ? gridBlocksX(p, kvSharing)
                                     : ctasAlong(p, tensors, OwnedAxis::queries, call.clusterSize, a.sliced);
  gridExtents(ctas, p.batch, p.headsQ, gridDnhb, call.grid);
  return call;
}

}  // namespace ffpa::sm90
