// Logging: the callback with its user data, per-handle levels, debug messages once per process.
#include "test_support.h"

#include <mutex>

using namespace ffpa_test;

namespace {

struct Captured {
  std::mutex mutex;
  std::vector<std::pair<ffpaLogLevel_t, std::string>> messages;

  size_t count(ffpaLogLevel_t level, const std::string& fragment) {
    std::lock_guard<std::mutex> lock(mutex);
    size_t n = 0;
    for (const auto& [l, text] : messages) n += (l == level && text.find(fragment) != std::string::npos);
    return n;
  }
};

void capture(ffpaLogLevel_t level, const char* message, void* userData) {
  auto* captured = static_cast<Captured*>(userData);
  std::lock_guard<std::mutex> lock(captured->mutex);
  captured->messages.emplace_back(level, message);
}

// Restores the default sink when the test ends, even on failure.
struct CallbackScope {
  explicit CallbackScope(Captured* captured) { REQUIRE_OK(ffpaSetLogCallback(capture, captured)); }
  ~CallbackScope() { ffpaSetLogCallback(nullptr, nullptr); }
};

}  // namespace

TEST_CASE("log messages reach the callback with its user data, filtered by the handle's level") {
  Captured captured;
  CallbackScope scope(&captured);
  Handle h;
  Attention attn;
  // A shape no other test uses, so its debug lines have not been emitted in this process yet.
  Problem p(FFPA_DATA_TYPE_FLOAT16, 1, 3, 1, 77, 91, 48, 40);
  size_t bytes = 0;

  h.set<int32_t>(FFPA_POLICY_LOG_LEVEL, FFPA_LOG_LEVEL_WARNING);
  REQUIRE_OK(p.forwardWorkspace(h, attn, &bytes));
  CHECK(captured.count(FFPA_LOG_LEVEL_INFO, "Nq=77") == 0);  // INFO is below WARNING

  h.set<int32_t>(FFPA_POLICY_LOG_LEVEL, FFPA_LOG_LEVEL_DEBUG);
  h.set<int32_t>(FFPA_POLICY_PLAN_CACHE_CAPACITY, 0);  // plan on every call
  REQUIRE_OK(p.forwardWorkspace(h, attn, &bytes));
  REQUIRE_OK(p.forwardWorkspace(h, attn, &bytes));
  CHECK(captured.count(FFPA_LOG_LEVEL_INFO, "plan: forward fp16 B=1 Hq=3 Hkv=1 Nq=77") == 2);
  CHECK(captured.count(FFPA_LOG_LEVEL_INFO, "reference.cublaslt.forward") == 2);
  // Debug lines: once per process, however often the plan is made.
  CHECK(captured.count(FFPA_LOG_LEVEL_DEBUG, "serves forward fp16 B=1 Hq=3 Hkv=1 Nq=77") == 1);
}

TEST_CASE("rejected arguments are logged as info with the status; level OFF silences a handle") {
  Captured captured;
  CallbackScope scope(&captured);
  Handle h;
  h.set<int32_t>(FFPA_POLICY_LOG_LEVEL, FFPA_LOG_LEVEL_INFO);
  const int32_t bad = 9;
  CHECK(ffpaSetPolicy(h, FFPA_POLICY_STAGES, &bad, sizeof bad) == FFPA_STATUS_BAD_PARAM_OUT_OF_BOUND);
  CHECK(captured.count(FFPA_LOG_LEVEL_INFO, "FFPA_STATUS_BAD_PARAM_OUT_OF_BOUND in ffpaSetPolicy") == 1);
  h.set<int32_t>(FFPA_POLICY_LOG_LEVEL, FFPA_LOG_LEVEL_OFF);
  CHECK(ffpaSetPolicy(h, FFPA_POLICY_STAGES, &bad, sizeof bad) == FFPA_STATUS_BAD_PARAM_OUT_OF_BOUND);
  CHECK(captured.count(FFPA_LOG_LEVEL_INFO, "in ffpaSetPolicy") == 1);
}

TEST_CASE("after ffpaSetLogCallback(NULL) the old callback is never called again") {
  Captured captured;
  {
    CallbackScope scope(&captured);
  }
  Handle h;
  h.set<int32_t>(FFPA_POLICY_LOG_LEVEL, FFPA_LOG_LEVEL_DEBUG);
  Problem p(FFPA_DATA_TYPE_FLOAT16, 1, 5, 1, 33, 33, 24, 24);
  size_t bytes = 0;
  REQUIRE_OK(p.forwardWorkspace(h, Attention(), &bytes));
  std::lock_guard<std::mutex> lock(captured.mutex);
  CHECK(captured.messages.empty());
}
