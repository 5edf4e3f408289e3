// The planner: problem + policies + device -> the plan of the best kernel variant that applies.
#pragma once

#include "core/kernel_registry.h"

namespace ffpa {

// Bytes the sanity check (FFPA_POLICY_SANITY_CHECK) appends to a plan's workspace.
constexpr size_t kSanityScratchBytes = 256;

class Planner {
 public:
  explicit Planner(const KernelRegistry& registry) : registry_(registry) {}

  // Throws ffpa::Error: the status of a variant that rejected the policies, or
  // FFPA_STATUS_NOT_SUPPORTED listing why each variant does not apply.
  Plan plan(const PlanRequest& request) const;

 private:
  const KernelRegistry& registry_;
};

}  // namespace ffpa
