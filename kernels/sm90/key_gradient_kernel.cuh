// The backward's dK/dV kernel for Hopper (sm_90a), on one CTA or clusters of two or four: TMA loads
// into 128-byte swizzled shared memory, wgmma from descriptors, a producer warpgroup and two
// consumers (see sm90/key_gradient_params.h for the roles and the layout).
//
// Per step s (64 queries of one query head of the group), with the barriers that order it:
//   producer:   [dO empty s-1] dO(s) -> dO full     [Q empty s-1] Q(s) -> Q full
//   consumer 0: [Q full] S^T = K Q^T over its d_qk share; summed over a cluster
//               [tiles empty s-1] P^T -> shared memory
//               [dP full] dS^T = P^T (dP^T - delta) -> dP empty; dS^T -> shared -> tiles full
//               [dO full] dV0 += P^T dO -> dO empty;  dK0 += dS^T Q -> Q empty, tiles empty
//   consumer 1: [dO full] dP^T = V dO^T over its d_v share; summed over a cluster
//               [dP empty s-1] dP^T - delta -> dP full
//               [tiles full] dV1 += P^T dO -> dO empty;  [Q full] dK1 += dS^T Q -> Q empty, tiles empty
// so dO(s+1) loads during dS^T Q of step s and consumer 1's dP^T(s+1) runs while Q(s+1) loads.
// As in the dQ kernel, a single Q buffer orders everything behind it: the dP-empty and
// tiles-empty waits then pass at once. Where shared memory holds two Q buffers (qBuffers = 2:
// one CTA, clusters of two at 384 and 512, of four at 768), the producer loads Q(s+1) into the
// other buffer first, [Q empty s-1] Q(s+1), then dO(s+1), and consumer 0 can start S^T(s+1) as
// soon as it is done with step s; the dP-empty and tiles-empty waits then order the consumers.
// In a cluster consumer 0 also defers dK0 += dS^T Q of step s into step s+1, between sending its
// partial S^T(s+1) and adding the partner's, so that the tensor cores work while the partial
// crosses the cluster:
//   [Q full s+1] S^T(s+1); dK0 += dS^T Q(s) issued; partial sent; [Exchange full] landed;
//   dK0 done -> Q empty (s), tiles empty (s); received partial added; P^T(s+1) ...
// and consumer 1 likewise defers dK1 += dS^T Q of step s over the exchange of dP^T(s+1).
//
// With attention slices (sm90/forward_params.h, SlicedTiles) a CTA's (cluster's) keys are one key
// tile of a key segment, and its query tiles per head are the walk over the rows that see them
// through each slice covering the segment in turn, masked by that tile's slice.
//
// With per-batch key lengths (FFPA_ATTENTION_KEY_LENGTHS) the keys from the batch entry's count
// on are seen by no query: a CTA wholly past it walks no step and stores zeros, and the one that
// holds the count's last key zeroes its V rows past it (clearValuesPastKeys).
#pragma once

#include "common/element.cuh"
#include "common/platform.cuh"
#include "common/ptx.cuh"
#include "sm80/cta_geometry.cuh"
#include "sm90/key_gradient_params.h"
#include "sm90/ptx.cuh"
#include "sm90/warpgroup_tiles.cuh"

#include <type_traits>

namespace ffpa::kernels::sm90 {

using ffpa::sm90::KeyGradientParams;

template <class Tag, int kHeadDim, int kCluster>
struct KeyGradientKernel {
  using Element = typename Tag::Element;
  static constexpr int kCtaColumns = kHeadDim / kCluster;          // dK and dV columns of one CTA
  static constexpr int kCtaBlocks = kCtaColumns / kBlockColumns;
  static constexpr uint32_t kQBytes = kCtaBlocks * kBlockBytes;  // one Q buffer
  static constexpr int kColumns0 = consumer0Columns(kCtaColumns);  // of consumer 0
  static constexpr int kColumns1 = consumer1Columns(kCtaColumns);  // and of consumer 1

  static_assert(kCluster == 1 || kCluster == 2 || kCluster == kMaxGradientClusterSize,
                "one CTA, or a cluster of two or four");
  static_assert(kHeadDim % (kBlockColumns * kCluster) == 0, "whole 64-column blocks per CTA");
  static_assert(kCtaColumns <= 256 && (kCtaColumns > kBlockColumns || kCluster == 1),
                "128..256 columns of dK and dV per CTA (two 64-register halves per consumer at most), or "
                "one CTA of 64 (consumer 1's alone)");
  static_assert((kColumns0 >= kBlockColumns || kColumns0 == 0) && kColumns1 >= kBlockColumns && kColumns1 <= 128,
                "wgmma N: 64..128 per consumer (consumer 0 none at d 64)");
  static constexpr int kRegisters0 = accumulatorRegisters(kColumns0);  // of dV and of dK each
  static constexpr uint32_t kSecond = (kColumns0 / kBlockColumns) * kBlockBytes;  // consumer 1's first block

  struct Shared {
    uint32_t k, v, q, dO, p, ds;
    Four* dp;  // [kTileRegisters / 4][128 threads]: dP^T - delta of consumer 1's thread t
    ExchangeStages scores, gradients;  // the partial S^T and dP^T
    uint32_t barriers;
    FFPA_DEVICE uint32_t barrier(int which) const { return barriers + 8u * which; }
  };

  // The cluster's keys and the 64-query tiles they meet (those of the mma.sync dK/dV kernel's
  // key-major CTAs: sm80::CtaKeys), and this CTA's share of the head dims.
  struct Position : ffpa::kernels::sm80::CtaKeys {
    int batch;  // ints (< 2^31): every register a consumer keeps across its loop counts
    int kvHead;
    int rank;          // in the cluster
    BlockShare qk, v;  // the 64-column blocks of d_qk and d_v the CTA holds
    int steps;         // query tiles of all the group's heads
  };

  // The query head, first query and slice (-1: none, the causal rule) of step `step`.
  using Step = ffpa::kernels::sm80::QueryTile;

  // The queries [begin, end) that see key `key` in step `t` (empty when end <= begin):
  // sm80::queriesSeeing clamped to [0, seqQ] (none for keys past the cluster's keys).
  struct VisibleQueries {
    int begin, end;
    FFPA_DEVICE bool holds(int query) const { return query >= begin && query < end; }
  };

  static FFPA_DEVICE Shared locateShared(const KeyGradientParams& p) {
    const AlignedShared shared = alignedShared();
    const uint32_t address = shared.address;
    Shared s{};
    s.k = address + p.kOffset;
    s.v = address + p.vOffset;
    s.q = address + p.qOffset;
    s.dO = address + p.dOOffset;
    s.p = address + p.pOffset;
    s.ds = address + p.dsOffset;
    s.dp = reinterpret_cast<Four*>(shared.base + p.dpOffset);
    s.barriers = address + p.barrierOffset;
    locateExchangePair<kCluster>(shared, p.exchangeOffset, s.barrier(kKeyExchangeBarriers), s.scores, s.gradients);
    return s;
  }

  // The cluster's keys from its batch entry's count (keyEndOf, read where used rather than held)
  // on are seen by no query (a CTA wholly past it walks no step), and stored as the zeros they get
  // up to the tensor's end.
  static FFPA_DEVICE Position locate(const KeyGradientParams& p) {
    const ffpa::kernels::sm80::GridPosition grid = ffpa::kernels::sm80::gridPosition(p.gridDnhb, p.headsKv);
    Position at;
    at.rank = kCluster == 1 ? 0 : clusterRank();
    at.batch = static_cast<int>(grid.batch);
    static_cast<ffpa::kernels::sm80::CtaKeys&>(at) = ffpa::kernels::sm80::ctaKeys(
        p, p.sliced.slices, p.sliced.tiles, p.sliced.tileCount, blockIndexX() / kCluster, kRows, kKeys,
        keyEndOf(p, at.batch));
    at.kvHead = static_cast<int>(grid.head);
    at.qk = blockShare(columnBlocks(p.headDimQk), kCluster, at.rank);
    at.v = blockShare(columnBlocks(p.headDimV), kCluster, at.rank);
    at.steps = p.groupSize * at.queryTiles;
    return at;
  }

  static FFPA_DEVICE Step stepOf(const KeyGradientParams& p, const Position& at, int step) {
    return ffpa::kernels::sm80::queryTileOf(p.sliced.slices, at, at.kvHead, p.groupSize, kKeys, step);
  }

  static FFPA_DEVICE VisibleQueries visibleQueries(const KeyGradientParams& p, const Position& at, const Step& t,
                                                   int key) {
    const slices::KeySpan span =
        ffpa::kernels::sm80::queriesSeeing(p, p.sliced.slices, at, t.slice, key, keyEndOf(p, at.batch));
    const int64_t begin = span.begin < 0 ? 0 : span.begin;  // the causal rule's may be below 0
    return {static_cast<int>(begin < span.end ? begin : span.end), static_cast<int>(span.end)};
  }

  // --- producer ---------------------------------------------------------------------------------

  static FFPA_DEVICE void produce(const KeyGradientParams& p, const Shared& s, const Position& at) {
    loadBlocks(&p.kMap, s.k, at.qk, at.firstKey, at.kvHead, at.batch, s.barrier(kKeyKFull));
    loadBlocks(&p.vMap, s.v, at.v, at.firstKey, at.kvHead, at.batch, s.barrier(kKeyVFull));
    // Q and dO: all the instance's blocks from the CTA's first, for the products over
    // kCtaColumns (blocks past d load as zeros; columns past the share are dropped at the end).
    if (p.qBuffers == 2) {
      produceQuerySteps<2>(p, s, at);
    } else {
      produceQuerySteps<1>(p, s, at);
    }
  }

  // Q (through kBuffers buffers) and dO of every step (produceStep: with one Q buffer dO goes
  // first, as both consumers release it after P^T dO, before dS^T Q).
  template <int kBuffers>
  static FFPA_DEVICE void produceQuerySteps(const KeyGradientParams& p, const Shared& s, const Position& at) {
    const BlockShare qBlocks{at.qk.first, kCtaBlocks};
    const BlockShare dOBlocks{at.v.first, kCtaBlocks};
    for (int step = 0; step < at.steps; ++step) {
      const Step t = stepOf(p, at, step);
      produceStep<kBuffers>(
          step, s.barrier(kKeyDOEmpty), s.barrier(kKeyQEmpty0),
          [&] { loadBlocks(&p.dOMap, s.dO, dOBlocks, t.firstQuery, t.head, at.batch, s.barrier(kKeyDOFull)); },
          [&](int slot) {
            loadBlocks(&p.qMap, s.q + slot * kQBytes, qBlocks, t.firstQuery, t.head, at.batch,
                       s.barrier(kKeyQFull0 + slot));
          });
    }
  }

  // --- consumers ---------------------------------------------------------------------------------

  // The query statistic `which` (0: delta, 1: lse2) of the thread's 16 query columns of step
  // `t`: out[2 j + e] for column 8 j + 2 quad + e (the column of tile registers 4 j + 2 half + e);
  // queries past the end get `outside`.
  static FFPA_DEVICE void queryStats(const KeyGradientParams& p, const Position& at, const Step& t, const Lane& me,
                                     int which, float outside, float (&out)[kKeys / 4]) {
    const int64_t rows = int64_t(p.batch) * p.headsQ * p.seqQ;
    const int64_t base = which * rows + (int64_t(at.batch) * p.headsQ + t.head) * p.seqQ;
    #pragma unroll
    for (int j = 0; j < kKeys / 8; ++j) {
      #pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int query = t.firstQuery + me.column(j, e);
        out[2 * j + e] = query < p.seqQ ? p.rowStats[base + query] : outside;
      }
    }
  }

  // Writes `acc` (times `scale`) as the CTA's columns from `ctaColumn` on of the gradient at `out`
  // (d columns, `strides`), up to the end of `share`.
  template <int N>
  static FFPA_DEVICE void storeRows(const Position& at, const float (&acc)[N / 2], void* out,
                                    const int64_t (&strides)[3], int headDim, BlockShare share, int ctaColumn,
                                    float scale) {
    const int first = share.first * kBlockColumns;
    Element* rows = static_cast<Element*>(out) + at.batch * strides[0] + at.kvHead * strides[1];
    storeAccumulator<N, Tag>(acc, rows, strides[2], at.firstKey, at.keyEnd, first + ctaColumn,
                             first + columnsHeld(headDim, share), scale);
  }

  // A warpgroup is done with a step: its Q buffer (slot qSlot) and the P^T and dS^T tiles. (With two
  // Q buffers nothing else keeps a warpgroup's warps within a step of each other: P^T and dS^T of
  // the next step wait until all of them, consumer 0's too, are done.)
  static FFPA_DEVICE void releaseKeyStep(const Shared& s, int qSlot) {
    mbarrierArrive(s.barrier(kKeyQEmpty0 + qSlot));
    mbarrierArrive(s.barrier(kKeyTilesEmpty));
  }

  // Sums the warpgroup's partial tile `tile` of step `step` over a cluster (exchange `x`; one CTA
  // holds the whole tile already). With kDeferKey, dK += dS^T Q of step - 1 (2 kCount columns of
  // dK, Q's from byte `qColumns` of its buffer; none yet on the first step: an empty group) runs
  // meanwhile: issued before the partial is sent, completed once the partner's has landed, and
  // step - 1 released then.
  template <bool kDeferKey, int kCount>
  static FFPA_DEVICE void reduceOverKeyProduct(const Shared& s, const Position& at, const ExchangeStages& x,
                                               float (&tile)[kTileRegisters], float (&dk)[kCount], uint32_t qColumns,
                                               const BufferRing& qRing, int step) {
    if constexpr (kDeferKey) {
      const int previous = qRing.slot(step - 1);
      issueKeyProduct<2 * kCount, Tag>(dk, s.ds, s.q + previous * kQBytes + qColumns, step > 0 ? 1 : 0);
      reducePartials<kCluster>(x, tile, at.rank, step, at.steps, [&] {
        wgmmaWait<0>();
        wgmmaFenceOperands(dk);
        if (step > 0) releaseKeyStep(s, previous);
      });
    } else if constexpr (kCluster > 1) {
      reducePartials<kCluster>(x, tile, at.rank, step, at.steps);
    }
  }

  // Consumer 0: S^T, P^T, dS^T, and the first columns of dV and dK. kDeferKey (two Q buffers):
  // dK0 += dS^T Q of step s - 1 runs while step s's partial S^T makes its first round trip in
  // the cluster, instead of at the end of step s - 1, so that the warpgroup no longer waits idle.
  template <bool kDeferKey>
  static FFPA_DEVICE void consume0(const KeyGradientParams& p, const Shared& s, const Position& at) {
    const Lane me = lane();
    float dv[kRegisters0], dk[kRegisters0];
    for (float& value : dv) value = 0.0f;
    for (float& value : dk) value = 0.0f;
    const BufferRing qRing{p.qBuffers};
    if (at.steps > 0) mbarrierWait(s.barrier(kKeyKFull), 0);
    for (int step = 0; step < at.steps; ++step) {
      const Step t = stepOf(p, at, step);
      float lse2[kKeys / 4];  // +inf for queries past the end: P^T = exp2(-inf) = 0
      queryStats(p, at, t, me, 1, __builtin_huge_valf(), lse2);
      float tile[kTileRegisters];  // S^T, then P^T, then dS^T
      const int qSlot = qRing.slot(step);
      const uint32_t q = s.q + qSlot * kQBytes;
      mbarrierWait(s.barrier(kKeyQFull0 + qSlot), qRing.use(step) & 1);
      scoreProduct<Tag>(tile, s.k, q, at.qk.count);
      reduceOverKeyProduct<kDeferKey>(s, at, s.scores, tile, dk, 0, qRing, step);

      // P^T = exp2(S^T scale log2 e - LSE log2 e), 0 where a query does not see a key row.
      VisibleQueries visible[2];
      #pragma unroll
      for (int half = 0; half < 2; ++half) visible[half] = visibleQueries(p, at, t, at.firstKey + me.row(half));
      const auto columnLse2 = [&](int, int j, int e) { return lse2[2 * j + e]; };
      tileProbabilities(tile, visible, t.firstQuery, p.scaleLog2, me, columnLse2);
      if (step > 0) mbarrierWait(s.barrier(kKeyTilesEmpty), (step - 1) & 1);
      storeTile16<Tag>(s.p, tile, me);

      mbarrierWait(s.barrier(kKeyDpFull), step & 1);
      multiplyByTileShared(tile, s.dp);
      mbarrierArrive(s.barrier(kKeyDpEmpty));
      storeTile16<Tag>(s.ds, tile, me);
      mbarrierArrive(s.barrier(kKeyTilesFull));
      mbarrierWait(s.barrier(kKeyTilesFull), step & 1);  // all of P^T and dS^T are written

      mbarrierWait(s.barrier(kKeyDOFull), step & 1);  // (passes at once: dP^T needed dO)
      if constexpr (kColumns0 > 0) accumulateKeyProduct<kColumns0, Tag>(dv, s.p, s.dO);
      mbarrierArrive(s.barrier(kKeyDOEmpty));
      if constexpr (!kDeferKey) {
        if constexpr (kColumns0 > 0) accumulateKeyProduct<kColumns0, Tag>(dk, s.ds, q);
        releaseKeyStep(s, qSlot);
      }
    }
    if constexpr (kDeferKey) {
      if (at.steps > 0) {
        const int last = qRing.slot(at.steps - 1);
        accumulateKeyProduct<kColumns0, Tag>(dk, s.ds, s.q + last * kQBytes);
        releaseKeyStep(s, last);
      }
    }
    if constexpr (kColumns0 > 0) {
      storeRows<kColumns0>(at, dv, p.dv, p.dvStrides, p.headDimV, at.v, 0, 1.0f);
      storeRows<kColumns0>(at, dk, p.dk, p.dkStrides, p.headDimQk, at.qk, 0, p.scale);
    }
  }

  // With per-batch key lengths, consumer 1 zeroes the CTA's V rows past the batch entry's keys
  // (firstRowPastKeys), once, as V is resident: their rows of dP^T would reach dS^T = P^T (dP^T -
  // delta) as NaN times P^T = 0, and from there dK's rows past the count, which must be zeros.
  // K's rows need none: they reach S^T only, which the mask replaces.
  static FFPA_DEVICE void clearValuesPastKeys(const KeyGradientParams& p, const Shared& s, const Position& at) {
    const int firstRow = firstRowPastKeys(p, at.batch, at.firstKey);
    if (firstRow < kKeys) zeroBlockRows(s.v, at.v.count, firstRow, kClearedRowsBarrierId + 1);
  }

  // Consumer 1: dP^T - delta for consumer 0, and the other columns of dV and dK. kDeferKey (two
  // Q buffers): dK1 += dS^T Q of step s - 1 runs while step s's partial dP^T makes its first
  // round trip in the cluster.
  template <bool kDeferKey>
  static FFPA_DEVICE void consume1(const KeyGradientParams& p, const Shared& s, const Position& at) {
    const Lane me = lane();
    float dv[kColumns1 / 2], dk[kColumns1 / 2];
    for (float& value : dv) value = 0.0f;
    for (float& value : dk) value = 0.0f;
    const BufferRing qRing{p.qBuffers};
    if (at.steps > 0) {
      mbarrierWait(s.barrier(kKeyVFull), 0);
      clearValuesPastKeys(p, s, at);
    }
    for (int step = 0; step < at.steps; ++step) {
      const Step t = stepOf(p, at, step);
      float delta[kKeys / 4];
      queryStats(p, at, t, me, 0, 0.0f, delta);
      float dp[kTileRegisters];
      mbarrierWait(s.barrier(kKeyDOFull), step & 1);
      scoreProduct<Tag>(dp, s.v, s.dO, at.v.count);
      reduceOverKeyProduct<kDeferKey>(s, at, s.gradients, dp, dk, kSecond, qRing, step);

      // Register 4 j + 2 half + e holds query column 8 j + 2 quad + e (sm90/ptx.cuh).
      #pragma unroll
      for (int i = 0; i < kTileRegisters; ++i) dp[i] -= delta[i / 4 * 2 + i % 2];
      if (step > 0) mbarrierWait(s.barrier(kKeyDpEmpty), (step - 1) & 1);
      storeTileShared(s.dp, dp);
      mbarrierArrive(s.barrier(kKeyDpFull));

      mbarrierWait(s.barrier(kKeyTilesFull), step & 1);
      accumulateKeyProduct<kColumns1, Tag>(dv, s.p, s.dO + kSecond);
      mbarrierArrive(s.barrier(kKeyDOEmpty));
      const int qSlot = qRing.slot(step);
      mbarrierWait(s.barrier(kKeyQFull0 + qSlot), qRing.use(step) & 1);  // Q(s) is in place (consumer 0 saw it)
      if constexpr (!kDeferKey) {
        accumulateKeyProduct<kColumns1, Tag>(dk, s.ds, s.q + qSlot * kQBytes + kSecond);
        releaseKeyStep(s, qSlot);
      }
    }
    if constexpr (kDeferKey) {
      if (at.steps > 0) {
        const int last = qRing.slot(at.steps - 1);
        accumulateKeyProduct<kColumns1, Tag>(dk, s.ds, s.q + last * kQBytes + kSecond);
        releaseKeyStep(s, last);
      }
    }
    storeRows<kColumns1>(at, dv, p.dv, p.dvStrides, p.headDimV, at.v, kColumns0, 1.0f);
    storeRows<kColumns1>(at, dk, p.dk, p.dkStrides, p.headDimQk, at.qk, kColumns0, p.scale);
  }

  // A consumer's role with its own shared-memory layout and position, worked out again after it
  // took its registers (computed once before the roles split, they lived in the entry's 168
  // registers, and with a deferred dK product in flight beside dV, dK and a tile ptxas spilled
  // parts of them), and its dK product deferred (std::true_type) where a cluster has two Q
  // buffers (one CTA has no exchange for the product to overlap).
  template <class Role>
  static FFPA_DEVICE void consume(const KeyGradientParams& p, Role&& role) {
    const Shared s = locateShared(p);
    const Position at = locate(p);
    if constexpr (kCluster > 1) {
      if (p.qBuffers == 2) {
        role(s, at, std::true_type{});
        return;
      }
    }
    role(s, at, std::false_type{});
  }

  static FFPA_DEVICE void run(const KeyGradientParams& p) {
    const Shared s = locateShared(p);
    const Position at = locate(p);
    // Arrivals per phase of each mbarrier (KeyGradientBarrier order).
    int arrivals[kKeyBarrierCount] = {
        1, 1,            // K full, V full: the producer's expect_tx
        1, 1, 256, 256,  // Q full per buffer; Q empty per buffer: both consumers
        1, 256,          // dO full; dO empty: both consumers
        128, 128,        // dP full (consumer 1), dP empty (consumer 0)
        128, 256,        // tiles full (consumer 0), tiles empty (both consumers)
    };
    setExchangeArrivals(arrivals, kKeyExchangeBarriers);
    initBarriers<kCluster>(s.barrier(0), arrivals);
    runRoles<kGradientRegisters[0], kGradientRegisters[1]>(
        at.steps > 0, [&] { produce(p, s, at); },
        [&] { consume(p, [&](const Shared& mine, const Position& here, auto defer) {
                consume0<decltype(defer)::value>(p, mine, here);
              }); },
        [&] { consume(p, [&](const Shared& mine, const Position& here, auto defer) {
                consume1<decltype(defer)::value>(p, mine, here);
              }); });
  }
};

// The kernel entries: grid (key tiles * CTAs per cluster, B * Hkv) or (.., Hkv, B), the key
// tiles ceil(seqKv / 64) or those of SlicedTiles; 384 threads; sharedBytes.
template <class Tag, int kHeadDim>
FFPA_KERNEL void FFPA_LAUNCH_BOUNDS(kThreads, 1)
    keyGradientKernel(const FFPA_GRID_CONSTANT KeyGradientParams p) {
  KeyGradientKernel<Tag, kHeadDim, 1>::run(p);
}

template <class Tag, int kHeadDim, int kCluster>
FFPA_KERNEL void FFPA_CLUSTER_DIMS(kCluster, 1, 1) FFPA_LAUNCH_BOUNDS(kThreads, 1)
    clusterKeyGradientKernel(const FFPA_GRID_CONSTANT KeyGradientParams p) {
  KeyGradientKernel<Tag, kHeadDim, kCluster>::run(p);
}

}  // namespace ffpa::kernels::sm90
