// The difference of two device tensors, reduced on the GPU: outputs of the default sweep have
// hundreds of millions of elements, too many to copy to the host and compare there for every row.
#pragma once

#include <cuda_runtime.h>
#include <ffpa/ffpa.h>

#include <cstddef>

namespace ffpa_bench {

struct Difference {
  double relative = 0;  // ||actual - expected|| / ||expected|| (Frobenius); inf with any NaN
  double maxAbs = 0;    // max |actual - expected|; inf with any NaN
};

// Compares `count` contiguous elements of type `dtype` (fp16, bf16 or fp32); waits for `stream`.
cudaError_t compareOnDevice(const void* actual, const void* expected, ffpaDataType_t dtype, size_t count,
                            cudaStream_t stream, Difference* result);

}  // namespace ffpa_bench
