// The compiled instances of the sm90 forward kernel, as the planner sees them: one per element type
// and d_v block count (d_v in 257..512 rounds up to 320, 384, 448 or 512 columns; 513..1024 to
// 640, 768, 896 or 1024, served by clusters of two CTAs), and for d_v up to 512 a second kernel
// whose CTAs of two adjacent row tiles share K and V, built only for sm_90a
// (kernels/sm90/forward_instances.cu).
#pragma once

#include <ffpa/ffpa.h>

#include <vector>

namespace ffpa::sm90 {

struct ForwardInstance {
  int headDimV;  // the largest d_v it serves (a multiple of 64)
  ffpaDataType_t dtype;
  const void* kernel;  // the __global__ function, for cudaLaunchKernel and its attributes
  int kvSharing;       // CTAs of adjacent row tiles that share K and V (kvSharingForwardKernel: 2), else 1
};

using ForwardInstanceList = std::vector<ForwardInstance>;

// Empty when the build compiles no sm_90a code.
const ForwardInstanceList& forwardInstances();

}  // namespace ffpa::sm90
