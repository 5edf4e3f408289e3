// What the host and the sm90 dQ kernel of the backward agree on: the instances, the launch
// parameters and the shared-memory layout. Plain C++ (no CUDA), for the planner, the kernel and
// the emulator. The backward's other two kernels (row statistics, dK/dV) are the sm80 ones
// (kernels/sm80/backward_params.h); this kernel reads the row statistics they leave in the
// workspace.
//
// A CTA computes dQ for 64 query rows of one (batch, query head) with three warpgroups:
//   warpgroup 0, the producer: one thread issues the TMA loads of Q and dO (once), and of K and V
//     (per KV tile of 64 keys);
//   warpgroup 1, consumer 0: S = Q K^T, P = exp2(S scale log2 e - lse2), dS = P (dP - delta) with
//     consumer 1's dP, dS to shared memory (16-bit, swizzled), then dQ[:, 0 : columns0] += dS K;
//   warpgroup 2, consumer 1: dP = dO V^T, dP - delta to shared memory (fp32), then
//     dQ[:, columns0 :] += dS K.
// The two score products run side by side, one per consumer; dQ stays in fp32 registers split by
// columns (at most 96 per thread), and is written once, times the softmax scale. No atomics: the
// result is the same bits from run to run.
//
// Clusters (max(d_qk, d_v) above 384): Q, dO, K and V tiles of 64 rows are 512 d bytes, more
// than 227 KiB of shared memory above d = 384. Two CTAs of a cluster then take the same 64 rows
// and split the head dims by 64-column blocks as the forward does: each computes partial S and
// partial dP over its shares, the two exchange both through distributed shared memory, both form
// the same dS, and each accumulates dQ for its share of d_qk's columns. Above 640 the halves no
// longer fit either, and four CTAs share the rows: they sum their partials in two exchange stages
// (forward_params.h, exchangeStages), whose receive buffers take 64 KiB: 230,576 bytes of shared
// memory per CTA at 1024 / 1024.
#pragma once

#include "common/problem_sizes.h"
#include "sm90/forward_params.h"
#include "sm90/tensor_map.h"

#include <cstdint>

namespace ffpa::sm90 {

constexpr int kMaxSingleGradientDim = 384;  // the largest d_qk and d_v one CTA holds
constexpr int kMaxPairGradientDim = 640;    // and a cluster of two
constexpr int kMaxGradientDim = 1024;       // and a cluster of four
constexpr int kMinGradientDimQk = 16;       // up to 64, consumer 1 holds all of dQ (consumer 0 none)

// CTAs per cluster for head dims d_qk, d_v.
constexpr int gradientClusterSize(int headDimQk, int headDimV) {
  const int larger = headDimQk > headDimV ? headDimQk : headDimV;
  return larger > kMaxPairGradientDim ? kMaxGradientClusterSize : larger > kMaxSingleGradientDim ? 2 : 1;
}

// The d_qk of the instance that serves `headDimQk` in a cluster of `clusterSize`: the next
// multiple of 64 (one CTA: 64, 128, 192, 256, 320, 384), of 128 and at least 384 (two: 384, 512,
// 640), or of 256 and at least 768 (four: 768, 1024). The smaller d_qk of a cluster run on its
// smallest instance, whose last ranks compute columns of zeros.
constexpr int gradientInstanceDimQk(int headDimQk, int clusterSize) {
  const int multiple = kBlockColumns * clusterSize;
  const int rounded = (headDimQk + multiple - 1) / multiple * multiple;
  const int smallest = clusterSize == 1 ? kBlockColumns : clusterSize == 2 ? kMaxSingleGradientDim : 768;
  return rounded < smallest ? smallest : rounded;
}

// The mbarriers, in shared memory after the tiles.
enum QueryGradientBarrier : int {
  kGradQFull,
  kGradDOFull,
  kGradKFull0,    // kGradKFull0 + K buffer
  kGradKFull1,
  kGradKEmpty0,   // kGradKEmpty0 + K buffer: both consumers are done with it (S and dS K)
  kGradKEmpty1,
  kGradVFull,
  kGradVEmpty,
  kDpFull,        // consumer 1 wrote dP - delta
  kDpEmpty,       // consumer 0 read it
  kDsFull0,       // kDsFull0 + slot: consumer 0 wrote dS
  kDsFull1,
  kDsEmpty0,      // kDsEmpty0 + slot: consumer 1 is done with it
  kDsEmpty1,
  // Then per exchange stage s of a cluster (exchangeStages): full and empty of the partial S
  // received, then of the partial dP, from kGradExchangeBarriers + 4 s on.
  kGradExchangeBarriers,
  kGradBarrierCount = kGradExchangeBarriers + 4 * kMaxExchangeStages
};

// Everything but the tensor maps (see ForwardArguments).
struct QueryGradientArguments : ProblemSizes {
  void* dq;
  // The workspace of the sm80 row-statistics kernel: delta [batch, headsQ, seqQ], then lse2.
  const float* rowStats;
  int64_t dqStrides[3];  // elements, [batch, head, row]
  float scale;
  SlicedTiles sliced;  // the queries' tiles

  // Shared memory: byte offsets from the first 1024-byte aligned address of dynamic shared memory.
  uint32_t qOffset;
  uint32_t dOOffset;
  uint32_t kOffset;   // kBuffers buffers of the instance's blocks per CTA (boxes past d_qk load as zeros)
  int32_t kBuffers;   // 2 where shared memory holds them (K of the next tile loads during this one), else 1
  uint32_t vOffset;
  uint32_t dsOffset;  // two dS slots of one block each
  uint32_t dpOffset;  // dP - delta, fp32 [8][128 threads] float4
  // Clusters: the partials received, per exchange stage s, S at 2 s and dP at 2 s + 1 times
  // kExchangeBytes from here.
  uint32_t exchangeOffset;
  uint32_t barrierOffset;
  uint32_t sharedBytes;  // to request, including up to 1023 bytes of alignment
};

struct QueryGradientParams : QueryGradientArguments {
  TensorMap qMap;
  TensorMap kMap;
  TensorMap vMap;
  TensorMap dOMap;
};

// Fills the layout fields of `p` (headDimQk and headDimV set) for one CTA of instance
// `instanceDimQk` in a cluster of `clusterSize`, with two K buffers where kMaxSharedBytes holds
// them; returns the dynamic shared memory to request.
inline uint32_t queryGradientLayout(QueryGradientArguments& p, int instanceDimQk, int clusterSize) {
  const uint32_t qBytes = blockShare(columnBlocks(p.headDimQk), clusterSize, 0).count * kBlockBytes;
  const uint32_t vBytes = blockShare(columnBlocks(p.headDimV), clusterSize, 0).count * kBlockBytes;
  const uint32_t kBytes = columnBlocks(instanceDimQk / clusterSize) * kBlockBytes;
  for (p.kBuffers = 2;; p.kBuffers = 1) {
    LayoutCursor cursor;
    p.qOffset = cursor.take(qBytes);
    p.dOOffset = cursor.take(vBytes);
    p.kOffset = cursor.take(p.kBuffers * kBytes);
    p.vOffset = cursor.take(vBytes);
    p.dsOffset = cursor.take(2 * kBlockBytes);
    p.dpOffset = cursor.take(kExchangeBytes);
    p.exchangeOffset = cursor.take(2 * exchangeStages(clusterSize) * kExchangeBytes);
    p.barrierOffset = cursor.take(kGradBarrierCount * 8);
    p.sharedBytes = cursor.sharedBytes();
    if (p.sharedBytes <= kMaxSharedBytes || p.kBuffers == 1) return p.sharedBytes;
  }
}

}  // namespace ffpa::sm90
