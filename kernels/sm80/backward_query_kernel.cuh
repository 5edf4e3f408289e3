// The backward's dQ kernel (sm_80 and newer): query-major, with the forward's tiles. One CTA owns
// Br = 16 * kRowWarps query rows of one (batch, query head) and, for each visible KV tile of Bc
// keys, runs
//
//   score steps:   S[Br, Bc] = Q K^T over d_qk, then dP[Br, Bc] = dO V^T over d_v
//                  (each column warp for its keysPerWarp keys)
//   gradient:      P = exp2(S scaleLog2 - lse2), dS = P * (dP - delta), masked; dS shared by the
//                  column warps of a row group
//   output steps:  dQ[Br, warp's columns] += dS[Br, Bc] K[Bc, warp's columns]
//
// and writes dQ * scale once. Q and dO rows are persisted in shared memory or streamed with the
// K and V panels of each score step. With attention slices the CTA's rows are a row tile of one
// query segment and its KV tiles those of the forward (common/slice_mask.h). With per-batch key
// lengths (FFPA_ATTENTION_KEY_LENGTHS) its KV tiles end at its batch entry's count, as the
// forward's do: the mask hides the keys past it and their K and V rows are zero-filled.
#pragma once

#include "common/element.cuh"
#include "common/platform.cuh"
#include "common/ptx.cuh"
#include "sm80/cta_geometry.cuh"
#include "sm80/backward_params.h"
#include "sm80/gradient_tiles.cuh"
#include "sm80/panels.cuh"
#include "sm80/step_pipeline.cuh"

#include <cstdint>

namespace ffpa::kernels::sm80 {

using ffpa::sm80::BackwardParams;
using ffpa::sm80::GradientLayout;

template <class Tag, int kHeadDim>
struct QueryGradientKernel {
  using Element = typename Tag::Element;
  static constexpr ffpa::sm80::ForwardShape kShape = ffpa::sm80::queryGradientShape(kHeadDim);
  static constexpr int kRowWarps = kShape.rowWarps;
  static constexpr int kColWarps = kShape.colWarps;
  static_assert((kColWarps & (kColWarps - 1)) == 0, "column warps: a power of two (panels interleave)");
  static constexpr int kThreads = kShape.threads();
  static constexpr int kRows = kShape.rows();                 // Br
  static constexpr int kKeys = kShape.keys();                 // Bc
  static constexpr int kKeyTiles = kShape.keysPerWarp / 8;    // n8 tiles of S per warp
  static constexpr int kKeySteps = kKeys / 16;                // k16 steps of dS K
  static constexpr int kOutPanels = kShape.warpColumns / 16;  // 16-column panels of dQ per warp

  static_assert(kHeadDim % 16 == 0 && kHeadDim <= 1024, "head dim: a multiple of 16 up to 1024");
  static_assert(kShape.warpColumns <= 256, "dQ: at most 128 fp32 registers per thread");
  static_assert(2 * kHeadDim / 16 + kShape.warpColumns / 16 <= kMaxStepsPerTile,
                "S, dP and dQ steps of a tile");
  static_assert(kKeyTiles == 1 || kKeyTiles % 2 == 0, "keys are loaded 16 at a time");

  // Where the CTA works: its rows (CtaRows), its (batch, head), the warp's role.
  struct Coordinates : CtaRows {
    int warpRow;   // first row of the warp's row group, relative to the CTA
    int rowGroup;
    int colWarp;
    int group;  // lane / 4
    int quad;   // lane % 4
    int64_t statsRow;  // index of the CTA's first row in the row statistics
    const Element* q;
    const Element* dO;
    const Element* k;
    const Element* v;
    Element* dq;
  };

  static FFPA_DEVICE Coordinates locate(const BackwardParams& p) {
    Coordinates c;
    const WarpRole role = warpRole(kColWarps);
    c.rowGroup = role.rowGroup;
    c.colWarp = role.colWarp;
    c.group = role.group;
    c.quad = role.quad;
    static_cast<CtaRows&>(c) = ctaRows(p, kRows);
    c.warpRow = c.rowGroup * 16;
    const auto [batch, head] = gridPosition(p.gridDnhb, p.headsQ);
    const int64_t kvHead = head / p.groupSize;
    c.statsRow = (batch * p.headsQ + head) * p.seqQ + c.firstRow;
    c.q = static_cast<const Element*>(p.q) + batch * p.qStrides[0] + head * p.qStrides[1] +
          int64_t(c.firstRow) * p.qStrides[2];
    c.dO = static_cast<const Element*>(p.dO) + batch * p.dOStrides[0] + head * p.dOStrides[1] +
           int64_t(c.firstRow) * p.dOStrides[2];
    c.k = static_cast<const Element*>(p.k) + batch * p.kStrides[0] + kvHead * p.kStrides[1];
    c.v = static_cast<const Element*>(p.v) + batch * p.vStrides[0] + kvHead * p.vStrides[1];
    c.dq = static_cast<Element*>(p.dq) + batch * p.dqStrides[0] + head * p.dqStrides[1];
    return c;
  }

  static FFPA_DEVICE int min2(int a, int b) { return a < b ? a : b; }

  // The keys of the CTA's batch entry (keysOfBatch), worked out where used rather than held: the
  // KV tiles it walks, their mask, and the K and V rows read (zeros past them).
  static FFPA_DEVICE int keyEnd(const BackwardParams& p) {
    return keysOfBatch(p, gridPosition(p.gridDnhb, p.headsQ).batch);
  }

  // KV tile `tile` of the CTA (with slices: of each slice of its segment in turn).
  static FFPA_DEVICE KeyTile keyTile(const BackwardParams& p, const Coordinates& c, int tile) {
    return keyTileOf(p, c, kKeys, tile);
  }

  // Steps of a KV tile: ceil(qkPanels / w) steps of Q K^T, ceil(vPanels / w) of dO V^T, then
  // ceil(outPanels / w2) of dS K, over the warp's panels of dQ below d_qk (ownedPanels).
  struct Steps {
    int qkPanels, vPanels, outPanels, qkSteps, vSteps, outputSteps;
  };

  static FFPA_DEVICE Steps stepsOf(const BackwardParams& p) {
    const GradientLayout& l = p.queryLayout;
    Steps s;
    s.qkPanels = p.headDimQk / 16;
    s.vPanels = p.headDimV / 16;
    s.qkSteps = (s.qkPanels + l.scorePanelsPerStep - 1) / l.scorePanelsPerStep;
    s.vSteps = (s.vPanels + l.scorePanelsPerStep - 1) / l.scorePanelsPerStep;
    s.outPanels = ffpa::sm80::ownedPanels(p.headDimQk, kColWarps, kOutPanels);
    s.outputSteps = (s.outPanels + l.outputPanelsPerStep - 1) / l.outputPanelsPerStep;
    return s;
  }

  static FFPA_DEVICE void issueStep(const BackwardParams& p, const Coordinates& c, const Steps& s, int tile,
                                    int inTile, uint32_t base) {
    const GradientLayout& l = p.queryLayout;
    const int firstKey = keyTile(p, c, tile).firstKey;
    const int w = l.scorePanelsPerStep;
    if (inTile < s.qkSteps + s.vSteps) {
      const bool isQk = inTile < s.qkSteps;
      const int firstPanel = (isQk ? inTile : inTile - s.qkSteps) * w;
      const int panels = min2(w, (isQk ? s.qkPanels : s.vPanels) - firstPanel);
      if (!l.persistRows) {
        copyStepPanels<kRows, kThreads, ffpa::sm80::kMaxScoreStepPanels>(
            base, 32, panels, isQk ? c.q : c.dO, isQk ? p.qStrides[2] : p.dOStrides[2], p.seqQ - c.firstRow,
            firstPanel * 16);
      }
      const Element* keys = isQk ? c.k : c.v;
      const int64_t stride = isQk ? p.kStrides[2] : p.vStrides[2];
      copyStepPanels<kKeys, kThreads, ffpa::sm80::kMaxScoreStepPanels>(
          base + l.slotColumnsOffset, 32, panels, keys + int64_t(firstKey) * stride, stride, keyEnd(p) - firstKey,
          firstPanel * 16);
    } else {
      // K panels of dS K: panel k of the step for column warp w is the step's panel k * kColWarps
      // + w, K's consecutive panels from the step's first (interleavedColumn). Columns past d_qk
      // reach only columns of dQ that are never stored.
      const int firstPanel = (inTile - s.qkSteps - s.vSteps) * l.outputPanelsPerStep;  // of each column warp
      copyStepPanels<kKeys, kThreads, ffpa::sm80::kMaxOutputStepPanels * kColWarps, true>(
          base, 32, min2(l.outputPanelsPerStep, s.outPanels - firstPanel) * kColWarps,
          c.k + int64_t(firstKey) * p.kStrides[2], p.kStrides[2], keyEnd(p) - firstKey, firstPanel * kColWarps * 16,
          p.headDimQk);
    }
  }

  // The number of KV tiles the CTA's rows see (0 when the mask hides every key).
  static FFPA_DEVICE int visibleTiles(const BackwardParams& p, const Coordinates& c) {
    return visibleKeyTilesOf(p, c, kKeys, kRows, keyEnd(p));
  }

  // Score steps [first, first + count) of one product: acc += A B^T, A rows from the persisted
  // rows (panel offset `rowPanel0`) or the slot, B rows from the slot.
  template <class Pipe>
  static FFPA_DEVICE void scoreSteps(const BackwardParams& p, const Coordinates& c, Pipe& pipe,
                                     int count, int panelsTotal, int rowPanel0,
                                     AccumulatorTile<kKeyTiles>& acc) {
    const GradientLayout& l = p.queryLayout;
    const uint32_t rows = pipe.shared + l.rowsOffset;
    const uint32_t aPanelBytes = kRows * 32, bPanelBytes = kKeys * 32;
    const uint32_t aLane = laneOffsetA(32, c.warpRow);
    const uint32_t bLane = laneOffsetRowsB<kKeyTiles>(32, c.colWarp * kShape.keysPerWarp);
    for (int i = 0; i < count; ++i) {
      const uint32_t slot = pipe.acquire();
      const int firstPanel = i * l.scorePanelsPerStep;
      const int panels = min2(l.scorePanelsPerStep, panelsTotal - firstPanel);
      const uint32_t aFirst = l.persistRows ? rows + (rowPanel0 + firstPanel) * aPanelBytes : slot;
      accumulateScores(acc, aFirst + aLane, aPanelBytes, slot + l.slotColumnsOffset + bLane, bPanelBytes, panels,
                       Tag{});
    }
  }

  // dS of KV tile `tile` from S and dP (both overwritten), as A fragments of the row group.
  static FFPA_DEVICE void gradient(const BackwardParams& p, const Coordinates& c, int tile,
                                   AccumulatorTile<kKeyTiles>& s, AccumulatorTile<kKeyTiles>& dp,
                                   uint32_t (&dsFrag)[kKeySteps][4]) {
    // The row statistics of the thread's rows (g and g + 8), read here rather than kept in
    // registers across the loop; rows past the end see nothing.
    const int64_t rowCount = int64_t(p.batch) * p.headsQ * p.seqQ;
    float delta[2], lse2[2];
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int localRow = c.warpRow + c.group + 8 * half;
      const bool inside = c.firstRow + localRow < p.seqQ;
      delta[half] = inside ? p.rowStats[c.statsRow + localRow] : 0.0f;
      lse2[half] = inside ? p.rowStats[rowCount + c.statsRow + localRow] : __builtin_huge_valf();
    }
    const KeyTile keys = keyTile(p, c, tile);
    const int firstKey = keys.firstKey + c.colWarp * kShape.keysPerWarp;
    const RowKeyMask mask =
        rowKeyMask(p, keys.slice, c, keys.firstKey, kKeys, c.firstRow + c.warpRow + c.group, keyEnd(p));
#pragma unroll
    for (int n = 0; n < kKeyTiles; ++n) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        float probability = exp2Approx(s.f[n][e] * p.scaleLog2 - lse2[e >> 1]);
        if (mask.hides(e >> 1, firstKey + 8 * n + 2 * c.quad + (e & 1))) probability = 0.0f;
        s.f[n][e] = probability * (dp.f[n][e] - delta[e >> 1]);
      }
    }
    const uint32_t dsTile =
        p.queryLayout.exchangeOffset + ((tile % 2) * kRowWarps + c.rowGroup) * 16 * kKeys * 2;
    exchangeAsA(dsFrag, s, kColWarps, dsTile, c.colWarp * kShape.keysPerWarp, 1 + c.rowGroup, Tag{});
  }

  static FFPA_DEVICE void store(const BackwardParams& p, const Coordinates& c,
                                const AccumulatorTile<2 * kOutPanels>& dq) {
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int row = c.firstRow + c.warpRow + c.group + 8 * half;
      if (row >= c.rowEnd) continue;
      Element* out = c.dq + int64_t(row) * p.dqStrides[2];
#pragma unroll
      for (int n = 0; n < 2 * kOutPanels; ++n) {
        const int column = interleavedColumn<kColWarps>(c.colWarp, n, c.quad);
        if (column < p.headDimQk) {
          storeGlobal32(out + column, packPair(dq.f[n][2 * half] * p.scale,
                                               dq.f[n][2 * half + 1] * p.scale, Tag{}));
        }
      }
    }
  }

  static FFPA_DEVICE void run(const BackwardParams& p) {
    const Coordinates c = locate(p);
    const GradientLayout& l = p.queryLayout;
    const Steps s = stepsOf(p);
    const uint32_t shared = sharedAddress(sharedMemory());
    const int tiles = visibleTiles(p, c);
    auto pipe = makeStepPipeline(l.rings, shared, s.qkSteps + s.vSteps, s.outputSteps, tiles,
                                 [&](int tile, int inTile, uint32_t slot) { issueStep(p, c, s, tile, inTile, slot); });

    AccumulatorTile<2 * kOutPanels> dq;
    dq.clear();
    if (tiles > 0) {
      if (l.persistRows) {
        // The CTA's Q and dO rows: the first commit group, before every step.
        copyTile<kRows, kThreads>(shared + l.rowsOffset, 32, s.qkPanels, c.q, p.qStrides[2], p.seqQ - c.firstRow);
        const uint32_t dOPanels = shared + l.rowsOffset + s.qkPanels * kRows * 32;
        copyTile<kRows, kThreads>(dOPanels, 32, s.vPanels, c.dO, p.dOStrides[2], p.seqQ - c.firstRow);
        copyAsyncCommit();
      }
      pipe.start();
    }

    for (int tile = 0; tile < tiles; ++tile) {
      AccumulatorTile<kKeyTiles> scores, dp;
      scores.clear();
      dp.clear();
      scoreSteps(p, c, pipe, s.qkSteps, s.qkPanels, 0, scores);
      scoreSteps(p, c, pipe, s.vSteps, s.vPanels, s.qkPanels, dp);
      uint32_t dsFrag[kKeySteps][4];
      gradient(p, c, tile, scores, dp, dsFrag);

      accumulateOutputSteps<kOutPanels, kColWarps>(pipe, s.outPanels, l.outputPanelsPerStep, dq, dsFrag, kKeys,
                                                   c.colWarp, Tag{});
    }
    store(p, c, dq);
  }
};

template <class Tag, int kHeadDim>
FFPA_KERNEL void FFPA_LAUNCH_BOUNDS(ffpa::sm80::queryGradientShape(kHeadDim).threads(),
                                    ffpa::sm80::queryGradientShape(kHeadDim).threads() <= 128 ? 2 : 1)
    queryGradientKernel(const FFPA_GRID_CONSTANT BackwardParams params) {
  QueryGradientKernel<Tag, kHeadDim>::run(params);
}

}  // namespace ffpa::kernels::sm80
