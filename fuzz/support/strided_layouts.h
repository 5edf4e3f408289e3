// Strides of the layouts real programs use: the dimensions packed in some order (row-major, BNHD,
// the heads of a fused QKV buffer), each stride padded by a few elements. Random strides are
// almost never valid, so targets build most of theirs this way and mutate from there.
#pragma once

#include "support/byte_reader.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <vector>

namespace ffpa_fuzz {

// `innermostFirst` lists the dimensions from the smallest stride up; each stride is the span of
// the ones before it plus `padding(dimension)` elements. Products saturate at INT64_MAX (which
// the library must refuse) instead of overflowing.
template <class Padding>
std::vector<int64_t> stridesInOrder(const std::vector<int64_t>& dims, const std::vector<size_t>& innermostFirst,
                                    Padding&& padding) {
  constexpr auto kMax = static_cast<unsigned __int128>(std::numeric_limits<int64_t>::max());
  std::vector<int64_t> strides(dims.size());
  unsigned __int128 running = 1;
  for (const size_t i : innermostFirst) {
    const unsigned __int128 stride = std::min(running + padding(i), kMax);
    strides[i] = static_cast<int64_t>(stride);
    running = std::min(stride * static_cast<uint64_t>(std::max<int64_t>(dims[i], 1)), kMax);
  }
  return strides;
}

// A random order of the dimensions, padded by 0 to 3 elements each.
inline std::vector<int64_t> takePermutedStrides(ByteReader& in, const std::vector<int64_t>& dims) {
  std::vector<size_t> order(dims.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  for (size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[in.takeIndex(i)]);
  return stridesInOrder(dims, order, [&](size_t) { return in.takeIndex(4); });
}

// Arbitrary strides: small ones (negative and zero included) or any 64-bit value.
inline std::vector<int64_t> takeRawStrides(ByteReader& in, size_t count) {
  std::vector<int64_t> strides(count);
  for (int64_t& s : strides) s = in.takeBool() ? static_cast<int64_t>(in.take<int8_t>()) : in.take<int64_t>();
  return strides;
}

}  // namespace ffpa_fuzz
