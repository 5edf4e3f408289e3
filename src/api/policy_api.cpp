// Policies: the typed setter and getter, and introspection of the knobs.
#include "api/boundary.h"

#include "core/handle.h"
#include "core/policy.h"

extern "C" {

FFPA_API ffpaStatus_t ffpaSetPolicy(ffpaHandle_t handle, ffpaPolicyKnob_t knob, const void* value,
                                    size_t size) {
  return ffpa::guarded("ffpaSetPolicy", [&] {
    ffpa::Context& context = ffpa::contextOf(handle);
    ffpa::setCallLogLevel(context.snapshot().policy->logLevel());
    context.setPolicy(knob, value, size);
  });
}

FFPA_API ffpaStatus_t ffpaGetPolicy(ffpaHandle_t handle, ffpaPolicyKnob_t knob, void* value,
                                    size_t size, size_t* sizeWritten) {
  return ffpa::guarded("ffpaGetPolicy", [&] {
    ffpa::Context& context = ffpa::contextOf(handle);
    const auto policy = context.snapshot().policy;
    ffpa::setCallLogLevel(policy->logLevel());
    ffpa::getPolicyAsBytes(*policy, knob, value, size, sizeWritten);
  });
}

FFPA_API ffpaStatus_t ffpaGetPolicySource(ffpaHandle_t handle, ffpaPolicyKnob_t knob,
                                          ffpaPolicySource_t* source) {
  return ffpa::guarded("ffpaGetPolicySource", [&] {
    const auto policy = ffpa::contextOf(handle).snapshot().policy;
    ffpa::setCallLogLevel(policy->logLevel());
    ffpa::require(ffpa::findKnob(knob) != nullptr, FFPA_STATUS_BAD_PARAM_OUT_OF_BOUND, "knob ",
                  static_cast<int64_t>(knob), " is not an ffpaPolicyKnob_t value (see ffpaGetPolicyKnobs)");
    ffpa::requireNotNull(source, "source");
    *source = policy->source(knob);
  });
}

FFPA_API ffpaStatus_t ffpaGetPolicyInfo(ffpaPolicyKnob_t knob, ffpaPolicyInfo_t* info) {
  return ffpa::guarded("ffpaGetPolicyInfo", [&] {
    const ffpa::KnobSpec* spec = ffpa::findKnob(knob);
    ffpa::require(spec != nullptr, FFPA_STATUS_BAD_PARAM_OUT_OF_BOUND, "knob ",
                  static_cast<int64_t>(knob), " is not an ffpaPolicyKnob_t value (see ffpaGetPolicyKnobs)");
    ffpa::requireNotNull(info, "info");
    ffpa::require(info->structSize >= sizeof(ffpaPolicyInfo_t), FFPA_STATUS_BAD_PARAM_SIZE_INSUFFICIENT,
                  "info->structSize is ", info->structSize, "; set it to sizeof(ffpaPolicyInfo_t) = ",
                  sizeof(ffpaPolicyInfo_t));
    ffpaPolicyInfo_t out{};
    out.structSize = info->structSize;
    out.type = spec->type;
    out.minValue = spec->minValue;
    out.maxValue = spec->maxValue;
    out.defaultValue = spec->defaultValue;
    out.name = spec->name;
    out.environment = spec->environment;
    out.valueNames = spec->valueNames;
    out.defaultString = spec->defaultString;
    out.description = spec->description;
    *info = out;
  });
}

FFPA_API ffpaStatus_t ffpaGetPolicyKnobs(int32_t requested, int32_t* count, ffpaPolicyKnob_t* knobs) {
  return ffpa::guarded("ffpaGetPolicyKnobs", [&] {
    ffpa::requireNotNull(count, "count");
    ffpa::require(requested >= 0, FFPA_STATUS_BAD_PARAM_OUT_OF_BOUND, "requested is ", requested,
                  "; allowed: >= 0");
    if (requested > 0) ffpa::requireNotNull(knobs, "knobs");
    const auto& specs = ffpa::knobSpecs();
    *count = static_cast<int32_t>(specs.size());
    for (int32_t i = 0; i < requested && i < *count; ++i) knobs[i] = specs[i].knob;
  });
}

}  // extern "C"
