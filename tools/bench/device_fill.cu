#include "device_fill.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace ffpa_bench {
namespace {

// splitmix64 of (seed, index): independent values without any state.
__device__ float uniform(uint64_t seed, uint64_t index) {
  uint64_t z = seed + 0x9e3779b97f4a7c15ull * (index + 1);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  return static_cast<float>(z >> 40) * (1.0f / 16777216.0f);  // [0, 1)
}

template <class T>
__global__ void fill(T* data, size_t count, uint64_t seed, float range) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < count; i += size_t(gridDim.x) * blockDim.x) {
    data[i] = static_cast<T>((2.0f * uniform(seed, i) - 1.0f) * range);
  }
}

}  // namespace

cudaError_t fillUniform(void* data, ffpaDataType_t dtype, size_t count, uint64_t seed, float range,
                        cudaStream_t stream) {
  const dim3 grid(1024), block(256);
  switch (dtype) {
    case FFPA_DATA_TYPE_FLOAT16:
      fill<<<grid, block, 0, stream>>>(static_cast<__half*>(data), count, seed, range);
      break;
    case FFPA_DATA_TYPE_BFLOAT16:
      fill<<<grid, block, 0, stream>>>(static_cast<__nv_bfloat16*>(data), count, seed, range);
      break;
    default:
      fill<<<grid, block, 0, stream>>>(static_cast<float*>(data), count, seed, range);
      break;
  }
  return cudaGetLastError();
}

}  // namespace ffpa_bench
