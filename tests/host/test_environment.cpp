// Parsing of environment values, independent of the process environment.
#include "core/environment.h"
#include "core/error.h"

#include <doctest/doctest.h>

#include <map>
#include <string>

using namespace ffpa;

namespace {

std::map<std::string, std::string>* gFake = nullptr;

const char* fakeLookup(const char* name) {
  const auto found = gFake->find(name);
  return found == gFake->end() ? nullptr : found->second.c_str();
}

Policy fromFake(std::map<std::string, std::string> values) {
  gFake = &values;
  Policy policy = policyFromEnvironment(fakeLookup);
  gFake = nullptr;
  return policy;
}

}  // namespace

TEST_CASE("knob text parsing by type") {
  const KnobSpec& flag = knobSpec(FFPA_POLICY_PREFETCH_QKV);
  CHECK(parseKnobText(flag, "1") == 1);
  CHECK(parseKnobText(flag, "False") == 0);
  CHECK(parseKnobText(flag, "YES") == 1);
  CHECK_FALSE(parseKnobText(flag, "2").has_value());
  CHECK_FALSE(parseKnobText(flag, "1x").has_value());
  const KnobSpec& level = knobSpec(FFPA_POLICY_LOG_LEVEL);
  CHECK(parseKnobText(level, "Info") == FFPA_LOG_LEVEL_INFO);
  CHECK(parseKnobText(level, "critical") == FFPA_LOG_LEVEL_ERROR);
  CHECK(parseKnobText(level, "0") == FFPA_LOG_LEVEL_OFF);
  CHECK_FALSE(parseKnobText(level, "5").has_value());
  const KnobSpec& bytes = knobSpec(FFPA_POLICY_REFERENCE_CHUNK_BYTES);
  CHECK(parseKnobText(bytes, "1048576") == 1048576);
  CHECK_FALSE(parseKnobText(bytes, "99999999999999999999").has_value());
  CHECK_FALSE(parseKnobText(bytes, "-1").has_value());
}

TEST_CASE("a fake environment sets knobs without touching the process environment") {
  const Policy p = fromFake({{"ENABLE_FFPA_REGISTERS_PIPE_KV", "1"}, {"FFPA_AUTOTUNE", "on"},
                             {"FFPA_PLAN_CACHE_CAPACITY", "17"}, {"FFPA_TUNED_CONFIG_DIR", "/x"}});
  CHECK(p.value(FFPA_POLICY_REGISTERS_PIPE_KV) == 1);
  CHECK(p.value(FFPA_POLICY_AUTOTUNE) == 1);
  CHECK(p.value(FFPA_POLICY_PLAN_CACHE_CAPACITY) == 17);
  CHECK(p.tunedConfigDir() == "/x");
  CHECK(p.tunedConfigDirId() != Policy().tunedConfigDirId());
  CHECK(fromFake({{"FFPA_TUNED_CONFIG_DIR", "/x"}}).tunedConfigDirId() == p.tunedConfigDirId());
}

TEST_CASE("the error for a malformed value quotes it and lists what is accepted") {
  try {
    fromFake({{"FFPA_AUTOTUNE_MODE", "fastest"}});
    FAIL("accepted a malformed value");
  } catch (const Error& e) {
    CHECK(e.status() == FFPA_STATUS_BAD_PARAM_ENVIRONMENT);
    const std::string message = e.what();
    CHECK(message.find("FFPA_AUTOTUNE_MODE=\"fastest\"") != std::string::npos);
    CHECK(message.find("fast/max") != std::string::npos);
  }
}
