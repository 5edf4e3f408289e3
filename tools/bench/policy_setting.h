// --policy NAME=VALUE: a knob named as ffpa-info --knobs lists it, with a value checked against
// the library's own table (type, bounds, value names) before any GPU work, so that a typo is a
// usage error on any machine rather than a failure halfway through a sweep.
#pragma once

#include <ffpa/ffpa.h>

#include <cstdint>
#include <string>

namespace ffpa_bench {

struct PolicySetting {
  ffpaPolicyKnob_t knob = FFPA_POLICY_ACCUMULATOR;
  ffpaPolicyType_t type = FFPA_POLICY_TYPE_INT32;
  std::string name;    // the knob's full name, e.g. FFPA_POLICY_STAGES
  int64_t number = 0;  // the value of bool, int and enum knobs
  std::string text;    // the value of string knobs
};

// Parses "NAME=VALUE". NAME is matched without regard to case, with or without the
// FFPA_POLICY_ prefix; VALUE is an integer, or one of the knob's value names (bool and enum
// knobs), or any text (string knobs). Throws std::invalid_argument naming --policy, the knob and
// what it accepts.
PolicySetting resolvePolicy(const std::string& assignment);

// ffpaSetPolicy with the value in the knob's C type.
ffpaStatus_t applyPolicy(ffpaHandle_t handle, const PolicySetting& setting);

}  // namespace ffpa_bench
