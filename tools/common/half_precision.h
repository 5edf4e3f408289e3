// Host-side conversions between float and the two 16-bit formats libffpa reads and writes, so the
// programs that check the library need no CUDA header for them. Float to 16 bits rounds to
// nearest, ties to even, as the GPU's own conversions do; NaN stays NaN and overflow gives
// infinity.
#pragma once

#include <cstdint>

namespace ffpa_tools {

uint16_t float_to_half_bits(float value);
float half_bits_to_float(uint16_t bits);

uint16_t float_to_bfloat16_bits(float value);
float bfloat16_bits_to_float(uint16_t bits);

}  // namespace ffpa_tools
