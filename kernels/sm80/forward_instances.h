// The compiled instances of the sm80 forward kernel, as the planner sees them. Each head dim of
// the build's kernel set has a generated translation unit (forward_instances.cu.in) that appends
// its instances; instances of head dims with the same tile shape are the same kernels.
#pragma once

#include "sm80/forward_params.h"

#include <ffpa/ffpa.h>

#include <vector>

namespace ffpa::sm80 {

struct ForwardInstance {
  int headDimV;  // the largest d_v it serves: forwardShape(d).maxHeadDimV()
  ffpaDataType_t dtype;
  ffpaAccumulator_t accumulator;
  bool pipeKv;        // FFPA_POLICY_REGISTERS_PIPE_KV
  bool qInRegisters;  // FFPA_POLICY_PERSIST_Q_S2R
  bool vInRegisters;  // FFPA_POLICY_PERSIST_V_S2R (one-warp-per-row-group shapes only)
  const void* kernel; // the __global__ function, for cudaLaunchKernel and its attributes
};

using ForwardInstanceList = std::vector<ForwardInstance>;

}  // namespace ffpa::sm80
