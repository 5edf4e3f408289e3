#include "device_compare.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <cstring>
#include <limits>

namespace ffpa_bench {
namespace {

struct Sums {
  double diffSquares;
  double expectedSquares;
  unsigned int maxAbsBits;  // a non-negative float's bits order like the float: atomicMax works
  unsigned int nan;
};

__device__ float load(const __half* p, size_t i) { return __half2float(p[i]); }
__device__ float load(const __nv_bfloat16* p, size_t i) { return __bfloat162float(p[i]); }
__device__ float load(const float* p, size_t i) { return p[i]; }

template <class T>
__global__ void reduce(const T* actual, const T* expected, size_t count, Sums* sums) {
  double diff2 = 0, ref2 = 0;
  float maxAbs = 0;
  bool nan = false;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < count; i += size_t(gridDim.x) * blockDim.x) {
    const float a = load(actual, i), e = load(expected, i);
    const double d = double(a) - double(e);
    nan = nan || isnan(a) || isnan(e);
    diff2 += d * d;
    ref2 += double(e) * double(e);
    maxAbs = fmaxf(maxAbs, fabsf(a - e));
  }
  // Warp sums first, so that only one lane per warp touches global memory.
  for (int offset = 16; offset > 0; offset /= 2) {
    diff2 += __shfl_down_sync(0xffffffffu, diff2, offset);
    ref2 += __shfl_down_sync(0xffffffffu, ref2, offset);
    maxAbs = fmaxf(maxAbs, __shfl_down_sync(0xffffffffu, maxAbs, offset));
  }
  nan = __any_sync(0xffffffffu, nan);
  if (threadIdx.x % 32 == 0) {
    atomicAdd(&sums->diffSquares, diff2);
    atomicAdd(&sums->expectedSquares, ref2);
    atomicMax(&sums->maxAbsBits, __float_as_uint(maxAbs));
    if (nan) atomicOr(&sums->nan, 1u);
  }
}

}  // namespace

cudaError_t compareOnDevice(const void* actual, const void* expected, ffpaDataType_t dtype, size_t count,
                            cudaStream_t stream, Difference* result) {
  Sums* sums = nullptr;
  cudaError_t error = cudaMalloc(&sums, sizeof(Sums));
  if (error != cudaSuccess) return error;
  const dim3 grid(1024), block(256);
  Sums host{};
  error = cudaMemsetAsync(sums, 0, sizeof(Sums), stream);
  if (error == cudaSuccess) {
    switch (dtype) {
      case FFPA_DATA_TYPE_FLOAT16:
        reduce<<<grid, block, 0, stream>>>(static_cast<const __half*>(actual), static_cast<const __half*>(expected),
                                           count, sums);
        break;
      case FFPA_DATA_TYPE_BFLOAT16:
        reduce<<<grid, block, 0, stream>>>(static_cast<const __nv_bfloat16*>(actual),
                                           static_cast<const __nv_bfloat16*>(expected), count, sums);
        break;
      default:
        reduce<<<grid, block, 0, stream>>>(static_cast<const float*>(actual), static_cast<const float*>(expected),
                                           count, sums);
        break;
    }
    error = cudaGetLastError();
  }
  if (error == cudaSuccess) error = cudaMemcpyAsync(&host, sums, sizeof host, cudaMemcpyDeviceToHost, stream);
  if (error == cudaSuccess) error = cudaStreamSynchronize(stream);
  cudaFree(sums);
  if (error != cudaSuccess) return error;
  const double inf = std::numeric_limits<double>::infinity();
  float maxAbs = 0;
  static_assert(sizeof maxAbs == sizeof host.maxAbsBits, "float and its bits");
  std::memcpy(&maxAbs, &host.maxAbsBits, sizeof maxAbs);
  result->maxAbs = host.nan ? inf : maxAbs;
  result->relative = host.nan ? inf
                     : host.expectedSquares > 0 ? std::sqrt(host.diffSquares / host.expectedSquares)
                     : host.diffSquares > 0     ? inf
                                                : 0.0;
  return cudaSuccess;
}

}  // namespace ffpa_bench
