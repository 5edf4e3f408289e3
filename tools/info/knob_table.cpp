#include "knob_table.h"

#include "library_call.h"

#include <cctype>
#include <sstream>
#include <string>

namespace ffpa_info {
namespace {

std::vector<std::string> splitWords(const char* text) {
  std::vector<std::string> words;
  std::istringstream in(text != nullptr ? text : "");
  for (std::string word; in >> word;) words.push_back(word);
  return words;
}

bool isNumeric(ffpaPolicyType_t type) { return type != FFPA_POLICY_TYPE_STRING; }

// "f32 (0), qk_f16 (1), ...": the names in valueNames belong to minValue, minValue + 1, ...
std::string enumValues(const ffpaPolicyInfo_t& info, const char* quote) {
  std::string text;
  int64_t value = info.minValue;
  for (const std::string& name : splitWords(info.valueNames)) {
    if (!text.empty()) text += ", ";
    text += quote + name + quote + " (" + std::to_string(value++) + ")";
  }
  return text;
}

// The value type and what it accepts; quote wraps value names (rst literals, or nothing).
std::string typeText(const ffpaPolicyInfo_t& info, const char* quote) {
  const std::string range = std::to_string(info.minValue) + " to " + std::to_string(info.maxValue);
  switch (info.type) {
    case FFPA_POLICY_TYPE_BOOL:
      return "bool, 0 or 1";
    case FFPA_POLICY_TYPE_INT32:
      return "int32, " + range;
    case FFPA_POLICY_TYPE_INT64:
      return "int64, " + range;
    case FFPA_POLICY_TYPE_ENUM: {
      const std::string names = enumValues(info, quote);
      return names.empty() ? "enum, " + range : "enum: " + names;
    }
    case FFPA_POLICY_TYPE_STRING:
      return "string, at most " + std::to_string(info.maxValue) + " bytes";
    default:  // a type newer than this program: still show what can be shown
      return "type " + std::to_string(static_cast<int64_t>(info.type)) + ", " + range;
  }
}

// The default as the library spells it, with the number when the spelling is a name ("f32 (0)").
std::string defaultText(const ffpaPolicyInfo_t& info, const char* quote) {
  const std::string spelled = info.defaultString != nullptr ? info.defaultString : "";
  if (!isNumeric(info.type)) return quote + (spelled.empty() ? "\"\"" : spelled) + quote;
  const std::string number = std::to_string(info.defaultValue);
  if (spelled.empty() || spelled == number) return quote + number + quote;
  return quote + spelled + quote + " (" + number + ")";
}

std::string environmentText(const ffpaPolicyInfo_t& info, const char* quote) {
  std::string text;
  for (const std::string& name : splitWords(info.environment)) {
    if (!text.empty()) text += ", ";
    text += quote + name + quote;
  }
  return text.empty() ? "none" : text;
}

// Description text as reStructuredText: characters that start inline markup are escaped, and so
// is a leading non-letter, which could otherwise open a list inside the table cell.
std::string rstEscaped(const char* text) {
  std::string escaped;
  for (const char* c = text != nullptr ? text : ""; *c != '\0'; ++c) {
    const bool markup = *c == '\\' || *c == '*' || *c == '_' || *c == '`' || *c == '|';
    const bool leading = escaped.empty() && !std::isalpha(static_cast<unsigned char>(*c));
    if (markup || leading) escaped += '\\';
    escaped += *c == '\n' ? ' ' : *c;
  }
  return escaped;
}

}  // namespace

std::vector<ffpaPolicyInfo_t> readPolicyInfos() {
  int32_t count = 0;
  check(ffpaGetPolicyKnobs(0, &count, nullptr), "ffpaGetPolicyKnobs");
  std::vector<ffpaPolicyKnob_t> knobs(static_cast<size_t>(count));
  check(ffpaGetPolicyKnobs(count, &count, knobs.data()), "ffpaGetPolicyKnobs");
  knobs.resize(static_cast<size_t>(count));

  std::vector<ffpaPolicyInfo_t> infos;
  for (ffpaPolicyKnob_t knob : knobs) {
    ffpaPolicyInfo_t info{};
    info.structSize = sizeof info;
    check(ffpaGetPolicyInfo(knob, &info), "ffpaGetPolicyInfo");
    infos.push_back(info);
  }
  return infos;
}

void writeKnobsText(std::ostream& out, const std::vector<ffpaPolicyInfo_t>& knobs) {
  out << "policy knobs (" << knobs.size() << "; set with ffpaSetPolicy, or through the environment "
      << "before ffpaCreate):\n";
  for (const ffpaPolicyInfo_t& info : knobs) {
    out << '\n'
        << info.name << '\n'
        << "  type         " << typeText(info, "") << '\n'
        << "  default      " << defaultText(info, "") << '\n'
        << "  environment  " << environmentText(info, "") << '\n'
        << "  " << info.description << '\n';
  }
}

void writeKnobsRst(std::ostream& out, const std::vector<ffpaPolicyInfo_t>& knobs) {
  out << ".. list-table::\n"
      << "   :header-rows: 1\n"
      << "   :widths: 26 22 10 20 22\n"
      << '\n'
      << "   * - Knob\n"
      << "     - Type and values\n"
      << "     - Default\n"
      << "     - Environment variables\n"
      << "     - Description\n";
  for (const ffpaPolicyInfo_t& info : knobs) {
    out << "   * - :c:enumerator:`" << info.name << "`\n"
        << "     - " << typeText(info, "``") << '\n'
        << "     - " << defaultText(info, "``") << '\n'
        << "     - " << environmentText(info, "``") << '\n'
        << "     - " << rstEscaped(info.description) << '\n';
  }
}

}  // namespace ffpa_info
