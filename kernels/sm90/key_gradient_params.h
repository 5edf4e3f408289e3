// What the host and the sm90 dK/dV kernel of the backward agree on: the instances, the launch
// parameters and the shared-memory layout. Plain C++ (no CUDA), for the planner, the kernel and
// the emulator. It reads the row statistics the sm80 row-statistics kernel leaves in the
// workspace (kernels/sm80/backward_params.h), as the sm90 dQ kernel does.
//
// The dQ kernel transposed: a CTA, or a cluster of two or four, owns 64 keys of one (batch, KV
// head), each CTA holding its share of the 64-column blocks of K and V (resident) and, per tile
// of 64 queries of each query head of the group, the instance's blocks per CTA of Q and dO from
// its share's first (the columns of its dK and dV products), with three warpgroups:
//   warpgroup 0, the producer: K and V once, then dO and Q per query tile (TMA);
//   warpgroup 1, consumer 0: S^T = K Q^T over its d_qk share, summed over a cluster;
//     P^T = exp2(S^T scale log2 e - lse2[query]), 0 where masked; dS^T = P^T (dP^T - delta[query])
//     with consumer 1's dP^T; both to shared memory (16-bit, swizzled);
//   warpgroup 2, consumer 1: dP^T = V dO^T over its d_v share, summed; dP^T - delta to shared
//     memory (fp32);
//   both consumers: dV[:, their columns] += P^T dO, dK[:, their columns] += dS^T Q.
// dK (times the scale) and dV are written once, summed over the query heads of the group inside
// the CTA: no atomics, the same bits from run to run.
//
// Registers: a consumer holds its half of the CTA's dV and dK columns, 2 x 64 fp32 when a CTA
// holds 256 columns, besides a [64, 64] tile: one CTA serves max(d_qk, d_v) up to 256 (no
// exchange; up to 64 consumer 1 holds all 64 columns), clusters of two 257..512, clusters of
// four 513..1024 (the same 256 columns per CTA at 256, 512 and 1024). Four CTAs sum their
// partial S^T and dP^T in two exchange stages (forward_params.h, exchangeStages), which take
// 64 KiB of receive buffers: 230,560 bytes of shared memory per CTA at 1024 (one Q buffer).
#pragma once

#include "common/problem_sizes.h"
#include "sm90/forward_params.h"
#include "sm90/tensor_map.h"

#include <cstdint>

namespace ffpa::sm90 {

// One CTA serves max(d_qk, d_v) up to 256: at 64 or less consumer 1 owns all the columns (64)
// and consumer 0 only forms P^T and dS^T.
constexpr int kMinKeyGradientDim = 16;
constexpr int kMaxKeyGradientSingleDim = 256;  // the largest one CTA serves
constexpr int kMaxKeyGradientPairDim = 512;    // and a cluster of two
constexpr int kMaxKeyGradientDim = 1024;

// CTAs per cluster for head dims d_qk, d_v: one up to max(d_qk, d_v) = 256, two up to 512, four
// above.
constexpr int keyGradientClusterSize(int headDimQk, int headDimV) {
  const int larger = headDimQk > headDimV ? headDimQk : headDimV;
  return larger > kMaxKeyGradientPairDim ? kMaxGradientClusterSize : larger > kMaxKeyGradientSingleDim ? 2 : 1;
}

// The head dim of the instance that serves d_qk, d_v: the larger, rounded up to whole 64-column
// blocks per CTA of its cluster (64, 128, 192 or 256 for one CTA, 384 or 512 for two, 768 or
// 1024 for four); each CTA holds 1 / clusterSize of its columns of dK and of dV.
constexpr int keyGradientInstanceDim(int headDimQk, int headDimV) {
  const int larger = headDimQk > headDimV ? headDimQk : headDimV;
  const int multiple = kBlockColumns * keyGradientClusterSize(headDimQk, headDimV);
  return (larger + multiple - 1) / multiple * multiple;
}

// The mbarriers, in shared memory after the tiles.
enum KeyGradientBarrier : int {
  kKeyKFull,
  kKeyVFull,
  kKeyQFull0,     // kKeyQFull0 + Q buffer
  kKeyQFull1,
  kKeyQEmpty0,    // kKeyQEmpty0 + Q buffer: both consumers are done with it (S^T and dS^T Q)
  kKeyQEmpty1,
  kKeyDOFull,
  kKeyDOEmpty,    // both consumers are done with dO (dP^T and P^T dO)
  kKeyDpFull,     // consumer 1 wrote dP^T - delta
  kKeyDpEmpty,    // consumer 0 read it
  kKeyTilesFull,  // consumer 0 wrote P^T and dS^T
  kKeyTilesEmpty, // both consumers are done with them
  // Then per exchange stage s (exchangeStages): full and empty of the partial S^T received,
  // then of the partial dP^T, from kKeyExchangeBarriers + 4 s on.
  kKeyExchangeBarriers,
  kKeyBarrierCount = kKeyExchangeBarriers + 4 * kMaxExchangeStages
};

// Everything but the tensor maps (see ForwardArguments).
// Its grid runs over key tiles and KV heads: (N/Bk, Hkv, B), or (N/Bk, B*Hkv) without gridDnhb.
struct KeyGradientArguments : ProblemSizes {
  void* dk;
  void* dv;
  // The workspace of the sm80 row-statistics kernel: delta [batch, headsQ, seqQ], then lse2.
  const float* rowStats;
  int64_t dkStrides[3];  // elements, [batch, head, row]
  int64_t dvStrides[3];
  int32_t headsKv;
  float scale;
  SlicedTiles sliced;  // the keys' tiles

  // Shared memory: byte offsets from the first 1024-byte aligned address of dynamic shared memory.
  uint32_t kOffset;
  uint32_t vOffset;
  uint32_t qOffset;   // qBuffers buffers of the instance's blocks per CTA (boxes past d_qk load as zeros)
  int32_t qBuffers;   // 2 where shared memory holds them (Q of the next step loads during this one), else 1
  uint32_t dOOffset;  // likewise past d_v
  uint32_t pOffset;   // P^T, one block
  uint32_t dsOffset;  // dS^T, one block
  uint32_t dpOffset;  // dP^T - delta, fp32 [8][128 threads] float4
  // The partials received: per exchange stage s, S^T at 2 s and dP^T at 2 s + 1 times
  // kExchangeBytes from here.
  uint32_t exchangeOffset;
  uint32_t barrierOffset;
  uint32_t sharedBytes;  // to request, including up to 1023 bytes of alignment
};

struct KeyGradientParams : KeyGradientArguments {
  TensorMap qMap;
  TensorMap kMap;
  TensorMap vMap;
  TensorMap dOMap;
};

// Fills the layout fields of `p` (headDimQk and headDimV set) for one CTA of the instance of
// head dim `instanceDim` in a cluster of `clusterSize`, with two Q buffers where kMaxSharedBytes
// holds them; returns the dynamic shared memory to request.
inline uint32_t keyGradientLayout(KeyGradientArguments& p, int instanceDim, int clusterSize) {
  const uint32_t ctaBlocks = columnBlocks(instanceDim / clusterSize) * kBlockBytes;
  for (p.qBuffers = 2;; p.qBuffers = 1) {
    LayoutCursor cursor;
    p.kOffset = cursor.take(blockShare(columnBlocks(p.headDimQk), clusterSize, 0).count * kBlockBytes);
    p.vOffset = cursor.take(blockShare(columnBlocks(p.headDimV), clusterSize, 0).count * kBlockBytes);
    p.qOffset = cursor.take(p.qBuffers * ctaBlocks);
    p.dOOffset = cursor.take(ctaBlocks);
    p.pOffset = cursor.take(kBlockBytes);
    p.dsOffset = cursor.take(kBlockBytes);
    p.dpOffset = cursor.take(kExchangeBytes);
    p.exchangeOffset = cursor.take(2 * exchangeStages(clusterSize) * kExchangeBytes);
    p.barrierOffset = cursor.take(kKeyBarrierCount * 8);
    p.sharedBytes = cursor.sharedBytes();
    if (p.sharedBytes <= kMaxSharedBytes || p.qBuffers == 1) return p.sharedBytes;
  }
}

}  // namespace ffpa::sm90
