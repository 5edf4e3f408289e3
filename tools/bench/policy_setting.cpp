#include "policy_setting.h"

#include <algorithm>
#include <cctype>
#include <sstream>
#include <stdexcept>
#include <vector>

namespace ffpa_bench {
namespace {

std::string upper(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(), [](unsigned char c) { return std::toupper(c); });
  return text;
}

std::string lower(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(), [](unsigned char c) { return std::tolower(c); });
  return text;
}

ffpaPolicyInfo_t infoOf(ffpaPolicyKnob_t knob) {
  ffpaPolicyInfo_t info{};
  info.structSize = sizeof info;
  if (ffpaGetPolicyInfo(knob, &info) != FFPA_STATUS_SUCCESS) {
    throw std::runtime_error("ffpaGetPolicyInfo failed for knob " + std::to_string(knob));
  }
  return info;
}

std::vector<ffpaPolicyKnob_t> allKnobs() {
  int32_t count = 0;
  std::vector<ffpaPolicyKnob_t> knobs;
  if (ffpaGetPolicyKnobs(0, &count, nullptr) == FFPA_STATUS_SUCCESS) {
    knobs.resize(static_cast<size_t>(count));
    ffpaGetPolicyKnobs(count, &count, knobs.data());
  }
  return knobs;
}

[[noreturn]] void refuse(const std::string& assignment, const std::string& why) {
  throw std::invalid_argument("--policy: \"" + assignment + "\": " + why);
}

// What a numeric knob accepts, for messages: "1 to 4" or "0 to 3 (f32 qk_f16 pv_f16 f16)".
std::string allowed(const ffpaPolicyInfo_t& info) {
  std::string text = std::to_string(info.minValue) + " to " + std::to_string(info.maxValue);
  if (*info.valueNames) text += std::string(" or a name: ") + info.valueNames;
  return text;
}

int64_t numberOf(const std::string& assignment, const ffpaPolicyInfo_t& info, const std::string& value) {
  std::istringstream names(info.valueNames);
  int64_t index = info.minValue;
  for (std::string word; names >> word; ++index) {
    if (lower(word) == lower(value)) return index;
  }
  size_t used = 0;
  int64_t number = 0;
  try {
    number = std::stoll(value, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (value.empty() || used != value.size() || number < info.minValue || number > info.maxValue) {
    refuse(assignment, std::string(info.name) + " takes " + allowed(info));
  }
  return number;
}

}  // namespace

PolicySetting resolvePolicy(const std::string& assignment) {
  const size_t eq = assignment.find('=');
  if (eq == std::string::npos || eq == 0) refuse(assignment, "expected NAME=VALUE, e.g. FFPA_POLICY_STAGES=2");
  const std::string name = upper(assignment.substr(0, eq)), value = assignment.substr(eq + 1);
  for (const ffpaPolicyKnob_t knob : allKnobs()) {
    const ffpaPolicyInfo_t info = infoOf(knob);
    const std::string full = info.name;
    if (name != full && "FFPA_POLICY_" + name != full) continue;
    PolicySetting setting;
    setting.knob = knob;
    setting.type = info.type;
    setting.name = full;
    if (info.type == FFPA_POLICY_TYPE_STRING) {
      if (static_cast<int64_t>(value.size()) > info.maxValue) {
        refuse(assignment, full + " takes at most " + std::to_string(info.maxValue) + " characters");
      }
      setting.text = value;
    } else {
      setting.number = numberOf(assignment, info, value);
    }
    return setting;
  }
  refuse(assignment, "no knob of that name (ffpa-info --knobs lists them)");
}

ffpaStatus_t applyPolicy(ffpaHandle_t handle, const PolicySetting& setting) {
  switch (setting.type) {
    case FFPA_POLICY_TYPE_STRING:
      return ffpaSetPolicy(handle, setting.knob, setting.text.c_str(), setting.text.size() + 1);
    case FFPA_POLICY_TYPE_INT64:
      return ffpaSetPolicy(handle, setting.knob, &setting.number, sizeof setting.number);
    default: {
      const int32_t narrow = static_cast<int32_t>(setting.number);
      return ffpaSetPolicy(handle, setting.knob, &narrow, sizeof narrow);
    }
  }
}

}  // namespace ffpa_bench
