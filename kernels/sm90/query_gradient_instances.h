// The compiled instances of the sm90 dQ kernel of the backward, as the planner sees them: one per
// element type, d_qk and cluster size (one CTA: d_qk 64, 128, 192, 256, 320, 384; two: 384, 512,
// 640; four: 768, 1024; see sm90/query_gradient_params.h), built only for sm_90a
// (query_gradient_instances.cu).
#pragma once

#include <ffpa/ffpa.h>

#include <vector>

namespace ffpa::sm90 {

struct QueryGradientInstance {
  int headDimQk;    // the largest d_qk it serves (a multiple of 64 * clusterSize)
  int clusterSize;  // CTAs per cluster along x
  ffpaDataType_t dtype;
  const void* kernel;  // the __global__ function, for cudaLaunchKernel and its attributes
};

using QueryGradientInstanceList = std::vector<QueryGradientInstance>;

// Empty when the build compiles no sm_90a code.
const QueryGradientInstanceList& queryGradientInstances();

}  // namespace ffpa::sm90
