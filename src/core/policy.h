// The policy knobs of a handle: their specification (type, bounds, default, environment
// variables) and a Policy value holding one setting of each.
#pragma once

#include <ffpa/ffpa.h>

#include <array>
#include <cstdint>
#include <string>

namespace ffpa {

struct KnobSpec {
  ffpaPolicyKnob_t knob;
  const char* name;
  ffpaPolicyType_t type;
  int64_t minValue;
  int64_t maxValue;
  int64_t defaultValue;
  const char* defaultString;
  const char* environment;  // space-separated; the first is the primary name
  const char* valueNames;   // enum/bool: names of minValue.. in order, space-separated
  const char* aliases;      // extra accepted names, "name=value" space-separated
  const char* description;
  bool affectsPlan;         // false for knobs that cannot change which kernel runs or how
};

constexpr size_t kKnobCount = 28;
constexpr size_t kMaxPolicyStringBytes = 4096;  // including the NUL

// All knobs, in the order of their enumerator values.
const std::array<KnobSpec, kKnobCount>& knobSpecs();
// The spec of a knob, or nullptr for a value that names no knob.
const KnobSpec* findKnob(ffpaPolicyKnob_t knob);
// As findKnob, for knobs known to exist (the library's own code).
const KnobSpec& knobSpec(ffpaPolicyKnob_t knob);

// One value per knob. Numeric knobs (bool, int, enum) are stored as int64; the one string knob
// separately. Values are checked against the specs on the way in.
class Policy {
 public:
  Policy();  // every knob at its default

  int64_t value(ffpaPolicyKnob_t knob) const;
  bool flag(ffpaPolicyKnob_t knob) const { return value(knob) != 0; }
  const std::string& tunedConfigDir() const { return tunedConfigDir_; }
  // A process-wide number for the directory string, so plan keys stay fixed-size words.
  int64_t tunedConfigDirId() const { return tunedConfigDirId_; }

  // Throw ffpa::Error (OUT_OF_BOUND) naming the knob when the value is outside its bounds.
  void setValue(ffpaPolicyKnob_t knob, int64_t value,
                ffpaPolicySource_t source = FFPA_POLICY_SOURCE_SETTER);
  void setTunedConfigDir(std::string dir, ffpaPolicySource_t source = FFPA_POLICY_SOURCE_SETTER);
  // Where the current value came from (not part of plan keys: only values change plans).
  ffpaPolicySource_t source(ffpaPolicyKnob_t knob) const;

  ffpaAccumulator_t accumulator() const {
    return static_cast<ffpaAccumulator_t>(value(FFPA_POLICY_ACCUMULATOR));
  }
  ffpaLogLevel_t logLevel() const { return static_cast<ffpaLogLevel_t>(value(FFPA_POLICY_LOG_LEVEL)); }

 private:
  std::array<int64_t, kKnobCount> values_{};
  std::array<ffpaPolicySource_t, kKnobCount> sources_{};  // zero is FFPA_POLICY_SOURCE_DEFAULT
  std::string tunedConfigDir_;
  int64_t tunedConfigDirId_ = 0;  // 0 is ""
};

// The name of an enum or bool knob's value ("qk_f16"), or its number as text.
std::string knobValueName(ffpaPolicyKnob_t knob, int64_t value);

// "0 or 1", "an integer from 0 to 4", "one of f32, qk_f16, pv_f16, f16 (or 0 to 3)", ...
std::string describeAllowedValues(const KnobSpec& spec);

// The C-API typed setter and getter (ffpaSetPolicy / ffpaGetPolicy semantics).
void setPolicyFromBytes(Policy& policy, ffpaPolicyKnob_t knob, const void* value, size_t size);
void getPolicyAsBytes(const Policy& policy, ffpaPolicyKnob_t knob, void* value, size_t size,
                      size_t* sizeWritten);

}  // namespace ffpa
