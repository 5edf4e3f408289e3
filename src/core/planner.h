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
  // the plan's tuning as pending.
  Plan plan(const PlanRequest& request, bool mayTune = true) const;

 private:
  Plan planWith(const KernelVariant& variant, const PlanRequest& request, std::string skipped,
                bool mayTune) const;

  const KernelRegistry& registry_;
  TimerFactory timers_;
};

}  // namespace ffpa
