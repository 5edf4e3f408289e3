// The command-line tools' strict reading of a number: the integer a text spells out entirely
// (decimal, optional sign, no spaces), or nothing.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>

namespace ffpa_tools {

inline std::optional<int64_t> wholeInteger(const std::string& text) {
  size_t used = 0;
  long long value = 0;
  try {
    value = std::stoll(text, &used);
  } catch (const std::exception&) {
    return std::nullopt;
  }
  if (used != text.size()) return std::nullopt;
  return static_cast<int64_t>(value);
}

}  // namespace ffpa_tools
