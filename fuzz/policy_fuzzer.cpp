// Policies: the typed setter and getter behind ffpaSetPolicy / ffpaGetPolicy (ffpa::setPolicyFromBytes
// and getPolicyAsBytes) with arbitrary knob numbers, sizes and bytes, checked against a model of the
// documented semantics; and ffpa::policyFromEnvironment with a fake environment of the real variable
// names and arbitrary values, checked against the parse of each variable.
#include "core/environment.h"
#include "core/error.h"
#include "core/policy.h"
#include "support/byte_reader.h"
#include "support/fuzz_checks.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

using ffpa_fuzz::ByteReader;
using ffpa_fuzz::completesOrThrowsFfpaError;
using ffpa_fuzz::expect;

namespace {

// Value buffers hold exactly the size passed, up to this many bytes (a larger size must be
// refused unread: it fits no type, and strings are at most kMaxPolicyStringBytes).
constexpr size_t kMaxValueBytes = ffpa::kMaxPolicyStringBytes + 64;

std::string knobText(ffpaPolicyKnob_t knob) { return std::to_string(static_cast<int64_t>(knob)); }

ffpaPolicyKnob_t takeKnob(ByteReader& in) {
  const auto& specs = ffpa::knobSpecs();
  switch (in.takeIndex(8)) {
    case 0: return static_cast<ffpaPolicyKnob_t>(in.pick({15, 99, 104, 199, 204, 302, 0x7ffffffe, 0x7fffffff}));
    case 1: return in.takeEnum<ffpaPolicyKnob_t>();
    default: return specs[in.takeIndex(specs.size())].knob;
  }
}

// --- The typed setter and getter -----------------------------------------------------------------

// What every knob must read back as: its default, then each value the documentation accepts.
struct ModelPolicy {
  std::map<ffpaPolicyKnob_t, int64_t> numbers;
  std::string tunedConfigDir;

  ModelPolicy() {
    for (const ffpa::KnobSpec& spec : ffpa::knobSpecs()) numbers[spec.knob] = spec.defaultValue;
  }
};

size_t numericSize(const ffpa::KnobSpec& spec) { return spec.type == FFPA_POLICY_TYPE_INT64 ? 8 : 4; }

std::vector<uint8_t> takeValueBytes(ByteReader& in, size_t size) {
  std::vector<uint8_t> bytes(std::min(size, kMaxValueBytes));
  switch (in.takeIndex(3)) {
    case 0: {  // a small integer, little-endian, sign-extended over the whole buffer
      const int64_t value = in.take<int8_t>();
      for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(i < 8 ? value >> (8 * i) : value >> 63);
      break;
    }
    case 1: {  // text, with or without its NUL inside the buffer
      const std::string text = in.takeText(255);
      std::fill(bytes.begin(), bytes.end(), static_cast<uint8_t>(in.take<uint8_t>() | 1));
      std::copy_n(text.begin(), std::min(text.size(), bytes.size()), bytes.begin());
      if (in.takeBool() && text.size() < bytes.size()) bytes[text.size()] = 0;
      break;
    }
    default: {
      const std::vector<uint8_t> raw = in.takeBytes(16);
      for (size_t i = 0; i < bytes.size() && !raw.empty(); ++i) bytes[i] = raw[i % raw.size()];
    }
  }
  return bytes;
}

size_t takeSize(ByteReader& in, const ffpa::KnobSpec* spec) {
  switch (in.takeIndex(4)) {
    case 0:
    case 1:
      if (spec != nullptr && spec->type != FFPA_POLICY_TYPE_STRING) return numericSize(*spec);
      return 1 + in.take<uint8_t>();
    case 2: return in.pick({size_t{0}, size_t{1}, size_t{2}, size_t{4}, size_t{8}, size_t{4095}, size_t{4096},
                            size_t{4097}});
    default: return in.take<size_t>();
  }
}

void setKnob(ByteReader& in, ffpa::Policy& policy, ModelPolicy& model) {
  const ffpaPolicyKnob_t knob = takeKnob(in);
  const ffpa::KnobSpec* spec = ffpa::findKnob(knob);
  const size_t size = takeSize(in, spec);
  const std::vector<uint8_t> bytes = takeValueBytes(in, size);
  const bool nullValue = in.takeIndex(16) == 0;
  // An exact-size heap copy: vector::data() may be NULL for size 0, which is not what is meant.
  std::unique_ptr<uint8_t[]> value(new uint8_t[bytes.size()]);
  std::copy(bytes.begin(), bytes.end(), value.get());

  const bool accepted = completesOrThrowsFfpaError("setPolicyFromBytes", [&] {
    ffpa::setPolicyFromBytes(policy, knob, nullValue ? nullptr : value.get(), size);
  });
  const std::string call = "setPolicyFromBytes(knob " + knobText(knob) + ", size " + std::to_string(size) + ")";

  bool valid = spec != nullptr && !nullValue;
  if (valid && spec->type == FFPA_POLICY_TYPE_STRING) {
    const auto nul = std::find(bytes.begin(), bytes.end(), 0);
    valid = size >= 1 && size <= ffpa::kMaxPolicyStringBytes && nul != bytes.end();
    if (valid) model.tunedConfigDir.assign(bytes.begin(), nul);
  } else if (valid) {
    int64_t number = 0;
    valid = size == numericSize(*spec);
    if (valid && size == 8) std::memcpy(&number, bytes.data(), 8);
    if (valid && size == 4) {
      int32_t narrow;
      std::memcpy(&narrow, bytes.data(), 4);
      number = narrow;
    }
    valid = valid && number >= spec->minValue && number <= spec->maxValue;
    if (valid) model.numbers[knob] = number;
  }
  expect(accepted == valid, call + (accepted ? " accepted a value the documentation refuses"
                                             : " refused a value the documentation accepts"));
}

void getKnob(ByteReader& in, const ffpa::Policy& policy, const ModelPolicy& model) {
  const ffpaPolicyKnob_t knob = takeKnob(in);
  const ffpa::KnobSpec* spec = ffpa::findKnob(knob);
  const size_t size = takeSize(in, spec);
  const bool nullValue = in.takeIndex(16) == 0;
  const size_t length = std::min(size, kMaxValueBytes);
  std::unique_ptr<uint8_t[]> value(new uint8_t[length]);
  std::fill(value.get(), value.get() + length, 0xa5);
  size_t sizeWritten = 0;

  const bool completed = completesOrThrowsFfpaError("getPolicyAsBytes", [&] {
    ffpa::getPolicyAsBytes(policy, knob, nullValue ? nullptr : value.get(), size, &sizeWritten);
  });
  const std::string call = "getPolicyAsBytes(knob " + knobText(knob) + ", size " + std::to_string(size) + ")";
  if (spec == nullptr) {
    expect(!completed, call + " read a knob that does not exist");
    return;
  }
  const bool isString = spec->type == FFPA_POLICY_TYPE_STRING;
  const size_t needed = isString ? model.tunedConfigDir.size() + 1 : numericSize(*spec);
  const bool valid = size == 0 || (!nullValue && (isString ? size >= needed : size == needed));
  expect(completed == valid, call + (completed ? " succeeded" : " failed") + " against the documentation");
  expect(sizeWritten == needed, call + " reported size " + std::to_string(sizeWritten) + ", not " +
                                    std::to_string(needed));
  if (!completed || size == 0) return;
  if (isString) {
    expect(std::memcmp(value.get(), model.tunedConfigDir.c_str(), needed) == 0, call + " read another string");
    return;
  }
  int64_t got = 0;
  if (needed == 8) {
    std::memcpy(&got, value.get(), 8);
  } else {
    int32_t narrow;
    std::memcpy(&narrow, value.get(), 4);
    got = narrow;
  }
  expect(got == model.numbers.at(knob), call + " read " + std::to_string(got) + ", not " +
                                            std::to_string(model.numbers.at(knob)));
}

void fuzzTypedAccess(ByteReader& in) {
  ffpa::Policy policy;
  ModelPolicy model;
  for (int step = 0; step < 24 && !in.empty(); ++step) {
    if (in.takeBool()) {
      setKnob(in, policy, model);
    } else {
      getKnob(in, policy, model);
    }
  }
}

// --- The environment ---------------------------------------------------------------------------

// policyFromEnvironment takes a plain function pointer: the fake environment of the current input
// lives here.
std::map<std::string, std::string> gEnvironment;

const char* fakeLookup(const char* name) {
  const auto found = gEnvironment.find(name);
  return found == gEnvironment.end() ? nullptr : found->second.c_str();
}

std::vector<std::string> wordsOf(const char* text) {
  std::istringstream in(text);
  std::vector<std::string> words;
  for (std::string word; in >> word;) words.push_back(word);
  return words;
}

// Every variable the library reads, and one it does not.
std::vector<std::string> variableNames() {
  std::vector<std::string> names;
  for (const ffpa::KnobSpec& spec : ffpa::knobSpecs()) {
    for (const std::string& name : wordsOf(spec.environment)) names.push_back(name);
  }
  names.push_back("FFPA_NOT_A_KNOB");
  return names;
}

// Spellings every parser must get right: names, numbers at and past the bounds, odd whitespace.
const char* const kInterestingValues[] = {
    "0", "1", "2", "-1", "true", "FALSE", " on ", "Yes", "no", "off", "", " ", "\t1\n",
    "f16", "QK_F16", "pv_f16", "f32", "max", "fast", "debug", "warn", "none", "critical",
    "4", "4096", "4095", "1125899906842624", "1125899906842625", "+3", "0x10", "1e3",
    "99999999999999999999", "-9223372036854775808", "\v2", "1 1", "=1", "warn=2"};

std::string takeVariableValue(ByteReader& in) {
  switch (in.takeIndex(4)) {
    case 0: return in.pick(kInterestingValues);
    case 1: return std::string(in.take<uint16_t>() % 5000, static_cast<char>('a' + in.takeIndex(26)));
    default: return in.takeText(64);
  }
}

std::string trimmed(const std::string& text) {
  const size_t first = text.find_first_not_of(" \t\r\n");
  if (first == std::string::npos) return "";
  return text.substr(first, text.find_last_not_of(" \t\r\n") - first + 1);
}

// The value each set variable asks for, by the library's own parser of one variable.
std::optional<int64_t> requested(const ffpa::KnobSpec& spec, const std::string& name) {
  const auto found = gEnvironment.find(name);
  if (found == gEnvironment.end() || trimmed(found->second).empty()) return std::nullopt;
  const std::optional<int64_t> value = ffpa::parseKnobText(spec, found->second);
  expect(value.has_value(), "policyFromEnvironment accepted " + name + "=\"" + found->second +
                                "\", which parseKnobText refuses");
  return value;
}

// Each numeric knob holds the value of every variable of it that is set, or its default.
void checkAgainstVariables(const ffpa::Policy& policy) {
  for (const ffpa::KnobSpec& spec : ffpa::knobSpecs()) {
    const int64_t value = spec.type == FFPA_POLICY_TYPE_STRING ? 0 : policy.value(spec.knob);
    expect(value >= spec.minValue && value <= spec.maxValue, std::string(spec.name) + " is out of bounds");
    if (spec.type == FFPA_POLICY_TYPE_STRING) {
      const auto found = gEnvironment.find(wordsOf(spec.environment).front());
      const std::string dir = found == gEnvironment.end() ? "" : found->second;
      expect(policy.tunedConfigDir() == dir, std::string(spec.name) + " is not the variable's text");
      continue;
    }
    if (spec.knob == FFPA_POLICY_ACCUMULATOR) continue;  // below: its variables differ in type
    bool anySet = false;
    for (const std::string& name : wordsOf(spec.environment)) {
      const std::optional<int64_t> asked = requested(spec, name);
      if (!asked) continue;
      anySet = true;
      expect(*asked == value, std::string(spec.name) + " is " + std::to_string(value) + " although " +
                                  name + " asks for " + std::to_string(*asked));
    }
    if (!anySet) expect(value == spec.defaultValue, std::string(spec.name) + " left its default unasked");
  }

  ffpa::KnobSpec asBool = ffpa::knobSpec(FFPA_POLICY_ACCUMULATOR);
  asBool.type = FFPA_POLICY_TYPE_BOOL;
  asBool.maxValue = 1;
  asBool.valueNames = "false true";
  asBool.aliases = "";
  const int64_t accumulator = policy.value(FFPA_POLICY_ACCUMULATOR);
  const std::optional<int64_t> named = requested(ffpa::knobSpec(FFPA_POLICY_ACCUMULATOR), "FFPA_ACCUMULATOR");
  const bool forceQk = requested(asBool, "ENABLE_FFPA_FORCE_QK_F16").value_or(0) == 1;
  const bool forcePv = requested(asBool, "ENABLE_FFPA_FORCE_PV_F16").value_or(0) == 1;
  expect(!(forceQk && forcePv), "ENABLE_FFPA_FORCE_QK_F16=1 and ENABLE_FFPA_FORCE_PV_F16=1 were accepted together");
  if (named) expect(accumulator == *named, "FFPA_POLICY_ACCUMULATOR differs from FFPA_ACCUMULATOR");
  if (forceQk) expect(accumulator == FFPA_ACCUMULATOR_QK_F16, "ENABLE_FFPA_FORCE_QK_F16=1 was not honoured");
  if (forcePv) expect(accumulator == FFPA_ACCUMULATOR_PV_F16, "ENABLE_FFPA_FORCE_PV_F16=1 was not honoured");
  if (!named && !forceQk && !forcePv) expect(accumulator == FFPA_ACCUMULATOR_F32, "the accumulator changed unasked");
}

void fuzzEnvironment(ByteReader& in) {
  static const std::vector<std::string> names = variableNames();
  gEnvironment.clear();
  for (int count = 0; count < 12 && !in.empty(); ++count) {
    const std::string& name = names[in.takeIndex(names.size())];
    gEnvironment[name] = takeVariableValue(in);
  }

  ffpa::Policy policy;
  bool readEnvironment = false;
  const bool completed = completesOrThrowsFfpaError("policyFromEnvironment", [&] {
    try {
      policy = ffpa::policyFromEnvironment(fakeLookup);
      readEnvironment = true;
    } catch (const ffpa::Error& error) {
      expect(error.status() == FFPA_STATUS_BAD_PARAM_ENVIRONMENT ||
                 error.status() == FFPA_STATUS_BAD_PARAM_EXCLUSIVE_OPTIONS,
             std::string("policyFromEnvironment threw ") + ffpa_fuzz::statusText(error.status()) +
                 ": " + error.what());
      throw;
    }
  });
  if (completed && readEnvironment) checkAgainstVariables(policy);

  // The parser of one variable alone, on every value of this input and every numeric knob.
  for (const auto& [name, text] : gEnvironment) {
    for (const ffpa::KnobSpec& spec : ffpa::knobSpecs()) {
      if (spec.type == FFPA_POLICY_TYPE_STRING) continue;
      const std::optional<int64_t> value = ffpa::parseKnobText(spec, text);
      expect(!value || (*value >= spec.minValue && *value <= spec.maxValue),
             "parseKnobText returned an out-of-bounds value for " + std::string(spec.name));
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ByteReader in(data, size);
  if (in.takeBool()) {
    fuzzEnvironment(in);
  } else {
    fuzzTypedAccess(in);
  }
  return 0;
}
