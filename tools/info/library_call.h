// Calling libffpa from ffpa-info: a failing status becomes an exception that carries the status
// name and the library's detailed message, so main() reports every failure the same way.
#pragma once

#include <ffpa/ffpa.h>

#include <stdexcept>
#include <string>

namespace ffpa_info {

class LibraryCallError : public std::runtime_error {
 public:
  LibraryCallError(const char* call, ffpaStatus_t status);
  ffpaStatus_t status() const noexcept { return status_; }

 private:
  ffpaStatus_t status_;
};

// The calling thread's last detailed message (ffpaGetLastErrorString), whatever its length.
std::string lastErrorMessage();

// "FFPA_STATUS_...: <detailed message>", or just the name when the library left no message.
std::string describeFailure(ffpaStatus_t status);

// Throws LibraryCallError unless status is FFPA_STATUS_SUCCESS.
void check(ffpaStatus_t status, const char* call);

}  // namespace ffpa_info
