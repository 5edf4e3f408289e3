#include "core/environment.h"

#include "core/error.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <sstream>
#include <vector>

namespace ffpa {
namespace {

std::vector<std::string> words(const char* text) {
  std::istringstream in(text);
  std::vector<std::string> out;
  for (std::string word; in >> word;) out.push_back(word);
  return out;
}

std::string lowercase(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return text;
}

std::string trim(const std::string& text) {
  const size_t first = text.find_first_not_of(" \t\r\n");
  if (first == std::string::npos) return "";
  return text.substr(first, text.find_last_not_of(" \t\r\n") - first + 1);
}

std::optional<int64_t> parseDecimal(const std::string& text) {
  if (text.empty()) return std::nullopt;
  errno = 0;
  char* end = nullptr;
  const long long value = std::strtoll(text.c_str(), &end, 10);
  if (errno != 0 || end != text.c_str() + text.size()) return std::nullopt;
  return static_cast<int64_t>(value);
}

std::optional<int64_t> parseName(const KnobSpec& spec, const std::string& lower) {
  const std::vector<std::string> names = words(spec.valueNames);
  for (size_t i = 0; i < names.size(); ++i) {
    if (names[i] == lower) return spec.minValue + static_cast<int64_t>(i);
  }
  for (const std::string& alias : words(spec.aliases)) {
    const size_t eq = alias.find('=');
    if (alias.substr(0, eq) == lower) return parseDecimal(alias.substr(eq + 1));
  }
  if (spec.type == FFPA_POLICY_TYPE_BOOL) {
    if (lower == "on" || lower == "yes") return 1;
    if (lower == "off" || lower == "no") return 0;
  }
  return std::nullopt;
}

std::string acceptedText(const KnobSpec& spec) {
  if (spec.type == FFPA_POLICY_TYPE_BOOL) return "0 or 1 (also true/false, on/off, yes/no)";
  return describeAllowedValues(spec);
}

struct Setting {
  std::string text;  // "NAME=value", for messages
  int64_t value;
};

// Every variable of `names` that is set, parsed; throws on a malformed one.
std::vector<Setting> readSettings(const KnobSpec& spec, const std::vector<std::string>& names,
                                  EnvironmentLookup lookup, const KnobSpec& parseAs) {
  std::vector<Setting> settings;
  for (const std::string& name : names) {
    const char* raw = lookup(name.c_str());
    if (raw == nullptr || trim(raw).empty()) continue;
    const auto value = parseKnobText(parseAs, raw);
    require(value.has_value(), FFPA_STATUS_BAD_PARAM_ENVIRONMENT, "environment variable ", name,
            "=\"", raw, "\" is not valid for ", spec.name, "; allowed: ", acceptedText(parseAs));
    settings.push_back({name + "=" + trim(raw), *value});
  }
  return settings;
}

// Several spellings of one knob must agree when more than one is set.
void requireAgreement(const KnobSpec& spec, const std::vector<Setting>& settings) {
  for (const Setting& s : settings) {
    require(s.value == settings.front().value, FFPA_STATUS_BAD_PARAM_ENVIRONMENT,
            "environment variables ", settings.front().text, " and ", s.text, " disagree on ",
            spec.name, "; set only one");
  }
}

// ENABLE_FFPA_FORCE_QK_F16 and ENABLE_FFPA_FORCE_PV_F16 are booleans that each imply an
// accumulator mode; FFPA_ACCUMULATOR names the mode directly.
void readAccumulator(Policy& policy, EnvironmentLookup lookup) {
  const KnobSpec& spec = knobSpec(FFPA_POLICY_ACCUMULATOR);
  // How the two ENABLE_FFPA_FORCE_* variables are parsed: as booleans.
  KnobSpec asBool = spec;
  asBool.type = FFPA_POLICY_TYPE_BOOL;
  asBool.minValue = 0;
  asBool.maxValue = 1;
  asBool.valueNames = "false true";
  asBool.aliases = "";
  const auto forceQk = readSettings(spec, {"ENABLE_FFPA_FORCE_QK_F16"}, lookup, asBool);
  const auto forcePv = readSettings(spec, {"ENABLE_FFPA_FORCE_PV_F16"}, lookup, asBool);
  const bool qk = !forceQk.empty() && forceQk.front().value == 1;
  const bool pv = !forcePv.empty() && forcePv.front().value == 1;
  require(!(qk && pv), FFPA_STATUS_BAD_PARAM_EXCLUSIVE_OPTIONS,
          "environment variables ENABLE_FFPA_FORCE_QK_F16=1 and ENABLE_FFPA_FORCE_PV_F16=1 are "
          "mutually exclusive: enable at most one (FFPA_ACCUMULATOR=f16 accumulates both in fp16)");
  std::vector<Setting> settings = readSettings(spec, {"FFPA_ACCUMULATOR"}, lookup, spec);
  if (qk) settings.push_back({forceQk.front().text, FFPA_ACCUMULATOR_QK_F16});
  if (pv) settings.push_back({forcePv.front().text, FFPA_ACCUMULATOR_PV_F16});
  if (settings.empty()) return;
  requireAgreement(spec, settings);
  policy.setValue(FFPA_POLICY_ACCUMULATOR, settings.front().value, FFPA_POLICY_SOURCE_ENVIRONMENT);
}

void readStringKnob(Policy& policy, const KnobSpec& spec, EnvironmentLookup lookup) {
  for (const std::string& name : words(spec.environment)) {
    const char* raw = lookup(name.c_str());
    if (raw == nullptr || *raw == '\0') continue;
    require(std::char_traits<char>::length(raw) < kMaxPolicyStringBytes,
            FFPA_STATUS_BAD_PARAM_ENVIRONMENT, "environment variable ", name, " is too long for ",
            spec.name, "; allowed: ", describeAllowedValues(spec));
    policy.setTunedConfigDir(raw, FFPA_POLICY_SOURCE_ENVIRONMENT);
  }
}

}  // namespace

const char* processEnvironment(const char* name) { return std::getenv(name); }

std::optional<int64_t> parseKnobText(const KnobSpec& spec, const std::string& text) {
  const std::string lower = lowercase(trim(text));
  std::optional<int64_t> value = parseDecimal(lower);
  if (!value && (spec.type == FFPA_POLICY_TYPE_BOOL || spec.type == FFPA_POLICY_TYPE_ENUM)) {
    value = parseName(spec, lower);
  }
  if (!value || *value < spec.minValue || *value > spec.maxValue) return std::nullopt;
  return value;
}

Policy policyFromEnvironment(EnvironmentLookup lookup) {
  Policy policy;
  for (const KnobSpec& spec : knobSpecs()) {
    if (spec.knob == FFPA_POLICY_ACCUMULATOR) {
      readAccumulator(policy, lookup);
    } else if (spec.type == FFPA_POLICY_TYPE_STRING) {
      readStringKnob(policy, spec, lookup);
    } else {
      const std::vector<Setting> settings = readSettings(spec, words(spec.environment), lookup, spec);
      if (settings.empty()) continue;
      requireAgreement(spec, settings);
      policy.setValue(spec.knob, settings.front().value, FFPA_POLICY_SOURCE_ENVIRONMENT);
    }
  }
  return policy;
}

}  // namespace ffpa
