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
// the same dS, and each accumulates dQ for its share of d_qk's columns.
#pragma once

#include "common/problem_sizes.h"
#include "sm90/forward_params.h"
#include "sm90/tensor_map.h"

#include <cstdint>

namespace ffpa::sm90 {

constexpr int kMaxSingleGradientDim = 384;    // the largest d_qk and d_v one CTA holds
constexpr int kMaxClusterGradientDim = 640;   // and a cluster of two
constexpr int kMinGradientDimQk = 257;        // below, the mma.sync dQ kernel serves

// CTAs per cluster for head dims d_qk, d_v.
constexpr int gradientClusterSize(int headDimQk, int headDimV) {
  return (headDimQk > headDimV ? headDimQk : headDimV) > kMaxSingleGradientDim ? 2 : 1;
}

// The d_qk of the instance that serves `headDimQk` in a cluster of `clusterSize`: the next
// multiple of 64 (one CTA: 320, 384) or of 128, at least 384 (two: 384, 512, 640).
constexpr int gradientInstanceDimQk(int headDimQk, int clusterSize) {
  const int multiple = kBlockColumns * clusterSize;
  const int rounded = (headDimQk + multiple - 1) / multiple * multiple;
  return clusterSize > 1 && rounded < kMaxSingleGradientDim ? kMaxSingleGradientDim : rounded;
}

// The mbarriers, in shared memory after the tiles.
enum QueryGradientBarrier : int {
  kGradQFull,
  kGradDOFull,
  kGradKFull,
  kGradKEmpty,    // both consumers are done with K (S and dS K)
  kGradVFull,
  kGradVEmpty,
  kDpFull,        // consumer 1 wrote dP - delta
  kDpEmpty,       // consumer 0 read it
  kDsFull0,       // kDsFull0 + slot: consumer 0 wrote dS
  kDsFull1,
  kDsEmpty0,      // kDsEmpty0 + slot: consumer 1 is done with it
  kDsEmpty1,
  kScoreExchangeFull,  // cluster of two: the other CTA's partial S has arrived
  kScoreExchangeEmpty,
  kDpExchangeFull,     // and its partial dP
  kDpExchangeEmpty,
  kGradBarrierCount
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
  uint32_t kOffset;   // the instance's blocks per CTA (boxes past d_qk load as zeros)
  uint32_t vOffset;
  uint32_t dsOffset;  // two dS slots of one block each
  uint32_t dpOffset;  // dP - delta, fp32 [8][128 threads] float4
  uint32_t scoreExchangeOffset;  // cluster of two: the partial S and dP received
  uint32_t dpExchangeOffset;
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
// `instanceDimQk` in a cluster of `clusterSize`; returns the dynamic shared memory to request.
inline uint32_t queryGradientLayout(QueryGradientArguments& p, int instanceDimQk, int clusterSize) {
  const uint32_t qBytes = blockShare(columnBlocks(p.headDimQk), clusterSize, 0).count * kBlockBytes;
  const uint32_t vBytes = blockShare(columnBlocks(p.headDimV), clusterSize, 0).count * kBlockBytes;
  LayoutCursor cursor;
  p.qOffset = cursor.take(qBytes);
  p.dOOffset = cursor.take(vBytes);
  p.kOffset = cursor.take(columnBlocks(instanceDimQk / clusterSize) * kBlockBytes);
  p.vOffset = cursor.take(vBytes);
  p.dsOffset = cursor.take(2 * kBlockBytes);
  p.dpOffset = cursor.take(kExchangeBytes);
  p.scoreExchangeOffset = cursor.take(clusterSize > 1 ? kExchangeBytes : 0);
  p.dpExchangeOffset = cursor.take(clusterSize > 1 ? kExchangeBytes : 0);
  p.barrierOffset = cursor.take(kGradBarrierCount * 8);
  p.sharedBytes = cursor.sharedBytes();
  return p.sharedBytes;
}

}  // namespace ffpa::sm90
