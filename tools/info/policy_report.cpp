#include "policy_report.h"

#include "library_call.h"

#include <iomanip>
#include <sstream>
#include <string>
#include <vector>

namespace ffpa_info {
namespace {

int64_t numericValue(ffpaHandle_t handle, ffpaPolicyKnob_t knob, const ffpaPolicyInfo_t& info) {
  if (info.type == FFPA_POLICY_TYPE_INT64) {
    int64_t value = 0;
    check(ffpaGetPolicy(handle, knob, &value, sizeof value, nullptr), "ffpaGetPolicy");
    return value;
  }
  int32_t value = 0;
  check(ffpaGetPolicy(handle, knob, &value, sizeof value, nullptr), "ffpaGetPolicy");
  return value;
}

std::string stringValue(ffpaHandle_t handle, ffpaPolicyKnob_t knob) {
  size_t size = 0;
  check(ffpaGetPolicy(handle, knob, nullptr, 0, &size), "ffpaGetPolicy");
  std::string value(size, '\0');
  check(ffpaGetPolicy(handle, knob, value.data(), size, nullptr), "ffpaGetPolicy");
  value.resize(size > 0 ? size - 1 : 0);
  return value.empty() ? "\"\"" : value;
}

// "qk_f16 (1)" for named values, the number otherwise.
std::string valueText(ffpaHandle_t handle, ffpaPolicyKnob_t knob, const ffpaPolicyInfo_t& info) {
  if (info.type == FFPA_POLICY_TYPE_STRING) return stringValue(handle, knob);
  const int64_t value = numericValue(handle, knob, info);
  std::istringstream names(info.valueNames != nullptr ? info.valueNames : "");
  int64_t index = info.minValue;
  for (std::string name; names >> name; ++index) {
    if (index == value) return name + " (" + std::to_string(value) + ")";
  }
  return std::to_string(value);
}

const char* sourceText(ffpaPolicySource_t source) {
  switch (source) {
    case FFPA_POLICY_SOURCE_DEFAULT: return "default";
    case FFPA_POLICY_SOURCE_ENVIRONMENT: return "environment";
    case FFPA_POLICY_SOURCE_SETTER: return "setter";
    default: return "unknown";
  }
}

}  // namespace

void writeEffectivePolicy(std::ostream& out, ffpaHandle_t handle) {
  int32_t count = 0;
  check(ffpaGetPolicyKnobs(0, &count, nullptr), "ffpaGetPolicyKnobs");
  std::vector<ffpaPolicyKnob_t> knobs(static_cast<size_t>(count));
  check(ffpaGetPolicyKnobs(count, &count, knobs.data()), "ffpaGetPolicyKnobs");
  out << "effective policy (value, and where it comes from):\n";
  for (const ffpaPolicyKnob_t knob : knobs) {
    ffpaPolicyInfo_t info{};
    info.structSize = sizeof info;
    check(ffpaGetPolicyInfo(knob, &info), "ffpaGetPolicyInfo");
    ffpaPolicySource_t source = FFPA_POLICY_SOURCE_DEFAULT;
    check(ffpaGetPolicySource(handle, knob, &source), "ffpaGetPolicySource");
    out << "  " << std::left << std::setw(42) << info.name << std::setw(22)
        << valueText(handle, knob, info) << sourceText(source) << '\n';
  }
}

}  // namespace ffpa_info
