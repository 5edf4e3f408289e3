// The compiled instances of the sm80 forward kernel, as the planner sees them. Each head dim of
// the build's kernel set has kForwardParts generated translation units (forward_instances.cu.in),
// each appending its part of the head dim's instances; instances of head dims with the same tile
// shape are the same kernels.
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
  bool wideKeys;      // 64-key tiles on the two-row-tile shape (forwardShape; "tile_keys" 64)
  const void* kernel; // the __global__ function, for cudaLaunchKernel and its attributes
};

using ForwardInstanceList = std::vector<ForwardInstance>;

// The instances of one head dim are split over this many translation units (forwardPartOf in
// forward_instance_set.h says which instance goes where), so that a build on many cores is not
// held up by one large unit. kernels/meson.build generates as many.
inline constexpr int kForwardParts = 3;

// Appends part kPart of head dim kHeadDim's instances (defined in the generated units).
template <int kHeadDim, int kPart>
void appendForwardInstances(ForwardInstanceList& out);

}  // namespace ffpa::sm80
