#include "library_call.h"

#include <algorithm>

namespace ffpa_info {

LibraryCallError::LibraryCallError(const char* call, ffpaStatus_t status)
    : std::runtime_error(std::string(call) + " failed with " + describeFailure(status)),
      status_(status) {}

std::string lastErrorMessage() {
  // The first call only measures: the function returns the full length whatever the buffer.
  const size_t length = ffpaGetLastErrorString(nullptr, 0);
  std::string message(length + 1, '\0');
  const size_t copied = ffpaGetLastErrorString(&message[0], message.size());
  message.resize(std::min(copied, length));
  return message;
}

std::string describeFailure(ffpaStatus_t status) {
  std::string text = ffpaGetErrorString(status);
  const std::string detail = lastErrorMessage();
  if (!detail.empty()) text += ": " + detail;
  return text;
}

void check(ffpaStatus_t status, const char* call) {
  if (status != FFPA_STATUS_SUCCESS) throw LibraryCallError(call, status);
}

}  // namespace ffpa_info
