// The registry kernel variants put themselves into, and the answer each gives the planner.
//
// A variant answers a problem in one of three ways: it applies; the problem is outside its domain
// (the planner tries the next one); or the problem is in its domain but the policies ask for
// something illegal or not compiled (the planner then fails with that status rather than fall
// back to the reference path: a knob is never silently ignored).
#pragma once

#include "core/device.h"
#include "core/plan.h"
#include "core/policy.h"
#include "core/problem.h"
#include "tuning/tuned_config.h"

#include <functional>
#include <string>
#include <vector>

namespace ffpa {

struct PlanRequest {
  const AttentionProblem& problem;
  const Policy& policy;
  const DeviceInfo& device;
  const DeviceRuntime* runtime;  // null for a described device: plan, but prepare nothing on it
  // An autotune candidate to plan with instead of the persisted tuned config (null: none).
  const tuning::LaunchConfig* launchConfig = nullptr;
  // The problem as the caller described it, where the planner plans another one for it (query
  // heads as rows); null where `problem` is the caller's. Tuned configs are looked up and recorded
  // by the caller's shape (a decode call is a decode entry), whatever the kernel runs.
  const AttentionProblem* caller = nullptr;
};

// The caller's problem of a request (PlanRequest::caller, else its problem).
inline const AttentionProblem& callerProblem(const PlanRequest& r) { return r.caller ? *r.caller : r.problem; }

struct Support {
  enum class Verdict { Applies, NotApplicable, Rejected };
  Verdict verdict = Verdict::Applies;
  ffpaStatus_t status = FFPA_STATUS_SUCCESS;  // for Rejected: the status the call fails with
  std::string reason;

  static Support applies() { return {}; }
  static Support notApplicable(std::string why) {
    return {Verdict::NotApplicable, FFPA_STATUS_NOT_SUPPORTED, std::move(why)};
  }
  static Support rejected(ffpaStatus_t status, std::string why) {
    return {Verdict::Rejected, status, std::move(why)};
  }
};

struct KernelVariant {
  std::string name;
  Direction direction = Direction::Forward;
  int priority = 0;          // among variants that apply, the highest wins
  bool isReference = false;  // used only when no other variant applies or rejects, or by policy
  std::function<Support(const PlanRequest&)> supports;
  std::function<Plan(const PlanRequest&)> plan;  // called only after supports() said Applies
  // Launch configs worth timing for runtime autotune (FFPA_POLICY_AUTOTUNE_MODE's search space);
  // empty (or no function) when the variant has nothing to tune.
  std::function<std::vector<tuning::LaunchConfig>(const PlanRequest&)> candidates;
};

class KernelRegistry {
 public:
  void add(KernelVariant variant);
  // Highest priority first.
  const std::vector<KernelVariant>& variants() const { return variants_; }

 private:
  std::vector<KernelVariant> variants_;
};

// The variants compiled into this library: the reference path and every fast kernel.
const KernelRegistry& builtinKernels();

}  // namespace ffpa
