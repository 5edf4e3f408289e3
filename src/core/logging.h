// Process-wide log sink with per-handle levels.
//
// Which messages are produced is the caller's decision (each handle has its own level, from
// FFPA_POLICY_LOG_LEVEL); where they go is process-wide (stderr, or ffpaSetLogCallback).
// Debug messages are emitted once per process per distinct text, so a per-call message such as
// "plan cache hit: ..." shows up the first time only.
#pragma once

#include <ffpa/ffpa.h>

#include <string>

namespace ffpa {

void setLogCallback(ffpaLogCallback_t callback, void* userData);

// Emits `message` when `level` is enabled by `threshold` (the level of the handle concerned).
void logMessage(ffpaLogLevel_t threshold, ffpaLogLevel_t level, const std::string& message);

inline bool logEnabled(ffpaLogLevel_t threshold, ffpaLogLevel_t level) {
  return level != FFPA_LOG_LEVEL_OFF && level <= threshold;
}

// The level of messages not tied to a handle: FFPA_LOGGER_LEVEL, or WARNING when it is unset or
// malformed (a malformed value is reported by ffpaCreate, not here).
ffpaLogLevel_t environmentLogLevel();

}  // namespace ffpa
