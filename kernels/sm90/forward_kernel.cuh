// The FFPA forward kernel for Hopper (sm_90a): TMA loads into 128-byte swizzled shared memory,
// completed on mbarriers; wgmma from shared memory; a producer warpgroup and two consumer
// warpgroups (see sm90/forward_params.h for the roles and the layout).
//
// Per KV tile j (Bc = 64 keys), with the barriers that order it:
//   producer:   [K empty j-1] K(j) -> K full      [V empty j-1] V(j) -> V full
//   consumer 0: [K full] S[64, 64] = Q K^T over d_qk in k16 steps -> K empty
//               online softmax; [P empty slot] P(j) and the row scales -> P full (slot = j % 2)
//               rescale O0; [V full] O0[64, C0] += P V[:, 0:C0] -> V empty
//   consumer 1: [P full slot] rescale O1; [V full] O1[64, C1] += P V[:, C0:] -> V empty, P empty
// K(j+1) thus loads during the softmax and P V of tile j, V(j+1) during S(j+1). (A cluster with
// two K buffers loads K(j+1) into the other a tile earlier: see produceKeyTiles.) A kernel that
// shares no K and V loads V in two parts, consumer 0's blocks and consumer 1's (kSplitValues),
// and with p.overlap consumer 1 runs a tile behind:
//   consumer 0: [K full] S(j) -> K empty, Scores next (slot of j - 1); softmax; P(j); O0 += P V0(j)
//   consumer 1: [P full slot] [Scores next slot] O1 += P V1(j) -> V1 empty, P empty
// so that P V1(j) runs under the softmax of tile j + 1 instead of beside S(j + 1) (in a cluster,
// where consumer 0 completes S(j + 1) in iteration j, also under the partial's round trip).
// Scores are kept in the log2 domain (scaled by softmax scale * log2 e). A warp masks them only
// where one of its rows may not see the whole tile, and O is rescaled only when a row's reference
// maximum moves (kRescaleThreshold): both decided per warp, as consumer 0's softmax paces the CTA.
//
// With attention slices (sm90/forward_params.h, SlicedTiles) a CTA's rows are one row tile of a
// query segment, and KV tile j is tile j of its walk over the keys of each slice covering the
// segment: the producer loads it from that walk's key, consumer 0 masks it by that slice's rule.
//
// In a cluster of two (kCluster = 2, d_v > 512), each CTA holds its share of the head dims'
// 64-column blocks, and consumer 0 completes S between the wgmma and the softmax:
//   [Exchange empty j-1] partial S(j) -> the other CTA (st.async, on its Exchange full)
//   [Exchange full] S(j) = own partial + received -> the other CTA's Exchange empty
// (see sm90/forward_params.h). To hide that round trip, consumer 0 then runs one tile ahead:
// once P(j) is in shared memory it issues S(j+1), then O0 += P V(j), sends the partial S(j+1)
// as soon as its wgmma group completes, and receives the other CTA's after P V(j):
//   [K full j+1] S(j+1) issued; [V full] O0 += P V(j) issued; S(j+1) done -> K empty, sent;
//   P V(j) done -> V empty; [Exchange full] S(j+1) = own + received.
//
// With K and V shared by two CTAs (kShareKv, forward_params.h), each producer loads half of every
// K and V tile's blocks into both CTAs (TMA multicast), and "K empty" / "V empty" count the
// releases of both CTAs' consumers: a producer waits until both are done with a buffer.
//
// With per-batch key lengths (FFPA_ATTENTION_KEY_LENGTHS; no slices) the rows of batch entry b
// walk the KV tiles of its first L_b keys only, and a bottom-right diagonal ends at key L_b - 1.
// The tile holding key L_b - 1 may reach past it: TMA loads those rows from the tensor (zeros only
// past seqKv), whatever they hold. Their scores are masked (replaced, so a NaN goes too); their V
// rows each consumer zeroes in its own blocks before its P V of that tile (clearValuesPastKeys),
// as P = 0 does not cancel a NaN.
#pragma once

#include "common/element.cuh"
#include "common/platform.cuh"
#include "common/ptx.cuh"
#include "sm90/forward_params.h"
#include "sm90/forward_rows.cuh"
#include "sm90/ptx.cuh"
#include "sm90/warpgroup_tiles.cuh"

namespace ffpa::kernels::sm90 {

using ffpa::sm90::ForwardParams;
using namespace ffpa::sm90;  // the shape constants and Barrier

// kSplit: how the consumers split a CTA's output columns (kEvenSplit or kSkewedSplit,
// sm90/forward_params.h).
template <class Tag, int kHeadDimV, int kCluster = 1, bool kShareKv = false, int kSplit = defaultForwardSplit(kCluster)>
struct ForwardKernel {
  using Element = typename Tag::Element;
  static constexpr int kCtaColumns = kHeadDimV / kCluster;        // O columns of one CTA
  static constexpr int kColumns0 = forwardConsumer0Columns(kCtaColumns, kSplit);  // of consumer 0
  static constexpr int kColumns1 = forwardConsumer1Columns(kCtaColumns, kSplit);  // and of consumer 1

  static_assert(kCluster == 1 || kCluster == kMaxClusterSize, "one CTA, or a cluster of two");
  static_assert(kHeadDimV % (kBlockColumns * kCluster) == 0, "d_v: whole 64-column blocks per CTA");
  static_assert(kCtaColumns > kBlockColumns && kCtaColumns <= 512,
                "128..512 columns per CTA (two consumers of whole 64-column blocks)");
  static_assert(kColumns0 >= kBlockColumns && kColumns0 <= 256, "consumer 0: one wgmma of N 64..256");
  static_assert(kColumns1 <= 320, "consumer 1: at most 160 fp32 registers of O");
  static_assert(!kShareKv || kCluster == 1, "K and V are shared by the CTAs of row tiles, not of head dims");
  static_assert(kSplit == kEvenSplit || kSplit == kSkewedSplit, "an even or a skewed split");
  static constexpr int kKvCtas = kShareKv ? kKvSharingCtas : 1;  // CTAs that read each K and V buffer
  // A kernel that shares no K and V loads V in two parts, consumer 0's blocks and consumer 1's,
  // each with its own full and empty barriers: a consumer's next V loads as soon as that consumer
  // is done with its part, and with p.overlap consumer 1 runs a tile behind consumer 0.
  static constexpr bool kSplitValues = !kShareKv;
  static constexpr int kBlocks0 = kColumns0 / kBlockColumns;  // consumer 0's V blocks

  // Shared addresses of the CTA's tiles and barriers (1024-byte aligned base).
  struct Shared {
    uint32_t q, k, v, p;
    float* rowScale;     // [2 slots][64 rows]: exp2(old max - new max)
    float* rowInverse;   // [64 rows]: 1 / row sum at the end
    Exchange exchange;   // the other CTA's partial S (cluster of two)
    uint32_t barriers;
    FFPA_DEVICE uint32_t barrier(int which) const { return barriers + 8u * which; }
  };

  using Position = RowTile;

  static FFPA_DEVICE Position locate(const ForwardParams& p) {
    if constexpr (kShareKv) {
      return locateKvSharingRowTile(p);
    } else {
      Position at = locateRowTile<kCluster>(p, p.sliced);
      at.tiles = ffpa::kernels::sm80::splitKeyTiles(p.split, at, at.tiles);  // split-KV: the CTA's run
      return at;
    }
  }

  // A consumer is done with the K or V buffer of `empty`: with shared K and V, in both CTAs.
  static FFPA_DEVICE void release(uint32_t empty) {
    if constexpr (kShareKv) {
      #pragma unroll
      for (int rank = 0; rank < kKvSharingCtas; ++rank) mbarrierArriveCluster(mapShared(empty, rank));
    } else {
      mbarrierArrive(empty);
    }
  }

  static FFPA_DEVICE Shared locateShared(const ForwardParams& p) {
    const AlignedShared shared = alignedShared();
    unsigned char* base = shared.base;
    const uint32_t address = shared.address;
    Shared s;
    s.q = address + p.qOffset;
    s.k = address + p.kOffset;
    s.v = address + p.vOffset;
    s.p = address + p.pOffset;
    s.rowScale = reinterpret_cast<float*>(base + p.statsOffset);
    s.rowInverse = s.rowScale + 2 * kRows;
    s.barriers = address + p.barrierOffset;
    s.exchange = exchangeAt(shared, p.exchangeOffset, s.barrier(kExchangeFull), s.barrier(kExchangeEmpty));
    return s;
  }

  // --- producer ---------------------------------------------------------------------------------

  static FFPA_DEVICE void produce(const ForwardParams& p, const Shared& s, const Position& at) {
    loadBlocks(&p.qMap, s.q, at.qk, at.firstRow, at.head, at.batch, s.barrier(kQFull));
    if constexpr (kCluster > 1) {
      if (p.kBuffers == 2) {
        produceKeyTiles<2>(p, s, at);
        return;
      }
    }
    produceKeyTiles<1>(p, s, at);
  }

  // K and V of every KV tile, each into its buffer once the consumers released what it held, in
  // the order of those releases, so that a load whose buffer is free never waits behind one whose
  // buffer is not. kBuffers is a compile-time count: the producer has few registers.
  //   one CTA:              K(j), V(j) (or its parts: kSplitValues);
  //   one CTA, p.overlap:   K(j + 1), V(j)'s second part, V(j + 1)'s first: consumer 1 releases
  //                         its part of V(j - 1) only under the softmax of tile j, after S(j);
  //   clusters:             K(j + 1), V(j)'s parts: consumer 0 issues S(j + 1) in iteration j.
  //                         With two K buffers K(j + 1) waits only for S(j - 1), a tile earlier
  //                         than its single buffer's S(j).
  template <int kBuffers>
  static FFPA_DEVICE void produceKeyTiles(const ForwardParams& p, const Shared& s, const Position& at) {
    const BufferRing ring{kBuffers};
    // Shared K and V serve no slices: the tiles follow each other from key 0.
    const auto firstKeyOf = [&](int tile) { return kShareKv ? tile * kKeys : keyTileOf(p.sliced, at, tile).firstKey; };
    // K or V rows from `firstKey` into the buffer at `shared`, after the release of its last use
    // (`empty`'s phase `parity`) where `reuse`.
    const auto load = [&](const TensorMap* map, uint32_t shared, BlockShare blocks, int firstKey, bool reuse,
                          int empty, int parity, int full) {
      if (reuse) mbarrierWait(s.barrier(empty), parity);  // with shared K and V: both CTAs' releases
      if constexpr (kShareKv) {
        loadSharedBlocks(map, shared, blocks, firstKey, at.kvHead, at.batch, s.barrier(full), at.rank);
      } else {
        loadBlocks(map, shared, blocks, firstKey, at.kvHead, at.batch, s.barrier(full));
      }
    };
    const auto loadKeys = [&](int tile) {
      const int slot = ring.slot(tile);
      load(&p.kMap, s.k + slot * p.kBufferBytes, at.qk, firstKeyOf(tile), tile >= kBuffers, kKEmpty0 + slot,
           (ring.use(tile) - 1) & 1, kKFull0 + slot);
    };
    // V of tile `tile`, or part `part` of it (kSplitValues: consumer 0's blocks, then consumer
    // 1's; every CTA holds more than consumer 0's blocks of any problem its instance serves: the
    // instance's d_v rounds the problem's up to whole blocks per CTA, at least two).
    const auto loadValues = [&](int tile, int part) {
      BlockShare blocks = at.v;
      if constexpr (kSplitValues) blocks = part == 0 ? BlockShare{at.v.first, kBlocks0}
                                                     : BlockShare{at.v.first + kBlocks0, at.v.count - kBlocks0};
      load(&p.vMap, s.v + part * kBlocks0 * kBlockBytes, blocks, firstKeyOf(tile), tile > 0, kVEmpty0 + part,
           (tile - 1) & 1, kVFull0 + part);
    };
    if constexpr (kCluster > 1) {
      if (at.tiles > 0) loadKeys(0);
      for (int tile = 0; tile < at.tiles; ++tile) {
        if (tile + 1 < at.tiles) loadKeys(tile + 1);
        // One copy of the code for both parts: the producer has 24 registers.
#pragma unroll 1
        for (int part = 0; part < 2; ++part) loadValues(tile, part);
      }
    } else if (kSplitValues && p.overlap) {
      if (at.tiles > 0) {
        loadKeys(0);
        loadValues(0, 0);
      }
      for (int tile = 0; tile < at.tiles; ++tile) {
        if (tile + 1 < at.tiles) loadKeys(tile + 1);
        loadValues(tile, 1);
        if (tile + 1 < at.tiles) loadValues(tile + 1, 0);
      }
    } else {
      for (int tile = 0; tile < at.tiles; ++tile) {
        loadKeys(tile);
        loadValues(tile, 0);
        if constexpr (kSplitValues) loadValues(tile, 1);
      }
    }
  }

  // --- consumers ---------------------------------------------------------------------------------

  using Rows = ForwardRows<Tag>;

  // Consumer `consumer`'s blocks of V in KV tile `tile` (no slices: keys from (firstTile + tile) *
  // 64), where the tile holds the last key of the batch entry's count below seqKv and reaches past
  // it (firstRowPastKeys): once V has landed (V full; waiting again later costs nothing), the rows
  // past the count become zeros (zeroBlockRows, at the consumer's own named barrier). Called where
  // none of the consumer's products is in flight. Nothing without key lengths: TMA fills rows past
  // seqKv with zeros.
  static FFPA_DEVICE void clearValuesPastKeys(const ForwardParams& p, const Shared& s, const Position& at, int tile,
                                              int consumer) {
    const int firstRow = firstRowPastKeys(p, at.batch, (at.firstTile + tile) * kKeys);
    if (firstRow == kKeys) return;
    mbarrierWait(s.barrier(kVFull0 + (kSplitValues ? consumer : 0)), tile & 1);
    const int firstBlock = consumer == 0 ? 0 : kBlocks0;
    const int blocks = consumer == 0 ? kBlocks0 : at.v.count - kBlocks0;
    zeroBlockRows(s.v + firstBlock * kBlockBytes, blocks, firstRow, kClearedRowsBarrierId + consumer);
  }

  // --- consumer 0: scores, softmax, P, and the first output columns -----------------------------

  // kMayEmulate: whether exp2 may be emulated at all (p.exp2Emulated > 0), a separate copy so
  // that the default path carries no test of p.exp2Emulated per exponential.
  template <bool kMayEmulate>
  static FFPA_DEVICE void consume0(const ForwardParams& p, const Shared& s, const Position& at) {
    const Lane me = lane();
    float o[kColumns0 / 2];
    for (float& value : o) value = 0.0f;
    typename Rows::Softmax softmax;
    float score[kTileRegisters];  // S of the tile, then P
    const int partner = 1 - at.rank;  // in a cluster of two
    const BufferRing kRing{kCluster == 1 ? 1 : p.kBuffers};  // one CTA: one K buffer (forwardLayout)
    if (at.tiles > 0) mbarrierWait(s.barrier(kQFull), 0);
    for (int tile = 0; tile < at.tiles; ++tile) {
      const KeyTile keys = keyTileOf(p.sliced, at, tile);
      // S(j); in a cluster, from the second tile on, the previous iteration computed it.
      if (kCluster == 1 || tile == 0) {
        const int slot = kRing.slot(tile);
        mbarrierWait(s.barrier(kKFull0 + slot), kRing.use(tile) & 1);
        scoreProduct<Tag>(score, s.q, s.k + slot * p.kBufferBytes, at.qk.count);
        release(s.barrier(kKEmpty0 + slot));
        // S(j) is done: consumer 1 may start P V(j - 1) (p.overlap).
        if (kSplitValues && p.overlap && tile > 0) mbarrierArrive(s.barrier(kScoresNext0 + ((tile - 1) & 1)));
        if constexpr (kCluster > 1) exchangePartial(s.exchange, score, partner, tile, at.tiles);
      }

      // Online softmax: mask, new row maxima over the 4 lanes of a row, in log2 units.
      float factor[2];
      softmax.template tile<kMayEmulate>(p, keys, at.firstRow, keyEndOf(p, at.batch), score, me, factor);

      // P (16-bit) and the row scales to slot tile % 2, once consumer 1 is done with tile - 2.
      const int slot = tile & 1;
      if (tile >= 2) mbarrierWait(s.barrier(kPEmpty0 + slot), (tile / 2 - 1) & 1);
      const uint32_t pSlot = s.p + slot * kBlockBytes;
      storeTile16<Tag>(pSlot, score, me);
      if (me.quad == 0) {
        s.rowScale[slot * kRows + me.row(0)] = factor[0];
        s.rowScale[slot * kRows + me.row(1)] = factor[1];
      }
      mbarrierArrive(s.barrier(kPFull0 + slot));
      mbarrierWait(s.barrier(kPFull0 + slot), (tile / 2) & 1);  // all of P is written
      clearValuesPastKeys(p, s, at, tile, 0);  // before this iteration's products

      // P is in shared memory: `score` is free for the next tile's S. In a cluster, S(j + 1) is
      // issued before O0 += P V(j), so that its partial travels to the other CTA while P V runs
      // (the round trip would otherwise stand between every tile's S and its softmax).
      Rows::template rescale<kColumns0>(o, factor);
      const bool next = tile + 1 < at.tiles;
      // After the last tile the group of S is an empty one: the wgmma sequence stays the same on
      // every iteration, which ptxas needs to keep the two groups in flight together.
      const int nextBlocks = next ? at.qk.count : 0;
      const int nextSlot = kRing.slot(tile + 1);
      if constexpr (kCluster > 1) {
        if (next) mbarrierWait(s.barrier(kKFull0 + nextSlot), kRing.use(tile + 1) & 1);
        issueScoreProduct<Tag, true>(score, s.q, s.k + nextSlot * p.kBufferBytes, nextBlocks);
      }
      mbarrierWait(s.barrier(kVFull0), tile & 1);
      issueKeyProduct<kColumns0, Tag>(o, pSlot, s.v);
      if constexpr (kCluster > 1) {
        wgmmaWait<1>();  // groups complete in order: S(j + 1) is done, P V(j) may run on
        wgmmaFenceOperands(score);
        if (next) {
          release(s.barrier(kKEmpty0 + nextSlot));
          sendPartial(s.exchange, score, partner, tile + 1);
          // S(j + 1) is done: consumer 1 may start P V(j) (p.overlap), under the round trip of
          // the partial and the softmax of tile j + 1. (Arrived on whatever p.overlap says: a
          // phase nobody waits for costs nothing, and the test cost the 256 + 256 column split of
          // d 1024 a spilled register.)
          mbarrierArrive(s.barrier(kScoresNext0 + (tile & 1)));
        }
      }
      wgmmaWait<0>();
      wgmmaFenceOperands(o);
      release(s.barrier(kVEmpty0));
      if constexpr (kCluster > 1) {
        if (next) receivePartial(s.exchange, score, partner, tile + 1, at.tiles);
      }
    }

    // 1 / row sums for both consumers; LSE from rank 0 of the CTAs that split the head dims (CTAs
    // sharing K and V own their rows).
    float inverse[2];
    softmax.finish(p, at, kCluster == 1 || at.rank == 0, me, inverse);
    if (me.quad == 0) {
      s.rowInverse[me.row(0)] = inverse[0];
      s.rowInverse[me.row(1)] = inverse[1];
    }
    rolesBarrier(1, 256);  // the inverses are written
    Rows::template storeOutput<kColumns0>(p, at, o, inverse, 0);
  }

  // --- consumer 1: the other output columns ------------------------------------------------------

  static FFPA_DEVICE void consume1(const ForwardParams& p, const Shared& s, const Position& at) {
    const Lane me = lane();
    float o[kColumns1 / 2];
    for (float& value : o) value = 0.0f;
    // Its part of V: the second (kSplitValues), or all of it.
    constexpr int kPart = kSplitValues ? 1 : 0;
    for (int tile = 0; tile < at.tiles; ++tile) {
      const int slot = tile & 1;
      mbarrierWait(s.barrier(kPFull0 + slot), (tile / 2) & 1);
      // p.overlap: P V(j) waits for consumer 0 to complete S(j + 1), so that it runs under the
      // softmax of tile j + 1, where the tensor cores have nothing else to do, rather than beside
      // S(j + 1), which the softmax waits for. (The barrier of the slot cannot run a phase ahead:
      // S(j + 3) needs P(j + 2) in this slot, which this P V must release first.)
      if (kSplitValues && p.overlap && tile + 1 < at.tiles) {
        mbarrierWait(s.barrier(kScoresNext0 + slot), (tile / 2) & 1);
      }
      const float factor[2] = {s.rowScale[slot * kRows + me.row(0)], s.rowScale[slot * kRows + me.row(1)]};
      Rows::template rescale<kColumns1>(o, factor);
      clearValuesPastKeys(p, s, at, tile, 1);
      mbarrierWait(s.barrier(kVFull0 + kPart), tile & 1);
      accumulateKeyProduct<kColumns1, Tag>(o, s.p + slot * kBlockBytes, s.v + kBlocks0 * kBlockBytes);
      release(s.barrier(kVEmpty0 + kPart));
      mbarrierArrive(s.barrier(kPEmpty0 + slot));
    }
    rolesBarrier(1, 256);
    const float inverse[2] = {s.rowInverse[me.row(0)], s.rowInverse[me.row(1)]};
    Rows::template storeOutput<kColumns1>(p, at, o, inverse, kColumns0);
  }

  static FFPA_DEVICE void run(const ForwardParams& p) {
    const Shared s = locateShared(p);
    const Position at = locate(p);
    // Arrivals per phase of each mbarrier (Barrier order).
    const int arrivals[kBarrierCount] = {
        1,                   // Q full: the producer's expect_tx
        1, 1,                // K full per buffer
        128 * kKvCtas,       // K empty per buffer: consumer 0 (of each CTA sharing K)
        128 * kKvCtas,
        1, 1,                // V full per part
        kSplitValues ? 128 : 256 * kKvCtas,  // V empty: consumer 0 with two parts, else both (of each CTA sharing V)
        128,                 // V empty, second part: consumer 1
        128, 128,            // P full per slot: consumer 0
        128, 128,            // P empty per slot: consumer 1
        128, 128,            // Scores next per slot: consumer 0
        1, 128,              // Exchange full: one expect_tx; Exchange empty: the other CTA's consumer 0
    };
    initBarriers<kCluster * kKvCtas>(s.barrier(0), arrivals);
    // A separate copy of consumer 0 for exp2 emulation, so that the default path tests nothing
    // per exponential.
    const auto consume0Chosen = [&] {
      if (p.exp2Emulated > 0) {
        consume0<true>(p, s, at);
      } else {
        consume0<false>(p, s, at);
      }
    };
    runRoles<kForwardRegisters[0], kForwardRegisters[1]>(at.tiles > 0, [&] { produce(p, s, at); }, consume0Chosen,
        [&] { consume1(p, s, at); });
    // Sharing K and V, no CTA leaves while the other may still arrive on its barriers.
    if constexpr (kShareKv) clusterSync();
  }
};

// The kernel entries; grid (row tiles * CTAs per cluster, B * H) or (.., H, B), the row tiles
// ceil(seqQ / 64) or those of SlicedTiles; 384 threads; sharedBytes.
template <class Tag, int kHeadDimV, int kSplit = defaultForwardSplit(1)>
FFPA_KERNEL void FFPA_LAUNCH_BOUNDS(kThreads, 1) forwardKernel(const FFPA_GRID_CONSTANT ForwardParams p) {
  ForwardKernel<Tag, kHeadDimV, 1, false, kSplit>::run(p);
}

template <class Tag, int kHeadDimV, int kSplit = defaultForwardSplit(kMaxClusterSize)>
FFPA_KERNEL void FFPA_CLUSTER_DIMS(kMaxClusterSize, 1, 1) FFPA_LAUNCH_BOUNDS(kThreads, 1)
    clusterForwardKernel(const FFPA_GRID_CONSTANT ForwardParams p) {
  ForwardKernel<Tag, kHeadDimV, kMaxClusterSize, false, kSplit>::run(p);
}

// The CTAs of two adjacent row tiles share K and V (d_v <= 512, no slices); grid x even. They
// split the columns evenly.
template <class Tag, int kHeadDimV>
FFPA_KERNEL void FFPA_CLUSTER_DIMS(kKvSharingCtas, 1, 1) FFPA_LAUNCH_BOUNDS(kThreads, 1)
    kvSharingForwardKernel(const FFPA_GRID_CONSTANT ForwardParams p) {
  ForwardKernel<Tag, kHeadDimV, 1, true>::run(p);
}

}  // namespace ffpa::kernels::sm90
