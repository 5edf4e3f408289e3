// Errors inside libffpa: an exception carrying a public status and a message that names the
// argument and the allowed values. The C boundary (src/api/boundary.h) turns it into the status
// the caller sees and the thread-local message ffpaGetLastErrorString() returns.
#pragma once

#include <ffpa/ffpa.h>

#include <exception>
#include <sstream>
#include <string>
#include <utility>

namespace ffpa {

class Error : public std::exception {
 public:
  Error(ffpaStatus_t status, std::string message) : status_(status), message_(std::move(message)) {}
  ffpaStatus_t status() const noexcept { return status_; }
  const char* what() const noexcept override { return message_.c_str(); }

 private:
  ffpaStatus_t status_;
  std::string message_;
};

// Joins any streamable values into one string: cat("got ", 7, ", allowed 0 to 4").
template <class... Parts>
std::string cat(const Parts&... parts) {
  std::ostringstream out;
  (out << ... << parts);
  return out.str();
}

[[noreturn]] inline void fail(ffpaStatus_t status, std::string message) {
  throw Error(status, std::move(message));
}

template <class... Parts>
inline void require(bool condition, ffpaStatus_t status, const Parts&... message) {
  if (!condition) fail(status, cat(message...));
}

// Argument checks shared by every entry point.
inline void requireNotNull(const void* pointer, const char* argument) {
  if (pointer == nullptr) fail(FFPA_STATUS_BAD_PARAM_NULL_POINTER, cat(argument, " is NULL"));
}

// The thread-local message of the last failing call (see ffpaGetLastErrorString).
void setLastErrorMessage(std::string message);
const std::string& lastErrorMessage();

// The static name of a status ("FFPA_STATUS_BAD_PARAM_NULL_POINTER", "FFPA_STATUS_UNKNOWN").
const char* statusName(ffpaStatus_t status);

}  // namespace ffpa
