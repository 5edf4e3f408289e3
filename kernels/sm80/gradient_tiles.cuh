// Register tiles of the backward kernels: fp32 accumulators of 16 rows x n8 tiles, the score
// products that fill them (S = A B^T over one 16-column panel) and the output products
// (C += A B over k16 steps, B read with ldmatrix.trans).
#pragma once

#include "common/platform.cuh"
#include "common/ptx.cuh"
#include "sm80/panels.cuh"
#include "sm80/step_pipeline.cuh"

#include <cstdint>

namespace ffpa::kernels::sm80 {

// 16 rows x 8 * kTiles columns in fp32: f[n][0..1] row g, f[n][2..3] row g + 8 (common/ptx.cuh).
template <int kTiles>
struct AccumulatorTile {
  float f[kTiles][4];

  FFPA_DEVICE void clear() {
#pragma unroll
    for (int n = 0; n < kTiles; ++n) {
#pragma unroll
      for (int e = 0; e < 4; ++e) f[n][e] = 0.0f;
    }
  }
  FFPA_DEVICE void scale(float factor) {
#pragma unroll
    for (int n = 0; n < kTiles; ++n) {
#pragma unroll
      for (int e = 0; e < 4; ++e) f[n][e] *= factor;
    }
  }
};

// S[16 rows, 8 * kTiles columns] += A[16 rows, p] B[8 * kTiles rows, p]^T over panels p of one
// step: A's rows from the lane's address `aLane` in the step's first A panel (laneOffsetA), B's
// from `bLane` in its first B panel (laneOffsetRowsB), panels one stride apart; rows of 32 bytes.
template <int kTiles, class Tag>
FFPA_DEVICE void accumulateScores(AccumulatorTile<kTiles>& s, uint32_t aLane, uint32_t aPanelBytes, uint32_t bLane,
                                  uint32_t bPanelBytes, int panels, Tag tag) {
  forEachScorePanel(aLane, aPanelBytes, bLane, bPanelBytes, panels, [&](uint32_t aPanel, uint32_t bPanel) {
    uint32_t a[4];
    loadMatrixX4(a, aPanel);
    forEachRowsB<kTiles, false>(bPanel, 32, [&](int n, const uint32_t(&b)[2]) { mmaF32(s.f[n], a, b, s.f[n], tag); });
  });
}

// C[16 rows, n8 tiles 2 * tile .. +1] += A[16 rows, 16 * kSteps] B[16 * kSteps rows, panel]
// and, with kPair, the same for tile + 1 and the panel `panelStride` further: A as kSteps
// fragments, B's from the lane's address `bLane` in the panel (forEachColumnsB).
template <bool kPair, int kSteps, int kTiles, class Tag>
FFPA_DEVICE void accumulatePanels(AccumulatorTile<kTiles>& c, int tile, const uint32_t (&a)[kSteps][4],
                                  uint32_t bLane, uint32_t panelStride, Tag tag) {
  const int second = kPair && 2 * tile + 3 < kTiles ? tile + 1 : tile;  // never past the last tile
  forEachColumnsB<kSteps, kPair, false, false>(bLane, panelStride, 32, [&](int q, int j, const uint32_t(&b)[4]) {
    const int n = 2 * (q == 0 ? tile : second);
    mmaF32(c.f[n], a[j], {b[0], b[1]}, c.f[n], tag);
    mmaF32(c.f[n + 1], a[j], {b[2], b[3]}, c.f[n + 1], tag);
  });
}

// The output steps of one product: acc (the first `panels` of the warp's kOutPanels 16-column
// panels; ownedPanels) += A B, B's panels arriving panelsPerStep per column warp at a time through
// `pipe`, interleaved by column warp (panel i of a step is panel i / kColWarps of column warp
// i % kColWarps: interleavedColumn).
template <int kOutPanels, int kColWarps, class Pipe, int kSteps, int kTiles, class Tag>
FFPA_DEVICE void accumulateOutputSteps(Pipe& pipe, int panels, int panelsPerStep, AccumulatorTile<kTiles>& acc,
                                       const uint32_t (&a)[kSteps][4], int bRows, int colWarp, Tag tag) {
  static_assert(kTiles == 2 * kOutPanels, "two n8 tiles per panel");
  const uint32_t panelStride = uint32_t(kColWarps * bRows * 32);
  const uint32_t bLane = uint32_t(colWarp * bRows * 32) + laneOffsetA(32, 0);
  forEachStepPanelPair<kOutPanels>(pipe, panels, panelsPerStep, panelStride,
                                   [&](uint32_t bPanel, int panel, auto pair) {
                                     accumulatePanels<decltype(pair)::value>(acc, panel, a, bPanel + bLane,
                                                                             panelStride, tag);
                                   });
}

// A 16 x (16 * kSteps) matrix of a row group, shared by its column warps: each stores its
// 8 * kTiles columns from column0 (packed to 16 bits) into the group's tile at byte offset
// `tileOffset` of shared memory; after the group's named barrier each reads all columns back as
// A fragments.
template <int kTiles, class Tag>
FFPA_DEVICE void shareRows(uint32_t tileOffset, int column0, const AccumulatorTile<kTiles>& tile, Tag tag) {
  storeAccumulatorRows(tileOffset, column0, tile.f, tag);
}

template <int kSteps>
FFPA_DEVICE void loadSharedRowsA(uint32_t (&a)[kSteps][4], uint32_t tileOffset) {
  const uint32_t shared = sharedAddress(sharedMemory()) + tileOffset;
#pragma unroll
  for (int j = 0; j < kSteps; ++j) loadRowsA(a[j], shared, 16, 32, 0, j);
}

// The same for one matrix, barrier included; with one column warp the registers are repacked
// directly (the warp holds all columns).
template <int kSteps, int kTiles, class Tag>
FFPA_DEVICE void exchangeAsA(uint32_t (&a)[kSteps][4], const AccumulatorTile<kTiles>& tile, int colWarps,
                             uint32_t tileOffset, int column0, int barrier, Tag tag) {
  if constexpr (2 * kSteps == kTiles) {
    packAccumulatorAsA(a, tile.f, tag);
  } else {
    shareRows(tileOffset, column0, tile, tag);
    namedBarrier(barrier, 32 * colWarps);
    loadSharedRowsA(a, tileOffset);
  }
}

}  // namespace ffpa::kernels::sm80
