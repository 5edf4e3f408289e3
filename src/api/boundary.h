// The C boundary: every public function runs its body through guarded(), which maps exceptions to
// statuses, stores the message for ffpaGetLastErrorString() and logs the failure. Nothing thrown
// inside libffpa crosses into the caller.
#pragma once

#include "core/error.h"
#include "core/logging.h"

#include <ffpa/ffpa.h>

#include <new>
#include <optional>
#include <string>

namespace ffpa {

// The log level of the handle the current call works on, once the call has resolved it; failures
// before that are logged at the FFPA_LOGGER_LEVEL level.
void setCallLogLevel(ffpaLogLevel_t level);
std::optional<ffpaLogLevel_t> takeCallLogLevel();

// Failed GPU work and internal errors are logged as errors; everything else (rejected arguments,
// unsupported requests, no device) is fully reported by the status and logged as info.
void reportFailure(const char* function, ffpaStatus_t status, const char* message) noexcept;

// Copies `text` into a caller's buffer the snprintf way: truncated, NUL-terminated when `size` is
// not 0, and returns the whole length so the caller can ask again with a larger buffer.
size_t copyText(const std::string& text, char* buffer, size_t size) noexcept;

template <class Body>
ffpaStatus_t guarded(const char* function, Body&& body) noexcept {
  takeCallLogLevel();  // forget the level of a previous call on this thread
  try {
    body();
    return FFPA_STATUS_SUCCESS;
  } catch (const Error& e) {
    reportFailure(function, e.status(), e.what());
    return e.status();
  } catch (const std::bad_alloc&) {
    reportFailure(function, FFPA_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED, "out of host memory");
    return FFPA_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED;
  } catch (const std::exception& e) {
    reportFailure(function, FFPA_STATUS_INTERNAL_ERROR, e.what());
    return FFPA_STATUS_INTERNAL_ERROR;
  } catch (...) {
    reportFailure(function, FFPA_STATUS_INTERNAL_ERROR, "unknown exception");
    return FFPA_STATUS_INTERNAL_ERROR;
  }
}

}  // namespace ffpa
