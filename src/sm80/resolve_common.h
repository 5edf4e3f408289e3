// What the sm80 planner variants (forward and backward) check and decide alike: the problems the
// kernels serve at all, the stage knob against the build, the grid layout.
#pragma once

#include "core/kernel_registry.h"
#include "core/policy.h"
#include "core/problem.h"

#include <cstdint>
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

// The grid (tiles, B*H) or (tiles, H, B), following FFPA_POLICY_LAUNCH_GRID_DNHB; at its default
// the knob gives way when B*H exceeds the y extent (noted in `notes`). `grid` receives the extents;
// the result is a refusal when neither layout fits.
std::optional<std::string> chooseGrid(const Policy& policy, int64_t tiles, int64_t batch, int64_t heads,
                                      bool& dnhb, uint32_t (&grid)[3], std::string& notes);

}  // namespace ffpa::sm80
