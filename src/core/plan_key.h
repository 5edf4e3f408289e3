// The key of the plan cache: everything that can change a plan, as a fixed array of integers
// (device, direction, types, dims, strides, mask, plan-relevant policies), so that a lookup
// allocates nothing and compares exactly.
#pragma once

#include "core/device.h"
#include "core/policy.h"
#include "core/problem.h"

#include <array>
#include <cstddef>
#include <cstdint>

namespace ffpa {

class PlanKey {
 public:
  static constexpr size_t kWords = 96;  // 81 in use: the problem, the device, the plan-affecting knobs

  static PlanKey make(const AttentionProblem& problem, const Policy& policy, const DeviceInfo& device);

  bool operator==(const PlanKey& other) const { return words_ == other.words_; }
  bool operator!=(const PlanKey& other) const { return !(*this == other); }
  size_t hash() const;

 private:
  void push(int64_t word);
  std::array<int64_t, kWords> words_{};
  size_t count_ = 0;
};

struct PlanKeyHash {
  size_t operator()(const PlanKey& key) const { return key.hash(); }
};

}  // namespace ffpa
