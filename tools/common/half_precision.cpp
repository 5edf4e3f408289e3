#include "common/half_precision.h"

#include <cstring>

namespace ffpa_tools {
namespace {

uint32_t float_bits(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  return bits;
}

float bits_float(uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, sizeof value);
  return value;
}

// Drops the `shift` low bits of `value`, rounding to nearest with ties to even.
uint32_t shift_right_rounded(uint32_t value, uint32_t shift) {
  const uint32_t kept = value >> shift;
  const uint32_t dropped = value & ((1u << shift) - 1u);
  const uint32_t halfway = 1u << (shift - 1u);
  return (dropped > halfway || (dropped == halfway && (kept & 1u))) ? kept + 1u : kept;
}

}  // namespace

uint16_t float_to_half_bits(float value) {
  const uint32_t bits = float_bits(value);
  const uint32_t sign = (bits >> 16) & 0x8000u;
  const uint32_t magnitude = bits & 0x7fffffffu;
  if (magnitude > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u);  // NaN
  // 65520 (0x477ff000) is halfway between the largest half, 65504, and 2^16: ties go to the even
  // neighbour 2^16, which overflows to infinity.
  if (magnitude >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);
  const uint32_t exponent = magnitude >> 23;
  if (exponent < 113) {
    // Below 2^-14 the result is subnormal: a multiple of 2^-24. Values up to 2^-25 round to 0.
    if (exponent < 102) return static_cast<uint16_t>(sign);
    const uint32_t significand = (magnitude & 0x7fffffu) | 0x800000u;
    // A carry out of the subnormal range yields 0x400, the encoding of the smallest normal.
    return static_cast<uint16_t>(sign | shift_right_rounded(significand, 126 - exponent));
  }
  // Normal: rebias the exponent from 127 to 15 and keep 10 of the 23 fraction bits. A carry out of
  // the fraction correctly increments the exponent.
  const uint32_t rebased = magnitude - ((127u - 15u) << 23);
  return static_cast<uint16_t>(sign | shift_right_rounded(rebased, 13));
}

float half_bits_to_float(uint16_t bits) {
  const uint32_t sign = static_cast<uint32_t>(bits & 0x8000u) << 16;
  const uint32_t exponent = (bits >> 10) & 0x1fu;
  const uint32_t fraction = bits & 0x3ffu;
  if (exponent == 0) {
    // Zero or subnormal: fraction * 2^-24, exact in float.
    const float magnitude = static_cast<float>(fraction) * (1.0f / 16777216.0f);
    return sign ? -magnitude : magnitude;
  }
  if (exponent == 31) return bits_float(sign | 0x7f800000u | (fraction << 13));  // inf, NaN
  return bits_float(sign | ((exponent + 127u - 15u) << 23) | (fraction << 13));
}

uint16_t float_to_bfloat16_bits(float value) {
  const uint32_t bits = float_bits(value);
  if ((bits & 0x7fffffffu) > 0x7f800000u) {
    return static_cast<uint16_t>((bits >> 16) | 0x40u);  // NaN, kept quiet
  }
  // bfloat16 is the upper half of a float: round the lower half away, ties to even. Overflow
  // carries into the exponent and gives infinity, as it should.
  const uint32_t rounding_bias = 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>((bits + rounding_bias) >> 16);
}

float bfloat16_bits_to_float(uint16_t bits) {
  return bits_float(static_cast<uint32_t>(bits) << 16);
}

}  // namespace ffpa_tools
