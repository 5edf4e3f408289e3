#include "sm80/backward_variant.h"

#include "core/cuda_check.h"
#include "core/error.h"
#include "sm80/backward_resolve.h"
#include "sm80/kernel_attributes.h"

#include <cuda_runtime.h>

namespace ffpa::sm80 {
namespace {

class BackwardPlan final : public PlanPayload {
 public:
  explicit BackwardPlan(const BackwardLaunch& d) : d_(d) {}

  // Three launches on the stream, in order: row statistics, dQ, dK/dV.
  void launch(const LaunchArgs& args) const override {
    BackwardParams p = backwardCallParams(d_, args.problem, args.tensors, args.workspace);
    void* arguments[] = {&p};
    const auto stream = static_cast<cudaStream_t>(args.stream);
    checkCuda(cudaLaunchKernel(d_.instance->rowStats, dim3(d_.rowStatsGrid), dim3(32 * kRowStatsWarps),
                               arguments, 0, stream),
              "the sm80 backward row-statistics kernel launch");
    checkCuda(cudaLaunchKernel(d_.instance->queryGradient, dim3(d_.queryGrid[0], d_.queryGrid[1], d_.queryGrid[2]),
                               dim3(d_.queryShape.threads()), arguments, p.queryLayout.sharedBytes, stream),
              "the sm80 backward dQ kernel launch");
    checkCuda(cudaLaunchKernel(d_.instance->keyGradient, dim3(d_.keyGrid[0], d_.keyGrid[1], d_.keyGrid[2]),
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

}  // namespace

std::string backwardInstanceName(const BackwardInstance& instance) {
  return cat(kBackwardVariantName, ".", instance.dtype == FFPA_DATA_TYPE_FLOAT16 ? "f16" : "bf16", ".d",
             instance.headDim);
}

void registerBackwardVariant(KernelRegistry& registry) {
  registry.add({kBackwardVariantName, Direction::Backward, 100, false, supports, plan});
}

}  // namespace ffpa::sm80
