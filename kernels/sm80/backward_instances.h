// The compiled instances of the sm80 backward kernels, as the planner sees them: for each head
// dim of the build's kernel set and each dtype, the row-statistics kernel, the dQ kernel and the
// dK/dV kernel (kernels/sm80/backward_params.h). Each head dim has a generated translation unit
// (backward_instances.cu.in).
#pragma once

#include <ffpa/ffpa.h>

#include <vector>

namespace ffpa::sm80 {

struct BackwardInstance {
  int headDim;  // the largest d_qk and d_v it serves
  ffpaDataType_t dtype;
  // The __global__ functions, for cudaLaunchKernel and its attributes (null in descriptions).
  const void* rowStats;
  const void* queryGradient;
  const void* keyGradient;
};

using BackwardInstanceList = std::vector<BackwardInstance>;

}  // namespace ffpa::sm80
