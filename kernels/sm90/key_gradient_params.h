// What the host and the sm90 dK/dV kernel of the backward agree on: the instances, the launch
// parameters and the shared-memory layout. Plain C++ (no CUDA), for the planner, the kernel and
// the emulator. It reads the row statistics the sm80 row-statistics kernel leaves in the
// workspace (kernels/sm80/backward_params.h), as the sm90 dQ kernel does.
//
// The dQ kernel transposed: a cluster of two CTAs owns 64 keys of one (batch, KV head), each CTA
// holding its share of the 64-column blocks of K and V (resident) and, per tile of 64 queries of
// each query head of the group, the instance's blocks per CTA of Q and dO from its share's first
// (the columns of its dK and dV products), with three warpgroups:
//   warpgroup 0, the producer: K and V once, then dO and Q per query tile (TMA);
//   warpgroup 1, consumer 0: S^T = K Q^T over its d_qk share, exchanged with the other CTA;
//     P^T = exp2(S^T scale log2 e - lse2[query]), 0 where masked; dS^T = P^T (dP^T - delta[query])
//     with consumer 1's dP^T; both to shared memory (16-bit, swizzled);
//   warpgroup 2, consumer 1: dP^T = V dO^T over its d_v share, exchanged; dP^T - delta to shared
//     memory (fp32);
//   both consumers: dV[:, their columns] += P^T dO, dK[:, their columns] += dS^T Q.
// dK (times the scale) and dV are written once, summed over the query heads of the group inside
// the CTA: no atomics, the same bits from run to run.
//
// Registers: a consumer holds its half of the CTA's dV and dK columns, 2 x 64 fp32 at
// d = 512 (a CTA's share of 256 columns), besides a [64, 64] tile: clusters of two serve
// max(d_qk, d_v) in 257..512.
#pragma once

#include "common/problem_sizes.h"
#include "sm90/forward_params.h"
#include "sm90/tensor_map.h"

#include <cstdint>

namespace ffpa::sm90 {

constexpr int kMinKeyGradientDim = 257;  // below, the mma.sync dK/dV kernel serves
constexpr int kMaxKeyGradientDim = 512;

// The head dim of the instance that serves d_qk, d_v: the larger, rounded up to a multiple of 128
// (384 or 512); each CTA of the pair holds half of its columns of dK and of dV.
constexpr int keyGradientInstanceDim(int headDimQk, int headDimV) {
  const int larger = headDimQk > headDimV ? headDimQk : headDimV;
  return (larger + 127) / 128 * 128;
}

// The mbarriers, in shared memory after the tiles.
enum KeyGradientBarrier : int {
  kKeyKFull,
  kKeyVFull,
  kKeyQFull,
  kKeyQEmpty,     // both consumers are done with Q (S^T and dS^T Q)
  kKeyDOFull,
  kKeyDOEmpty,    // both consumers are done with dO (dP^T and P^T dO)
  kKeyDpFull,     // consumer 1 wrote dP^T - delta
  kKeyDpEmpty,    // consumer 0 read it
  kKeyTilesFull,  // consumer 0 wrote P^T and dS^T
  kKeyTilesEmpty, // consumer 1 is done with them
  kKeyScoreExchangeFull,  // the other CTA's partial S^T has arrived
  kKeyScoreExchangeEmpty,
  kKeyDpExchangeFull,     // and its partial dP^T
  kKeyDpExchangeEmpty,
  kKeyBarrierCount
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
  uint32_t qOffset;   // the instance's blocks per CTA (boxes past d_qk load as zeros)
  uint32_t dOOffset;  // likewise past d_v
  uint32_t pOffset;   // P^T, one block
  uint32_t dsOffset;  // dS^T, one block
  uint32_t dpOffset;  // dP^T - delta, fp32 [8][128 threads] float4
  uint32_t scoreExchangeOffset;  // the partial S^T and dP^T received from the other CTA
  uint32_t dpExchangeOffset;
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
// head dim `instanceDim` (a cluster of two); returns the dynamic shared memory to request.
inline uint32_t keyGradientLayout(KeyGradientArguments& p, int instanceDim) {
  const uint32_t ctaBlocks = columnBlocks(instanceDim / kMaxClusterSize) * kBlockBytes;
  LayoutCursor cursor;
  p.kOffset = cursor.take(blockShare(columnBlocks(p.headDimQk), kMaxClusterSize, 0).count * kBlockBytes);
  p.vOffset = cursor.take(blockShare(columnBlocks(p.headDimV), kMaxClusterSize, 0).count * kBlockBytes);
  p.qOffset = cursor.take(ctaBlocks);
  p.dOOffset = cursor.take(ctaBlocks);
  p.pOffset = cursor.take(kBlockBytes);
  p.dsOffset = cursor.take(kBlockBytes);
  p.dpOffset = cursor.take(kExchangeBytes);
  p.scoreExchangeOffset = cursor.take(kExchangeBytes);
  p.dpExchangeOffset = cursor.take(kExchangeBytes);
  p.barrierOffset = cursor.take(kKeyBarrierCount * 8);
  p.sharedBytes = cursor.sharedBytes();
  return p.sharedBytes;
}

}  // namespace ffpa::sm90
