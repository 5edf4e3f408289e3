#include "api/boundary.h"

#include <algorithm>
#include <cstring>
#include <string>

namespace ffpa {
namespace {
thread_local std::optional<ffpaLogLevel_t> tCallLogLevel;
}  // namespace

void setCallLogLevel(ffpaLogLevel_t level) { tCallLogLevel = level; }

std::optional<ffpaLogLevel_t> takeCallLogLevel() {
  const std::optional<ffpaLogLevel_t> level = tCallLogLevel;
  tCallLogLevel.reset();
  return level;
}

size_t copyText(const std::string& text, char* buffer, size_t size) noexcept {
  if (buffer != nullptr && size > 0) {
    const size_t copied = std::min(text.size(), size - 1);
    std::memcpy(buffer, text.data(), copied);
    buffer[copied] = '\0';
  }
  return text.size();
}

void reportFailure(const char* function, ffpaStatus_t status, const char* message) noexcept {
  try {
    std::string text = std::string(function) + ": " + message;
    const ffpaStatus_t category = FFPA_STATUS_CATEGORY(status);
    const bool systemFailure =
        category == FFPA_STATUS_INTERNAL_ERROR || category == FFPA_STATUS_EXECUTION_FAILED;
    const ffpaLogLevel_t threshold = takeCallLogLevel().value_or(environmentLogLevel());
    logMessage(threshold, systemFailure ? FFPA_LOG_LEVEL_ERROR : FFPA_LOG_LEVEL_INFO,
               std::string(statusName(status)) + " in " + text);
    setLastErrorMessage(std::move(text));
  } catch (...) {
    // Out of memory while reporting: the status still reaches the caller.
  }
}

}  // namespace ffpa
