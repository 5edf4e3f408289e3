#include "reference/reference_kernels.h"

#include "core/element_values.cuh"
#include "core/kernel_launch.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <type_traits>

namespace ffpa::reference {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 1 << 20;  // kernels loop over the rest (grid-stride)

// Strides as a plain struct: what a kernel parameter should be.
struct Stride4 {
  int64_t b, h, n, d;
};
Stride4 plain(const Strides& s) { return {s[0], s[1], s[2], s[3]}; }

struct RowCoord {
  int64_t b, h, n;
};

// The tensor coordinates of stacked row `rho` of a chunk (see ChunkGeometry).
__device__ inline RowCoord queryRow(const ChunkGeometry& g, int64_t rho) {
  const int64_t perUnit = g.group * g.rows;
  const int64_t u = rho / perUnit;
  const int64_t inUnit = rho - u * perUnit;
  const int64_t j = inUnit / g.rows;
  const int64_t unit = g.firstUnit + u;
  const int64_t b = unit / g.headsKv;
  const int64_t kvHead = unit - b * g.headsKv;
  return {b, kvHead * g.group + j, g.firstRow + (inUnit - j * g.rows)};
}

// The keys query n may see lie in [begin, end): all of them, those on or left of the causal
// diagonal, or the hull of what its slices give it (then `sees` decides key by key).
struct RowKeys {
  slices::KeySpan span;
  int32_t segment;
};

// The keys batch entry b has: seqKv, or its count of FFPA_ATTENTION_KEY_LENGTHS clamped to [0, seqKv].
__device__ inline int64_t keysOf(const int32_t* keyLengths, int64_t b, int64_t seqKv) {
  if (keyLengths == nullptr) return seqKv;
  return min(seqKv, max(int64_t{0}, int64_t{keyLengths[b]}));
}

__device__ inline RowKeys rowKeys(const KeyMask& mask, int64_t b, int64_t n, int64_t seqKv) {
  if (mask.slices.slices != nullptr) {
    const int32_t segment = slices::segmentOf(mask.slices.queries, n);
    return {slices::keyHull(mask.slices, segment, n), segment};
  }
  const int64_t keys = keysOf(mask.keyLengths, b, seqKv);
  if (mask.mode == FFPA_CAUSAL_NONE) return {{0, keys}, -1};
  // The bottom-right diagonal ends at the entry's last key.
  const int64_t offset = mask.mode == FFPA_CAUSAL_BOTTOM_RIGHT ? mask.offset + keys - seqKv : mask.offset;
  return {{0, max(int64_t{0}, min(keys, n + offset + 1))}, -1};
}

__device__ inline bool sees(const KeyMask& mask, const RowKeys& row, int64_t n, int64_t j) {
  if (j < row.span.begin || j >= row.span.end) return false;
  return mask.slices.slices == nullptr || slices::sees(mask.slices, row.segment, n, j);
}

__device__ inline int64_t gridStart() { return blockIdx.x * int64_t{blockDim.x} + threadIdx.x; }
__device__ inline int64_t gridStep() { return int64_t{gridDim.x} * blockDim.x; }

template <class Op>
__device__ float blockReduce(float value, Op op) {
  __shared__ float partial[32];
  for (int offset = 16; offset > 0; offset /= 2) value = op(value, __shfl_xor_sync(0xffffffffu, value, offset));
  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32;
  __syncthreads();  // `partial` may still be read by a previous reduction
  if (lane == 0) partial[warp] = value;
  __syncthreads();
  value = partial[0];
  for (int w = 1; w < blockDim.x / 32; ++w) value = op(value, partial[w]);
  return value;
}

struct MaxOp {
  __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};
struct SumOp {
  __device__ float operator()(float a, float b) const { return a + b; }
};

template <class T>
__global__ void gatherQueryRowsKernel(const T* src, Stride4 s, ChunkGeometry g, int64_t dim, float* dst) {
  const int64_t total = g.units * g.group * g.rows * dim;
  for (int64_t i = gridStart(); i < total; i += gridStep()) {
    const int64_t rho = i / dim;
    const int64_t d = i - rho * dim;
    const RowCoord c = queryRow(g, rho);
    dst[i] = toFloat(src[c.b * s.b + c.h * s.h + c.n * s.n + d * s.d]);
  }
}

template <class T>
__global__ void scatterQueryRowsKernel(const float* src, T* dst, Stride4 s, ChunkGeometry g, int64_t dim) {
  const int64_t total = g.units * g.group * g.rows * dim;
  for (int64_t i = gridStart(); i < total; i += gridStep()) {
    const int64_t rho = i / dim;
    const int64_t d = i - rho * dim;
    const RowCoord c = queryRow(g, rho);
    dst[c.b * s.b + c.h * s.h + c.n * s.n + d * s.d] = fromFloat<T>(src[i]);
  }
}

template <class T>
__global__ void gatherUnitRowsKernel(const T* src, Stride4 s, ChunkGeometry g, int64_t seq, int64_t dim,
                                     const int32_t* keyLengths, float* dst) {
  const int64_t total = g.units * seq * dim;
  for (int64_t i = gridStart(); i < total; i += gridStep()) {
    const int64_t d = i % dim;
    const int64_t n = (i / dim) % seq;
    const int64_t unit = g.firstUnit + i / (dim * seq);
    const int64_t b = unit / g.headsKv;
    dst[i] = n < keysOf(keyLengths, b, seq) ? toFloat(src[b * s.b + (unit - b * g.headsKv) * s.h + n * s.n + d * s.d])
                                            : 0.0f;
  }
}

template <class T>
__global__ void scatterUnitRowsKernel(const float* src, T* dst, Stride4 s, ChunkGeometry g, int64_t seq,
                                      int64_t dim) {
  const int64_t total = g.units * seq * dim;
  for (int64_t i = gridStart(); i < total; i += gridStep()) {
    const int64_t d = i % dim;
    const int64_t n = (i / dim) % seq;
    const int64_t unit = g.firstUnit + i / (dim * seq);
    const int64_t b = unit / g.headsKv;
    dst[b * s.b + (unit - b * g.headsKv) * s.h + n * s.n + d * s.d] = fromFloat<T>(src[i]);
  }
}

// One block per row: max, sum of exponentials, normalization; fp32 throughout with expf/logf
// (the reference is built without fast math).
__global__ void softmaxRowsKernel(float* scores, ChunkGeometry g, int64_t seqKv, KeyMask mask,
                                  float* lse, Stride4 ls) {
  const int64_t rows = g.units * g.group * g.rows;
  for (int64_t rho = blockIdx.x; rho < rows; rho += gridDim.x) {
    float* row = scores + rho * seqKv;
    const RowCoord c = queryRow(g, rho);
    const RowKeys keys = rowKeys(mask, c.b, c.n, seqKv);
    float rowMax = -INFINITY;
    float visible = 0.0f;  // a count, only ever compared with 0
    for (int64_t j = keys.span.begin + threadIdx.x; j < keys.span.end; j += blockDim.x) {
      if (!sees(mask, keys, c.n, j)) continue;
      rowMax = fmaxf(rowMax, row[j]);
      visible += 1.0f;
    }
    rowMax = blockReduce(rowMax, MaxOp{});
    visible = blockReduce(visible, SumOp{});
    float sum = 0.0f;
    for (int64_t j = keys.span.begin + threadIdx.x; j < keys.span.end; j += blockDim.x) {
      if (sees(mask, keys, c.n, j)) sum += expf(row[j] - rowMax);
    }
    sum = blockReduce(sum, SumOp{});
    const float inverse = visible > 0.0f ? 1.0f / sum : 0.0f;
    for (int64_t j = threadIdx.x; j < seqKv; j += blockDim.x) {
      row[j] = sees(mask, keys, c.n, j) ? expf(row[j] - rowMax) * inverse : 0.0f;
    }
    if (lse != nullptr && threadIdx.x == 0) {
      lse[c.b * ls.b + c.h * ls.h + c.n * ls.n] = visible > 0.0f ? rowMax + logf(sum) : -INFINITY;
    }
  }
}

__global__ void probabilitiesFromLseKernel(float* scores, ChunkGeometry g, int64_t seqKv, KeyMask mask,
                                           const float* lse, Stride4 ls) {
  const int64_t total = g.units * g.group * g.rows * seqKv;
  for (int64_t i = gridStart(); i < total; i += gridStep()) {
    const int64_t rho = i / seqKv;
    const int64_t j = i - rho * seqKv;
    const RowCoord c = queryRow(g, rho);
    const float rowLse = lse[c.b * ls.b + c.h * ls.h + c.n * ls.n];
    // Per element: only the slices' own test (segment lookup), not the row's hull as well.
    const bool seen = mask.slices.slices != nullptr
                          ? slices::sees(mask.slices, slices::segmentOf(mask.slices.queries, c.n), c.n, j)
                          : sees(mask, rowKeys(mask, c.b, c.n, seqKv), c.n, j);
    const bool visible = rowLse != -INFINITY && seen;
    scores[i] = visible ? expf(scores[i] - rowLse) : 0.0f;
  }
}

template <class T>
__global__ void rowDotProductsKernel(const T* o, Stride4 so, const T* dO, Stride4 sd, ChunkGeometry g,
                                     int64_t dimV, float* delta) {
  const int64_t rows = g.units * g.group * g.rows;
  for (int64_t rho = blockIdx.x; rho < rows; rho += gridDim.x) {
    const RowCoord c = queryRow(g, rho);
    const T* oRow = o + c.b * so.b + c.h * so.h + c.n * so.n;
    const T* dRow = dO + c.b * sd.b + c.h * sd.h + c.n * sd.n;
    float sum = 0.0f;
    for (int64_t d = threadIdx.x; d < dimV; d += blockDim.x) sum += toFloat(oRow[d * so.d]) * toFloat(dRow[d * sd.d]);
    sum = blockReduce(sum, SumOp{});
    if (threadIdx.x == 0) delta[rho] = sum;
  }
}

__global__ void softmaxGradientKernel(float* dScores, const float* probs, const float* delta, int64_t rows,
                                      int64_t seqKv) {
  const int64_t total = rows * seqKv;
  for (int64_t i = gridStart(); i < total; i += gridStep()) {
    dScores[i] = probs[i] * (dScores[i] - delta[i / seqKv]);
  }
}

int elementwiseBlocks(int64_t total) {
  return static_cast<int>(std::clamp<int64_t>((total + kThreads - 1) / kThreads, 1, kMaxBlocks));
}
int rowBlocks(int64_t rows) { return static_cast<int>(std::clamp<int64_t>(rows, 1, kMaxBlocks)); }

}  // namespace

void gatherQueryRows(const DeviceTensor& src, const ChunkGeometry& chunk, int64_t dim, float* dst,
                     cudaStream_t stream) {
  const int blocks = elementwiseBlocks(stackedRows(chunk) * dim);
  withElementType(src.dtype, [&](auto tag) {
    using T = ElementOf<decltype(tag)>;
    launchKernel("gatherQueryRowsKernel", gatherQueryRowsKernel<T>, blocks, kThreads, stream,
                 static_cast<const T*>(src.data), plain(src.strides), chunk, dim, dst);
  });
}

void scatterQueryRows(const float* src, const MutableDeviceTensor& dst, const ChunkGeometry& chunk,
                      int64_t dim, cudaStream_t stream) {
  const int blocks = elementwiseBlocks(stackedRows(chunk) * dim);
  withElementType(dst.dtype, [&](auto tag) {
    using T = ElementOf<decltype(tag)>;
    launchKernel("scatterQueryRowsKernel", scatterQueryRowsKernel<T>, blocks, kThreads, stream, src,
                 static_cast<T*>(dst.data), plain(dst.strides), chunk, dim);
  });
}

void gatherUnitRows(const DeviceTensor& src, const ChunkGeometry& chunk, int64_t seq, int64_t dim,
                    const int32_t* keyLengths, float* dst, cudaStream_t stream) {
  const int blocks = elementwiseBlocks(chunk.units * seq * dim);
  withElementType(src.dtype, [&](auto tag) {
    using T = ElementOf<decltype(tag)>;
    launchKernel("gatherUnitRowsKernel", gatherUnitRowsKernel<T>, blocks, kThreads, stream,
                 static_cast<const T*>(src.data), plain(src.strides), chunk, seq, dim, keyLengths, dst);
  });
}

void scatterUnitRows(const float* src, const MutableDeviceTensor& dst, const ChunkGeometry& chunk,
                     int64_t seq, int64_t dim, cudaStream_t stream) {
  const int blocks = elementwiseBlocks(chunk.units * seq * dim);
  withElementType(dst.dtype, [&](auto tag) {
    using T = ElementOf<decltype(tag)>;
    launchKernel("scatterUnitRowsKernel", scatterUnitRowsKernel<T>, blocks, kThreads, stream, src,
                 static_cast<T*>(dst.data), plain(dst.strides), chunk, seq, dim);
  });
}

void softmaxRows(float* scores, const ChunkGeometry& chunk, int64_t seqKv, KeyMask mask,
                 float* lse, const Strides& lseStrides, cudaStream_t stream) {
  launchKernel("softmaxRowsKernel", softmaxRowsKernel, rowBlocks(stackedRows(chunk)), kThreads,
               stream, scores, chunk, seqKv, mask, lse, plain(lseStrides));
}

void probabilitiesFromLse(float* scores, const ChunkGeometry& chunk, int64_t seqKv,
                          KeyMask mask, const float* lse, const Strides& lseStrides,
                          cudaStream_t stream) {
  launchKernel("probabilitiesFromLseKernel", probabilitiesFromLseKernel,
               elementwiseBlocks(stackedRows(chunk) * seqKv), kThreads, stream, scores, chunk, seqKv,
               mask, lse, plain(lseStrides));
}

void rowDotProducts(const DeviceTensor& o, const DeviceTensor& dO, const ChunkGeometry& chunk,
                    int64_t dimV, float* delta, cudaStream_t stream) {
  withElementType(o.dtype, [&](auto tag) {
    using T = ElementOf<decltype(tag)>;
    launchKernel("rowDotProductsKernel", rowDotProductsKernel<T>, rowBlocks(stackedRows(chunk)),
                 kThreads, stream, static_cast<const T*>(o.data), plain(o.strides),
                 static_cast<const T*>(dO.data), plain(dO.strides), chunk, dimV, delta);
  });
}

void softmaxGradient(float* dScores, const float* probs, const float* delta, int64_t rows,
                     int64_t seqKv, cudaStream_t stream) {
  launchKernel("softmaxGradientKernel", softmaxGradientKernel, elementwiseBlocks(rows * seqKv),
               kThreads, stream, dScores, probs, delta, rows, seqKv);
}

}  // namespace ffpa::reference
