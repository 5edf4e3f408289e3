#include "sm80/forward_variant.h"

#include "sm80/forward_resolve.h"
#include "sm80/kernel_attributes.h"

#include "core/cuda_check.h"
#include "core/descriptors.h"
#include "core/error.h"

#include <cuda_runtime.h>

namespace ffpa::sm80 {
namespace {

class ForwardPlan final : public PlanPayload {
 public:
  explicit ForwardPlan(const ForwardLaunch& d) : d_(d) {}

  void launch(const LaunchArgs& args) const override {
    ForwardParams p = forwardCallParams(d_, args.problem, args.tensors);
    void* arguments[] = {&p};
    const dim3 grid(d_.grid[0], d_.grid[1], d_.grid[2]);
    checkCuda(cudaLaunchKernel(d_.instance->kernel, grid, dim3(d_.shape.threads()), arguments,
                               p.sharedBytes, static_cast<cudaStream_t>(args.stream)),
              "the sm80 forward kernel launch");
  }

 private:
  ForwardLaunch d_;
};

Support supports(const PlanRequest& r) {
  if (r.device.smVersion < 80) return Support::notApplicable("needs sm_80 or newer");
  return resolveForward(r).refusal;
}

Plan plan(const PlanRequest& r) {
  const ForwardResolution resolution = resolveForward(r);
  const ForwardLaunch& d = *resolution.launch;
  if (r.runtime != nullptr) {
    // Once per plan, not per call: the execute path only launches.
    allowDynamicSharedMemory(d.instance->kernel, r.device, "sm80 forward kernel");
  }
  Plan plan;
  plan.kernel = instanceName(*d.instance);
  plan.config = describeForwardConfig(d);
  plan.payload = std::make_unique<ForwardPlan>(d);
  return plan;
}

}  // namespace

std::string instanceName(const ForwardInstance& instance) {
  const char* accumulators[] = {"acc_f32", "acc_qk_f16", "acc_pv_f16", "acc_f16"};
  std::string name = cat(kForwardVariantName, ".", instance.dtype == FFPA_DATA_TYPE_FLOAT16 ? "f16" : "bf16",
                         ".d", instance.headDimV, ".", accumulators[instance.accumulator]);
  if (instance.pipeKv) name += ".pipe_kv";
  if (instance.qInRegisters) name += ".q_s2r";
  if (instance.vInRegisters) name += ".v_s2r";
  return name;
}

void registerForwardVariant(KernelRegistry& registry) {
  registry.add({kForwardVariantName, Direction::Forward, 100, false, supports, plan});
}

}  // namespace ffpa::sm80
