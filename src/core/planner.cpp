#include "core/planner.h"

#include "core/error.h"
#include "core/logging.h"
#include "core/query_rows.h"
#include "core/workspace_layout.h"

#include <optional>
#include <utility>
#include <vector>

namespace ffpa {
namespace {

// Policy combinations no kernel could ever serve, whatever is compiled.
void checkPolicyFitsProblem(const PlanRequest& request) {
  const ffpaAccumulator_t accumulator = request.policy.accumulator();
  require(accumulator == FFPA_ACCUMULATOR_F32 || request.problem.dtype == FFPA_DATA_TYPE_FLOAT16,
          FFPA_STATUS_NOT_SUPPORTED_KNOB_COMBINATION, "FFPA_POLICY_ACCUMULATOR=",
          knobValueName(FFPA_POLICY_ACCUMULATOR, accumulator), " needs fp16 tensors; ",
          dataTypeName(request.problem.dtype), " always accumulates in fp32 (set FFPA_ACCUMULATOR_F32)");
}

}  // namespace

Plan Planner::planWith(const KernelVariant& variant, const PlanRequest& request, const AttentionProblem& caller,
                       std::string skipped, bool mayTune) const {
  // A variant with nothing to tune for this problem (no candidates) plans it untuned.
  std::vector<tuning::LaunchConfig> candidates;
  if (request.policy.flag(FFPA_POLICY_AUTOTUNE) && !variant.isReference && variant.candidates) {
    candidates = variant.candidates(request);
  }
  const bool tunable = !candidates.empty();
  Plan plan;
  if (tunable && mayTune) {
    std::unique_ptr<CandidateTimer> timer;
    std::string why = "no GPU to time on";
    try {
      if (timers_) timer = timers_(request);
    } catch (const Error& e) {  // no memory for the scratch tensors, say
      why = e.what();
      logMessage(request.policy.logLevel(), FFPA_LOG_LEVEL_WARNING,
                 cat("autotune: ", describe(caller), ": ", why, "; using the untuned plan"));
    }
    if (timer) {
      plan = autotune(variant, request, std::move(candidates), *timer);
    } else {
      plan = variant.plan(request);
      plan.config += cat(" autotune(off: ", why, ")");
    }
  } else {
    plan = variant.plan(request);
    // A plan made in an execute call is tuned by the next workspace query or description.
    if (tunable && request.runtime != nullptr) {
      plan.autotunePending = true;
      plan.config += " autotune(pending)";
    }
  }
  if (plan.kernel.empty()) plan.kernel = variant.name;  // variants may name the exact instance
  plan.skipped = std::move(skipped);
  plan.workspaceBytes = plan.kernelWorkspaceBytes;
  if (request.policy.flag(FFPA_POLICY_SANITY_CHECK)) {
    plan.sanityScratchOffset = alignUp(plan.kernelWorkspaceBytes);
    plan.workspaceBytes = plan.sanityScratchOffset + kSanityScratchBytes;
  }
  return plan;
}

Plan Planner::plan(const PlanRequest& request, bool mayTune) const {
  // Few query rows per head of a group: the group's heads become rows of one problem per KV head.
  std::optional<QueryHeadsAsRows> rows;
  if (request.policy.flag(FFPA_POLICY_QUERY_HEADS_AS_ROWS)) rows = queryHeadsAsRows(request.problem);
  Plan plan;
  if (rows) {
    logMessage(request.policy.logLevel(), FFPA_LOG_LEVEL_DEBUG,
               cat("planner: ", describe(request.problem), " runs as ", describe(rows->problem),
                   " (FFPA_POLICY_QUERY_HEADS_AS_ROWS)"));
    plan = planProblem({rows->problem, request.policy, request.device, request.runtime, request.launchConfig,
                        &request.problem},
                       request.problem, mayTune);
    plan.config += cat(" query_heads_as_rows=", rows->group);
    if (plan.payload) plan.payload = launchingMergedRows(std::move(plan.payload));
  } else {
    plan = planProblem(request, request.problem, mayTune);
  }
  logMessage(request.policy.logLevel(), FFPA_LOG_LEVEL_INFO,
             cat("plan: ", describe(request.problem), " -> ", plan.kernel, " [", plan.config,
                 "], workspace ", plan.workspaceBytes, " bytes"));
  return plan;
}

Plan Planner::planProblem(const PlanRequest& request, const AttentionProblem& caller, bool mayTune) const {
  checkPolicyFitsProblem(request);
  const ffpaLogLevel_t level = request.policy.logLevel();
  const bool referenceOnly = request.policy.flag(FFPA_POLICY_REFERENCE_BACKEND);
  const std::string problem = describe(caller);
  std::string reasons;  // for the error message
  std::string skipped;  // for the plan's explanation
  std::optional<Support> rejection;  // the first variant that refused the policies

  // Fast variants first, best first; the reference path only when none applies or rejects.
  for (const bool referencePass : {false, true}) {
    if (referencePass && rejection) break;
    for (const KernelVariant& variant : registry_.variants()) {
      if (variant.isReference != referencePass || variant.direction != request.problem.direction) {
        continue;
      }
      if (referenceOnly && !variant.isReference) continue;
      const Support support = variant.supports(request);
      if (support.verdict == Support::Verdict::Applies) {
        logMessage(level, FFPA_LOG_LEVEL_DEBUG, cat("planner: ", variant.name, " serves ", problem));
        return planWith(variant, request, caller, std::move(skipped), mayTune);
      }
      logMessage(level, FFPA_LOG_LEVEL_DEBUG,
                 cat("planner: ", variant.name, " does not serve ", problem, ": ", support.reason));
      reasons += cat("; ", variant.name, ": ", support.reason);
      skipped += cat(variant.name, ": ", support.reason, "\n");
      if (support.verdict == Support::Verdict::Rejected && !rejection) rejection = support;
    }
  }
  if (rejection) {
    fail(rejection->status, cat("no kernel serves ", problem, " with these policies", reasons));
  }
  fail(FFPA_STATUS_NOT_SUPPORTED, cat("no kernel serves ", problem,
                                      reasons.empty() ? std::string("; none is compiled for it") : reasons));
}

}  // namespace ffpa
