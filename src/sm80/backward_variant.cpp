#include "sm80/backward_variant.h"

#include "core/cuda_check.h"
#include "core/error.h"
#include "sm80/backward_resolve.h"
#include "core/kernel_attributes.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <vector>

namespace ffpa::sm80 {
namespace {

class BackwardPlan final : public PlanPayload {
 public:
  explicit BackwardPlan(const BackwardLaunch& d) : d_(d) {}

  // Three launches on the stream, in order: row statistics, dQ, dK/dV.
  void launch(const LaunchArgs& args) const override {
    BackwardParams p = backwardCallParams(d_, args.problem, args.tensors, args.workspace);
    const BackwardGrids grids = backwardCallGrids(d_, args.problem, p);
    void* arguments[] = {&p};
    const auto stream = static_cast<cudaStream_t>(args.stream);
    checkCuda(cudaLaunchKernel(d_.instance->rowStats, dim3(d_.rowStatsGrid), dim3(32 * kRowStatsWarps),
                               arguments, 0, stream),
              "the sm80 backward row-statistics kernel launch");
    checkCuda(cudaLaunchKernel(d_.instance->queryGradient, dim3(grids.query[0], grids.query[1], grids.query[2]),
                               dim3(d_.queryShape.threads()), arguments, p.queryLayout.sharedBytes, stream),
              "the sm80 backward dQ kernel launch");
    checkCuda(cudaLaunchKernel(d_.instance->keyGradient, dim3(grids.key[0], grids.key[1], grids.key[2]),
                               dim3(d_.keyShape.threads()), arguments, p.keyLayout.sharedBytes, stream),
              "the sm80 backward dK/dV kernel launch");
  }

 private:
  BackwardLaunch d_;
};

Support supports(const PlanRequest& r) {
  if (r.device.smVersion < 80) return Support::notApplicable("needs sm_80 or newer");
  return resolveBackward(r).refusal;
}

Plan plan(const PlanRequest& r) {
  const BackwardResolution resolution = resolveBackward(r);
  const BackwardLaunch& d = *resolution.launch;
  if (r.runtime != nullptr) {
    allowDynamicSharedMemory(d.instance->queryGradient, r.device, "sm80 backward dQ kernel");
    allowDynamicSharedMemory(d.instance->keyGradient, r.device, "sm80 backward dK/dV kernel");
  }
  Plan plan;
  plan.kernel = backwardInstanceName(*d.instance);
  plan.config = describeBackwardConfig(d);
  plan.kernelWorkspaceBytes = d.workspaceBytes;
  plan.payload = std::make_unique<BackwardPlan>(d);
  return plan;
}

// Runtime autotune's search space around the built-in defaults (see forward_variant.cpp).
std::vector<tuning::LaunchConfig> candidates(const PlanRequest& r) {
  const tuning::LaunchConfig none;
  PlanRequest defaults = r;
  defaults.launchConfig = &none;
  const BackwardResolution resolution = resolveBackward(defaults);
  if (!resolution.launch) return {};
  const BackwardLaunch& d = *resolution.launch;
  const bool max = r.policy.value(FFPA_POLICY_AUTOTUNE_MODE) == FFPA_AUTOTUNE_MODE_MAX;
  const int scoreDefault = d.layout.queryLayout.scorePanelsPerStep * 16;
  const int scoreLimit = static_cast<int>(std::min<int64_t>(128, std::max(r.problem.headDimQk, r.problem.headDimV)));
  std::vector<int> stages, scoreSteps, outputSteps, persistQ = {-1};
  for (int s = 1; s <= (max ? maxCompiledStages() : std::min(2, maxCompiledStages())); ++s) stages.push_back(s);
  if (max) {
    scoreSteps = {16, 32, 64, 128};
    outputSteps = {16, 32, 64};
    persistQ = {0, 1};
  } else {
    scoreSteps = {scoreDefault, 2 * scoreDefault};
    outputSteps = {16, 32};
  }
  std::vector<tuning::LaunchConfig> configs;
  for (int s : stages)
    for (int score : scoreSteps)
      for (int output : outputSteps)
        for (int pq : persistQ) {
          if (score > scoreLimit) continue;
          tuning::LaunchConfig c{{"stages", s}, {"score_step", score}, {"output_step", output}};
          if (pq >= 0) c["persist_q"] = pq;
          configs.push_back(std::move(c));
        }
  return configs;
}

}  // namespace

std::string backwardInstanceName(const BackwardInstance& instance) {
  return cat(kBackwardVariantName, ".", instance.dtype == FFPA_DATA_TYPE_FLOAT16 ? "f16" : "bf16", ".d",
             instance.headDim);
}

void registerBackwardVariant(KernelRegistry& registry) {
  registry.add({kBackwardVariantName, Direction::Backward, 100, false, supports, plan, candidates});
}

}  // namespace ffpa::sm80
