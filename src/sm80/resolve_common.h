// What the sm80 planner variants (forward and backward) check and decide alike: the problems the
// kernels serve at all, the stage knob against the build (the grid layout: core/launch_grid.h).
#pragma once

#include "core/kernel_registry.h"
#include "core/key_splits.h"
#include "core/launch_grid.h"
#include "core/policy.h"
#include "core/problem.h"
#include "common/slice_mask.h"

#include "tuning/tuned_config.h"

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <optional>
#include <string>

namespace ffpa::sm80 {

Support notApplicable(std::string why);
Support rejected(std::string why);  // FFPA_STATUS_NOT_SUPPORTED_KNOB_COMBINATION

// Whether the caller left `knob` at its default (defaults may adapt; a set knob never does).
bool isDefault(const Policy& policy, ffpaPolicyKnob_t knob);

// Why the kernels cannot serve the problem at all (dtype, head dims, sizes), or nothing.
std::optional<std::string> unservedProblem(const AttentionProblem& problem);

// A tensor's strides and the multiple (in elements) the kernels need of them.
struct StrideRule {
  const char* name;
  const Strides& strides;
  int64_t multiple;  // 8: rows copied 16 bytes at a time; 2: 4-byte element pairs
};
// The first rule broken (the head-dim stride must be 1), or nothing.
std::optional<std::string> strideProblem(std::initializer_list<StrideRule> rules);

// FFPA_POLICY_STAGES: 0 (the default, 2 stages) or a count this build compiled; else a refusal.
std::optional<std::string> stagesProblem(const Policy& policy);
int stagesOf(const Policy& policy);
// The largest stage count this build compiles (its stage sets are 1..N).
int maxCompiledStages();

// The launch config a plan takes its tunable parameters from: the autotune candidate the request
// carries, else the persisted tuned config of the device for `kernel` (core/tuned_configs.h), else
// none (the built-in defaults). Appends where it came from to `notes`.
std::optional<tuning::LaunchConfig> launchConfigFor(const PlanRequest& request, const char* kernel,
                                                    std::string& notes);

// One tunable launch parameter of a kernel variant: its name in launch configs, the values it
// takes, and the knob that overrides it (a knob the caller set wins over any config).
struct LaunchParameter {
  const char* name;
  int64_t low;
  int64_t high;
  int64_t multiple;
  std::optional<ffpaPolicyKnob_t> knob;
  std::function<void(int64_t)> set;
};

// Split-KV's launch parameters ("split_kv" 0 or 1, "split_min_tiles" 1 to 1024), writing into
// `tuning`, appended to `parameters`; FFPA_POLICY_KEY_SPLITS overrides both.
void addKeySplitParameters(std::vector<LaunchParameter>& parameters, KeySplitTuning& tuning);

// Applies the config's values to the parameters whose knobs are at their defaults. Names the
// variant does not know and values outside their range are ignored; the result lists them
// ("stages=9 (1 to 2)"), empty when there are none.
std::string applyLaunchConfig(const tuning::LaunchConfig& config, const Policy& policy,
                              const std::vector<LaunchParameter>& parameters);

// The launch config of `request` (launchConfigFor) applied to `parameters` (applyLaunchConfig),
// with a warning naming what was ignored; nothing without a config.
void applyTunedConfig(const PlanRequest& request, const char* kernel, const std::vector<LaunchParameter>& parameters,
                      std::string& notes);

}  // namespace ffpa::sm80
