// "Which kernel serves this shape, and why": parses a problem given on the command line and prints
// the library's own explanation of its forward and backward plans.
#pragma once

#include <ffpa/ffpa.h>

#include <ostream>
#include <string>

namespace ffpa_info {

// The problem syntax, for --help.
const char* planSyntax();

// Throws std::invalid_argument for a malformed problem, LibraryCallError for a refused one.
void writePlans(std::ostream& out, ffpaHandle_t handle, const std::string& problem);

}  // namespace ffpa_info
