// Runtime autotune (FFPA_POLICY_AUTOTUNE): the kernel variant that serves a problem proposes launch
// configs (KernelVariant::candidates, by FFPA_POLICY_AUTOTUNE_MODE); each is planned and timed on
// the handle's device, on scratch tensors of the problem's shape and strides, the built-in
// defaults first; the fastest plan is kept (in the plan cache) and its config recorded as a
// tuned-config entry. Tuning allocates and synchronizes, so it runs only where planning may:
// workspace-size queries and plan descriptions, never an execute call.
#pragma once

#include "core/kernel_registry.h"
#include "core/plan.h"
#include "tuning/tuned_config.h"

#include <functional>
#include <memory>
#include <vector>

namespace ffpa {

// Times plans of one problem; made once per tuning run (it may own scratch buffers).
class CandidateTimer {
 public:
  virtual ~CandidateTimer() = default;
  // Milliseconds of one call of the plan (a median). Throws ffpa::Error when it cannot run.
  virtual double milliseconds(const Plan& plan) = 0;
};

// Makes the timer of a request, or null when its problems cannot be timed (a described device).
using TimerFactory = std::function<std::unique_ptr<CandidateTimer>(const PlanRequest&)>;

// The timer of real devices: CUDA events on the handle's device, scratch tensors filled with
// finite values, one warm-up call, then the median of 3 (fast) or 5 (max) calls.
TimerFactory deviceTimers();

// Tunes `request` with `candidates`, `variant`'s for it (KernelVariant::candidates). Candidates the
// variant refuses or that fail to run are skipped; the defaults (an empty config) always take part.
// Returns the fastest plan, with " autotuned(...)" in its config and its tuned entry attached.
Plan autotune(const KernelVariant& variant, const PlanRequest& request, std::vector<tuning::LaunchConfig> candidates,
              CandidateTimer& timer);

}  // namespace ffpa
