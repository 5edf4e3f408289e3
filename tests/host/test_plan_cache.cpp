// PlanKey and PlanCache: what the key distinguishes, LRU behaviour, concurrent getOrCreate.
#include "core/descriptors.h"
#include "core/plan_cache.h"

#include <doctest/doctest.h>

#include <atomic>
#include <thread>
#include <vector>

using namespace ffpa;

namespace {

DeviceInfo device(int32_t sm = 90) {
  DeviceInfo d;
  d.smVersion = sm;
  d.smCount = 132;
  d.sharedMemPerBlockOptin = 227 * 1024;
  return d;
}

AttentionProblem problem(int64_t seq = 128) {
  AttentionProblem p;
  p.batch = 1;
  p.headsQ = p.headsKv = 4;
  p.seqQ = p.seqKv = seq;
  p.headDimQk = p.headDimV = 64;
  p.q = p.k = p.v = p.o = {4 * seq * 64, seq * 64, 64, 1};
  return p;
}

std::shared_ptr<const Plan> fakePlan(const std::string& name) {
  auto plan = std::make_shared<Plan>();
  plan->kernel = name;
  return plan;
}

}  // namespace

TEST_CASE("the plan key separates everything that can change a plan, and nothing else") {
  const Policy policy;
  const PlanKey base = PlanKey::make(problem(), policy, device());
  CHECK(base == PlanKey::make(problem(), policy, device()));
  CHECK(base.hash() == PlanKey::make(problem(), policy, device()).hash());

  CHECK(base != PlanKey::make(problem(), policy, device(80)));
  CHECK(base != PlanKey::make(problem(129), policy, device()));
  AttentionProblem strided = problem();
  strided.q[2] = 128;
  CHECK(base != PlanKey::make(strided, policy, device()));
  AttentionProblem causal = problem();
  causal.causal = FFPA_CAUSAL_BOTTOM_RIGHT;
  CHECK(base != PlanKey::make(causal, policy, device()));
  AttentionProblem withLse = problem();
  withLse.hasLse = true;
  CHECK(base != PlanKey::make(withLse, policy, device()));
  AttentionProblem scaled = problem();
  scaled.scale = 0.7f;  // a launch argument
  CHECK(base == PlanKey::make(scaled, policy, device()));

  Policy knob;
  knob.setValue(FFPA_POLICY_SMEM_SWIZZLE_V, 0);
  CHECK(base != PlanKey::make(problem(), knob, device()));
  Policy dir;
  dir.setTunedConfigDir("/some/where");
  CHECK(base != PlanKey::make(problem(), dir, device()));
  Policy quiet;
  quiet.setValue(FFPA_POLICY_LOG_LEVEL, FFPA_LOG_LEVEL_OFF);
  quiet.setValue(FFPA_POLICY_PLAN_CACHE_CAPACITY, 3);
  CHECK(base == PlanKey::make(problem(), quiet, device()));
}

TEST_CASE("the cache returns the cached plan, evicts the least recently used, counts everything") {
  const Policy policy;
  PlanCache cache(2);
  int made = 0;
  const auto key = [&](int64_t seq) { return PlanKey::make(problem(seq), policy, device()); };
  const auto get = [&](int64_t seq) {
    return cache.getOrCreate(key(seq), [&] { ++made; return fakePlan(std::to_string(seq)); });
  };
  const auto a = get(1);
  CHECK(get(1).get() == a.get());
  CHECK(made == 1);
  get(2);
  get(1);  // 2 is now the least recent
  get(3);  // evicts 2
  CHECK(made == 3);
  CHECK(get(1).get() == a.get());
  get(2);
  CHECK(made == 4);
  PlanCacheStats s = cache.stats();
  CHECK(s.hits == 3);
  CHECK(s.misses == 4);
  CHECK(s.evictions == 2);
  CHECK(s.size == 2);
  cache.setCapacity(0);
  s = cache.stats();
  CHECK(s.size == 0);
  CHECK(s.evictions == 4);
  get(7);
  get(7);
  CHECK(cache.stats().size == 0);  // capacity 0 keeps nothing
}

TEST_CASE("concurrent getOrCreate agrees on one plan per key") {
  const Policy policy;
  PlanCache cache(64);
  constexpr int kThreads = 8;
  std::vector<std::vector<const Plan*>> seen(kThreads);
  std::atomic<int> made{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 1000; ++i) {
        const int64_t seq = i % 32;
        const PlanKey key = PlanKey::make(problem(seq), policy, device());
        auto plan = cache.getOrCreate(key, [&] { ++made; return fakePlan(std::to_string(seq)); });
        REQUIRE(plan->kernel == std::to_string(seq));
        if (i >= 900) seen[t].push_back(plan.get());  // late lookups: every key is cached by now
      }
    });
  }
  for (auto& thread : threads) thread.join();
  for (int t = 1; t < kThreads; ++t) CHECK(seen[t] == seen[0]);
  const PlanCacheStats s = cache.stats();
  CHECK(s.hits + s.misses == kThreads * 1000);
  CHECK(s.size == 32);
  CHECK(made >= 32);
}

TEST_CASE("copies of one layout share an element exactly when their shift is a reachable offset") {
  TensorLayout packed;  // [1, 8, 128, 64] slices of a [1, 128, 3, 8, 64] buffer
  const int64_t dims[4] = {1, 8, 128, 64};
  const int64_t strides[4] = {128 * 3 * 8 * 64, 64, 3 * 8 * 64, 1};
  packed = makeTensorLayout(FFPA_DATA_TYPE_FLOAT16, 4, dims, strides);
  CHECK(copiesShareAnElement(packed, 0));
  CHECK_FALSE(copiesShareAnElement(packed, 8 * 64));      // the next slice (dK after dQ)
  CHECK_FALSE(copiesShareAnElement(packed, -2 * 8 * 64)); // two slices back
  CHECK(copiesShareAnElement(packed, 3 * 8 * 64));        // one row later: same slice, rows overlap
  CHECK(copiesShareAnElement(packed, 5));                 // inside a row
  CHECK_FALSE(copiesShareAnElement(packed, 128 * 3 * 8 * 64));  // past the end
  const int64_t dense[4] = {2, 3, 4, 5};
  const TensorLayout contiguous = makeTensorLayout(FFPA_DATA_TYPE_FLOAT32, 4, dense, nullptr);
  for (int64_t shift = -200; shift <= 200; ++shift) {
    CHECK(copiesShareAnElement(contiguous, shift) == (shift > -120 && shift < 120));
  }
}
