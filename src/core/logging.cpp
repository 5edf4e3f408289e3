#include "core/logging.h"

#include "core/environment.h"
#include "core/policy.h"

#include <cstdio>
#include <mutex>
#include <unordered_set>

namespace ffpa {
namespace {

// Beyond this many distinct debug texts the once-only memory starts over rather than growing
// without bound in a long-lived process.
constexpr size_t kMaxRememberedDebugMessages = 1 << 16;

struct LogSink {
  std::mutex mutex;
  ffpaLogCallback_t callback = nullptr;
  void* userData = nullptr;
  std::unordered_set<std::string> debugSeen;
};

LogSink& sink() {
  static LogSink instance;
  return instance;
}

const char* levelName(ffpaLogLevel_t level) {
  switch (level) {
    case FFPA_LOG_LEVEL_ERROR: return "ERROR";
    case FFPA_LOG_LEVEL_WARNING: return "WARNING";
    case FFPA_LOG_LEVEL_INFO: return "INFO";
    case FFPA_LOG_LEVEL_DEBUG: return "DEBUG";
    default: return "LOG";
  }
}

}  // namespace

void setLogCallback(ffpaLogCallback_t callback, void* userData) {
  LogSink& s = sink();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.callback = callback;
  s.userData = userData;
}

void logMessage(ffpaLogLevel_t threshold, ffpaLogLevel_t level, const std::string& message) {
  if (!logEnabled(threshold, level)) return;
  LogSink& s = sink();
  // The callback is called under the lock: once ffpaSetLogCallback returns, the previous
  // callback is never called again, so its user data may be freed.
  std::lock_guard<std::mutex> lock(s.mutex);
  if (level == FFPA_LOG_LEVEL_DEBUG) {
    if (s.debugSeen.size() >= kMaxRememberedDebugMessages) s.debugSeen.clear();
    if (!s.debugSeen.insert(message).second) return;
  }
  if (s.callback != nullptr) {
    s.callback(level, message.c_str(), s.userData);
  } else {
    std::fprintf(stderr, "[ffpa][%s] %s\n", levelName(level), message.c_str());
  }
}

ffpaLogLevel_t environmentLogLevel() {
  const KnobSpec& spec = knobSpec(FFPA_POLICY_LOG_LEVEL);
  const char* text = std::getenv("FFPA_LOGGER_LEVEL");
  if (text == nullptr || *text == '\0') return static_cast<ffpaLogLevel_t>(spec.defaultValue);
  const auto value = parseKnobText(spec, text);
  return static_cast<ffpaLogLevel_t>(value ? *value : spec.defaultValue);
}

}  // namespace ffpa
