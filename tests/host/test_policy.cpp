// Policies: the typed setter and getter, the knob table, environment variables and precedence.
#include "test_support.h"

#include <set>
#include <sstream>

using namespace ffpa_test;

namespace {

std::vector<ffpaPolicyKnob_t> allKnobs() {
  int32_t count = 0;
  REQUIRE_OK(ffpaGetPolicyKnobs(0, &count, nullptr));
  std::vector<ffpaPolicyKnob_t> knobs(static_cast<size_t>(count));
  REQUIRE_OK(ffpaGetPolicyKnobs(count, &count, knobs.data()));
  return knobs;
}

ffpaPolicyInfo_t infoOf(ffpaPolicyKnob_t knob) {
  ffpaPolicyInfo_t info{};
  info.structSize = sizeof info;
  REQUIRE_OK(ffpaGetPolicyInfo(knob, &info));
  return info;
}

}  // namespace

TEST_CASE("every runtime variable of ffpa-attn, the tuned-config design and MagiAttention maps to a knob") {
  std::set<std::string> variables;
  for (const ffpaPolicyKnob_t knob : allKnobs()) {
    std::istringstream names(infoOf(knob).environment);
    for (std::string name; names >> name;) variables.insert(name);
  }
  for (const char* expected :
       {"ENABLE_FFPA_FORCE_QK_F16", "ENABLE_FFPA_FORCE_PV_F16", "ENABLE_FFPA_PREFETCH_QKV",
        "ENABLE_FFPA_QKV_SMEM_SHARE", "ENABLE_FFPA_SMEM_SWIZZLE_Q", "ENABLE_FFPA_SMEM_SWIZZLE_K",
        "ENABLE_FFPA_SMEM_SWIZZLE_V", "ENABLE_FFPA_PERSIST_Q_G2S", "ENABLE_FFPA_PERSIST_KV_G2S",
        "ENABLE_FFPA_PERSIST_Q_S2R", "ENABLE_FFPA_PERSIST_V_S2R", "ENABLE_FFPA_REGISTERS_PIPE_KV",
        "ENABLE_FFPA_LAUNCH_GRID_DNHB", "FFPA_SKIP_PERSISIT_TUNED_CONFIG", "FFPA_SKIP_PERSIST_TUNED_CONFIG",
        "FFPA_TUNED_CONFIG_DIR", "FFPA_LOGGER_LEVEL", "MAGI_ATTENTION_DETERMINISTIC_MODE",
        "MAGI_ATTENTION_SANITY_CHECK", "MAGI_ATTENTION_SDPA_BACKEND"}) {
    CHECK_MESSAGE(variables.count(expected) == 1, expected);
  }
}

TEST_CASE("the knob table is consistent: names, bounds, defaults, value names") {
  const std::vector<ffpaPolicyKnob_t> knobs = allKnobs();
  CHECK(knobs.size() >= 23);
  Handle h;
  for (const ffpaPolicyKnob_t knob : knobs) {
    const ffpaPolicyInfo_t info = infoOf(knob);
    CAPTURE(info.name);
    CHECK(std::string(info.name).rfind("FFPA_POLICY_", 0) == 0);
    CHECK(std::string(info.description).size() > 10);
    CHECK(info.minValue <= info.defaultValue);
    CHECK(info.defaultValue <= info.maxValue);
    if (info.type == FFPA_POLICY_TYPE_STRING) continue;
    CHECK(h.get(knob) == info.defaultValue);  // no environment set in this test
    if (info.type == FFPA_POLICY_TYPE_ENUM || info.type == FFPA_POLICY_TYPE_BOOL) {
      std::istringstream names(info.valueNames);
      int64_t count = 0;
      for (std::string name; names >> name;) ++count;
      CHECK(count == info.maxValue - info.minValue + 1);
    }
  }
  ffpaPolicyInfo_t small{};
  small.structSize = 8;
  CHECK_FAILS_WITH(ffpaGetPolicyInfo(FFPA_POLICY_STAGES, &small), FFPA_STATUS_BAD_PARAM_SIZE_INSUFFICIENT,
                   "structSize");
  CHECK_FAILS_WITH(ffpaGetPolicyInfo(static_cast<ffpaPolicyKnob_t>(99), &small), FFPA_STATUS_BAD_PARAM_OUT_OF_BOUND,
                   "knob 99");
  int32_t count = 0;
  CHECK_FAILS_WITH(ffpaGetPolicyKnobs(-1, &count, nullptr), FFPA_STATUS_BAD_PARAM_OUT_OF_BOUND, "requested");
  CHECK_FAILS_WITH(ffpaGetPolicyKnobs(3, &count, nullptr), FFPA_STATUS_BAD_PARAM_NULL_POINTER, "knobs");
}

TEST_CASE("every numeric knob accepts its bounds and refuses one past them, naming the knob and range") {
  Handle h;
  for (const ffpaPolicyKnob_t knob : allKnobs()) {
    const ffpaPolicyInfo_t info = infoOf(knob);
    if (info.type == FFPA_POLICY_TYPE_STRING) continue;
    CAPTURE(info.name);
    if (info.type == FFPA_POLICY_TYPE_INT64) {
      h.set<int64_t>(knob, info.minValue);
      h.set<int64_t>(knob, info.maxValue);
      CHECK(h.get(knob) == info.maxValue);
      const int64_t past = info.maxValue + 1;
      CHECK_FAILS_WITH(ffpaSetPolicy(h, knob, &past, sizeof past), FFPA_STATUS_BAD_PARAM_OUT_OF_BOUND, info.name);
      const int32_t narrow = 1;
      CHECK_FAILS_WITH(ffpaSetPolicy(h, knob, &narrow, sizeof narrow), FFPA_STATUS_BAD_PARAM_ATTRIBUTE_TYPE,
                       info.name, "size must be 8");
    } else {
      h.set<int32_t>(knob, static_cast<int32_t>(info.minValue));
      h.set<int32_t>(knob, static_cast<int32_t>(info.maxValue));
      CHECK(h.get(knob) == info.maxValue);
      const int32_t past = static_cast<int32_t>(info.maxValue + 1);
      CHECK_FAILS_WITH(ffpaSetPolicy(h, knob, &past, sizeof past), FFPA_STATUS_BAD_PARAM_OUT_OF_BOUND, info.name,
                       "allowed");
      const int32_t below = static_cast<int32_t>(info.minValue - 1);
      CHECK_FAILS_WITH(ffpaSetPolicy(h, knob, &below, sizeof below), FFPA_STATUS_BAD_PARAM_OUT_OF_BOUND, info.name);
      const int64_t wide = info.minValue;
      CHECK_FAILS_WITH(ffpaSetPolicy(h, knob, &wide, sizeof wide), FFPA_STATUS_BAD_PARAM_ATTRIBUTE_TYPE,
                       info.name, "size must be 4");
    }
  }
}

TEST_CASE("setter errors: unknown knob, NULL value, a failed set changes nothing") {
  Handle h;
  const int32_t seven = 7;
  CHECK_FAILS_WITH(ffpaSetPolicy(h, FFPA_POLICY_STAGES, &seven, sizeof seven), FFPA_STATUS_BAD_PARAM_OUT_OF_BOUND,
                   "FFPA_POLICY_STAGES: 7 is out of range", "0 to 4");
  CHECK(h.get(FFPA_POLICY_STAGES) == 0);
  CHECK_FAILS_WITH(ffpaSetPolicy(h, static_cast<ffpaPolicyKnob_t>(42), &seven, sizeof seven),
                   FFPA_STATUS_BAD_PARAM_OUT_OF_BOUND, "knob 42");
  CHECK_FAILS_WITH(ffpaSetPolicy(h, FFPA_POLICY_STAGES, nullptr, 4), FFPA_STATUS_BAD_PARAM_NULL_POINTER, "value");
  CHECK_FAILS_WITH(ffpaSetPolicy(nullptr, FFPA_POLICY_STAGES, &seven, 4), FFPA_STATUS_BAD_PARAM_NULL_POINTER,
                   "handle");
  int32_t out = 0;
  CHECK_FAILS_WITH(ffpaGetPolicy(h, FFPA_POLICY_STAGES, &out, 2, nullptr), FFPA_STATUS_BAD_PARAM_ATTRIBUTE_TYPE);
  CHECK_FAILS_WITH(ffpaGetPolicy(h, FFPA_POLICY_STAGES, nullptr, 4, nullptr), FFPA_STATUS_BAD_PARAM_NULL_POINTER);
}

TEST_CASE("the string knob: size includes the NUL, queries report the size, short buffers are refused") {
  Handle h;
  size_t size = 0;
  REQUIRE_OK(ffpaGetPolicy(h, FFPA_POLICY_TUNED_CONFIG_DIR, nullptr, 0, &size));
  CHECK(size == 1);  // "" by default
  const char dir[] = "/opt/ffpa/configs";
  REQUIRE_OK(ffpaSetPolicy(h, FFPA_POLICY_TUNED_CONFIG_DIR, dir, sizeof dir));
  REQUIRE_OK(ffpaGetPolicy(h, FFPA_POLICY_TUNED_CONFIG_DIR, nullptr, 0, &size));
  CHECK(size == sizeof dir);
  std::string back(size, '\0');
  REQUIRE_OK(ffpaGetPolicy(h, FFPA_POLICY_TUNED_CONFIG_DIR, back.data(), size, nullptr));
  CHECK(std::string(back.c_str()) == dir);
  char tiny[4];
  CHECK_FAILS_WITH(ffpaGetPolicy(h, FFPA_POLICY_TUNED_CONFIG_DIR, tiny, sizeof tiny, nullptr),
                   FFPA_STATUS_BAD_PARAM_SIZE_INSUFFICIENT, "needs 18 bytes");
  const char noNul[3] = {'a', 'b', 'c'};
  CHECK_FAILS_WITH(ffpaSetPolicy(h, FFPA_POLICY_TUNED_CONFIG_DIR, noNul, sizeof noNul),
                   FFPA_STATUS_BAD_PARAM_ATTRIBUTE_TYPE, "NUL");
  std::string tooLong(5000, 'x');
  CHECK_FAILS_WITH(ffpaSetPolicy(h, FFPA_POLICY_TUNED_CONFIG_DIR, tooLong.c_str(), tooLong.size() + 1),
                   FFPA_STATUS_BAD_PARAM_ATTRIBUTE_TYPE, "4096");
}

TEST_CASE("precedence: setter over environment over default") {
  {
    Handle plain;
    CHECK(plain.get(FFPA_POLICY_PREFETCH_QKV) == 1);
  }
  ScopedEnvironment env({{"ENABLE_FFPA_PREFETCH_QKV", "0"}, {"FFPA_STAGES", "3"}});
  Handle fromEnvironment;
  CHECK(fromEnvironment.get(FFPA_POLICY_PREFETCH_QKV) == 0);
  CHECK(fromEnvironment.get(FFPA_POLICY_STAGES) == 3);
  fromEnvironment.set<int32_t>(FFPA_POLICY_PREFETCH_QKV, 1);
  CHECK(fromEnvironment.get(FFPA_POLICY_PREFETCH_QKV) == 1);
  Handle another;  // the setter changed one handle only
  CHECK(another.get(FFPA_POLICY_PREFETCH_QKV) == 0);
}

TEST_CASE("environment values: spellings, names, aliases, empty means unset") {
  SUBCASE("booleans") {
    for (const char* on : {"1", "true", "TRUE", "on", "yes", " 1 "}) {
      ScopedEnvironment env({{"FFPA_DETERMINISTIC_MODE", on}});
      CHECK_MESSAGE(Handle().get(FFPA_POLICY_DETERMINISTIC) == 1, on);
    }
    ScopedEnvironment off({{"ENABLE_FFPA_SMEM_SWIZZLE_K", "off"}});
    CHECK(Handle().get(FFPA_POLICY_SMEM_SWIZZLE_K) == 0);
  }
  SUBCASE("enumerations by name or number") {
    ScopedEnvironment env({{"FFPA_LOGGER_LEVEL", "DEBUG"}, {"FFPA_AUTOTUNE_MODE", "max"}});
    Handle h;
    CHECK(h.get(FFPA_POLICY_LOG_LEVEL) == FFPA_LOG_LEVEL_DEBUG);
    CHECK(h.get(FFPA_POLICY_AUTOTUNE_MODE) == FFPA_AUTOTUNE_MODE_MAX);
    ScopedEnvironment warn({{"FFPA_LOGGER_LEVEL", "warn"}});
    CHECK(Handle().get(FFPA_POLICY_LOG_LEVEL) == FFPA_LOG_LEVEL_WARNING);
    ScopedEnvironment number({{"FFPA_LOGGER_LEVEL", "3"}});
    CHECK(Handle().get(FFPA_POLICY_LOG_LEVEL) == FFPA_LOG_LEVEL_INFO);
  }
  SUBCASE("the accumulator from ffpa-attn's two switches") {
    ScopedEnvironment pv({{"ENABLE_FFPA_FORCE_PV_F16", "1"}});
    CHECK(Handle().get(FFPA_POLICY_ACCUMULATOR) == FFPA_ACCUMULATOR_PV_F16);
    ScopedEnvironment qk({{"ENABLE_FFPA_FORCE_PV_F16", "0"}, {"ENABLE_FFPA_FORCE_QK_F16", "1"}});
    CHECK(Handle().get(FFPA_POLICY_ACCUMULATOR) == FFPA_ACCUMULATOR_QK_F16);
    ScopedEnvironment named({{"ENABLE_FFPA_FORCE_QK_F16", nullptr}, {"FFPA_ACCUMULATOR", "f16"}});
    CHECK(Handle().get(FFPA_POLICY_ACCUMULATOR) == FFPA_ACCUMULATOR_F16);
  }
  SUBCASE("the historical and the corrected spelling, and MagiAttention's names") {
    ScopedEnvironment old({{"FFPA_SKIP_PERSISIT_TUNED_CONFIG", "1"}});
    CHECK(Handle().get(FFPA_POLICY_SKIP_PERSISTENT_TUNED_CONFIG) == 1);
    ScopedEnvironment both({{"FFPA_SKIP_PERSIST_TUNED_CONFIG", "1"}});
    CHECK(Handle().get(FFPA_POLICY_SKIP_PERSISTENT_TUNED_CONFIG) == 1);
    ScopedEnvironment magi({{"MAGI_ATTENTION_SDPA_BACKEND", "1"}, {"MAGI_ATTENTION_SANITY_CHECK", "1"}});
    Handle h;
    CHECK(h.get(FFPA_POLICY_REFERENCE_BACKEND) == 1);
    CHECK(h.get(FFPA_POLICY_SANITY_CHECK) == 1);
  }
  SUBCASE("strings and empty values") {
    ScopedEnvironment env({{"FFPA_TUNED_CONFIG_DIR", "/srv/tuned"}, {"FFPA_STAGES", ""}});
    Handle h;
    CHECK(h.get(FFPA_POLICY_STAGES) == 0);
    char dir[32] = {};
    REQUIRE_OK(ffpaGetPolicy(h, FFPA_POLICY_TUNED_CONFIG_DIR, dir, sizeof dir, nullptr));
    CHECK(std::string(dir) == "/srv/tuned");
  }
}

TEST_CASE("malformed or contradictory environment values fail handle creation, naming the variable") {
  const ffpaDeviceDesc_t device = describedH100();
  ffpaHandle_t h = reinterpret_cast<ffpaHandle_t>(0x1);
  SUBCASE("not a boolean") {
    ScopedEnvironment env({{"ENABLE_FFPA_PREFETCH_QKV", "maybe"}});
    CHECK_FAILS_WITH(ffpaCreateForDevice(&h, &device), FFPA_STATUS_BAD_PARAM_ENVIRONMENT,
                     "ENABLE_FFPA_PREFETCH_QKV=\"maybe\"", "0 or 1");
    CHECK(h == nullptr);
    // ffpaCreate reads the environment before looking for a device: same answer without a GPU.
    CHECK_FAILS_WITH(ffpaCreate(&h), FFPA_STATUS_BAD_PARAM_ENVIRONMENT, "ENABLE_FFPA_PREFETCH_QKV");
  }
  SUBCASE("out of range") {
    ScopedEnvironment env({{"FFPA_STAGES", "9"}});
    CHECK_FAILS_WITH(ffpaCreateForDevice(&h, &device), FFPA_STATUS_BAD_PARAM_ENVIRONMENT, "FFPA_STAGES",
                     "0 to 4");
  }
  SUBCASE("below the minimum of an int64 knob") {
    ScopedEnvironment env({{"FFPA_REFERENCE_CHUNK_BYTES", "100"}});
    CHECK_FAILS_WITH(ffpaCreateForDevice(&h, &device), FFPA_STATUS_BAD_PARAM_ENVIRONMENT,
                     "FFPA_REFERENCE_CHUNK_BYTES", "4096");
  }
  SUBCASE("an unknown name") {
    ScopedEnvironment env({{"FFPA_LOGGER_LEVEL", "loud"}});
    CHECK_FAILS_WITH(ffpaCreateForDevice(&h, &device), FFPA_STATUS_BAD_PARAM_ENVIRONMENT, "FFPA_LOGGER_LEVEL",
                     "debug");
  }
  SUBCASE("QK-F16 and PV-F16 are mutually exclusive") {
    ScopedEnvironment env({{"ENABLE_FFPA_FORCE_QK_F16", "1"}, {"ENABLE_FFPA_FORCE_PV_F16", "1"}});
    CHECK_FAILS_WITH(ffpaCreateForDevice(&h, &device), FFPA_STATUS_BAD_PARAM_EXCLUSIVE_OPTIONS,
                     "ENABLE_FFPA_FORCE_QK_F16", "ENABLE_FFPA_FORCE_PV_F16", "mutually exclusive");
  }
  SUBCASE("two spellings that disagree") {
    ScopedEnvironment env({{"FFPA_SKIP_PERSISIT_TUNED_CONFIG", "1"}, {"FFPA_SKIP_PERSIST_TUNED_CONFIG", "0"}});
    CHECK_FAILS_WITH(ffpaCreateForDevice(&h, &device), FFPA_STATUS_BAD_PARAM_ENVIRONMENT, "disagree");
  }
  SUBCASE("a named accumulator that contradicts a switch") {
    ScopedEnvironment env({{"FFPA_ACCUMULATOR", "f32"}, {"ENABLE_FFPA_FORCE_QK_F16", "1"}});
    CHECK_FAILS_WITH(ffpaCreateForDevice(&h, &device), FFPA_STATUS_BAD_PARAM_ENVIRONMENT, "FFPA_ACCUMULATOR",
                     "disagree");
  }
}

TEST_CASE("each knob reports where its value comes from") {
  ScopedEnvironment env({{"ENABLE_FFPA_SMEM_SWIZZLE_Q", "0"}, {"FFPA_TUNED_CONFIG_DIR", "/etc/ffpa"}});
  Handle h;
  ffpaPolicySource_t source = FFPA_POLICY_SOURCE_FORCE_INT32;
  REQUIRE_OK(ffpaGetPolicySource(h, FFPA_POLICY_STAGES, &source));
  CHECK(source == FFPA_POLICY_SOURCE_DEFAULT);
  REQUIRE_OK(ffpaGetPolicySource(h, FFPA_POLICY_SMEM_SWIZZLE_Q, &source));
  CHECK(source == FFPA_POLICY_SOURCE_ENVIRONMENT);
  REQUIRE_OK(ffpaGetPolicySource(h, FFPA_POLICY_TUNED_CONFIG_DIR, &source));
  CHECK(source == FFPA_POLICY_SOURCE_ENVIRONMENT);
  h.set<int32_t>(FFPA_POLICY_SMEM_SWIZZLE_Q, 0);  // same value, now from the setter
  REQUIRE_OK(ffpaGetPolicySource(h, FFPA_POLICY_SMEM_SWIZZLE_Q, &source));
  CHECK(source == FFPA_POLICY_SOURCE_SETTER);
  CHECK_FAILS_WITH(ffpaGetPolicySource(h, static_cast<ffpaPolicyKnob_t>(77), &source),
                   FFPA_STATUS_BAD_PARAM_OUT_OF_BOUND, "knob 77");
  CHECK_FAILS_WITH(ffpaGetPolicySource(h, FFPA_POLICY_STAGES, nullptr), FFPA_STATUS_BAD_PARAM_NULL_POINTER, "source");
}
