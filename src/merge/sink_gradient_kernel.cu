// The gradient of the attention sinks: one CTA per head, each warp taking rows r, r + kWarps, ...
// of the head's B * N rows: delta = rowsum(O' * dO) by a butterfly over the lanes, weighted by the
// sink's probability exp(s_h - LSE'), summed per warp, then over the warps in order. The
// assignment of rows and the order of every sum are fixed, so the result is the same bits on
// every run. Reads O' and dO once; a head's share is small beside the attention backward
// (O(N * D) against O(N^2 * D)), so one CTA per head is enough.
#include "merge/merge_call.h"

#include "core/element_values.cuh"
#include "core/kernel_launch.h"

namespace ffpa {
namespace {

constexpr int kWarpSize = 32;
constexpr int kWarps = 16;

struct SinkGradientParams {
  SinkGradientTensors t;
  int64_t batch, seq, headDim;
  RowStrides oStrides, dOStrides, lseStrides;
};

__device__ inline float warpSum(float value) {
#pragma unroll
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) {
    value += __shfl_xor_sync(0xffffffffu, value, offset);
  }
  return value;  // every lane holds the same sum, added in the same order
}

template <class T>
__global__ void __launch_bounds__(kWarps* kWarpSize) sinkGradient(const SinkGradientParams p) {
  __shared__ float warpTotals[kWarps];
  const int64_t h = blockIdx.x;
  const int lane = threadIdx.x % kWarpSize;
  const int warp = threadIdx.x / kWarpSize;
  const float sink = p.t.sinks[h];
  float total = 0.0f;
  for (int64_t row = warp; row < p.batch * p.seq; row += kWarps) {
    const int64_t b = row / p.seq;
    const int64_t n = row % p.seq;
    const T* oRow = static_cast<const T*>(p.t.o) + p.oStrides.offset(b, h, n);
    const T* dRow = static_cast<const T*>(p.t.dO) + p.dOStrides.offset(b, h, n);
    float dot = 0.0f;
    for (int64_t c = lane; c < p.headDim; c += kWarpSize) dot += toFloat(oRow[c]) * toFloat(dRow[c]);
    const float delta = warpSum(dot);
    const float lse = p.t.lse[p.lseStrides.offset(b, h, n)];
    // The sink's probability in this row; a sink of -inf has none (and no gradient).
    const float share = sink == -INFINITY ? 0.0f : expf(sink - lse);
    total += share * delta;
  }
  if (lane == 0) warpTotals[warp] = total;
  __syncthreads();
  if (threadIdx.x == 0) {
    float sum = 0.0f;
    for (int w = 0; w < kWarps; ++w) sum += warpTotals[w];
    p.t.dSinks[h] = -sum;
  }
}

}  // namespace

void enqueueSinkGradient(const SinkGradientProblem& problem, const SinkGradientTensors& t,
                         ffpaStream_t stream) {
  const SinkGradientParams params{t,
                                  problem.batch,
                                  problem.seq,
                                  problem.headDim,
                                  rowStrides(problem.o),
                                  rowStrides(problem.dO),
                                  rowStrides(problem.lse)};
  withElementType(problem.dtype, [&](auto tag) {
    launchKernel("sinkGradient", sinkGradient<ElementOf<decltype(tag)>>,
                 static_cast<unsigned>(problem.heads), kWarps * kWarpSize, stream, params);
  });
}

}  // namespace ffpa
