// How the sm80 forward kernels serve a problem under the policies: which compiled instance, with
// which pipeline, shared-memory layout and grid, or why none does. Plain C++ that calls nothing
// on the device, shared by the planner variant (forward_variant.cpp) and the tests that run the
// kernels on the CPU warp emulator, so that both launch exactly what the planner decides.
#pragma once

#include "core/kernel_registry.h"
#include "core/key_splits.h"
#include "sm80/forward_instances.h"
#include "sm80/forward_params.h"
#include "sm80/resolve_common.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ffpa::sm80 {

// What the planner decided for one problem: the instance and everything its launch needs.
struct ForwardLaunch {
  const ForwardInstance* instance = nullptr;
  ForwardShape shape{};
  PipelineChoice choice;
  ForwardParams layout{};  // the pipeline and shared-memory fields filled
  bool gridDnhb = false;
  uint32_t grid[3] = {1, 1, 1};
  std::string notes;  // adaptations of knobs left at their defaults, e.g. " stages=1(fit)"
  bool tileKeysChoice = false;  // the instance comes with 32- and 64-key tiles ("tile_keys")
  KeySplitPlan split;  // split-KV (FFPA_POLICY_KEY_SPLITS): grid z is the split
};

// Either a decision or the reason there is none (not applicable, or a knob combination refused).
struct ForwardResolution {
  std::optional<ForwardLaunch> launch;
  Support refusal;
};

// The forward's tunable launch parameters (stages, qk_step, v_step, prefetch, smem_share,
// persist_q, persist_kv, tile_keys), writing into `choice`, for the instance of tile shape
// `shape`; `tileKeysChoice`: whether 64-key tiles are compiled beside the shape's 32 (else
// tile_keys takes the shape's Bc only).
std::vector<LaunchParameter> forwardLaunchParameters(PipelineChoice& choice, const AttentionProblem& problem,
                                                     const ForwardShape& shape, bool qInRegisters,
                                                     bool tileKeysChoice = false);

// Resolves against this build's instances (forwardInstances()) and the request's device.
ForwardResolution resolveForward(const PlanRequest& request);

// The launch parameters of one call: the decision's layout plus the call's pointers, strides,
// sizes, mask and scale. Pointers are used as they are (device pointers, or host pointers on the
// emulator). With split-KV, O and LSE are the partial results in `workspace` (launch.split.bytes).
ForwardParams forwardCallParams(const ForwardLaunch& launch, const AttentionProblem& problem,
                                const TensorArgs& tensors, void* workspace = nullptr);

// The grid of one call: the plan's, with the x extent of a sliced problem counting its row tiles
// (which the plan, keyed on the presence of slices only, cannot know).
void forwardCallGrid(const ForwardLaunch& launch, const AttentionProblem& problem, const ForwardParams& params,
                     uint32_t (&grid)[3]);

// "Br=64 Bc=64 warps=4x2 threads=256 d_v<=512 stages=2 ..." for plan descriptions.
std::string describeForwardConfig(const ForwardLaunch& launch);

}  // namespace ffpa::sm80
