// A thread-safe LRU cache of plans. Planning runs outside the lock, so a slow plan never blocks
// lookups of other problems; two threads missing the same key at once both plan, and the first
// to finish is kept.
#pragma once

#include "core/plan.h"
#include "core/plan_key.h"

#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <utility>

namespace ffpa {

struct PlanCacheStats {
  uint64_t hits = 0;
  uint64_t misses = 0;
  uint64_t evictions = 0;
  uint64_t size = 0;
  uint64_t capacity = 0;
};

class PlanCache {
 public:
  using PlanPtr = std::shared_ptr<const Plan>;

  explicit PlanCache(size_t capacity) : capacity_(capacity) {}

  // The cached plan for `key`, or the one `make()` returns (then cached). A template, not a
  // std::function, so that a hit allocates nothing.
  template <class MakePlan>
  PlanPtr getOrCreate(const PlanKey& key, MakePlan&& make);

  // Caches `plan` for `key`, replacing the plan there (a re-planned one, e.g. tuned).
  void replace(const PlanKey& key, PlanPtr plan);

  void setCapacity(size_t capacity);
  PlanCacheStats stats() const;
  void clear();  // drops the plans and resets the counters

 private:
  using Entry = std::pair<PlanKey, PlanPtr>;
  PlanPtr findLocked(const PlanKey& key);
  PlanPtr insertLocked(const PlanKey& key, PlanPtr plan);
  void evictLocked();

  mutable std::mutex mutex_;
  size_t capacity_;
  std::list<Entry> lru_;  // most recently used first
  std::unordered_map<PlanKey, std::list<Entry>::iterator, PlanKeyHash> index_;
  PlanCacheStats counters_;
};

template <class MakePlan>
PlanCache::PlanPtr PlanCache::getOrCreate(const PlanKey& key, MakePlan&& make) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (PlanPtr hit = findLocked(key)) {
      ++counters_.hits;
      return hit;
    }
    ++counters_.misses;
  }
  PlanPtr fresh = make();
  std::lock_guard<std::mutex> lock(mutex_);
  return insertLocked(key, std::move(fresh));
}

}  // namespace ffpa
