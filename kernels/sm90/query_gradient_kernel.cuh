// The backward's dQ kernel for Hopper (sm_90a): TMA loads into 128-byte swizzled shared memory,
// wgmma from descriptors, a producer warpgroup and two consumers (see
// sm90/query_gradient_params.h for the roles and the layout).
//
// Per KV tile j (64 keys), with the barriers that order it (one K buffer):
//   producer:   [V empty j-1] V(j) -> V full      [K empty j-1] K(j) -> K full
//   consumer 0: [K full] S = Q K^T over d_qk; P = exp2(S scaleLog2 - lse2), 0 where masked
//               [dP full] dS = P (dP - delta) -> dP empty
//               [dS empty slot] dS -> dS full (slot = j % 2); dQ0 += dS K[:, 0:C0] -> K empty
//   consumer 1: [V full] dP = dO V^T over d_v -> V empty
//               [dP empty j-1] dP - delta -> dP full
//               [dS full slot] dQ1 += dS K[:, C0:] -> K empty, dS empty
// so V(j+1) loads while dS K of tile j runs, and consumer 1's dP(j+1) runs while K(j+1) loads
// and consumer 0 computes S(j+1) and P. K(j+1) waits for both dS K products of tile j, which
// orders everything behind it: the dP-empty and dS-empty waits then pass at once. Where shared
// memory holds two K buffers (kBuffers = 2: clusters of two up to d 512, of four up to 768), the
// producer loads K(j+1) into the other buffer first, [K empty j-1] K(j+1), then V(j+1), so that
// consumer 0 can start S(j+1) as soon as it is done with tile j; the dP-empty and dS-empty waits
// then order the consumers. In a cluster with two K buffers each consumer also defers its
// dS K product of tile j into tile j+1, between sending its partial S(j+1) (dP(j+1)) and adding
// the partner's, so that the tensor cores work while the partial crosses the cluster:
//   consumer 0: [K full j+1] S(j+1); dQ0 += dS(j) K(j) issued; partial sent; [Exchange full];
//               dQ0 done -> K empty (j); received partial added; P(j+1) ...
//   consumer 1: [V full j+1] dP(j+1); [dS full j] dQ1 += dS(j) K(j) issued; partial sent;
//               [Exchange full]; dQ1 done -> K empty (j), dS empty (j); received partial added ...
//
// With attention slices (sm90/forward_params.h, SlicedTiles) a CTA's rows are one row tile of a
// query segment and its KV tiles those of the forward's walk, masked by each tile's slice.
//
// With per-batch key lengths (FFPA_ATTENTION_KEY_LENGTHS) a CTA walks the KV tiles of its batch
// entry's keys, masked at its count, and the tile that holds the count's last key has the rest
// of its K and V rows zeroed before they reach a product (clearRowsPastKeys).
//
// In a cluster (kCluster = 2 or 4), each CTA holds its share of the head dims' 64-column blocks;
// consumer 0 sums its partial S over the cluster, consumer 1 its partial dP, each through its own
// buffers and mbarriers (warpgroup_tiles.cuh: reducePartials), before either is used.
#pragma once

#include "common/element.cuh"
#include "common/platform.cuh"
#include "common/ptx.cuh"
#include "sm90/ptx.cuh"
#include "sm90/query_gradient_params.h"
#include "sm90/warpgroup_tiles.cuh"

namespace ffpa::kernels::sm90 {

using ffpa::sm90::QueryGradientParams;

template <class Tag, int kHeadDimQk, int kCluster>
struct QueryGradientKernel {
  using Element = typename Tag::Element;
  static constexpr int kCtaColumns = kHeadDimQk / kCluster;        // dQ columns of one CTA
  static constexpr int kCtaBlocks = kCtaColumns / kBlockColumns;
  static constexpr uint32_t kKBytes = kCtaBlocks * kBlockBytes;   // one K buffer
  static constexpr int kColumns0 = consumer0Columns(kCtaColumns);  // of consumer 0
  static constexpr int kColumns1 = consumer1Columns(kCtaColumns);  // and of consumer 1

  static_assert(kCluster == 1 || kCluster == 2 || kCluster == kMaxGradientClusterSize,
                "one CTA, or a cluster of two or four");
  static_assert(kHeadDimQk % (kBlockColumns * kCluster) == 0, "d_qk: whole 64-column blocks per CTA");
  static_assert(kCtaColumns <= 384 && (kCtaColumns > kBlockColumns || kCluster == 1),
                "128..384 dQ columns per CTA (two consumers of whole 64-column blocks), or one CTA of 64 "
                "(consumer 1's alone)");
  static_assert((kColumns0 >= kBlockColumns || kColumns0 == 0) && kColumns1 >= kBlockColumns && kColumns1 <= 256,
                "wgmma N: 64..256 per consumer (consumer 0 none at d_qk 64)");
  static constexpr int kRegisters0 = accumulatorRegisters(kColumns0);

  struct Shared {
    uint32_t q, dO, k, v, ds;
    Four* dp;  // [kTileRegisters / 4][128 threads]: dP - delta of consumer 1's thread t
    ExchangeStages scores, gradients;  // the partial S and dP
    uint32_t barriers;
    FFPA_DEVICE uint32_t barrier(int which) const { return barriers + 8u * which; }
  };

  struct Position : RowTile {
    int64_t statsRow;  // of the CTA's first row in the row statistics
  };

  static FFPA_DEVICE Shared locateShared(const QueryGradientParams& p) {
    const AlignedShared shared = alignedShared();
    const uint32_t address = shared.address;
    Shared s{};
    s.q = address + p.qOffset;
    s.dO = address + p.dOOffset;
    s.k = address + p.kOffset;
    s.v = address + p.vOffset;
    s.ds = address + p.dsOffset;
    s.dp = reinterpret_cast<Four*>(shared.base + p.dpOffset);
    s.barriers = address + p.barrierOffset;
    locateExchangePair<kCluster>(shared, p.exchangeOffset, s.barrier(kGradExchangeBarriers), s.scores, s.gradients);
    return s;
  }

  static FFPA_DEVICE Position locate(const QueryGradientParams& p) {
    Position at;
    static_cast<RowTile&>(at) = locateRowTile<kCluster>(p, p.sliced);
    at.statsRow = (at.batch * p.headsQ + at.head) * p.seqQ + at.firstRow;
    return at;
  }

  // Where KV tile `keys` holds rows past the batch entry's keys (firstRowPastKeys), consumer
  // `consumer` zeroes them in the `count` landed blocks of its operand from `blocks`: consumer 0
  // in K, whose rows dS K multiplies by dS = 0 there (consumer 1 reads K after dS full, which
  // orders the zeros before it), consumer 1 in V, whose rows give the columns of dP that
  // dS = P (dP - delta) multiplies by P = 0.
  static FFPA_DEVICE void clearRowsPastKeys(const QueryGradientParams& p, const Position& at, const KeyTile& keys,
                                            uint32_t blocks, int count, int consumer) {
    const int firstRow = firstRowPastKeys(p, at.batch, keys.firstKey);
    if (firstRow < kKeys) zeroBlockRows(blocks, count, firstRow, kClearedRowsBarrierId + consumer);
  }

  // --- producer ---------------------------------------------------------------------------------

  static FFPA_DEVICE void produce(const QueryGradientParams& p, const Shared& s, const Position& at) {
    loadBlocks(&p.qMap, s.q, at.qk, at.firstRow, at.head, at.batch, s.barrier(kGradQFull));
    loadBlocks(&p.dOMap, s.dO, at.v, at.firstRow, at.head, at.batch, s.barrier(kGradDOFull));
    if (p.kBuffers == 2) {
      produceKeyTiles<2>(p, s, at);
    } else {
      produceKeyTiles<1>(p, s, at);
    }
  }

  // K (through kBuffers buffers) and V of every KV tile (produceStep: with one K buffer V goes
  // first, as consumer 1 releases V after dP and K comes free only after dS K).
  template <int kBuffers>
  static FFPA_DEVICE void produceKeyTiles(const QueryGradientParams& p, const Shared& s, const Position& at) {
    // K: all the instance's blocks from the CTA's first, for dS K over kCtaColumns (rank 1 may
    // hold fewer: its blocks past d_qk load as zeros, and the dQ columns they give are dropped).
    const BlockShare kBlocks{at.qk.first, kCtaBlocks};
    for (int tile = 0; tile < at.tiles; ++tile) {
      const int firstKey = keyTileOf(p.sliced, at, tile).firstKey;
      produceStep<kBuffers>(
          tile, s.barrier(kGradVEmpty), s.barrier(kGradKEmpty0),
          [&] { loadBlocks(&p.vMap, s.v, at.v, firstKey, at.kvHead, at.batch, s.barrier(kGradVFull)); },
          [&](int slot) {
            loadBlocks(&p.kMap, s.k + slot * kKBytes, kBlocks, firstKey, at.kvHead, at.batch,
                       s.barrier(kGradKFull0 + slot));
          });
    }
  }

  // --- consumers ---------------------------------------------------------------------------------

  // The row statistic `which` (0: delta, 1: lse2) of the thread's two rows; rows past the end
  // get `outside`.
  static FFPA_DEVICE void rowStats(const QueryGradientParams& p, const Position& at, const Lane& me, int which,
                                   float outside, float (&out)[2]) {
    const int64_t rowCount = int64_t(p.batch) * p.headsQ * p.seqQ;
    #pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int row = me.row(half);
      out[half] = at.firstRow + row < p.seqQ ? p.rowStats[which * rowCount + at.statsRow + row] : outside;
    }
  }

  // Writes dQ times the scale for the CTA's columns from `ctaColumn` on, up to the end of its
  // share (rank 1 may compute columns past d_qk, from the zeros its last K blocks hold).
  template <int N>
  static FFPA_DEVICE void storeGradient(const QueryGradientParams& p, const Position& at, const float (&dq)[N / 2],
                                        int ctaColumn) {
    const int first = at.qk.first * kBlockColumns;
    Element* out = static_cast<Element*>(p.dq) + at.batch * p.dqStrides[0] + at.head * p.dqStrides[1];
    storeAccumulator<N, Tag>(dq, out, p.dqStrides[2], at.firstRow, at.rowEnd, first + ctaColumn,
                             first + columnsHeld(p.headDimQk, at.qk), p.scale);
  }

  // Consumer 0: S, P, dS and the first dQ columns. kDeferKey (a cluster, two K buffers): dQ0 +=
  // dS K of tile j - 1 runs while tile j's partial S makes its first round trip in the cluster,
  // instead of at the end of tile j - 1, so that the warpgroup no longer waits idle there.
  template <bool kDeferKey>
  static FFPA_DEVICE void consume0(const QueryGradientParams& p, const Shared& s, const Position& at) {
    const Lane me = lane();
    float lse2[2];  // +inf for rows that see no key or do not exist: P = exp2(-inf) = 0
    rowStats(p, at, me, 1, __builtin_huge_valf(), lse2);
    float dq[kRegisters0];
    for (float& value : dq) value = 0.0f;
    const BufferRing kRing{p.kBuffers};
    if (at.tiles > 0) mbarrierWait(s.barrier(kGradQFull), 0);
    for (int tile = 0; tile < at.tiles; ++tile) {
      float t[kTileRegisters];  // S, then P, then dS
      const KeyTile keys = keyTileOf(p.sliced, at, tile);
      const int kSlot = kRing.slot(tile);
      const uint32_t k = s.k + kSlot * kKBytes;
      mbarrierWait(s.barrier(kGradKFull0 + kSlot), kRing.use(tile) & 1);
      clearRowsPastKeys(p, at, keys, k, kCtaBlocks, 0);
      scoreProduct<Tag>(t, s.q, k, at.qk.count);
      if constexpr (kDeferKey) {
        // dQ0 of the previous tile (none yet on the first: an empty group).
        const int previous = kRing.slot(tile - 1);
        issueKeyProduct<kColumns0, Tag>(dq, s.ds + ((tile - 1) & 1) * kBlockBytes, s.k + previous * kKBytes,
                                        tile > 0 ? 1 : 0);
        reducePartials<kCluster>(s.scores, t, at.rank, tile, at.tiles, [&] {
          wgmmaWait<0>();
          wgmmaFenceOperands(dq);
          if (tile > 0) mbarrierArrive(s.barrier(kGradKEmpty0 + previous));
        });
      } else if constexpr (kCluster > 1) {
        reducePartials<kCluster>(s.scores, t, at.rank, tile, at.tiles);
      }

      // P = exp2(S scale log2 e - LSE log2 e), 0 where a row does not see a key.
      VisibleKeys visible[2];
      #pragma unroll
      for (int half = 0; half < 2; ++half) {
        visible[half] = visibleKeys(p, p.sliced, keys, at.firstRow + me.row(half), keyEndOf(p, at.batch));
      }
      const auto rowLse2 = [&](int half, int, int) { return lse2[half]; };
      tileProbabilities(t, visible, keys.firstKey, p.scaleLog2, me, rowLse2);

      mbarrierWait(s.barrier(kDpFull), tile & 1);
      multiplyByTileShared(t, s.dp);
      mbarrierArrive(s.barrier(kDpEmpty));

      const int slot = tile & 1;
      if (tile >= 2) mbarrierWait(s.barrier(kDsEmpty0 + slot), (tile / 2 - 1) & 1);
      const uint32_t dsSlot = s.ds + slot * kBlockBytes;
      storeTile16<Tag>(dsSlot, t, me);
      mbarrierArrive(s.barrier(kDsFull0 + slot));
      mbarrierWait(s.barrier(kDsFull0 + slot), (tile / 2) & 1);  // all of dS is written

      if constexpr (!kDeferKey) {
        if constexpr (kColumns0 > 0) accumulateKeyProduct<kColumns0, Tag>(dq, dsSlot, k);
        mbarrierArrive(s.barrier(kGradKEmpty0 + kSlot));  // without columns, done with K since S
      }
    }
    if constexpr (kDeferKey) {
      if (at.tiles > 0) {
        const int last = kRing.slot(at.tiles - 1);
        accumulateKeyProduct<kColumns0, Tag>(dq, s.ds + ((at.tiles - 1) & 1) * kBlockBytes, s.k + last * kKBytes);
        mbarrierArrive(s.barrier(kGradKEmpty0 + last));
      }
    }
    if constexpr (kColumns0 > 0) storeGradient<kColumns0>(p, at, dq, 0);
  }

  // dQ1 += dS K of tile `tile` for consumer 1's columns (K from its first block on) is issued, once
  // dS(tile) and K(tile) are in place; finishSecondKeyProduct completes it and releases K and dS.
  static FFPA_DEVICE void issueSecondKeyProduct(float (&dq)[kColumns1 / 2], const Shared& s, const BufferRing& kRing,
                                                int tile, int count = 1) {
    const int slot = tile & 1, kSlot = kRing.slot(tile);
    if (count > 0) {
      mbarrierWait(s.barrier(kDsFull0 + slot), (tile / 2) & 1);
      mbarrierWait(s.barrier(kGradKFull0 + kSlot), kRing.use(tile) & 1);  // K(tile) is in place (consumer 0 saw it)
    }
    issueKeyProduct<kColumns1, Tag>(dq, s.ds + slot * kBlockBytes,
                                    s.k + kSlot * kKBytes + (kColumns0 / kBlockColumns) * kBlockBytes, count);
  }
  // (count 0: an empty group, nothing to release.)
  static FFPA_DEVICE void finishSecondKeyProduct(float (&dq)[kColumns1 / 2], const Shared& s, const BufferRing& kRing,
                                                 int tile, int count = 1) {
    wgmmaWait<0>();
    wgmmaFenceOperands(dq);
    if (count > 0) {
      mbarrierArrive(s.barrier(kGradKEmpty0 + kRing.slot(tile)));
      mbarrierArrive(s.barrier(kDsEmpty0 + (tile & 1)));
    }
  }

  // Consumer 1: dP - delta for consumer 0, and the other dQ columns; kDeferKey as for consumer 0,
  // over the exchange of dP.
  template <bool kDeferKey>
  static FFPA_DEVICE void consume1(const QueryGradientParams& p, const Shared& s, const Position& at) {
    const Lane me = lane();
    float delta[2];
    rowStats(p, at, me, 0, 0.0f, delta);
    float dq[kColumns1 / 2];
    for (float& value : dq) value = 0.0f;
    const BufferRing kRing{p.kBuffers};
    if (at.tiles > 0) mbarrierWait(s.barrier(kGradDOFull), 0);
    for (int tile = 0; tile < at.tiles; ++tile) {
      float dp[kTileRegisters];
      mbarrierWait(s.barrier(kGradVFull), tile & 1);
      clearRowsPastKeys(p, at, keyTileOf(p.sliced, at, tile), s.v, at.v.count, 1);
      scoreProduct<Tag>(dp, s.dO, s.v, at.v.count);
      mbarrierArrive(s.barrier(kGradVEmpty));
      if constexpr (kDeferKey) {
        // dQ1 of the previous tile (none yet on the first: an empty group).
        const int count = tile > 0 ? 1 : 0;
        issueSecondKeyProduct(dq, s, kRing, tile - 1, count);
        reducePartials<kCluster>(s.gradients, dp, at.rank, tile, at.tiles,
                                 [&] { finishSecondKeyProduct(dq, s, kRing, tile - 1, count); });
      } else if constexpr (kCluster > 1) {
        reducePartials<kCluster>(s.gradients, dp, at.rank, tile, at.tiles);
      }

      // Register 4 j + 2 half + e holds a column of row `half` (sm90/ptx.cuh).
      #pragma unroll
      for (int i = 0; i < kTileRegisters; ++i) dp[i] -= delta[i / 2 % 2];
      if (tile > 0) mbarrierWait(s.barrier(kDpEmpty), (tile - 1) & 1);
      storeTileShared(s.dp, dp);
      mbarrierArrive(s.barrier(kDpFull));

      if constexpr (!kDeferKey) {
        issueSecondKeyProduct(dq, s, kRing, tile);
        finishSecondKeyProduct(dq, s, kRing, tile);
      }
    }
    if constexpr (kDeferKey) {
      if (at.tiles > 0) {
        issueSecondKeyProduct(dq, s, kRing, at.tiles - 1);
        finishSecondKeyProduct(dq, s, kRing, at.tiles - 1);
      }
    }
    storeGradient<kColumns1>(p, at, dq, kColumns0);
  }

  static FFPA_DEVICE void run(const QueryGradientParams& p) {
    const Shared s = locateShared(p);
    const Position at = locate(p);
    // Arrivals per phase of each mbarrier (QueryGradientBarrier order).
    int arrivals[kGradBarrierCount] = {
        1, 1,            // Q full, dO full: the producer's expect_tx
        1, 1, 256, 256,  // K full per buffer; K empty per buffer: both consumers
        1, 128,          // V full; V empty: consumer 1
        128, 128,        // dP full (consumer 1), dP empty (consumer 0)
        128, 128,        // dS full per slot: consumer 0
        128, 128,        // dS empty per slot: consumer 1
    };
    setExchangeArrivals(arrivals, kGradExchangeBarriers);
    initBarriers<kCluster>(s.barrier(0), arrivals);
    runRoles<kGradientRegisters[0], kGradientRegisters[1]>(
        at.tiles > 0, [&] { produce(p, s, at); },
        [&] {
          if (kCluster > 1 && p.kBuffers == 2) {
            consume0<kCluster != 1>(p, s, at);
          } else {
            consume0<false>(p, s, at);
          }
        },
        [&] {
          if (kCluster > 1 && p.kBuffers == 2) {
            consume1<kCluster != 1>(p, s, at);
          } else {
            consume1<false>(p, s, at);
          }
        });
  }
};

// The kernel entries: grid (row tiles * CTAs per cluster, B * H) or (.., H, B), the row tiles
// ceil(seqQ / 64) or those of SlicedTiles; 384 threads; sharedBytes.
template <class Tag, int kHeadDimQk>
FFPA_KERNEL void FFPA_LAUNCH_BOUNDS(kThreads, 1)
    queryGradientKernel(const FFPA_GRID_CONSTANT QueryGradientParams p) {
  QueryGradientKernel<Tag, kHeadDimQk, 1>::run(p);
}

template <class Tag, int kHeadDimQk, int kCluster>
FFPA_KERNEL void FFPA_CLUSTER_DIMS(kCluster, 1, 1) FFPA_LAUNCH_BOUNDS(kThreads, 1)
    clusterQueryGradientKernel(const FFPA_GRID_CONSTANT QueryGradientParams p) {
  QueryGradientKernel<Tag, kHeadDimQk, kCluster>::run(p);
}

}  // namespace ffpa::kernels::sm90
