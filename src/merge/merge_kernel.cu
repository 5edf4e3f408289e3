// The merge kernel: one warp per query row. The warp reads the row's partial log-sum-exps
// (every lane all of them: count <= 32 broadcast loads, and the head's sink when there is one),
// turns them into weights kept in shared memory, then sweeps D, each lane kVec columns at a time,
// summing weight_i * O_i in fp32 over the parts that have keys (a sink has no O: it only adds to
// the denominator). Memory-bound: it reads each partial once and writes O once.
#include "merge/merge_call.h"

#include "core/element_values.cuh"
#include "core/kernel_launch.h"
#include "merge/row_merge.h"

#include <algorithm>

namespace ffpa {
namespace {

constexpr int kWarpSize = 32;
constexpr int kWarpsPerBlock = 8;
constexpr int64_t kMaxBlocks = 1 << 20;  // a grid-stride loop takes the rest
static_assert(kMaxMergePartials <= kWarpSize, "one lane computes the weight of one part");


struct MergeParams {
  const void* partialO[kMaxMergePartials];
  const float* partialLse[kMaxMergePartials];
  void* o;
  float* lse;          // null: not wanted
  const float* sinks;  // [H], or null: one more part per row, O = 0 and LSE = sinks[h]
  int32_t count;
  bool carry;          // O and LSE hold one more part, read before they are written
  int64_t heads, seq, headDim, rows;  // rows = B * H * N
  RowStrides partialOStrides, partialLseStrides, oStrides, lseStrides;
};

// kVec consecutive elements, moved as one access when kVec > 1 (the host checked alignment).
template <class T, int kVec>
struct alignas(sizeof(T) * kVec) Pack {
  T value[kVec];
};

template <class In, class Out, int kVec>
__global__ void __launch_bounds__(kWarpsPerBlock* kWarpSize) mergeRows(const MergeParams p) {
  __shared__ float weights[kWarpsPerBlock][kMaxMergePartials];
  const int lane = threadIdx.x % kWarpSize;
  float* rowWeights = weights[threadIdx.x / kWarpSize];
  const int64_t firstRow = int64_t{blockIdx.x} * kWarpsPerBlock + threadIdx.x / kWarpSize;
  for (int64_t row = firstRow; row < p.rows; row += int64_t{gridDim.x} * kWarpsPerBlock) {
    const int64_t n = row % p.seq;
    const int64_t h = row / p.seq % p.heads;
    const int64_t b = row / p.seq / p.heads;
    const int64_t lseAt = p.partialLseStrides.offset(b, h, n);
    const int64_t outLseAt = p.lseStrides.offset(b, h, n);
    // The carried part (every lane reads it): the running result a merge folds a new part into.
    const float carryLse = p.carry ? p.lse[outLseAt] : -INFINITY;
    const int parts = p.count + (p.carry ? 1 : 0) + (p.sinks != nullptr);
    const merge::RowTotals totals = merge::rowTotals(parts, [&](int i) {
      return i < p.count ? p.partialLse[i][lseAt] : (p.carry && i == p.count) ? carryLse : p.sinks[h];
    });
    const float laneLse = lane < p.count ? p.partialLse[lane][lseAt] : -INFINITY;
    if (lane < p.count) rowWeights[lane] = merge::partWeight(laneLse, totals);
    const float carryWeight = merge::partWeight(carryLse, totals);
    // Parts without keys are not read (their O may hold anything); a part whose weight only
    // underflows to 0 still is, so that NaN in it reaches the output as in the forward.
    const unsigned keyless = __ballot_sync(0xffffffffu, laneLse == -INFINITY);
    // The weights are visible to the warp, and every lane has read every partial LSE, so an LSE
    // updated in place may now be written.
    __syncwarp();
    if (p.lse != nullptr && lane == 0) {
      p.lse[outLseAt] = merge::mergedLse(totals);
    }
    const int64_t inRow = p.partialOStrides.offset(b, h, n);
    Out* outRow = static_cast<Out*>(p.o) + p.oStrides.offset(b, h, n);
    for (int64_t column = int64_t{lane} * kVec; column < p.headDim; column += kWarpSize * kVec) {
      float sum[kVec] = {};
      for (int i = 0; i < p.count; ++i) {
        if ((keyless >> i) & 1u) continue;
        const float weight = rowWeights[i];
        const auto x = *reinterpret_cast<const Pack<In, kVec>*>(
            static_cast<const In*>(p.partialO[i]) + inRow + column);
#pragma unroll
        for (int e = 0; e < kVec; ++e) sum[e] += weight * toFloat(x.value[e]);
      }
      if (carryLse != -INFINITY) {
        const auto x = *reinterpret_cast<const Pack<Out, kVec>*>(outRow + column);
#pragma unroll
        for (int e = 0; e < kVec; ++e) sum[e] += carryWeight * toFloat(x.value[e]);
      }
      Pack<Out, kVec> y;
#pragma unroll
      for (int e = 0; e < kVec; ++e) y.value[e] = fromFloat<Out>(sum[e]);
      // The same lane read this element of every partial above: an O updated in place is safe.
      *reinterpret_cast<Pack<Out, kVec>*>(outRow + column) = y;
    }
    __syncwarp();  // every lane is done with the weights before the next row replaces them
  }
}

MergeParams paramsOf(const MergeProblem& problem, const MergeTensors& tensors) {
  MergeParams p{};
  for (int32_t i = 0; i < problem.count; ++i) {
    p.partialO[i] = tensors.partialO[i];
    p.partialLse[i] = tensors.partialLse[i];
  }
  p.o = tensors.o;
  p.lse = problem.hasLse ? tensors.lse : nullptr;
  p.sinks = tensors.sinks;
  p.count = problem.count;
  p.carry = problem.carry;
  p.heads = problem.heads;
  p.seq = problem.seq;
  p.headDim = problem.headDim;
  p.rows = problem.batch * problem.heads * problem.seq;
  p.partialOStrides = rowStrides(problem.partialO);
  p.partialLseStrides = rowStrides(problem.partialLse);
  p.oStrides = rowStrides(problem.o);
  p.lseStrides = rowStrides(problem.lse);
  return p;
}

}  // namespace

void enqueueMerge(const MergeProblem& problem, const MergeTensors& tensors, ffpaStream_t stream) {
  const MergeParams params = paramsOf(problem, tensors);
  const int64_t blocks = std::clamp<int64_t>((params.rows + kWarpsPerBlock - 1) / kWarpsPerBlock, 1, kMaxBlocks);
  const bool vectorized = mergeVectorizes(problem, tensors);
  withElementType(problem.partialType, [&](auto inTag) {
    withElementType(problem.outType, [&](auto outTag) {
      using In = ElementOf<decltype(inTag)>;
      using Out = ElementOf<decltype(outTag)>;
      const auto kernel = vectorized ? mergeRows<In, Out, 4> : mergeRows<In, Out, 1>;
      launchKernel("mergeRows", kernel, static_cast<unsigned>(blocks), kWarpsPerBlock * kWarpSize,
                   stream, params);
    });
  });
}

}  // namespace ffpa
