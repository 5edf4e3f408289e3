#include "core/plan_cache.h"

namespace ffpa {

PlanCache::PlanPtr PlanCache::findLocked(const PlanKey& key) {
  const auto found = index_.find(key);
  if (found == index_.end()) return nullptr;
  lru_.splice(lru_.begin(), lru_, found->second);
  return found->second->second;
}

PlanCache::PlanPtr PlanCache::insertLocked(const PlanKey& key, PlanPtr plan) {
  if (capacity_ == 0) return plan;
  if (PlanPtr raced = findLocked(key)) return raced;  // another thread planned it meanwhile
  lru_.emplace_front(key, plan);
  try {
    index_.emplace(key, lru_.begin());
  } catch (...) {
    lru_.pop_front();  // keep list and index in step when the index cannot grow
    throw;
  }
  evictLocked();
  return plan;
}

void PlanCache::replace(const PlanKey& key, PlanPtr plan) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (const auto found = index_.find(key); found != index_.end()) {
    found->second->second = std::move(plan);
    lru_.splice(lru_.begin(), lru_, found->second);
    return;
  }
  insertLocked(key, std::move(plan));
}

void PlanCache::evictLocked() {
  while (lru_.size() > capacity_) {
    index_.erase(lru_.back().first);
    lru_.pop_back();
    ++counters_.evictions;
  }
}

void PlanCache::setCapacity(size_t capacity) {
  std::lock_guard<std::mutex> lock(mutex_);
  capacity_ = capacity;
  evictLocked();
}

PlanCacheStats PlanCache::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  PlanCacheStats s = counters_;
  s.size = lru_.size();
  s.capacity = capacity_;
  return s;
}

void PlanCache::clear() {
  std::lock_guard<std::mutex> lock(mutex_);
  lru_.clear();
  index_.clear();
  counters_ = PlanCacheStats{};
}

}  // namespace ffpa
