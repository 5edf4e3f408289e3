// The "kernel: " and "config: " lines of a plan description (ffpaDescribeAttention*Plan), for the
// programs that report which kernel serves a problem.
#pragma once

#include <sstream>
#include <string>

namespace ffpa_tools {

struct PlanText {
  std::string kernel, config;  // empty when the description has no such line
};

inline PlanText parsePlanText(const std::string& text) {
  PlanText plan;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("kernel: ", 0) == 0) plan.kernel = line.substr(8);
    if (line.rfind("config: ", 0) == 0) plan.config = line.substr(8);
  }
  return plan;
}

}  // namespace ffpa_tools
