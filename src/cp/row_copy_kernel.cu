// One thread per element, a grid-stride loop over B * H * N * D: memory-bound, and a small part of
// a context-parallel step (one pass over a block's O or gradients against the block's attention).
#include "cp/row_copy.h"

#include "core/element_values.cuh"
#include "core/kernel_launch.h"

#include <algorithm>

namespace ffpa::cp {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 1 << 16;

struct RowParams {
  void* dst;
  const void* src;
  RowStrides dstStrides, srcStrides;
  int64_t heads, rows, dim, elements;
};

template <class Out, class In, bool kAdd>
__global__ void __launch_bounds__(kThreads) rowsKernel(const RowParams p) {
  for (int64_t e = int64_t{blockIdx.x} * kThreads + threadIdx.x; e < p.elements;
       e += int64_t{gridDim.x} * kThreads) {
    const int64_t x = e % p.dim;
    const int64_t n = e / p.dim % p.rows;
    const int64_t h = e / p.dim / p.rows % p.heads;
    const int64_t b = e / p.dim / p.rows / p.heads;
    Out* out = static_cast<Out*>(p.dst) + p.dstStrides.offset(b, h, n) + x;
    const float value = toFloat(static_cast<const In*>(p.src)[p.srcStrides.offset(b, h, n) + x]);
    *out = fromFloat<Out>(kAdd ? toFloat(*out) + value : value);
  }
}

}  // namespace

void enqueueRows(RowOp op, const RowShape& shape, const RowTensor& dst, const RowTensor& src,
                 ffpaStream_t stream) {
  const RowParams p{dst.data, src.data, dst.strides, src.strides, shape.heads, shape.rows, shape.dim,
                    shape.batch * shape.heads * shape.rows * shape.dim};
  if (p.elements == 0) return;
  const int64_t blocks = std::clamp<int64_t>((p.elements + kThreads - 1) / kThreads, 1, kMaxBlocks);
  withElementType(dst.dtype, [&](auto outTag) {
    withElementType(src.dtype, [&](auto inTag) {
      using Out = ElementOf<decltype(outTag)>;
      using In = ElementOf<decltype(inTag)>;
      const auto kernel = op == RowOp::Add ? rowsKernel<Out, In, true> : rowsKernel<Out, In, false>;
      launchKernel("cp rows", kernel, static_cast<unsigned>(blocks), kThreads, stream, p);
    });
  });
}

}  // namespace ffpa::cp
