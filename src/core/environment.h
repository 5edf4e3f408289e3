// Policy values from environment variables, read when a handle is created.
//
// Names are those of ffpa-attn and MagiAttention (see each KnobSpec), so existing launch scripts
// keep working. An empty variable counts as unset; a malformed one is an error naming it.
#pragma once

#include "core/policy.h"

#include <optional>
#include <string>

namespace ffpa {

// Returns the value of a variable, or nullptr when unset (std::getenv's contract).
using EnvironmentLookup = const char* (*)(const char* name);

// std::getenv: the process environment.
const char* processEnvironment(const char* name);

// Parses the text of one variable for a numeric knob: booleans accept 0/1, true/false, on/off,
// yes/no; enumerations their names (case-insensitive) or numbers; integers decimal digits.
// nullopt when malformed or out of bounds.
std::optional<int64_t> parseKnobText(const KnobSpec& spec, const std::string& text);

// The defaults, overridden by every variable that is set. Throws ffpa::Error with
// FFPA_STATUS_BAD_PARAM_ENVIRONMENT (malformed or contradictory values) or
// FFPA_STATUS_BAD_PARAM_EXCLUSIVE_OPTIONS (ENABLE_FFPA_FORCE_QK_F16 and _PV_F16 both on).
Policy policyFromEnvironment(EnvironmentLookup lookup = processEnvironment);

}  // namespace ffpa
