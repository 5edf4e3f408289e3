// The backward's first kernel: per query row i, delta[i] = sum_c dO[i, c] O[i, c] (in fp32, from
// the 16-bit O and dO) and lse2[i] = LSE[i] * log2(e), or +inf for a row that sees no key
// (LSE = -inf), so that the gradient kernels' P = exp2(S * scaleLog2 - lse2) is 0 there.
//
// One warp per row, kRowStatsWarps rows per CTA; grid: ceil(B * Hq * Nq / kRowStatsWarps).
#pragma once

#include "common/element.cuh"
#include "common/platform.cuh"
#include "common/ptx.cuh"
#include "sm80/backward_params.h"

#include <cstdint>

namespace ffpa::kernels::sm80 {

using ffpa::sm80::BackwardParams;

template <class Tag>
struct RowStatsKernel {
  using Element = typename Tag::Element;

  static FFPA_DEVICE void run(const BackwardParams& p) {
    const int64_t rows = int64_t(p.batch) * p.headsQ * p.seqQ;
    const int64_t row = int64_t(blockIndexX()) * ffpa::sm80::kRowStatsWarps + threadIndex() / 32;
    if (row >= rows) return;  // whole warps
    const int lane = threadIndex() % 32;
    const int64_t i = row % p.seqQ;
    const int64_t head = (row / p.seqQ) % p.headsQ;
    const int64_t batch = row / (int64_t(p.seqQ) * p.headsQ);
    const Element* o = static_cast<const Element*>(p.o) + batch * p.oStrides[0] +
                       head * p.oStrides[1] + i * p.oStrides[2];
    const Element* dO = static_cast<const Element*>(p.dO) + batch * p.dOStrides[0] +
                        head * p.dOStrides[1] + i * p.dOStrides[2];
    // Lane l reads the pairs at columns 2l, 2l + 64, ...: each pass reads 128 contiguous bytes.
    float sum = 0.0f;
    for (int column = 2 * lane; column < p.headDimV; column += 64) {
      const float2 a = unpackPair(*reinterpret_cast<const uint32_t*>(o + column), Tag{});
      const float2 b = unpackPair(*reinterpret_cast<const uint32_t*>(dO + column), Tag{});
      sum += a.x * b.x + a.y * b.y;
    }
#pragma unroll
    for (int mask = 16; mask >= 1; mask /= 2) sum += shuffleXor(sum, mask);
    if (lane == 0) {
      constexpr float kLog2e = 1.4426950408889634f;
      const float lse = p.lse[batch * p.lseStrides[0] + head * p.lseStrides[1] + i * p.lseStrides[2]];
      const float lse2 = lse == -__builtin_huge_valf() ? __builtin_huge_valf() : lse * kLog2e;
      storeGlobalF32(p.rowStats + row, sum);
      storeGlobalF32(p.rowStats + rows + row, lse2);
    }
  }
};

template <class Tag>
FFPA_KERNEL void FFPA_LAUNCH_BOUNDS(32 * ffpa::sm80::kRowStatsWarps, 4)
    rowStatsKernel(const FFPA_GRID_CONSTANT BackwardParams params) {
  RowStatsKernel<Tag>::run(params);
}

}  // namespace ffpa::kernels::sm80
