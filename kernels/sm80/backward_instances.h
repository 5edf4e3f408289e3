// The compiled instances of the sm80 backward kernels, as the planner sees them: for each head
// dim of the build's kernel set and each dtype, the row-statistics kernel, the dQ kernel and the
// dK/dV kernel (kernels/sm80/backward_params.h). Each head dim and dtype has a generated
// translation unit (backward_instances.cu.in).
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

// The instances of one head dim are split over this many translation units, one per dtype
// (backwardPartOf in backward_instance_set.h); kernels/meson.build generates as many.
inline constexpr int kBackwardParts = 2;

// Appends part kPart of head dim kHeadDim's instances (defined in the generated units).
template <int kHeadDim, int kPart>
void appendBackwardInstances(BackwardInstanceList& out);

}  // namespace ffpa::sm80
