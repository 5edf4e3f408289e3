// How the sm80 backward kernels serve a problem under the policies: which compiled instance, with
// which pipelines, shared-memory layouts and grids, or why none does. Plain C++ that calls nothing
// on the device, shared by the planner variant (backward_variant.cpp) and the emulator's tests.
#pragma once

#include "core/kernel_registry.h"
#include "sm80/backward_instances.h"
#include "sm80/backward_params.h"
#include "sm80/resolve_common.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ffpa::sm80 {

// What the planner decided for one backward problem.
struct BackwardLaunch {
  const BackwardInstance* instance = nullptr;
  ForwardShape queryShape{};
  KeyShape keyShape{};
  GradientChoice choice;
  BackwardParams layout{};  // queryLayout and keyLayout filled
  bool gridDnhb = false;
  uint32_t rowStatsGrid = 1;
  uint32_t queryGrid[3] = {1, 1, 1};  // (Nq / Br, B * Hq) or (Nq / Br, Hq, B)
  uint32_t keyGrid[3] = {1, 1, 1};    // (Nkv / Bk, B * Hkv) or (Nkv / Bk, Hkv, B)
  size_t workspaceBytes = 0;          // the row statistics
  std::string notes;                  // adaptations of knobs left at their defaults
};

struct BackwardResolution {
  std::optional<BackwardLaunch> launch;
  Support refusal;
};

// The backward's tunable launch parameters (stages, score_step, output_step, prefetch,
// smem_share, persist_q), writing into `choice`.
std::vector<LaunchParameter> backwardLaunchParameters(GradientChoice& choice);

// Resolves against this build's instances (backwardInstances()) and the request's device.
BackwardResolution resolveBackward(const PlanRequest& request);

// The launch parameters of one call: the decision's layouts plus the call's pointers (device
// pointers, or host pointers on the emulator), strides, sizes, mask and scale. `rowStats` is the
// workspace (at least launch.workspaceBytes).
BackwardParams backwardCallParams(const BackwardLaunch& launch, const AttentionProblem& problem,
                                  const TensorArgs& tensors, void* rowStats);

// The grids of one call's dQ and dK/dV kernels: the plan's, with the x extents of a sliced problem
// counting its row and key tiles (which the plan, keyed on the presence of slices only, cannot
// know).
struct BackwardGrids {
  uint32_t query[3];
  uint32_t key[3];
};
BackwardGrids backwardCallGrids(const BackwardLaunch& launch, const AttentionProblem& problem,
                                const BackwardParams& params);

// "dQ: Br=64 Bc=64 warps=4x2 ...; dK/dV: Bk=32 Bq=64 warps=2x4 ..." for plan descriptions.
std::string describeBackwardConfig(const BackwardLaunch& launch);

}  // namespace ffpa::sm80
