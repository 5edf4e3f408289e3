#include "core/policy.h"

#include "core/error.h"

#include <cstring>
#include <limits>
#include <mutex>
#include <sstream>
#include <unordered_map>

namespace ffpa {
namespace {

constexpr ffpaPolicyType_t kBool = FFPA_POLICY_TYPE_BOOL;
constexpr const char* kBoolNames = "false true";

// clang-format off
const std::array<KnobSpec, kKnobCount> kSpecs = {{
  // --- Kernel selection ---
  {FFPA_POLICY_ACCUMULATOR, "FFPA_POLICY_ACCUMULATOR", FFPA_POLICY_TYPE_ENUM, 0, 3, 0, "f32",
   "FFPA_ACCUMULATOR ENABLE_FFPA_FORCE_QK_F16 ENABLE_FFPA_FORCE_PV_F16", "f32 qk_f16 pv_f16 f16", "",
   "Accumulator precision of the forward's Q*K^T and P*V (the backward always uses fp32); the two ENABLE_FFPA_FORCE_* variables are mutually exclusive.", true},
  {FFPA_POLICY_PREFETCH_QKV, "FFPA_POLICY_PREFETCH_QKV", kBool, 0, 1, 1, "1",
   "ENABLE_FFPA_PREFETCH_QKV", kBoolNames, "",
   "Prefetch the next Q/K/V chunks while the current product runs.", true},
  {FFPA_POLICY_QKV_SMEM_SHARE, "FFPA_POLICY_QKV_SMEM_SHARE", kBool, 0, 1, 0, "0",
   "ENABLE_FFPA_QKV_SMEM_SHARE", kBoolNames, "",
   "Let Q, K and V share one shared-memory buffer (for devices with little shared memory).", true},
  {FFPA_POLICY_SMEM_SWIZZLE_Q, "FFPA_POLICY_SMEM_SWIZZLE_Q", kBool, 0, 1, 1, "1",
   "ENABLE_FFPA_SMEM_SWIZZLE_Q", kBoolNames, "",
   "Avoid shared-memory bank conflicts on Q by swizzling (1) or by padding (0).", true},
  {FFPA_POLICY_SMEM_SWIZZLE_K, "FFPA_POLICY_SMEM_SWIZZLE_K", kBool, 0, 1, 1, "1",
   "ENABLE_FFPA_SMEM_SWIZZLE_K", kBoolNames, "",
   "Avoid shared-memory bank conflicts on K by swizzling (1) or by padding (0).", true},
  {FFPA_POLICY_SMEM_SWIZZLE_V, "FFPA_POLICY_SMEM_SWIZZLE_V", kBool, 0, 1, 1, "1",
   "ENABLE_FFPA_SMEM_SWIZZLE_V", kBoolNames, "",
   "Avoid shared-memory bank conflicts on V by swizzling (1) or by padding (0).", true},
  {FFPA_POLICY_PERSIST_Q_G2S, "FFPA_POLICY_PERSIST_Q_G2S", kBool, 0, 1, 1, "1",
   "ENABLE_FFPA_PERSIST_Q_G2S", kBoolNames, "",
   "Keep the whole Q tile in shared memory for head dims up to 320.", true},
  {FFPA_POLICY_PERSIST_KV_G2S, "FFPA_POLICY_PERSIST_KV_G2S", kBool, 0, 1, 1, "1",
   "ENABLE_FFPA_PERSIST_KV_G2S", kBoolNames, "",
   "Keep K/V tiles in shared memory for head dims up to 256 (coarse tiling there).", true},
  {FFPA_POLICY_PERSIST_Q_S2R, "FFPA_POLICY_PERSIST_Q_S2R", kBool, 0, 1, 0, "0",
   "ENABLE_FFPA_PERSIST_Q_S2R", kBoolNames, "",
   "Keep Q fragments in registers for head dims below 512.", true},
  {FFPA_POLICY_PERSIST_V_S2R, "FFPA_POLICY_PERSIST_V_S2R", kBool, 0, 1, 1, "1",
   "ENABLE_FFPA_PERSIST_V_S2R", kBoolNames, "",
   "Keep V fragments in registers in the small-head-dim kernel.", true},
  {FFPA_POLICY_REGISTERS_PIPE_KV, "FFPA_POLICY_REGISTERS_PIPE_KV", kBool, 0, 1, 0, "0",
   "ENABLE_FFPA_REGISTERS_PIPE_KV", kBoolNames, "",
   "Double-buffer K/V fragments in registers to overlap ldmatrix with MMA.", true},
  {FFPA_POLICY_LAUNCH_GRID_DNHB, "FFPA_POLICY_LAUNCH_GRID_DNHB", kBool, 0, 1, 0, "0",
   "ENABLE_FFPA_LAUNCH_GRID_DNHB", kBoolNames, "",
   "Launch with grid (N/Br, H, B) instead of (N/Br, B*H).", true},
  {FFPA_POLICY_STAGES, "FFPA_POLICY_STAGES", FFPA_POLICY_TYPE_INT32, 0, 4, 0, "0",
   "FFPA_STAGES", "", "",
   "Number of cp.async pipeline stages; 0 lets the planner or a tuned config choose.", true},
  {FFPA_POLICY_HOPPER_KERNELS, "FFPA_POLICY_HOPPER_KERNELS", kBool, 0, 1, 1, "1",
   "ENABLE_FFPA_HOPPER_KERNELS", kBoolNames, "",
   "On compute capability 9.0, run the Hopper (TMA + wgmma) forward and gradient kernels where they apply; 0 keeps the mma.sync kernels.", true},
  {FFPA_POLICY_EXP2_EMULATION, "FFPA_POLICY_EXP2_EMULATION", FFPA_POLICY_TYPE_INT32, 0, 8, 0, "0",
   "FFPA_EXP2_EMULATION", "", "",
   "Of every 8 softmax exponentials of the Hopper forward, how many an FMA polynomial computes instead of the special-function unit.", true},
  {FFPA_POLICY_HOPPER_KV_MULTICAST, "FFPA_POLICY_HOPPER_KV_MULTICAST", kBool, 0, 1, 0, "0",
   "FFPA_HOPPER_KV_MULTICAST", kBoolNames, "",
   "In the Hopper forward (d_v <= 512, no slices), CTAs of two adjacent row tiles share each K and V tile through TMA multicast.", true},
  {FFPA_POLICY_QUERY_HEADS_AS_ROWS, "FFPA_POLICY_QUERY_HEADS_AS_ROWS", kBool, 0, 1, 1, "1",
   "FFPA_QUERY_HEADS_AS_ROWS", kBoolNames, "",
   "A forward with few query rows per head (under 128) and query heads sharing K and V runs the heads of a group as rows of one problem per KV head.", true},
  {FFPA_POLICY_KEY_SPLITS, "FFPA_POLICY_KEY_SPLITS", FFPA_POLICY_TYPE_INT32, 0, 32, 0, "0",
   "FFPA_KEY_SPLITS", "", "",
   "Split-KV runs per row tile of the fast forward kernels where the grid leaves the GPU idle; 0 lets the planner choose, 1 never splits.", true},
  // --- Tuned configs ---
  {FFPA_POLICY_AUTOTUNE, "FFPA_POLICY_AUTOTUNE", kBool, 0, 1, 0, "0",
   "FFPA_AUTOTUNE", kBoolNames, "",
   "Tune launch configs at run time, once per problem and process.", true},
  {FFPA_POLICY_AUTOTUNE_MODE, "FFPA_POLICY_AUTOTUNE_MODE", FFPA_POLICY_TYPE_ENUM, 0, 1, 0, "fast",
   "FFPA_AUTOTUNE_MODE", "fast max", "",
   "Search space of tuning; persisted configs are used only when made with the same mode.", true},
  {FFPA_POLICY_TUNED_CONFIG_DIR, "FFPA_POLICY_TUNED_CONFIG_DIR", FFPA_POLICY_TYPE_STRING, 0,
   static_cast<int64_t>(kMaxPolicyStringBytes - 1), 0, "",
   "FFPA_TUNED_CONFIG_DIR", "", "",
   "Directory of per-device tuned-config files; empty means the installed directory.", true},
  {FFPA_POLICY_SKIP_PERSISTENT_TUNED_CONFIG, "FFPA_POLICY_SKIP_PERSISTENT_TUNED_CONFIG", kBool, 0, 1, 0, "0",
   "FFPA_SKIP_PERSIST_TUNED_CONFIG FFPA_SKIP_PERSISIT_TUNED_CONFIG", kBoolNames, "",
   "Ignore persisted tuned configs and use the built-in launch defaults.", true},
  // --- Correctness and debugging ---
  {FFPA_POLICY_DETERMINISTIC, "FFPA_POLICY_DETERMINISTIC", kBool, 0, 1, 0, "0",
   "FFPA_DETERMINISTIC_MODE MAGI_ATTENTION_DETERMINISTIC_MODE", kBoolNames, "",
   "Bit-identical results across runs with the same inputs (no floating-point atomics).", true},
  {FFPA_POLICY_SANITY_CHECK, "FFPA_POLICY_SANITY_CHECK", kBool, 0, 1, 0, "0",
   "FFPA_SANITY_CHECK MAGI_ATTENTION_SANITY_CHECK", kBoolNames, "",
   "Synchronize after each call and fail on CUDA errors or NaN/infinity in inputs and outputs.", true},
  {FFPA_POLICY_REFERENCE_BACKEND, "FFPA_POLICY_REFERENCE_BACKEND", kBool, 0, 1, 0, "0",
   "FFPA_REFERENCE_BACKEND MAGI_ATTENTION_SDPA_BACKEND", kBoolNames, "",
   "Run every call on the cuBLASLt fp32 reference path instead of the fast kernels.", true},
  {FFPA_POLICY_REFERENCE_CHUNK_BYTES, "FFPA_POLICY_REFERENCE_CHUNK_BYTES", FFPA_POLICY_TYPE_INT64,
   4096, int64_t{1} << 50, int64_t{512} << 20, "536870912",
   "FFPA_REFERENCE_CHUNK_BYTES", "", "",
   "Largest scratch of one chunk of heads and rows on the reference path.", true},
  // --- Library ---
  {FFPA_POLICY_PLAN_CACHE_CAPACITY, "FFPA_POLICY_PLAN_CACHE_CAPACITY", FFPA_POLICY_TYPE_INT32,
   0, 1 << 20, 1024, "1024",
   "FFPA_PLAN_CACHE_CAPACITY", "", "",
   "Plans the handle's LRU plan cache keeps; 0 disables caching.", false},
  {FFPA_POLICY_LOG_LEVEL, "FFPA_POLICY_LOG_LEVEL", FFPA_POLICY_TYPE_ENUM, 0, 4, 2, "warning",
   "FFPA_LOGGER_LEVEL", "off error warning info debug", "none=0 critical=1 fatal=1 warn=2",
   "Which log messages the handle produces.", false},
}};
// clang-format on

size_t indexOf(ffpaPolicyKnob_t knob) {
  for (size_t i = 0; i < kSpecs.size(); ++i) {
    if (kSpecs[i].knob == knob) return i;
  }
  return kSpecs.size();
}

int64_t readInteger(const void* bytes, size_t size) {
  if (size == sizeof(int64_t)) {
    int64_t v;
    std::memcpy(&v, bytes, sizeof v);
    return v;
  }
  int32_t v;
  std::memcpy(&v, bytes, sizeof v);
  return v;
}

size_t valueSize(const KnobSpec& spec) {
  return spec.type == FFPA_POLICY_TYPE_INT64 ? sizeof(int64_t) : sizeof(int32_t);
}

const char* typeName(ffpaPolicyType_t type) {
  switch (type) {
    case FFPA_POLICY_TYPE_BOOL: return "bool (int32_t)";
    case FFPA_POLICY_TYPE_INT32: return "int32_t";
    case FFPA_POLICY_TYPE_INT64: return "int64_t";
    case FFPA_POLICY_TYPE_ENUM: return "enum (int32_t)";
    default: return "string";
  }
}

// Distinct strings get distinct numbers for the life of the process.
int64_t internString(const std::string& text) {
  static std::mutex mutex;
  static std::unordered_map<std::string, int64_t> ids{{"", 0}};
  std::lock_guard<std::mutex> lock(mutex);
  return ids.emplace(text, static_cast<int64_t>(ids.size())).first->second;
}

}  // namespace

const std::array<KnobSpec, kKnobCount>& knobSpecs() { return kSpecs; }

const KnobSpec* findKnob(ffpaPolicyKnob_t knob) {
  const size_t i = indexOf(knob);
  return i < kSpecs.size() ? &kSpecs[i] : nullptr;
}

const KnobSpec& knobSpec(ffpaPolicyKnob_t knob) { return kSpecs[indexOf(knob)]; }

Policy::Policy() {
  for (size_t i = 0; i < kSpecs.size(); ++i) values_[i] = kSpecs[i].defaultValue;
}

int64_t Policy::value(ffpaPolicyKnob_t knob) const { return values_[indexOf(knob)]; }

void Policy::setValue(ffpaPolicyKnob_t knob, int64_t value, ffpaPolicySource_t source) {
  const KnobSpec& spec = knobSpec(knob);
  require(value >= spec.minValue && value <= spec.maxValue, FFPA_STATUS_BAD_PARAM_OUT_OF_BOUND,
          spec.name, ": ", value, " is out of range; allowed: ", describeAllowedValues(spec));
  values_[indexOf(knob)] = value;
  sources_[indexOf(knob)] = source;
}

void Policy::setTunedConfigDir(std::string dir, ffpaPolicySource_t source) {
  require(dir.size() < kMaxPolicyStringBytes, FFPA_STATUS_BAD_PARAM_OUT_OF_BOUND,
          "FFPA_POLICY_TUNED_CONFIG_DIR: ", dir.size(), " characters is too long; allowed: at most ",
          kMaxPolicyStringBytes - 1);
  tunedConfigDirId_ = internString(dir);
  tunedConfigDir_ = std::move(dir);
  sources_[indexOf(FFPA_POLICY_TUNED_CONFIG_DIR)] = source;
}

ffpaPolicySource_t Policy::source(ffpaPolicyKnob_t knob) const { return sources_[indexOf(knob)]; }

std::string knobValueName(ffpaPolicyKnob_t knob, int64_t value) {
  const KnobSpec& spec = knobSpec(knob);
  std::istringstream names(spec.valueNames);
  int64_t index = spec.minValue;
  for (std::string name; names >> name; ++index) {
    if (index == value) return name;
  }
  return std::to_string(value);
}

std::string describeAllowedValues(const KnobSpec& spec) {
  switch (spec.type) {
    case FFPA_POLICY_TYPE_BOOL:
      return "0 or 1";
    case FFPA_POLICY_TYPE_ENUM: {
      std::string names = spec.valueNames;
      for (char& c : names) if (c == ' ') c = '/';
      return cat(spec.minValue, " to ", spec.maxValue, " (", names, ")");
    }
    case FFPA_POLICY_TYPE_STRING:
      return cat("a string of at most ", spec.maxValue, " characters");
    default: {
      std::string text = cat("an integer from ", spec.minValue, " to ", spec.maxValue);
      if (spec.knob == FFPA_POLICY_STAGES) text += " (0 = auto)";
      return text;
    }
  }
}

void setPolicyFromBytes(Policy& policy, ffpaPolicyKnob_t knob, const void* value, size_t size) {
  const KnobSpec* spec = findKnob(knob);
  require(spec != nullptr, FFPA_STATUS_BAD_PARAM_OUT_OF_BOUND, "knob ", static_cast<int64_t>(knob),
          " is not an ffpaPolicyKnob_t value (see ffpaGetPolicyKnobs)");
  requireNotNull(value, "value");
  if (spec->type == FFPA_POLICY_TYPE_STRING) {
    require(size >= 1 && size <= kMaxPolicyStringBytes, FFPA_STATUS_BAD_PARAM_ATTRIBUTE_TYPE,
            spec->name, ": size ", size, " is not a string size; allowed: strlen + 1, from 1 to ",
            kMaxPolicyStringBytes);
    const char* text = static_cast<const char*>(value);
    const void* nul = std::memchr(text, '\0', size);
    require(nul != nullptr, FFPA_STATUS_BAD_PARAM_ATTRIBUTE_TYPE, spec->name,
            ": the string has no terminating NUL within size ", size);
    policy.setTunedConfigDir(std::string(text, static_cast<const char*>(nul) - text));
    return;
  }
  require(size == valueSize(*spec), FFPA_STATUS_BAD_PARAM_ATTRIBUTE_TYPE, spec->name, " is ",
          typeName(spec->type), ": size must be ", valueSize(*spec), ", got ", size);
  policy.setValue(knob, readInteger(value, size));
}

void getPolicyAsBytes(const Policy& policy, ffpaPolicyKnob_t knob, void* value, size_t size,
                      size_t* sizeWritten) {
  const KnobSpec* spec = findKnob(knob);
  require(spec != nullptr, FFPA_STATUS_BAD_PARAM_OUT_OF_BOUND, "knob ", static_cast<int64_t>(knob),
          " is not an ffpaPolicyKnob_t value (see ffpaGetPolicyKnobs)");
  if (spec->type == FFPA_POLICY_TYPE_STRING) {
    const std::string& text = policy.tunedConfigDir();
    const size_t needed = text.size() + 1;
    if (sizeWritten != nullptr) *sizeWritten = needed;
    if (size == 0) return;
    requireNotNull(value, "value");
    require(size >= needed, FFPA_STATUS_BAD_PARAM_SIZE_INSUFFICIENT, spec->name, ": size ", size,
            " is too small; the value needs ", needed, " bytes");
    std::memcpy(value, text.c_str(), needed);
    return;
  }
  const size_t needed = valueSize(*spec);
  if (sizeWritten != nullptr) *sizeWritten = needed;
  if (size == 0) return;
  requireNotNull(value, "value");
  require(size == needed, FFPA_STATUS_BAD_PARAM_ATTRIBUTE_TYPE, spec->name, " is ",
          typeName(spec->type), ": size must be ", needed, ", got ", size);
  const int64_t v = policy.value(knob);
  if (needed == sizeof(int64_t)) {
    std::memcpy(value, &v, sizeof v);
  } else {
    const int32_t v32 = static_cast<int32_t>(v);
    std::memcpy(value, &v32, sizeof v32);
  }
}

}  // namespace ffpa
