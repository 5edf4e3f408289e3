// The planner: problem + policies + device -> the plan of the best kernel variant that applies.
#pragma once

#include "core/autotune.h"
#include "core/kernel_registry.h"

namespace ffpa {

// Bytes the sanity check (FFPA_POLICY_SANITY_CHECK) appends to a plan's workspace.
constexpr size_t kSanityScratchBytes = 256;

class Planner {
 public:
  explicit Planner(const KernelRegistry& registry, TimerFactory timers = deviceTimers())
      : registry_(registry), timers_(std::move(timers)) {}

  // Throws ffpa::Error: the status of a variant that rejected the policies, or
  // FFPA_STATUS_NOT_SUPPORTED listing why each variant does not apply. With
  // FFPA_POLICY_AUTOTUNE, tunes the chosen variant when `mayTune` (core/autotune.h), else marks
  // the plan's tuning as pending. With FFPA_POLICY_QUERY_HEADS_AS_ROWS, a forward whose query
  // heads merge into rows (core/query_rows.h) is planned and launched as the merged problem.
  Plan plan(const PlanRequest& request, bool mayTune = true) const;

 private:
  // Plans request.problem, described in logs and errors as `caller` (the call's problem, which
  // the request's may merge).
  Plan planProblem(const PlanRequest& request, const AttentionProblem& caller, bool mayTune) const;
  Plan planWith(const KernelVariant& variant, const PlanRequest& request, const AttentionProblem& caller,
                std::string skipped, bool mayTune) const;

  const KernelRegistry& registry_;
  TimerFactory timers_;
};

}  // namespace ffpa
