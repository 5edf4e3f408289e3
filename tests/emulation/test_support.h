// Helpers of the emulator's tests: random 16-bit elements and their values.
#pragma once

#include "common/element.cuh"
#include "emulation/launch.h"

#include <cstdint>
#include <random>
#include <vector>

namespace emulation_test {

using ffpa::kernels::Bf16Tag;
using ffpa::kernels::HalfTag;

// The bits of `value` rounded to the element type.
template <class Tag>
uint16_t bitsOf(float value, Tag tag) {
  return static_cast<uint16_t>(ffpa::kernels::packPair(value, 0.0f, tag));
}

template <class Tag>
float valueOf(uint16_t bits, Tag tag) {
  return ffpa::kernels::unpackPair(bits, tag).x;
}

inline uint32_t pairOf(uint16_t low, uint16_t high) { return uint32_t{low} | uint32_t{high} << 16; }

// `count` elements uniform in [-range, range), rounded to the element type.
template <class Tag>
std::vector<uint16_t> randomElements(std::size_t count, Tag tag, std::mt19937& random,
                                     float range = 2.0f) {
  std::uniform_real_distribution<float> uniform(-range, range);
  std::vector<uint16_t> bits(count);
  for (auto& element : bits) element = bitsOf(uniform(random), tag);
  return bits;
}

}  // namespace emulation_test
