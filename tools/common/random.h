// A small, fast and fully specified pseudo-random generator (SplitMix64). Unlike the standard
// library's distributions it gives the same numbers with every compiler, so a failure reported
// with its starting value can be replayed anywhere.
#pragma once

#include <cstdint>

namespace ffpa_tools {

class Random {
 public:
  explicit Random(uint64_t start) : state_(start) {}

  uint64_t next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }

  // Uniform in [low, high).
  double uniform(double low, double high) {
    const double unit = static_cast<double>(next() >> 11) * (1.0 / 9007199254740992.0);  // 2^-53
    return low + (high - low) * unit;
  }

  // Uniform integer in [low, high], both included.
  int64_t range(int64_t low, int64_t high) {
    const uint64_t width = static_cast<uint64_t>(high - low) + 1u;
    return low + static_cast<int64_t>(next() % width);
  }

 private:
  uint64_t state_;
};

}  // namespace ffpa_tools
