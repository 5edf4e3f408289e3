// What the host and the sm80 backward kernels agree on: tile shapes, launch parameters and
// shared-memory layouts. Plain C++ (no CUDA), shared with the planner and the CPU warp emulator.
//
// The backward runs three kernels, none of which uses atomics (results are bit-identical from run
// to run, whatever FFPA_POLICY_DETERMINISTIC says):
//
//   row statistics  delta[i] = sum_c dO[i, c] O[i, c]; lse2[i] = LSE[i] log2(e)      (workspace)
//   dQ kernel       query-major, as the forward: per KV tile S = Q K^T and dP = dO V^T,
//                   dS = P * (dP - delta), dQ += dS K; dQ is written once, times the scale
//   dK/dV kernel    key-major: per (query head of the group, Q tile) S^T = K Q^T and
//                   dP^T = V dO^T, dV += P^T dO, dK += dS^T Q; written once (dK times the scale)
//
// With attention slices the dQ kernel walks its rows' key hulls as the forward does, and the
// dK/dV kernel the mirror: its keys are a tile of one key-axis segment, its Q tiles those of the
// query hull of each slice covering that segment (common/slice_mask.h).
//
// where P = exp2(S * scale * log2(e) - lse2). S and dP are computed twice (once per kernel): the
// price of keeping every gradient accumulator in registers, split by columns across warps, at
// head dims up to 1024, and of needing no atomics.
#pragma once

#include "common/problem_sizes.h"
#include "sm80/forward_params.h"
#include "sm80/step_rings.h"

#include <cstdint>

namespace ffpa::sm80 {

// The dQ kernel's tiles: row groups of 16 queries, column warps that score their own keys and
// own dQ's columns [c * warpColumns, +warpColumns): one warp per row group up to d = 128, two
// above, four above 512, so that a warp keeps at most 256 columns of dQ (128 fp32 registers per
// thread) besides S, dP, P and dS.
constexpr ForwardShape queryGradientShape(int headDim) {
  if (headDim <= 128) return {4, 1, 64, roundUp16(headDim)};
  if (headDim <= 512) return {4, 2, 32, roundUp16((headDim + 1) / 2)};
  return {2, 4, 16, roundUp16((headDim + 3) / 4)};
}

// The dK/dV kernel: kRowWarps row groups of 16 keys and kColWarps column warps per group. Column
// warp c of a group
//   - computes S^T and dP^T for its queriesPerWarp queries of the Q tile (over all of d),
//   - shares P^T and dS^T with the group through shared memory,
//   - accumulates dV[:, c * warpColumns, +warpColumns) and dK[same columns] over all the tile's
//     queries,
// so a thread keeps warpColumns fp32 gradient values (two accumulators of warpColumns / 2).
struct KeyShape {
  int rowWarps;
  int colWarps;
  int queriesPerWarp;
  int warpColumns;  // of dK and of dV each

  constexpr int threads() const { return 32 * rowWarps * colWarps; }
  constexpr int keys() const { return 16 * rowWarps; }
  constexpr int queries() const { return colWarps * queriesPerWarp; }
  constexpr int maxHeadDim() const { return colWarps * warpColumns; }
};

// At most 128 columns of dK and of dV per warp (128 fp32 registers per thread in all), 256
// threads per CTA: the more keys a CTA holds, the fewer times Q and dO stream through it. Up to
// d = 256 a Q tile has 32 queries, which keeps S^T, dP^T and P^T within the registers the two
// 64-register accumulators leave.
constexpr KeyShape keyGradientShape(int headDim) {
  if (headDim <= 64) return {4, 1, 64, roundUp16(headDim)};
  if (headDim <= 256) return {4, 2, 16, roundUp16((headDim + 1) / 2)};
  if (headDim <= 512) return {2, 4, 16, roundUp16((headDim + 3) / 4)};
  return {1, 8, 8, roundUp16((headDim + 7) / 8)};
}

// Where a gradient kernel keeps what in shared memory, and its pipeline (step_rings.h). A score
// step brings `scorePanelsPerStep` panels of the A operand (unless it is persisted) and of the B
// operand; an output step brings `outputPanelsPerStep` panels per column warp.
struct GradientLayout {
  StepRings rings;
  int32_t scorePanelsPerStep;
  int32_t outputPanelsPerStep;
  int32_t persistRows;         // the CTA's A rows (both operands) loaded once
  uint32_t rowsOffset;         // the persisted rows: d_qk panels, then d_v panels
  uint32_t slotColumnsOffset;  // where the B panels start inside a score slot
  uint32_t exchangeOffset;     // P (or P^T) and dS (or dS^T) shared by column warps
  uint32_t sharedBytes;
};

// Launch parameters of the three kernels, passed by value. Strides are in elements, in
// [batch, head, row] order (the head-dim stride is 1).
struct BackwardParams : ProblemSizes {
  const void* q;
  const void* k;
  const void* v;
  const void* o;
  const void* dO;
  const float* lse;
  void* dq;
  void* dk;
  void* dv;
  // Workspace: delta of every query row ([batch, headsQ, seqQ], dense), then lse2 in the same
  // layout; lse2 is +inf for rows that see no key, so that their P is exp2(-inf) = 0.
  float* rowStats;
  int64_t qStrides[3];
  int64_t kStrides[3];
  int64_t vStrides[3];
  int64_t oStrides[3];
  int64_t dOStrides[3];
  int64_t lseStrides[3];
  int64_t dqStrides[3];
  int64_t dkStrides[3];
  int64_t dvStrides[3];
  int32_t headsKv;
  float scale;
  // Attention slices (slices.slices not null; then `causal` is 0): dQ CTA x < rowTileCount works
  // on rowTiles[x] (the query axis' tiles of Br rows), dK/dV CTA x < keyTileCount on keyTiles[x]
  // (the key axis' tiles of Bk keys); the CTAs after them on the rows (keys) from the axis'
  // extent on, which see no key (which no row sees): their gradients are 0.
  slices::SliceView slices;
  const slices::AxisTile* rowTiles;
  const slices::AxisTile* keyTiles;
  int32_t rowTileCount;
  int32_t keyTileCount;

  GradientLayout queryLayout;  // the dQ kernel's
  GradientLayout keyLayout;    // the dK/dV kernel's
};

// Rows of query statistics each row-statistics CTA computes (one warp per row).
constexpr int kRowStatsWarps = 8;

// The gradient kernels' pipeline knobs, after the planner resolved them.
struct GradientChoice {
  int stages = 2;
  int scorePanelsPerStep = 0;   // 0: the default for the shape
  int outputPanelsPerStep = 0;
  bool prefetch = true;
  bool shareSmem = false;
  bool persistQueryRows = true;  // the dQ kernel keeps its Q and dO rows in shared memory
};

// The most panels of a score step, and of an output step per column warp, which the kernels'
// copies are unrolled for (the launch parameters' ranges: 128 and 64 columns).
constexpr int kMaxScoreStepPanels = 8;
constexpr int kMaxOutputStepPanels = 4;

// Panels per step: about 16 MMAs per warp between two block barriers, as in the forward.
constexpr int scorePanelsFor(int scoreTilesPerWarp) {
  return 16 / scoreTilesPerWarp < 8 ? (16 / scoreTilesPerWarp > 0 ? 16 / scoreTilesPerWarp : 1) : 8;
}

// Output panels per column warp and step: the choice's, or 2; at most the warp's panels.
constexpr int outputPanelsFor(const GradientChoice& choice, int warpPanels) {
  int wanted = choice.outputPanelsPerStep > 0 ? choice.outputPanelsPerStep : 2;
  if (wanted > kMaxOutputStepPanels) wanted = kMaxOutputStepPanels;
  return wanted < warpPanels ? wanted : warpPanels;
}

// Score panels per step: the choice's, or the default for `scoreTilesPerWarp` n8 tiles per warp;
// at most `panels`.
constexpr int scorePanelsPerStepFor(const GradientChoice& choice, int scoreTilesPerWarp, int panels) {
  int wanted = choice.scorePanelsPerStep > 0 ? choice.scorePanelsPerStep : scorePanelsFor(scoreTilesPerWarp);
  if (wanted > kMaxScoreStepPanels) wanted = kMaxScoreStepPanels;
  return wanted < panels ? wanted : panels;
}

// The dQ kernel's layout; returns its dynamic shared memory. Swizzled panels throughout.
inline uint32_t queryGradientLayout(const ForwardShape& shape, const GradientChoice& choice,
                                    int headDimQk, int headDimV, GradientLayout& l) {
  const int panels = (headDimQk > headDimV ? headDimQk : headDimV) / 16;
  l.scorePanelsPerStep = scorePanelsPerStepFor(choice, shape.keysPerWarp / 8, panels);
  l.outputPanelsPerStep = outputPanelsFor(choice, shape.warpColumns / 16);
  l.persistRows = choice.persistQueryRows;
  const uint64_t rowBytes = 32;
  const uint64_t aStep = l.persistRows ? 0 : shape.rows() * l.scorePanelsPerStep * rowBytes;
  const uint64_t bStep = uint64_t(shape.keys()) * l.scorePanelsPerStep * rowBytes;
  const uint64_t outputStep = uint64_t(shape.keys()) * shape.colWarps * l.outputPanelsPerStep * rowBytes;
  l.slotColumnsOffset = alignUp(aStep, 128);
  uint32_t offset = 0;
  l.rowsOffset = offset;
  if (l.persistRows) offset += alignUp(shape.rows() * uint64_t(headDimQk + headDimV) / 16 * rowBytes, 128);
  offset = layOutRings(l.rings, choice.stages, choice.prefetch, choice.shareSmem,
                       l.slotColumnsOffset + bStep, outputStep, offset);
  l.exchangeOffset = offset;
  // dS of each row group, two buffers (column warps > 1).
  if (shape.colWarps > 1) offset += 2u * shape.rowWarps * 16 * shape.keys() * 2;
  l.sharedBytes = alignUp(offset, 128);
  return l.sharedBytes;
}

// The dK/dV kernel's layout (its K and V rows are always persisted).
inline uint32_t keyGradientLayout(const KeyShape& shape, const GradientChoice& choice, int headDimQk,
                                  int headDimV, GradientLayout& l) {
  const int panels = (headDimQk > headDimV ? headDimQk : headDimV) / 16;
  l.scorePanelsPerStep = scorePanelsPerStepFor(choice, shape.queriesPerWarp / 8, panels);
  l.outputPanelsPerStep = outputPanelsFor(choice, shape.warpColumns / 16);
  l.persistRows = 1;
  const uint64_t rowBytes = 32;
  const uint64_t bStep = uint64_t(shape.queries()) * l.scorePanelsPerStep * rowBytes;
  const uint64_t outputStep = uint64_t(shape.queries()) * shape.colWarps * l.outputPanelsPerStep * rowBytes;
  l.slotColumnsOffset = 0;
  uint32_t offset = 0;
  l.rowsOffset = offset;
  offset += alignUp(shape.keys() * uint64_t(headDimQk + headDimV) / 16 * rowBytes, 128);
  offset = layOutRings(l.rings, choice.stages, choice.prefetch, choice.shareSmem, bStep, outputStep, offset);
  l.exchangeOffset = offset;
  // P^T and dS^T of each row group, two buffers each (column warps > 1).
  if (shape.colWarps > 1) offset += 4u * shape.rowWarps * 16 * shape.queries() * 2;
  l.sharedBytes = alignUp(offset, 128);
  return l.sharedBytes;
}

}  // namespace ffpa::sm80
