// The policy knobs of the loaded library (ffpaGetPolicyKnobs + ffpaGetPolicyInfo), rendered as
// plain text for people and as a reStructuredText list-table for the documentation.
#pragma once

#include <ffpa/ffpa.h>

#include <ostream>
#include <vector>

namespace ffpa_info {

// Every knob the library knows, in the order of their values. Throws LibraryCallError.
std::vector<ffpaPolicyInfo_t> readPolicyInfos();

void writeKnobsText(std::ostream& out, const std::vector<ffpaPolicyInfo_t>& knobs);
void writeKnobsRst(std::ostream& out, const std::vector<ffpaPolicyInfo_t>& knobs);

}  // namespace ffpa_info
