// Device-side input generation for the benchmark: inputs of billions of elements are filled on
// the GPU (a counter-based hash, reproducible from a seed), not on the host.
#pragma once

#include <cuda_runtime.h>
#include <ffpa/ffpa.h>

#include <cstddef>
#include <cstdint>

namespace ffpa_bench {

// Uniform values in [-range, range) of type `dtype` (fp16, bf16 or fp32) for `count` elements.
cudaError_t fillUniform(void* data, ffpaDataType_t dtype, size_t count, uint64_t seed, float range,
                        cudaStream_t stream);

}  // namespace ffpa_bench
