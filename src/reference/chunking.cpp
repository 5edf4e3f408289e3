#include "reference/chunking.h"

#include "core/error.h"
#include "core/workspace_layout.h"

#include <algorithm>
#include <cstdint>

namespace ffpa::reference {
namespace {

constexpr int64_t kFloatBytes = 4;
// cuBLASLt takes batch counts as int32, and the stacked rows of a unit (its m dimension) are kept
// within int32 as well.
constexpr int64_t kMaxGemmExtent = INT32_MAX;
// Past this the scratch could not be addressed (and no device has it).
constexpr __int128 kMaxScratchBytes = __int128{1} << 62;

// fp32 elements a chunk needs: a part per unit (its K/V, and for the backward dK/dV) and a part
// per stacked query row (its Q, O, scores, ...). Each term fits int64: extents are below 2^31.
struct ScratchCost {
  int64_t perUnit;
  int64_t perStackedRow;
};

ScratchCost costOf(const AttentionProblem& p) {
  const int64_t kv = p.seqKv * (p.headDimQk + p.headDimV);
  if (p.direction == Direction::Forward) {
    return {kv, p.headDimQk + p.seqKv + p.headDimV};
  }
  // K, V and dK, dV per unit; Q, dO, P, dS, dQ and delta per stacked row.
  return {2 * kv, 2 * p.headDimQk + p.headDimV + 2 * p.seqKv + 1};
}

// Bytes of `count` floats, refusing a problem whose scratch could not exist.
size_t floats(__int128 count) {
  require(count * kFloatBytes < kMaxScratchBytes, FFPA_STATUS_NOT_SUPPORTED_SHAPE,
          "the reference path's scratch for this problem exceeds 2^62 bytes");
  return static_cast<size_t>(count * kFloatBytes);
}

}  // namespace

ChunkPlan chooseChunks(const AttentionProblem& p, int64_t budgetBytes) {
  const ScratchCost cost = costOf(p);
  const __int128 budget = budgetBytes / kFloatBytes;
  ChunkPlan chunks;
  chunks.units = p.batch * p.headsKv;
  chunks.group = p.groupSize();
  const int64_t maxRows = std::min<int64_t>(p.seqQ, kMaxGemmExtent / chunks.group);
  const __int128 wholeUnit = cost.perUnit + __int128{chunks.group} * maxRows * cost.perStackedRow;
  if (wholeUnit <= budget) {
    chunks.rowsPerChunk = maxRows;
    const __int128 fitting = budget / wholeUnit;
    chunks.unitsPerChunk = static_cast<int64_t>(std::min<__int128>(fitting, std::min(chunks.units, kMaxGemmExtent)));
  } else {
    // One unit at a time, as many rows as fit; at least one row even past the budget.
    chunks.unitsPerChunk = 1;
    const __int128 rows = (budget - cost.perUnit) / (__int128{chunks.group} * cost.perStackedRow);
    chunks.rowsPerChunk = static_cast<int64_t>(std::clamp<__int128>(rows, 1, maxRows));
  }
  return chunks;
}

ForwardBuffers forwardBuffers(const AttentionProblem& p, const ChunkPlan& c) {
  const __int128 stacked = __int128{c.unitsPerChunk} * c.group * c.rowsPerChunk;
  WorkspaceLayout layout;
  ForwardBuffers b{};
  b.q = layout.add(floats(stacked * p.headDimQk));
  b.k = layout.add(floats(__int128{c.unitsPerChunk} * p.seqKv * p.headDimQk));
  b.v = layout.add(floats(__int128{c.unitsPerChunk} * p.seqKv * p.headDimV));
  b.scores = layout.add(floats(stacked * p.seqKv));
  b.out = layout.add(floats(stacked * p.headDimV));
  b.lt = layout.add(kCublasLtWorkspaceBytes);
  b.total = layout.total();
  return b;
}

BackwardBuffers backwardBuffers(const AttentionProblem& p, const ChunkPlan& c) {
  const __int128 stacked = __int128{c.unitsPerChunk} * c.group * c.rowsPerChunk;
  const __int128 kvRows = __int128{c.unitsPerChunk} * p.seqKv;
  WorkspaceLayout layout;
  BackwardBuffers b{};
  b.q = layout.add(floats(stacked * p.headDimQk));
  b.k = layout.add(floats(kvRows * p.headDimQk));
  b.v = layout.add(floats(kvRows * p.headDimV));
  b.dOut = layout.add(floats(stacked * p.headDimV));
  b.probs = layout.add(floats(stacked * p.seqKv));
  b.dScores = layout.add(floats(stacked * p.seqKv));
  b.dq = layout.add(floats(stacked * p.headDimQk));
  b.dk = layout.add(floats(kvRows * p.headDimQk));
  b.dv = layout.add(floats(kvRows * p.headDimV));
  b.delta = layout.add(floats(stacked));
  b.lt = layout.add(kCublasLtWorkspaceBytes);
  b.total = layout.total();
  return b;
}

std::string describeChunks(const ChunkPlan& c, int64_t seqQ) {
  return cat("fp32 cuBLASLt GEMMs; units=", c.units, " group=", c.group, " units/chunk=",
             c.unitsPerChunk, " rows/chunk=", c.rowsPerChunk, " chunks=", c.chunkCount(seqQ));
}

}  // namespace ffpa::reference
