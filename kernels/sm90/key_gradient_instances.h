// The compiled instances of the sm90 dK/dV kernel of the backward, as the planner sees them: one
// per element type and head dim (the larger of d_qk and d_v, rounded up: 64, 128, 192 and 256 on
// one CTA, 384 and 512 on clusters of two, 768 and 1024 on clusters of four; see
// sm90/key_gradient_params.h), built only for sm_90a (key_gradient_instances.cu).
#pragma once

#include <ffpa/ffpa.h>

#include <vector>

namespace ffpa::sm90 {

struct KeyGradientInstance {
  int headDim;      // the largest d_qk and d_v it serves
  int clusterSize;  // CTAs per cluster along x (keyGradientClusterSize)
  ffpaDataType_t dtype;
  const void* kernel;  // the __global__ function, for cudaLaunchKernel and its attributes
};

using KeyGradientInstanceList = std::vector<KeyGradientInstance>;

// Empty when the build compiles no sm_90a code.
const KeyGradientInstanceList& keyGradientInstances();

}  // namespace ffpa::sm90
