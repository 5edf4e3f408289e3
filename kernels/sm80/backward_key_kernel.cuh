// The backward's dK/dV kernel (sm_80 and newer): key-major. One CTA owns Bk = 16 * kRowWarps
// keys of one (batch, KV head), keeps their K and V rows in shared memory, and for each query head
// of the group and each Q tile of Bq queries that sees any of its keys, runs
//
//   score steps:   S^T[Bk, Bq] = K Q^T over d_qk, then dP^T[Bk, Bq] = V dO^T over d_v
//                  (each column warp for its queriesPerWarp queries)
//   gradient:      P^T = exp2(S^T scaleLog2 - lse2[query]), dS^T = P^T * (dP^T - delta[query]),
//                  masked; both shared by the column warps of a row group
//   output steps:  dV[Bk, warp's columns] += P^T dO[Bq, warp's columns], then
//                  dK[Bk, warp's columns] += dS^T Q[Bq, warp's columns]
//
// and writes dV and dK * scale once: the sum over the group's query heads needs no atomics. Keys
// that no query sees get exact zeros.
//
// With attention slices the CTA's keys are a key tile of one key-axis segment, and its Q tiles,
// per query head, those of the query hull of each slice covering the segment in turn, masked by
// that slice's rule (common/slice_mask.h): the mirror of the forward's walk.
//
// With per-batch key lengths (FFPA_ATTENTION_KEY_LENGTHS) the keys of batch entry b from its
// count L_b on are seen by no query: their K and V rows are zero-filled rather than read (so a NaN
// there never meets a zero P), and their dK and dV are stored as zeros. A bottom-right diagonal
// ends at key L_b - 1.
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
struct KeyGradientKernel {
  using Element = typename Tag::Element;
  static constexpr ffpa::sm80::KeyShape kShape = ffpa::sm80::keyGradientShape(kHeadDim);
  static constexpr int kRowWarps = kShape.rowWarps;
  static constexpr int kColWarps = kShape.colWarps;
  static_assert((kColWarps & (kColWarps - 1)) == 0, "column warps: a power of two (panels interleave)");
  static constexpr int kThreads = kShape.threads();
  static constexpr int kKeys = kShape.keys();                    // Bk
  static constexpr int kQueries = kShape.queries();              // Bq
  static constexpr int kQueryTiles = kShape.queriesPerWarp / 8;  // n8 tiles of S^T per warp
  static constexpr int kQuerySteps = kQueries / 16;              // k16 steps of P^T dO and dS^T Q
  static constexpr int kOutPanels = kShape.warpColumns / 16;     // panels of dK (and of dV) per warp

  static_assert(kHeadDim % 16 == 0 && kHeadDim <= 1024, "head dim: a multiple of 16 up to 1024");
  static_assert(kShape.warpColumns <= 128, "dK + dV: at most 128 fp32 registers per thread");
  static_assert(2 * kHeadDim / 16 + 2 * kShape.warpColumns / 16 <= kMaxStepsPerTile,
                "S^T, dP^T, dV and dK steps of a tile");
  static_assert(kQueryTiles == 1 || kQueryTiles % 2 == 0, "queries are loaded 16 at a time");
  static_assert(kQueries % 16 == 0, "P^T dO: k16 steps");

  // The CTA's keys and the query tiles it walks (CtaKeys), and the thread's place.
  struct Coordinates : CtaKeys {
    int warpRow;  // first key of the warp's row group, relative to the CTA
    int rowGroup;
    int colWarp;
    int group;  // lane / 4
    int quad;   // lane % 4
    int64_t batch;
    int64_t kvHead;
    const Element* k;
    const Element* v;
    Element* dk;
    Element* dv;
  };

  static FFPA_DEVICE Coordinates locate(const BackwardParams& p) {
    Coordinates c;
    const WarpRole role = warpRole(kColWarps);
    c.rowGroup = role.rowGroup;
    c.colWarp = role.colWarp;
    c.group = role.group;
    c.quad = role.quad;
    const GridPosition position = gridPosition(p.gridDnhb, p.headsKv);
    static_cast<CtaKeys&>(c) = ctaKeys(p, p.slices, p.keyTiles, p.keyTileCount, blockIndexX(), kKeys, kQueries,
                                       keysOfBatch(p, position.batch));
    c.warpRow = c.rowGroup * 16;
    c.batch = position.batch;
    c.kvHead = position.head;
    c.k = static_cast<const Element*>(p.k) + c.batch * p.kStrides[0] + c.kvHead * p.kStrides[1] +
          int64_t(c.firstKey) * p.kStrides[2];
    c.v = static_cast<const Element*>(p.v) + c.batch * p.vStrides[0] + c.kvHead * p.vStrides[1] +
          int64_t(c.firstKey) * p.vStrides[2];
    c.dk = static_cast<Element*>(p.dk) + c.batch * p.dkStrides[0] + c.kvHead * p.dkStrides[1];
    c.dv = static_cast<Element*>(p.dv) + c.batch * p.dvStrides[0] + c.kvHead * p.dvStrides[1];
    return c;
  }

  static FFPA_DEVICE int min2(int a, int b) { return a < b ? a : b; }

  // A tile of the loop: query head `head` (of the whole problem) and its Q tile of queries
  // [firstQuery, firstQuery + Bq), seen through slice `slice` (-1: no slices).
  using Tile = QueryTile;
  static FFPA_DEVICE Tile tileOf(const BackwardParams& p, const Coordinates& c, int tile) {
    return queryTileOf(p.slices, c, c.kvHead, p.groupSize, kQueries, tile);
  }

  static FFPA_DEVICE const Element* queryRows(const void* base, const int64_t (&strides)[3],
                                              const Coordinates& c, const Tile& t) {
    return static_cast<const Element*>(base) + c.batch * strides[0] + t.head * strides[1] +
           int64_t(t.firstQuery) * strides[2];
  }

  // Steps of a tile: ceil(qkPanels / w) of K Q^T, ceil(vPanels / w) of V dO^T, then
  // ceil(dvPanels / w2) of P^T dO and ceil(dkPanels / w2) of dS^T Q, over the warp's panels of dV
  // below d_v and of dK below d_qk (ownedPanels).
  struct Steps {
    int qkPanels, vPanels, dvPanels, dkPanels, qkSteps, vSteps, dvSteps, dkSteps;
  };

  static FFPA_DEVICE Steps stepsOf(const BackwardParams& p) {
    const GradientLayout& l = p.keyLayout;
    Steps s;
    s.qkPanels = p.headDimQk / 16;
    s.vPanels = p.headDimV / 16;
    s.qkSteps = (s.qkPanels + l.scorePanelsPerStep - 1) / l.scorePanelsPerStep;
    s.vSteps = (s.vPanels + l.scorePanelsPerStep - 1) / l.scorePanelsPerStep;
    s.dvPanels = ffpa::sm80::ownedPanels(p.headDimV, kColWarps, kOutPanels);
    s.dkPanels = ffpa::sm80::ownedPanels(p.headDimQk, kColWarps, kOutPanels);
    s.dvSteps = (s.dvPanels + l.outputPanelsPerStep - 1) / l.outputPanelsPerStep;
    s.dkSteps = (s.dkPanels + l.outputPanelsPerStep - 1) / l.outputPanelsPerStep;
    return s;
  }

  static FFPA_DEVICE void issueStep(const BackwardParams& p, const Coordinates& c, const Steps& s,
                                    int tile, int inTile, uint32_t base) {
    const GradientLayout& l = p.keyLayout;
    const Tile t = tileOf(p, c, tile);
    const int validRows = p.seqQ - t.firstQuery;
    const Element* q = queryRows(p.q, p.qStrides, c, t);
    const Element* dO = queryRows(p.dO, p.dOStrides, c, t);
    const int scoreSteps = s.qkSteps + s.vSteps;
    if (inTile < scoreSteps) {
      const bool isQk = inTile < s.qkSteps;
      const int firstPanel = (isQk ? inTile : inTile - s.qkSteps) * l.scorePanelsPerStep;
      copyStepPanels<kQueries, kThreads, ffpa::sm80::kMaxScoreStepPanels>(
          base, 32, min2(l.scorePanelsPerStep, (isQk ? s.qkPanels : s.vPanels) - firstPanel), isQk ? q : dO,
          isQk ? p.qStrides[2] : p.dOStrides[2], validRows, firstPanel * 16);
    } else {
      // dO panels (the dV steps), then Q panels (the dK steps); panel k of a step for column warp
      // w is the step's panel k * kColWarps + w, the operand's consecutive panels from the step's
      // first (interleavedColumn: no run-time division finds them). Columns past d_v (d_qk) reach
      // only columns of dV (dK) that are never stored.
      const bool isDv = inTile < scoreSteps + s.dvSteps;
      const int firstPanel = (inTile - scoreSteps - (isDv ? 0 : s.dvSteps)) * l.outputPanelsPerStep;  // of each warp
      copyStepPanels<kQueries, kThreads, ffpa::sm80::kMaxOutputStepPanels * kColWarps, true>(
          base, 32, min2(l.outputPanelsPerStep, (isDv ? s.dvPanels : s.dkPanels) - firstPanel) * kColWarps,
          isDv ? dO : q, isDv ? p.dOStrides[2] : p.qStrides[2], validRows, firstPanel * kColWarps * 16,
          isDv ? p.headDimV : p.headDimQk);
    }
  }

  // Score steps of one product: acc += A B^T, A from the persisted K or V rows (panel offset
  // `rowPanel0`), B (queries) from the slot.
  template <class Pipe>
  static FFPA_DEVICE void scoreSteps(const BackwardParams& p, const Coordinates& c, Pipe& pipe,
                                     int count, int panelsTotal, int rowPanel0,
                                     AccumulatorTile<kQueryTiles>& acc) {
    const GradientLayout& l = p.keyLayout;
    const uint32_t rows = pipe.shared + l.rowsOffset;
    const uint32_t aPanelBytes = kKeys * 32, bPanelBytes = kQueries * 32;
    const uint32_t aLane = laneOffsetA(32, c.warpRow);
    const uint32_t bLane = laneOffsetRowsB<kQueryTiles>(32, c.colWarp * kShape.queriesPerWarp);
    for (int i = 0; i < count; ++i) {
      const uint32_t slot = pipe.acquire();
      const int firstPanel = i * l.scorePanelsPerStep;
      const int panels = min2(l.scorePanelsPerStep, panelsTotal - firstPanel);
      accumulateScores(acc, rows + (rowPanel0 + firstPanel) * aPanelBytes + aLane, aPanelBytes, slot + bLane,
                       bPanelBytes, panels, Tag{});
    }
  }

  // Where the row group's P^T (which 0) and dS^T (which 1) of tile `tile` are shared (two
  // buffers each: a warp may write tile t + 1's while another still reads tile t's).
  static FFPA_DEVICE uint32_t exchangeTile(const BackwardParams& p, const Coordinates& c, int tile, int which) {
    const uint32_t bufferBytes = 16 * kQueries * 2;
    return p.keyLayout.exchangeOffset + (((tile % 2) * 2 + which) * kRowWarps + c.rowGroup) * bufferBytes;
  }

  // P^T and dS^T of a tile from S^T and dP^T (both overwritten). P^T comes back as A fragments of
  // the row group; dS^T too with one column warp, else it waits in shared memory for the dK steps
  // (loadGradient), so that it takes no registers during the dV steps.
  static FFPA_DEVICE void gradient(const BackwardParams& p, const Coordinates& c, int tile, const Tile& t,
                                   AccumulatorTile<kQueryTiles>& s, AccumulatorTile<kQueryTiles>& dp,
                                   uint32_t (&pFrag)[kQuerySteps][4], uint32_t (&dsFrag)[kQuerySteps][4]) {
    const int64_t rowCount = int64_t(p.batch) * p.headsQ * p.seqQ;
    const int64_t statsRow0 = (c.batch * p.headsQ + t.head) * p.seqQ;
    const int firstQuery = t.firstQuery + c.colWarp * kShape.queriesPerWarp;
    // The queries that see each of the thread's two keys (g and g + 8); keys past the CTA's end
    // (another segment's, or past the tensor) or past its batch entry's count are seen by none.
    slices::KeySpan seenBy[2];
    const int end = keysOfBatch(p, c.batch);
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int key = c.firstKey + c.warpRow + c.group + 8 * half;
      seenBy[half] = queriesSeeing(p, p.slices, c, t.slice, key, end);
    }
#pragma unroll
    for (int n = 0; n < kQueryTiles; ++n) {
#pragma unroll
      for (int odd = 0; odd < 2; ++odd) {
        const int query = firstQuery + 8 * n + 2 * c.quad + odd;
        const bool inside = query < p.seqQ;
        const float delta = inside ? p.rowStats[statsRow0 + query] : 0.0f;
        const float lse2 = inside ? p.rowStats[rowCount + statsRow0 + query] : __builtin_huge_valf();
#pragma unroll
        for (int half = 0; half < 2; ++half) {
          const int e = 2 * half + odd;
          const bool visible = inside && query >= seenBy[half].begin && query < seenBy[half].end;
          const float probability = visible ? exp2Approx(s.f[n][e] * p.scaleLog2 - lse2) : 0.0f;
          s.f[n][e] = probability;
          dp.f[n][e] = probability * (dp.f[n][e] - delta);
        }
      }
    }
    if constexpr (kColWarps == 1) {
      packAccumulatorAsA(pFrag, s.f, Tag{});
      packAccumulatorAsA(dsFrag, dp.f, Tag{});
    } else {
      const int column0 = c.colWarp * kShape.queriesPerWarp;
      shareRows(exchangeTile(p, c, tile, 0), column0, s, Tag{});
      shareRows(exchangeTile(p, c, tile, 1), column0, dp, Tag{});
      namedBarrier(1 + c.rowGroup, 32 * kColWarps);
      loadSharedRowsA(pFrag, exchangeTile(p, c, tile, 0));
    }
  }

  // dS^T of tile `tile` as A fragments (shared by gradient() when there are column warps).
  static FFPA_DEVICE void loadGradient(const BackwardParams& p, const Coordinates& c, int tile,
                                       uint32_t (&dsFrag)[kQuerySteps][4]) {
    if constexpr (kColWarps > 1) loadSharedRowsA(dsFrag, exchangeTile(p, c, tile, 1));
  }

  static FFPA_DEVICE void store(const Coordinates& c, Element* base, const int64_t (&strides)[3], int width,
                                float factor,
                                const AccumulatorTile<2 * kOutPanels>& acc) {
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int key = c.firstKey + c.warpRow + c.group + 8 * half;
      if (key >= c.keyEnd) continue;
      Element* out = base + int64_t(key) * strides[2];
#pragma unroll
      for (int n = 0; n < 2 * kOutPanels; ++n) {
        const int column = interleavedColumn<kColWarps>(c.colWarp, n, c.quad);
        if (column < width) {
          storeGlobal32(out + column, packPair(acc.f[n][2 * half] * factor,
                                               acc.f[n][2 * half + 1] * factor, Tag{}));
        }
      }
    }
  }

  static FFPA_DEVICE void run(const BackwardParams& p) {
    const Coordinates c = locate(p);
    const GradientLayout& l = p.keyLayout;
    const Steps s = stepsOf(p);
    const uint32_t shared = sharedAddress(sharedMemory());
    const int tiles = p.groupSize * c.queryTiles;
    auto pipe = makeStepPipeline(l.rings, shared, s.qkSteps + s.vSteps, s.dvSteps + s.dkSteps, tiles,
                                 [&](int tile, int inTile, uint32_t slot) { issueStep(p, c, s, tile, inTile, slot); });

    AccumulatorTile<2 * kOutPanels> dk, dv;
    dk.clear();
    dv.clear();
    if (tiles > 0) {
      // The CTA's K and V rows: the first commit group, before every step (zeros past the batch
      // entry's keys).
      const int validKeys = keysOfBatch(p, c.batch) - c.firstKey;
      copyTile<kKeys, kThreads>(shared + l.rowsOffset, 32, s.qkPanels, c.k, p.kStrides[2], validKeys);
      copyTile<kKeys, kThreads>(shared + l.rowsOffset + s.qkPanels * kKeys * 32, 32, s.vPanels, c.v,
                                p.vStrides[2], validKeys);
      copyAsyncCommit();
      pipe.start();
    }

    for (int tile = 0; tile < tiles; ++tile) {
      const Tile t = tileOf(p, c, tile);
      AccumulatorTile<kQueryTiles> scores, dp;
      scores.clear();
      dp.clear();
      scoreSteps(p, c, pipe, s.qkSteps, s.qkPanels, 0, scores);
      scoreSteps(p, c, pipe, s.vSteps, s.vPanels, s.qkPanels, dp);
      uint32_t pFrag[kQuerySteps][4], dsFrag[kQuerySteps][4];
      gradient(p, c, tile, t, scores, dp, pFrag, dsFrag);

      accumulateOutputSteps<kOutPanels, kColWarps>(pipe, s.dvPanels, l.outputPanelsPerStep, dv, pFrag, kQueries,
                                                   c.colWarp, Tag{});
      loadGradient(p, c, tile, dsFrag);
      accumulateOutputSteps<kOutPanels, kColWarps>(pipe, s.dkPanels, l.outputPanelsPerStep, dk, dsFrag, kQueries,
                                                   c.colWarp, Tag{});
    }
    store(c, c.dv, p.dvStrides, p.headDimV, 1.0f, dv);
    store(c, c.dk, p.dkStrides, p.headDimQk, p.scale, dk);
  }
};

template <class Tag, int kHeadDim>
FFPA_KERNEL void FFPA_LAUNCH_BOUNDS(ffpa::sm80::keyGradientShape(kHeadDim).threads(), 1)
    keyGradientKernel(const FFPA_GRID_CONSTANT BackwardParams params) {
  KeyGradientKernel<Tag, kHeadDim>::run(params);
}

}  // namespace ffpa::kernels::sm80
