// The effective policy of a handle: each knob's current value and where it comes from (default,
// environment variable, setter).
#pragma once

#include <ffpa/ffpa.h>

#include <ostream>

namespace ffpa_info {

// Throws LibraryCallError.
void writeEffectivePolicy(std::ostream& out, ffpaHandle_t handle);

}  // namespace ffpa_info
