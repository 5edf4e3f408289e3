// Many threads on one shared handle and on a handle each, with random shapes, policy changes,
// cache clears and a small cache: run under ThreadSanitizer in the sanitizer stage of the test
// suite, and under AddressSanitizer/LeakSanitizer for the create/destroy cycles.
#include "test_support.h"

#include <atomic>
#include <random>
#include <thread>

using namespace ffpa_test;

TEST_CASE("stress: threads share one handle and own one each while shapes and policies change") {
  Handle shared;
  shared.set<int32_t>(FFPA_POLICY_PLAN_CACHE_CAPACITY, 16);  // evictions under pressure
  constexpr int kThreads = 8;
  constexpr int kIterations = 150;
  std::atomic<int> failures{0};
  std::atomic<uint64_t> sharedLookups{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 random(1234 + t);
      Handle own;
      Attention attn(static_cast<ffpaCausalMode_t>(t % 3));
      for (int i = 0; i < kIterations; ++i) {
        const int64_t hkv = 1 + random() % 4;
        Problem p(i % 2 ? FFPA_DATA_TYPE_FLOAT16 : FFPA_DATA_TYPE_BFLOAT16, 1 + random() % 3,
                  hkv * (1 + random() % 3), hkv, 1 + random() % 300, 1 + random() % 300,
                  16 * (1 + random() % 64), 16 * (1 + random() % 64));
        size_t ownBytes = 0, sharedBytes = 0;
        if (p.forwardWorkspace(own, attn, &ownBytes) != FFPA_STATUS_SUCCESS) ++failures;
        if (p.backwardWorkspace(shared, attn, &sharedBytes) != FFPA_STATUS_SUCCESS) ++failures;
        sharedLookups += 1;
        char text[64];
        if (ffpaDescribeAttentionForwardPlan(shared, attn, p.q, p.k, p.v, p.o, nullptr, text, sizeof text,
                                             nullptr) != FFPA_STATUS_SUCCESS) {
          ++failures;
        }
        sharedLookups += 1;
        if (random() % 16 == 0) {
          const int32_t swizzle = random() % 2;
          if (ffpaSetPolicy(shared, FFPA_POLICY_SMEM_SWIZZLE_K, &swizzle, sizeof swizzle) != FFPA_STATUS_SUCCESS) {
            ++failures;
          }
        }
        if (random() % 64 == 0) {
          const int32_t capacity = 4 + random() % 32;
          if (ffpaSetPolicy(shared, FFPA_POLICY_PLAN_CACHE_CAPACITY, &capacity, sizeof capacity) !=
              FFPA_STATUS_SUCCESS) {
            ++failures;
          }
        }
        if (t == 0 && i % 50 == 49 && ffpaClearPlanCache(shared) != FFPA_STATUS_SUCCESS) ++failures;
      }
      const ffpaPlanCacheStats_t s = own.stats();
      if (s.hits + s.misses != kIterations || s.size > s.capacity) ++failures;
    });
  }
  for (std::thread& thread : threads) thread.join();
  CHECK(failures == 0);
  const ffpaPlanCacheStats_t s = shared.stats();
  CHECK(s.size <= s.capacity);
  CHECK(s.hits + s.misses <= sharedLookups.load());  // clears reset the counters
}

TEST_CASE("stress: create and destroy cycles leave nothing behind") {
  for (int cycle = 0; cycle < 300; ++cycle) {
    Handle h;
    Attention attn;
    Problem p(FFPA_DATA_TYPE_FLOAT16, 1, 4, 2, 64 + cycle % 7, 64, 128, 128);
    size_t bytes = 0;
    REQUIRE_OK(p.forwardWorkspace(h, attn, &bytes));
    REQUIRE_OK(p.backwardWorkspace(h, attn, &bytes));
  }
  // A failing create leaves nothing either.
  ffpaDeviceDesc_t bad = describedH100();
  bad.smCount = -1;
  for (int cycle = 0; cycle < 100; ++cycle) {
    ffpaHandle_t h = nullptr;
    CHECK(ffpaCreateForDevice(&h, &bad) == FFPA_STATUS_BAD_PARAM_OUT_OF_BOUND);
  }
}
