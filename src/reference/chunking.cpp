#include "reference/chunking.h"

#include "core/error.h"
#include "core/workspace_layout.h"

#include <algorithm>

namespace ffpa::reference {
namespace {

constexpr int64_t kFloatBytes = 4;

// fp32 elements a chunk needs: a part per unit (its K/V, and for the backward dK/dV) and a part
// per stacked query row (its Q, O, scores, ...).
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

size_t floats(int64_t count) { return static_cast<size_t>(count) * kFloatBytes; }

}  // namespace

ChunkPlan chooseChunks(const AttentionProblem& p, int64_t budgetBytes) {
  const ScratchCost cost = costOf(p);
  const int64_t budget = budgetBytes / kFloatBytes;
  ChunkPlan chunks;
  chunks.units = p.batch * p.headsKv;
  chunks.group = p.groupSize();
  const int64_t wholeUnit = cost.perUnit + chunks.group * p.seqQ * cost.perStackedRow;
  if (wholeUnit <= budget) {
    chunks.rowsPerChunk = p.seqQ;
    chunks.unitsPerChunk = std::min(chunks.units, budget / wholeUnit);
  } else {
    // One unit at a time, as many rows as fit; at least one row even past the budget.
    chunks.unitsPerChunk = 1;
    const int64_t rows = (budget - cost.perUnit) / (chunks.group * cost.perStackedRow);
    chunks.rowsPerChunk = std::clamp<int64_t>(rows, 1, p.seqQ);
  }
  return chunks;
}

ForwardBuffers forwardBuffers(const AttentionProblem& p, const ChunkPlan& c) {
  const int64_t stacked = c.unitsPerChunk * c.group * c.rowsPerChunk;
  WorkspaceLayout layout;
  ForwardBuffers b{};
  b.q = layout.add(floats(stacked * p.headDimQk));
  b.k = layout.add(floats(c.unitsPerChunk * p.seqKv * p.headDimQk));
  b.v = layout.add(floats(c.unitsPerChunk * p.seqKv * p.headDimV));
  b.scores = layout.add(floats(stacked * p.seqKv));
  b.out = layout.add(floats(stacked * p.headDimV));
  b.lt = layout.add(kCublasLtWorkspaceBytes);
  b.total = layout.total();
  return b;
}

BackwardBuffers backwardBuffers(const AttentionProblem& p, const ChunkPlan& c) {
  const int64_t stacked = c.unitsPerChunk * c.group * c.rowsPerChunk;
  const int64_t kvRows = c.unitsPerChunk * p.seqKv;
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
