#include "sm90/forward_call.h"

#include "core/error.h"
#include "core/launch_grid.h"
#include "sm80/resolve_common.h"
#include "sm90/row_maps.h"
#include "sm90/sliced_tiles.h"

#include <cstdint>
#include <limits>

namespace ffpa::sm90 {

namespace {

// `headDimV` rounded up to a multiple of `multiple`, at least `least`.
int roundedHeadDimV(int64_t headDimV, int64_t multiple, int64_t least) {
  const int64_t rounded = (headDimV + multiple - 1) / multiple * multiple;
  return static_cast<int>(rounded < least ? least : rounded);
}

}  // namespace

int instanceHeadDimV(int64_t headDimV) {
  // A block per consumer at least.
  return roundedHeadDimV(headDimV, kBlockColumns * clusterSizeFor(static_cast<int>(headDimV)), 2 * kBlockColumns);
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

int64_t forwardGridBlocksX(const AttentionProblem& p, int kvSharing, bool rowSplit) {
  return rowSplit ? (p.seqQ + kRowSplitRows - 1) / kRowSplitRows : gridBlocksX(p, kvSharing);
}

int rowSplitHeadDimV(int64_t headDimV) { return roundedHeadDimV(headDimV, kBlockColumns, kBlockColumns); }

ForwardArguments forwardLayoutFor(const AttentionProblem& p, bool rowSplit, int tileKeys) {
  ForwardArguments a{};
  a.headDimQk = static_cast<int32_t>(p.headDimQk);
  a.headDimV = static_cast<int32_t>(p.headDimV);
  if (rowSplit) {
    forwardRowSplitLayout(a, tileKeys);
  } else {
    forwardLayout(a);
  }
  return a;
}

namespace {

// What both arrangements need of the tensors: sizes, and strides TMA can step.
std::string tensorRefusal(const AttentionProblem& p) {
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

std::string dtypeRefusal(const AttentionProblem& p) {
  if (p.dtype != FFPA_DATA_TYPE_FLOAT16 && p.dtype != FFPA_DATA_TYPE_BFLOAT16) {
    return "the sm90 forward computes fp16 and bf16";
  }
  return {};
}

}  // namespace

std::string forwardRefusal(const AttentionProblem& p) {
  if (std::string why = dtypeRefusal(p); !why.empty()) return why;
  if (p.headDimV < kMinForwardHeadDimV || p.headDimV > kMaxForwardHeadDimV) {
    return cat("d_v = ", p.headDimV, " is outside the sm90 forward's ", kMinForwardHeadDimV, "..", kMaxForwardHeadDimV);
  }
  if (p.headDimV % 16 != 0) return cat("d_v = ", p.headDimV, " is not a multiple of 16");
  const int maxQk = maxHeadDimQk(clusterSizeFor(static_cast<int>(p.headDimV)));
  if (p.headDimQk % 16 != 0 || p.headDimQk > maxQk) {
    return cat("d_qk = ", p.headDimQk, " is not a multiple of 16 up to ", maxQk, " (with d_v = ", p.headDimV, ")");
  }
  return tensorRefusal(p);
}

std::string rowSplitRefusal(const AttentionProblem& p) {
  if (std::string why = dtypeRefusal(p); !why.empty()) return why;
  if (p.headDimV > kRowSplitMaxHeadDimV) return cat("d_v = ", p.headDimV, " is above the row split's ", kRowSplitMaxHeadDimV);
  if (p.headDimV % 16 != 0 || p.headDimQk % 16 != 0) {
    return cat("d_qk = ", p.headDimQk, " and d_v = ", p.headDimV, " must be multiples of 16");
  }
  if (p.slices != nullptr) return "the row split serves no attention slices";
  // Its CTAs' row ranges, [128 x, 128 x + 128), stay within int.
  if (p.seqQ > std::numeric_limits<int32_t>::max() - kRowSplitRows) return "the row split needs seqQ below 2^31 - 128";
  if (const uint32_t bytes = forwardLayoutFor(p, true).sharedBytes; bytes > kMaxSharedBytes) {
    return cat("the row split needs ", bytes, " bytes of shared memory at d_qk = ", p.headDimQk, " (at most ",
               kMaxSharedBytes, ")");
  }
  return tensorRefusal(p);
}

bool overlapApplies(const AttentionProblem&, int kvSharing) { return kvSharing == 1; }

// With one K buffer, S(j + 1), which P V(j) is issued behind, waits for K(j + 1) to load after
// both consumers' S(j) (d_qk above 256); not yet timed against the split of the columns.
bool rowSplitByDefault(const AttentionProblem& p) {
  if (!rowSplitRefusal(p).empty()) return false;
  return forwardLayoutFor(p, true).kBuffers == 2 || !forwardRefusal(p).empty();
}

bool rowSplitWideKeysServe(const AttentionProblem& p) {
  return rowSplitRefusal(p).empty() && rowSplitHasWideKeys(rowSplitHeadDimV(p.headDimV)) &&
         forwardLayoutFor(p, true, kRowSplitWideKeys).sharedBytes <= kMaxSharedBytes;
}

// With one K buffer of 128 keys, S(j + 1) waits for K(j + 1), which loads only once both
// consumers' S(j) is done: 64 keys with two buffers instead (d_qk 208..320 at d_v 128).
int rowSplitTileKeysByDefault(const AttentionProblem& p) {
  return rowSplitWideKeysServe(p) && forwardLayoutFor(p, true, kRowSplitWideKeys).kBuffers == 2 ? kRowSplitWideKeys
                                                                                                 : kKeys;
}

ForwardCall describeForwardCall(const AttentionProblem& p, const TensorArgs& tensors, bool gridDnhb,
                                int exp2Emulated, int kvSharing, int overlap, bool rowSplit, int pingpong,
                                int tileKeys, const KeySplitPlan& split, void* workspace) {
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
  require(pingpong == 0 || rowSplit, FFPA_STATUS_INTERNAL_ERROR, "only the sm90 forward's row split takes turns");
  a.pingpong = pingpong;
  // The kernel that shares K and V walks the keys from 0: it serves no slices (kvSharingFor).
  require(kvSharing == 1 || p.slices == nullptr, FFPA_STATUS_INTERNAL_ERROR,
          "the sm90 forward shares K and V between row tiles only without attention slices");
  call.kvSharing = kvSharing;
  call.clusterSize = kvSharing > 1 ? kvSharing : clusterSizeFor(a.headDimV);
  if (rowSplit) {
    require(rowSplitRefusal(p).empty() && kvSharing == 1 && overlap == 0, FFPA_STATUS_INTERNAL_ERROR,
            "the sm90 forward's row split serves d_v up to 256 without slices, K and V sharing or overlap");
    require(tileKeys == kKeys || (tileKeys == kRowSplitWideKeys && rowSplitWideKeysServe(p)),
            FFPA_STATUS_INTERNAL_ERROR,
            "the sm90 forward's row split takes KV tiles of 64 keys, or 128 where they fit");
    call.clusterSize = 1;
    forwardRowSplitLayout(a, tileKeys);
  } else {
    require(tileKeys == kKeys, FFPA_STATUS_INTERNAL_ERROR, "the sm90 forward's split of the columns takes 64 keys");
    forwardLayout(a);
  }
  call.q = rowMap(tensors.q, p.headDimQk, p.seqQ, p.headsQ, p.batch, p.q);
  call.k = rowMap(tensors.k, p.headDimQk, p.seqKv, p.headsKv, p.batch, p.k);
  call.v = rowMap(tensors.v, p.headDimV, p.seqKv, p.headsKv, p.batch, p.v);
  // Sharing K and V (no slices): the row tiles in whole pairs, the last CTA maybe past the rows.
  const int64_t ctas = rowSplit || kvSharing > 1
                           ? forwardGridBlocksX(p, kvSharing, rowSplit)
                           : ctasAlong(p, tensors, OwnedAxis::queries, call.clusterSize, a.sliced);
  gridExtents(ctas, p.batch, p.headsQ, gridDnhb, call.grid);
  a.split = KeySplit{};
  if (split.splits > 1) {
    require(!gridDnhb && kvSharing == 1 && p.slices == nullptr, FFPA_STATUS_INTERNAL_ERROR,
            "the sm90 forward splits the keys only on the (N/Br, B*H) grid, without K and V sharing or slices");
    usePartialOutputs(split, p, workspace, a);
    call.grid[2] = static_cast<uint32_t>(split.splits);
  }
  return call;
}

}  // namespace ffpa::sm90
