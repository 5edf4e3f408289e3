#include "core/autotune.h"

#include "core/error.h"
#include "core/logging.h"

#include <cmath>
#include <limits>
#include <set>

namespace ffpa {
namespace {

constexpr const char* kCandidateNote = " (autotune candidate)";

// The plan's config without the candidate note its resolver appended.
std::string withoutCandidateNote(std::string config) {
  const size_t at = config.find(kCandidateNote);
  if (at != std::string::npos) config.erase(at, std::string(kCandidateNote).size());
  return config;
}

tuning::TunedEntry entryFor(const KernelVariant& variant, const PlanRequest& r, const tuning::LaunchConfig& config,
                            double bestMs, double defaultMs) {
  const AttentionProblem& p = callerProblem(r);
  tuning::TunedEntry e;
  e.direction = p.direction == Direction::Forward ? "forward" : "backward";
  e.kernel = variant.name;
  e.dtype = p.dtype == FFPA_DATA_TYPE_FLOAT16 ? "fp16" : p.dtype == FFPA_DATA_TYPE_BFLOAT16 ? "bf16" : "fp32";
  e.headDim = p.headDimQk;
  e.headDimV = p.headDimV;
  e.seqlenQ = p.seqQ;
  e.seqlenKv = p.seqKv;
  e.causal = p.causal != FFPA_CAUSAL_NONE;
  e.headsQ = p.headsQ;
  e.headsKv = p.headsKv;
  e.config = config;
  e.timeMs = bestMs;
  e.defaultTimeMs = defaultMs;
  return e;
}

}  // namespace

Plan autotune(const KernelVariant& variant, const PlanRequest& request, std::vector<tuning::LaunchConfig> candidates,
              CandidateTimer& timer) {
  const ffpaLogLevel_t level = request.policy.logLevel();
  candidates.insert(candidates.begin(), tuning::LaunchConfig{});  // the built-in defaults
  std::optional<Plan> best;
  tuning::LaunchConfig bestConfig;
  double bestMs = std::numeric_limits<double>::infinity();
  double defaultMs = 0.0;
  int timed = 0;
  std::set<std::string> seen;  // candidates that knobs the caller set make equal are timed once
  for (size_t i = 0; i < candidates.size(); ++i) {
    PlanRequest r = request;
    r.launchConfig = &candidates[i];
    try {
      if (variant.supports(r).verdict != Support::Verdict::Applies) continue;
      Plan plan = variant.plan(r);
      plan.config = withoutCandidateNote(plan.config);
      if (!seen.insert(plan.config).second) continue;
      const double ms = timer.milliseconds(plan);
      ++timed;
      logMessage(level, FFPA_LOG_LEVEL_DEBUG,
                 cat("autotune: ", describe(callerProblem(request)), " [", plan.config, "]: ", ms, " ms"));
      if (i == 0) defaultMs = ms;
      if (ms < bestMs) {
        bestMs = ms;
        bestConfig = candidates[i];
        best = std::move(plan);
      }
    } catch (const Error& e) {
      logMessage(level, FFPA_LOG_LEVEL_DEBUG, cat("autotune: a candidate failed: ", e.what()));
    }
  }
  if (!best) {
    // Nothing could be timed: the built-in defaults, untuned.
    logMessage(level, FFPA_LOG_LEVEL_WARNING,
               cat("autotune: no candidate of ", variant.name, " could be timed for ", describe(callerProblem(request)),
                   "; using the built-in defaults"));
    Plan plan = variant.plan(request);
    plan.config += " autotune(failed)";
    return plan;
  }
  best->config += cat(" autotuned(", timed, " configs: ", bestMs, " ms; defaults ", defaultMs, " ms)");
  best->tuned = std::make_shared<const tuning::TunedEntry>(entryFor(variant, request, bestConfig, bestMs, defaultMs));
  return std::move(*best);
}

}  // namespace ffpa
