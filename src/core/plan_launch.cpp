#include "core/plan_launch.h"

#include "core/device.h"
#include "core/sanity_check.h"
#include "core/slice_table.h"
#include "core/workspace_layout.h"

namespace ffpa {

void launchPlan(const Context& context, const CallSnapshot& snapshot, const AttentionProblem& problem,
                const Plan& plan, TensorArgs tensors, void* workspace) {
  const DeviceRuntime& runtime = context.executableRuntime();
  if (problem.slices != nullptr) {
    tensors.slices = problem.slices->deviceView(context.device().ordinal, "attn");
  }
  ScopedDevice device(context.device().ordinal);
  plan.payload->launch({problem, tensors, workspace, plan.kernelWorkspaceBytes, snapshot.stream, runtime});
  if (snapshot.policy->flag(FFPA_POLICY_SANITY_CHECK)) {
    runSanityCheck(problem, tensors, slice<void>(workspace, plan.sanityScratchOffset), snapshot.stream,
                   snapshot.policy->logLevel());
  }
}

}  // namespace ffpa
