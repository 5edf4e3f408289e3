#include "core/plan_key.h"

#include "core/error.h"

namespace ffpa {

void PlanKey::push(int64_t word) {
  // The layout below is fixed; running out of words is a bug in this file, not a user error.
  require(count_ < kWords, FFPA_STATUS_INTERNAL_ERROR, "plan key overflow");
  words_[count_++] = word;
}

PlanKey PlanKey::make(const AttentionProblem& p, const Policy& policy, const DeviceInfo& device) {
  PlanKey key;
  key.push(device.ordinal);
  key.push(device.smVersion);
  key.push(device.smCount);
  key.push(device.sharedMemPerBlockOptin);
  key.push(device.sharedMemPerSm);  // the CTAs per SM some defaults keep (the mma.sync forward's tiles)

  key.push(static_cast<int64_t>(p.direction));
  key.push(p.dtype);
  key.push(p.causal);
  key.push(p.slices != nullptr ? 1 : 0);
  key.push(p.keyLengths != nullptr ? 1 : 0);
  key.push(p.hasLse ? 1 : 0);
  for (const int64_t dim : {p.batch, p.headsQ, p.headsKv, p.seqQ, p.seqKv, p.headDimQk, p.headDimV}) {
    key.push(dim);
  }
  for (const Strides* strides : {&p.q, &p.k, &p.v, &p.o, &p.lse, &p.dO, &p.dq, &p.dk, &p.dv}) {
    for (const int64_t stride : *strides) key.push(stride);
  }

  // Planners may adapt a knob left at its default (to fit a device), never one that was set: which
  // knobs are at their defaults is part of the key, one bit each.
  int64_t atDefault = 0;
  int bit = 0;
  for (const KnobSpec& spec : knobSpecs()) {
    if (!spec.affectsPlan) continue;
    key.push(spec.type == FFPA_POLICY_TYPE_STRING ? policy.tunedConfigDirId() : policy.value(spec.knob));
    if (policy.source(spec.knob) == FFPA_POLICY_SOURCE_DEFAULT) atDefault |= int64_t{1} << bit;
    ++bit;
  }
  key.push(atDefault);
  return key;
}

size_t PlanKey::hash() const {
  // FNV-1a over the words, then a final avalanche (splitmix64) for the low bits buckets use.
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < count_; ++i) {
    h ^= static_cast<uint64_t>(words_[i]);
    h *= 0x100000001b3ull;
  }
  h ^= h >> 30;
  h *= 0xbf58476d1ce4e5b9ull;
  h ^= h >> 27;
  h *= 0x94d049bb133111ebull;
  h ^= h >> 31;
  return static_cast<size_t>(h);
}

}  // namespace ffpa
