#include "sm80/resolve_common.h"

#include "core/descriptors.h"
#include "core/error.h"
#include "core/logging.h"
#include "core/tuned_configs.h"
#include "ffpa_build_config.h"

#include <algorithm>
#include <climits>
#include <sstream>

namespace ffpa::sm80 {

Support notApplicable(std::string why) { return Support::notApplicable(std::move(why)); }

Support rejected(std::string why) {
  return Support::rejected(FFPA_STATUS_NOT_SUPPORTED_KNOB_COMBINATION, std::move(why));
}

bool isDefault(const Policy& policy, ffpaPolicyKnob_t knob) {
  return policy.source(knob) == FFPA_POLICY_SOURCE_DEFAULT;
}

std::optional<std::string> unservedProblem(const AttentionProblem& problem) {
  if (problem.dtype != FFPA_DATA_TYPE_FLOAT16 && problem.dtype != FFPA_DATA_TYPE_BFLOAT16) {
    return cat(dataTypeName(problem.dtype), " tensors (fp16 and bf16 only)");
  }
  if (problem.headDimQk % 16 != 0 || problem.headDimV % 16 != 0 || problem.headDimQk > 1024 ||
      problem.headDimV > 1024) {
    return cat("head dims ", problem.headDimQk, "/", problem.headDimV,
               " (needs multiples of 16 up to 1024)");
  }
  if (problem.seqQ > INT32_MAX - 1024 || problem.seqKv > INT32_MAX - 1024 ||
      problem.headsQ > INT32_MAX || problem.batch > INT32_MAX) {
    return std::string("sequence lengths, heads and batch must stay below 2^31");
  }
  return std::nullopt;
}

std::optional<std::string> strideProblem(std::initializer_list<StrideRule> rules) {
  for (const StrideRule& t : rules) {
    if (t.strides[3] != 1) return cat(t.name, " has a head-dim stride of ", t.strides[3], " (needs 1)");
    for (int i = 0; i < 3; ++i) {
      if (t.strides[i] % t.multiple != 0) {
        return cat(t.name, " strides must be multiples of ", t.multiple, " elements (",
                   t.multiple * 2, " bytes); stride ", i, " is ", t.strides[i]);
      }
    }
  }
  return std::nullopt;
}

std::optional<std::string> stagesProblem(const Policy& policy) {
  const int64_t stages = policy.value(FFPA_POLICY_STAGES);
  if (stages == 0) return std::nullopt;
  std::istringstream list(FFPA_BUILD_STAGES);
  for (std::string item; std::getline(list, item, ',');) {
    if (std::stoi(item) == stages) return std::nullopt;
  }
  return cat("FFPA_POLICY_STAGES=", stages, " is not in this build's stage set (", FFPA_BUILD_STAGES,
             "); rebuild with -Dkernel_set=full -Dall_stages=true");
}

int maxCompiledStages() {
  int largest = 1;
  std::istringstream list(FFPA_BUILD_STAGES);
  for (std::string item; std::getline(list, item, ',');) largest = std::max(largest, std::stoi(item));
  return largest;
}

int stagesOf(const Policy& policy) {
  const int64_t stages = policy.value(FFPA_POLICY_STAGES);
  return stages == 0 ? 2 : static_cast<int>(stages);
}

std::optional<tuning::LaunchConfig> launchConfigFor(const PlanRequest& r, const char* kernel, std::string& notes) {
  if (r.launchConfig != nullptr) {
    notes += " (autotune candidate)";
    return *r.launchConfig;
  }
  const AttentionProblem& p = callerProblem(r);
  tuning::TunedQuery query;
  query.direction = p.direction == Direction::Forward ? "forward" : "backward";
  query.kernel = kernel;
  query.mode = knobValueName(FFPA_POLICY_AUTOTUNE_MODE, r.policy.value(FFPA_POLICY_AUTOTUNE_MODE));
  query.dtype = p.dtype == FFPA_DATA_TYPE_FLOAT16 ? "fp16" : "bf16";
  query.causal = p.causal != FFPA_CAUSAL_NONE;
  query.headDim = std::max(p.headDimQk, p.headDimV);
  query.seqlenQ = p.seqQ;
  query.seqlenKv = p.seqKv;
  query.headsQ = p.headsQ;
  query.headsKv = p.headsKv;
  std::optional<TunedChoice> tuned = findTunedConfig(r.policy, r.device, query);
  if (!tuned) return std::nullopt;
  notes += cat(" tuned(", tuned->source, ")");
  return std::move(tuned->config);
}

void addKeySplitParameters(std::vector<LaunchParameter>& parameters, KeySplitTuning& tuning) {
  parameters.push_back({"split_kv", 0, 1, 1, FFPA_POLICY_KEY_SPLITS, [&tuning](int64_t v) { tuning.split = v != 0; }});
  parameters.push_back({"split_min_tiles", 1, 1024, 1, FFPA_POLICY_KEY_SPLITS,
                        [&tuning](int64_t v) { tuning.minTiles = int(v); }});
}

std::string applyLaunchConfig(const tuning::LaunchConfig& config, const Policy& policy,
                              const std::vector<LaunchParameter>& parameters) {
  std::string ignored;
  for (const auto& [name, value] : config) {
    const LaunchParameter* parameter = nullptr;
    for (const LaunchParameter& candidate : parameters) {
      if (name == candidate.name) parameter = &candidate;
    }
    if (parameter == nullptr) {
      ignored += cat(ignored.empty() ? "" : ", ", name, " (not a parameter of this kernel)");
      continue;
    }
    if (value < parameter->low || value > parameter->high || value % parameter->multiple != 0) {
      ignored += cat(ignored.empty() ? "" : ", ", name, "=", value, " (", parameter->low, " to ", parameter->high,
                     parameter->multiple > 1 ? cat(", a multiple of ", parameter->multiple) : "", ")");
      continue;
    }
    if (parameter->knob && !isDefault(policy, *parameter->knob)) continue;  // the caller's setting wins
    parameter->set(value);
  }
  return ignored;
}

void applyTunedConfig(const PlanRequest& r, const char* kernel, const std::vector<LaunchParameter>& parameters,
                      std::string& notes) {
  const std::optional<tuning::LaunchConfig> config = launchConfigFor(r, kernel, notes);
  if (!config) return;
  const std::string ignored = applyLaunchConfig(*config, r.policy, parameters);
  if (!ignored.empty()) {
    logMessage(r.policy.logLevel(), FFPA_LOG_LEVEL_WARNING,
               cat("tuned config for ", describe(r.problem), ": ignored ", ignored));
  }
}

}  // namespace ffpa::sm80
