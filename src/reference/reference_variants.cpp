#include "reference/reference_variants.h"

#include "core/error.h"
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

// The reference serves every problem the API accepts, on every device libffpa runs on. It
// computes in fp32 whatever the kernel knobs say: the performance knobs (pipelining, layouts) do
// not change results, but a reduced-precision forward accumulator does, so the reference serves a
// forward problem that asks for one only when FFPA_POLICY_REFERENCE_BACKEND says to. (Backward
// gradients accumulate in fp32 on every path.)
Support referenceSupports(const PlanRequest& r) {
  const ffpaAccumulator_t accumulator = r.policy.accumulator();
  if (r.problem.direction == Direction::Forward && accumulator != FFPA_ACCUMULATOR_F32 &&
      !r.policy.flag(FFPA_POLICY_REFERENCE_BACKEND)) {
    return Support::rejected(
        FFPA_STATUS_NOT_SUPPORTED_KNOB_COMBINATION,
        cat("FFPA_POLICY_ACCUMULATOR=", knobValueName(FFPA_POLICY_ACCUMULATOR, accumulator),
            " needs a fast kernel and none serves this problem; set FFPA_ACCUMULATOR_F32, or "
            "FFPA_POLICY_REFERENCE_BACKEND for the fp32 reference"));
  }
  return Support::applies();
}

}  // namespace

void registerReferenceVariants(KernelRegistry& registry) {
  registry.add({reference::kForwardName, Direction::Forward, 0, true, referenceSupports, referencePlan, {}});
  registry.add({reference::kBackwardName, Direction::Backward, 0, true, referenceSupports, referencePlan, {}});
}

}  // namespace ffpa
