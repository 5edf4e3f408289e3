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
// K(j+1) thus loads during the softmax and P V of tile j, V(j+1) during S(j+1).
// Scores are kept in the log2 domain (scaled by softmax scale * log2 e).
//
// In a cluster of two (kCluster = 2, d_v > 512), each CTA holds its share of the head dims'
// 64-column blocks, and consumer 0 completes S between the wgmma and the softmax:
//   [Exchange empty j-1] partial S(j) -> the other CTA (st.async, on its Exchange full)
//   [Exchange full] S(j) = own partial + received -> the other CTA's Exchange empty
// (see sm90/forward_params.h).
#pragma once

#include "common/element.cuh"
#include "common/platform.cuh"
#include "common/ptx.cuh"
#include "sm80/cta_geometry.cuh"
#include "sm90/forward_params.h"
#include "sm90/ptx.cuh"

namespace ffpa::kernels::sm90 {

using ffpa::sm90::ForwardParams;
using namespace ffpa::sm90;  // the shape constants and Barrier

template <class Tag, int kHeadDimV, int kCluster = 1>
struct ForwardKernel {
  using Element = typename Tag::Element;
  static constexpr int kCtaColumns = kHeadDimV / kCluster;        // O columns of one CTA
  static constexpr int kColumns0 = consumer0Columns(kCtaColumns);  // of consumer 0
  static constexpr int kColumns1 = consumer1Columns(kCtaColumns);  // and of consumer 1
  static constexpr int kScoreRegisters = kKeys / 2;              // S[64, 64] over 128 threads
  static constexpr int kProducerRegisters = 24;
  static constexpr int kConsumerRegisters = 240;
  static constexpr float kNegativeInfinity = -__builtin_huge_valf();

  static_assert(kCluster == 1 || kCluster == kMaxClusterSize, "one CTA, or a cluster of two");
  static_assert(kHeadDimV % (kBlockColumns * kCluster) == 0, "d_v: whole 64-column blocks per CTA");
  static_assert(kCtaColumns > kBlockColumns && kCtaColumns <= 512,
                "128..512 columns per CTA (two consumers of whole 64-column blocks)");
  static_assert(kScoreRegisters % 4 == 0, "partial scores travel in 16-byte stores");
  static_assert(kColumns0 <= 256 && kColumns1 >= kBlockColumns, "wgmma N: 64..256 per consumer");
  static_assert(kProducerRegisters + 2 * kConsumerRegisters <= 512, "setmaxnreg: 64K registers / 128");

  // Shared addresses of the CTA's tiles and barriers (1024-byte aligned base).
  struct Shared {
    uint32_t q, k, v, p;
    float* rowScale;     // [2 slots][64 rows]: exp2(old max - new max)
    float* rowInverse;   // [64 rows]: 1 / row sum at the end
    uint32_t exchange;   // [kScoreRegisters / 4][128 threads] float4: the other CTA's partial S
    const float* exchanged;
    uint32_t barriers;
    FFPA_DEVICE uint32_t barrier(int which) const { return barriers + 8u * which; }
  };

  struct Position {
    int firstRow;
    int64_t batch;
    int64_t head;
    int64_t kvHead;
    int tiles;  // KV tiles the CTA's rows see
    int rank;   // in the cluster
    BlockShare qk, v;  // the 64-column blocks of d_qk and d_v the CTA holds
  };

  static FFPA_DEVICE Shared locateShared(const ForwardParams& p) {
    unsigned char* raw = sharedMemory();
    const uint32_t rawAddress = sharedAddress(raw);
    const uint32_t pad = (1024u - rawAddress % 1024u) % 1024u;
    unsigned char* base = raw + pad;
    const uint32_t address = rawAddress + pad;
    Shared s;
    s.q = address + p.qOffset;
    s.k = address + p.kOffset;
    s.v = address + p.vOffset;
    s.p = address + p.pOffset;
    s.rowScale = reinterpret_cast<float*>(base + p.statsOffset);
    s.rowInverse = s.rowScale + 2 * kRows;
    s.exchange = address + p.exchangeOffset;
    s.exchanged = reinterpret_cast<const float*>(base + p.exchangeOffset);
    s.barriers = address + p.barrierOffset;
    return s;
  }

  static FFPA_DEVICE Position locate(const ForwardParams& p) {
    const ffpa::kernels::sm80::GridPosition grid = ffpa::kernels::sm80::gridPosition(p.gridDnhb, p.headsQ);
    Position at;
    at.rank = kCluster == 1 ? 0 : clusterRank();
    at.firstRow = blockIndexX() / kCluster * kRows;
    at.qk = blockShare(columnBlocks(p.headDimQk), kCluster, at.rank);
    at.v = blockShare(columnBlocks(p.headDimV), kCluster, at.rank);
    at.batch = grid.batch;
    at.head = grid.head;
    at.kvHead = grid.head / p.groupSize;
    at.tiles = ffpa::kernels::sm80::visibleKeyTiles(p.seqQ, p.seqKv, kKeys, at.firstRow, kRows, p.causal,
                                                    p.causalOffset);
    return at;
  }

  // --- producer ---------------------------------------------------------------------------------

  // Loads the 64 x 64 boxes `blocks` of `map` at row `row` into `shared`, completing on `barrier`.
  static FFPA_DEVICE void loadTile(const TensorMap* map, uint32_t shared, BlockShare blocks, int row,
                                   const Position& at, int64_t head, uint32_t barrier) {
    mbarrierArriveExpectTx(barrier, blocks.count * kBlockBytes);
    for (int b = 0; b < blocks.count; ++b) {
      tmaLoad4d(shared + b * kBlockBytes, map, (blocks.first + b) * kBlockColumns, row, int(head), int(at.batch),
                barrier);
    }
  }

  static FFPA_DEVICE void produce(const ForwardParams& p, const Shared& s, const Position& at) {
    loadTile(&p.qMap, s.q, at.qk, at.firstRow, at, at.head, s.barrier(kQFull));
    for (int tile = 0; tile < at.tiles; ++tile) {
      if (tile > 0) mbarrierWait(s.barrier(kKEmpty), (tile - 1) & 1);
      loadTile(&p.kMap, s.k, at.qk, tile * kKeys, at, at.kvHead, s.barrier(kKFull));
      if (tile > 0) mbarrierWait(s.barrier(kVEmpty), (tile - 1) & 1);
      loadTile(&p.vMap, s.v, at.v, tile * kKeys, at, at.kvHead, s.barrier(kVFull));
    }
  }

  // --- consumers: fragments of a 64-row wgmma accumulator ---------------------------------------

  struct Lane {
    int warp;   // of the warpgroup: rows 16 * warp .. +15
    int group;  // lane / 4
    int quad;   // lane % 4
    FFPA_DEVICE int row(int half) const { return 16 * warp + group + 8 * half; }
  };

  static FFPA_DEVICE Lane lane() {
    const int t = threadIndex() % 128;
    return {t / 32, t % 32 / 4, t % 4};
  }

  // O[64, N] += P[64, 64] V[64 keys, first column .. + N] (four k16 steps).
  template <int N>
  static FFPA_DEVICE void accumulatePV(float (&o)[N / 2], uint32_t pSlot, uint32_t v) {
    wgmmaFence();
    #pragma unroll
    for (int step = 0; step < kKeys / 16; ++step) {
      // P: K-major, step s 32 bytes into its rows. V: N-major, 16 keys = 2048 bytes per step,
      // 64-column blocks kBlockBytes apart.
      const uint64_t a = matrixDescriptor(pSlot + 32 * step, 16, 1024);
      const uint64_t b = matrixDescriptor(v + 2048 * step, kBlockBytes, 1024);
      wgmmaSS<N, true>(o, a, b, true, Tag());
    }
    wgmmaCommit();
    wgmmaWait<0>();
    wgmmaFenceOperands(o);
  }

  template <int N>
  static FFPA_DEVICE void rescale(float (&o)[N / 2], const float (&factor)[2]) {
    #pragma unroll
    for (int i = 0; i < N / 2; ++i) o[i] *= factor[i / 2 % 2];
  }

  // Writes O (divided by the row sums, whose inverses are given) for the columns from the CTA's
  // column `ctaColumn` on.
  template <int N>
  static FFPA_DEVICE void storeOutput(const ForwardParams& p, const Position& at, const float (&o)[N / 2],
                                      const float (&inverse)[2], int ctaColumn) {
    const int column = at.v.first * kBlockColumns + ctaColumn;
    const Lane me = lane();
    Element* out = static_cast<Element*>(p.o) + at.batch * p.oStrides[0] + at.head * p.oStrides[1];
    #pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int row = at.firstRow + me.row(half);
      if (row >= p.seqQ) continue;
      #pragma unroll
      for (int j = 0; j < N / 8; ++j) {
        const int col = column + 8 * j + 2 * me.quad;
        if (col >= p.headDimV) continue;
        const float* pair = &o[4 * j + 2 * half];
        storeGlobal32(out + row * p.oStrides[2] + col,
                      packPair(pair[0] * inverse[half], pair[1] * inverse[half], Tag()));
      }
    }
  }

  // --- consumer 0: scores, softmax, P, and the first output columns -----------------------------

  // Cluster of two: adds the other CTA's partial S of tile `tile` to this CTA's (`score`), after
  // sending it this one. Thread t's 32 scores travel as 8 float4 at [i][t], so that a warp's
  // stores and loads cover 512 contiguous bytes.
  static FFPA_DEVICE void exchangeScores(const Shared& s, const Position& at, float (&score)[kScoreRegisters],
                                         int tile) {
    const int t = threadIndex() % 128;
    const int other = 1 - at.rank;
    if (t == 0) mbarrierArriveExpectTx(s.barrier(kExchangeFull), kExchangeBytes);
    if (tile > 0) mbarrierWaitCluster(s.barrier(kExchangeEmpty), (tile - 1) & 1);
    const uint32_t buffer = mapShared(s.exchange, other);
    const uint32_t full = mapShared(s.barrier(kExchangeFull), other);
    #pragma unroll
    for (int i = 0; i < kScoreRegisters / 4; ++i) {
      const float part[4] = {score[4 * i], score[4 * i + 1], score[4 * i + 2], score[4 * i + 3]};
      storeAsyncCluster(buffer + (i * 128 + t) * 16, part, full);
    }
    // st.async completes its bytes with release at cluster scope: acquire at cluster scope too.
    mbarrierWaitCluster(s.barrier(kExchangeFull), tile & 1);
    #pragma unroll
    for (int i = 0; i < kScoreRegisters / 4; ++i) {
      const float* received = s.exchanged + 4 * (i * 128 + t);
      #pragma unroll
      for (int e = 0; e < 4; ++e) score[4 * i + e] += received[e];
    }
    // The other CTA may send the next tile's partial; after the last tile it may have exited.
    if (tile + 1 < at.tiles) mbarrierArriveCluster(mapShared(s.barrier(kExchangeEmpty), other));
  }

  // kMayEmulate: whether exp2 may be emulated at all (p.exp2Emulated > 0), a separate copy so
  // that the default path carries no test of p.exp2Emulated per exponential.
  template <bool kMayEmulate>
  static FFPA_DEVICE void consume0(const ForwardParams& p, const Shared& s, const Position& at) {
    const Lane me = lane();
    const int qkSteps = columnsHeld(p.headDimQk, at.qk) / 16;  // k16 steps over the CTA's d_qk share
    float o[kColumns0 / 2];
    for (float& value : o) value = 0.0f;
    float max[2] = {kNegativeInfinity, kNegativeInfinity};
    float sum[2] = {0.0f, 0.0f};  // this thread's part of the row sums
    if (at.tiles > 0) mbarrierWait(s.barrier(kQFull), 0);
    for (int tile = 0; tile < at.tiles; ++tile) {
      float score[kScoreRegisters];
      mbarrierWait(s.barrier(kKFull), tile & 1);
      wgmmaFenceOperands(score);
      wgmmaFence();
      for (int step = 0; step < qkSteps; ++step) {
        const uint32_t offset = (step / 4) * kBlockBytes + (step % 4) * 32;
        wgmmaSS<kKeys, false>(score, matrixDescriptor(s.q + offset, 16, 1024),
                              matrixDescriptor(s.k + offset, 16, 1024), step > 0, Tag());
      }
      wgmmaCommit();
      wgmmaWait<0>();
      wgmmaFenceOperands(score);
      mbarrierArrive(s.barrier(kKEmpty));
      if (qkSteps == 0) {  // a rank holding no d_qk block (d_qk <= 64 in a cluster)
        for (float& value : score) value = 0.0f;
      }
      if constexpr (kCluster > 1) exchangeScores(s, at, score, tile);

      // Online softmax: mask, scale to log2 units, new row maxima over the 4 lanes of a row.
      float factor[2];
      #pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int row = at.firstRow + me.row(half);
        float tileMax = kNegativeInfinity;
        #pragma unroll
        for (int j = 0; j < kKeys / 8; ++j) {
          #pragma unroll
          for (int e = 0; e < 2; ++e) {
            const int key = tile * kKeys + 8 * j + 2 * me.quad + e;
            const bool visible = key < p.seqKv && (!p.causal || key <= row + p.causalOffset);
            float& value = score[4 * j + 2 * half + e];
            value = visible ? value * p.scaleLog2 : kNegativeInfinity;
            tileMax = value > tileMax ? value : tileMax;
          }
        }
        #pragma unroll
        for (int mask = 1; mask <= 2; mask <<= 1) {
          const float other = shuffleXor(tileMax, mask);
          tileMax = other > tileMax ? other : tileMax;
        }
        const float newMax = tileMax > max[half] ? tileMax : max[half];
        // A row that has seen no visible key keeps max -inf: exponentiate against 0 so that its
        // scores give exp2(-inf) = 0, never -inf - -inf = NaN.
        const float base = newMax == kNegativeInfinity ? 0.0f : newMax;
        factor[half] = exp2Approx(max[half] - base);
        max[half] = newMax;
        float tileSum = 0.0f;
        #pragma unroll
        for (int j = 0; j < kKeys / 8; ++j) {
          #pragma unroll
          for (int e = 0; e < 2; ++e) {
            float& value = score[4 * j + 2 * half + e];
            // Column group j of 8: emulated when j < exp2Emulated (a warp-uniform branch).
            if (kMayEmulate && j < p.exp2Emulated) {
              value = exp2Polynomial(value - base);
            } else {
              value = exp2Approx(value - base);
            }
            tileSum += value;
          }
        }
        sum[half] = sum[half] * factor[half] + tileSum;
      }

      // P (16-bit) and the row scales to slot tile % 2, once consumer 1 is done with tile - 2.
      const int slot = tile & 1;
      if (tile >= 2) mbarrierWait(s.barrier(kPEmpty0 + slot), (tile / 2 - 1) & 1);
      const uint32_t pSlot = s.p + slot * kBlockBytes;
      unsigned char* pBytes = sharedMemory() + (pSlot - sharedAddress(sharedMemory()));
      #pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int row = me.row(half);
        #pragma unroll
        for (int j = 0; j < kKeys / 8; ++j) {
          // Row `row`, 16-byte unit j, swizzled with the row within its 8-row group.
          const uint32_t offset = row * 128 + ((j ^ (row % 8)) * 16) + 4 * me.quad;
          const float* pair = &score[4 * j + 2 * half];
          *reinterpret_cast<uint32_t*>(pBytes + offset) = packPair(pair[0], pair[1], Tag());
        }
        if (me.quad == 0) s.rowScale[slot * kRows + row] = factor[half];
      }
      fenceProxyAsync();  // P is read by wgmma, the async proxy
      mbarrierArrive(s.barrier(kPFull0 + slot));
      mbarrierWait(s.barrier(kPFull0 + slot), (tile / 2) & 1);  // all of P is written

      rescale<kColumns0>(o, factor);
      mbarrierWait(s.barrier(kVFull), tile & 1);
      accumulatePV<kColumns0>(o, pSlot, s.v);
      mbarrierArrive(s.barrier(kVEmpty));
    }

    // Row sums over the 4 lanes of a row; 1 / sum for both consumers; LSE = ln(sum) + max ln 2.
    float inverse[2];
    #pragma unroll
    for (int half = 0; half < 2; ++half) {
      #pragma unroll
      for (int mask = 1; mask <= 2; mask <<= 1) sum[half] += shuffleXor(sum[half], mask);
      // A row that saw no key (causal, more queries than keys): O = 0, LSE = -inf.
      inverse[half] = sum[half] > 0.0f ? 1.0f / sum[half] : 0.0f;
      const int row = me.row(half);
      if (me.quad == 0) s.rowInverse[row] = inverse[half];
      if (p.lse && at.rank == 0 && me.quad == 0 && at.firstRow + row < p.seqQ) {
        constexpr float kLn2 = 0.693147180559945309f;
        const float lse = sum[half] > 0.0f ? (max[half] + log2Approx(sum[half])) * kLn2 : kNegativeInfinity;
        storeGlobalF32(p.lse + at.batch * p.lseStrides[0] + at.head * p.lseStrides[1] +
                           int64_t(at.firstRow + row) * p.lseStrides[2],
                       lse);
      }
    }
    namedBarrier(1, 256);  // the inverses are written
    storeOutput<kColumns0>(p, at, o, inverse, 0);
  }

  // --- consumer 1: the other output columns ------------------------------------------------------

  static FFPA_DEVICE void consume1(const ForwardParams& p, const Shared& s, const Position& at) {
    const Lane me = lane();
    float o[kColumns1 / 2];
    for (float& value : o) value = 0.0f;
    for (int tile = 0; tile < at.tiles; ++tile) {
      const int slot = tile & 1;
      mbarrierWait(s.barrier(kPFull0 + slot), (tile / 2) & 1);
      const float factor[2] = {s.rowScale[slot * kRows + me.row(0)], s.rowScale[slot * kRows + me.row(1)]};
      rescale<kColumns1>(o, factor);
      mbarrierWait(s.barrier(kVFull), tile & 1);
      accumulatePV<kColumns1>(o, s.p + slot * kBlockBytes, s.v + (kColumns0 / kBlockColumns) * kBlockBytes);
      mbarrierArrive(s.barrier(kVEmpty));
      mbarrierArrive(s.barrier(kPEmpty0 + slot));
    }
    namedBarrier(1, 256);
    const float inverse[2] = {s.rowInverse[me.row(0)], s.rowInverse[me.row(1)]};
    storeOutput<kColumns1>(p, at, o, inverse, kColumns0);
  }

  static FFPA_DEVICE void run(const ForwardParams& p) {
    const Shared s = locateShared(p);
    const Position at = locate(p);
    const int warpgroup = threadIndex() / 128;
    if (threadIndex() == 0) {
      mbarrierInit(s.barrier(kQFull), 1);
      mbarrierInit(s.barrier(kKFull), 1);
      mbarrierInit(s.barrier(kKEmpty), 128);
      mbarrierInit(s.barrier(kVFull), 1);
      mbarrierInit(s.barrier(kVEmpty), 256);
      for (int slot = 0; slot < 2; ++slot) {
        mbarrierInit(s.barrier(kPFull0 + slot), 128);
        mbarrierInit(s.barrier(kPEmpty0 + slot), 128);
      }
      mbarrierInit(s.barrier(kExchangeFull), 1);
      mbarrierInit(s.barrier(kExchangeEmpty), 128);
      fenceBarrierInit();
    }
    // A cluster's CTAs reach each other's barriers only once both initialised theirs.
    if constexpr (kCluster > 1) {
      clusterSync();
    } else {
      blockBarrier();
    }
    // One branch per warpgroup role, so that setmaxnreg applies (no C7508).
    if (warpgroup == 0) {
      decreaseRegisters<kProducerRegisters>();
      if (threadIndex() == 0 && at.tiles > 0) produce(p, s, at);
    } else if (warpgroup == 1) {
      increaseRegisters<kConsumerRegisters>();
      if (p.exp2Emulated > 0) {
        consume0<true>(p, s, at);
      } else {
        consume0<false>(p, s, at);
      }
    } else {
      increaseRegisters<kConsumerRegisters>();
      consume1(p, s, at);
    }
  }
};

// The kernel entries; grid (ceil(seqQ / 64) * CTAs per cluster, B * H) or (.., H, B); 384
// threads; sharedBytes.
template <class Tag, int kHeadDimV>
FFPA_KERNEL void FFPA_LAUNCH_BOUNDS(kThreads, 1) forwardKernel(const FFPA_GRID_CONSTANT ForwardParams p) {
  ForwardKernel<Tag, kHeadDimV>::run(p);
}

template <class Tag, int kHeadDimV>
FFPA_KERNEL void FFPA_CLUSTER_DIMS(kMaxClusterSize, 1, 1) FFPA_LAUNCH_BOUNDS(kThreads, 1)
    clusterForwardKernel(const FFPA_GRID_CONSTANT ForwardParams p) {
  ForwardKernel<Tag, kHeadDimV, kMaxClusterSize>::run(p);
}

}  // namespace ffpa::kernels::sm90
