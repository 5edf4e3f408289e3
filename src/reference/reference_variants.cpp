#include "reference/reference_variants.h"

#include "reference/chunking.h"
#include "reference/reference_plans.h"

namespace ffpa {
namespace {

Plan referencePlan(const PlanRequest& r) {
  const reference::ChunkPlan chunks =
      reference::chooseChunks(r.problem, r.policy.value(FFPA_POLICY_REFERENCE_CHUNK_BYTES));
  Plan plan;
  plan.config = reference::describeChunks(chunks, r.problem.seqQ);
  if (r.problem.direction == Direction::Forward) {
    auto payload = std::make_unique<reference::ForwardPlan>(r.problem, chunks, r.runtime);
    plan.kernelWorkspaceBytes = payload->buffers().total;
    plan.payload = std::move(payload);
  } else {
    auto payload = std::make_unique<reference::BackwardPlan>(r.problem, chunks, r.runtime);
    plan.kernelWorkspaceBytes = payload->buffers().total;
    plan.payload = std::move(payload);
  }
  return plan;
}

}  // namespace

void registerReferenceVariants(KernelRegistry& registry) {
  // The reference serves every problem the API accepts, on every device libffpa runs on.
  const auto always = [](const PlanRequest&) { return Support::applies(); };
  registry.add({reference::kForwardName, Direction::Forward, 0, true, always, referencePlan});
  registry.add({reference::kBackwardName, Direction::Backward, 0, true, always, referencePlan});
}

}  // namespace ffpa
