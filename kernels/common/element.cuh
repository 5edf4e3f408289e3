// Conversions between the 16-bit element types and fp32, on packed pairs (one 32-bit register
// holds two elements, low half first, as mma fragments and 32-bit memory accesses expect).
#pragma once

#include "common/platform.cuh"

#include <cstdint>

namespace ffpa::kernels {

#ifndef FFPA_EMULATE

FFPA_DEVICE uint32_t packPair(float low, float high, HalfTag) {
  const __half2 pair = __floats2half2_rn(low, high);
  return *reinterpret_cast<const uint32_t*>(&pair);
}

FFPA_DEVICE uint32_t packPair(float low, float high, Bf16Tag) {
  const __nv_bfloat162 pair = __floats2bfloat162_rn(low, high);
  return *reinterpret_cast<const uint32_t*>(&pair);
}

FFPA_DEVICE float2 unpackPair(uint32_t bits, HalfTag) {
  return __half22float2(*reinterpret_cast<const __half2*>(&bits));
}

FFPA_DEVICE float2 unpackPair(uint32_t bits, Bf16Tag) {
  return __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&bits));
}

// Multiplies both fp16 halves of a register by `factor` (for fp16 accumulators).
FFPA_DEVICE uint32_t scalePair(uint32_t bits, float factor) {
  const __half2 scaled = __hmul2(*reinterpret_cast<const __half2*>(&bits), __float2half2_rn(factor));
  return *reinterpret_cast<const uint32_t*>(&scaled);
}

#endif  // !FFPA_EMULATE

}  // namespace ffpa::kernels
