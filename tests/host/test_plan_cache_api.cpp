// The plan cache through the public API: what is a hit, LRU eviction, capacity, clearing, and
// many threads planning on one handle at once.
#include "plan_text.h"
#include "test_support.h"

#include <atomic>
#include <memory>
#include <thread>

using namespace ffpa_test;

namespace {

// A distinct problem per sequence length.
size_t plan(const Handle& h, const Attention& attn, int64_t seq) {
  Problem p(FFPA_DATA_TYPE_FLOAT16, 1, 2, 2, seq, seq, 64, 64);
  size_t bytes = 0;
  REQUIRE_OK(p.forwardWorkspace(h, attn, &bytes));
  return bytes;
}

}  // namespace

TEST_CASE("a repeated problem is a hit; a new shape, policy or layout is a miss") {
  Handle h;
  Attention attn;
  ffpaPlanCacheStats_t s = h.stats();
  CHECK(s.hits == 0);
  CHECK(s.misses == 0);
  CHECK(s.capacity == 1024);

  plan(h, attn, 100);
  plan(h, attn, 100);
  s = h.stats();
  CHECK(s.misses == 1);
  CHECK(s.hits == 1);
  CHECK(s.size == 1);

  plan(h, attn, 101);  // another shape
  CHECK(h.stats().misses == 2);

  const float scale = 0.3f;  // the scale is an argument of the launch, not of the plan
  REQUIRE_OK(ffpaSetAttentionAttribute(attn, FFPA_ATTENTION_SOFTMAX_SCALE, &scale, sizeof scale));
  plan(h, attn, 100);
  CHECK(h.stats().hits == 2);

  h.set<int32_t>(FFPA_POLICY_LOG_LEVEL, FFPA_LOG_LEVEL_ERROR);  // does not change plans
  plan(h, attn, 100);
  CHECK(h.stats().hits == 3);

  h.set<int32_t>(FFPA_POLICY_PREFETCH_QKV, 0);  // a kernel knob does
  plan(h, attn, 100);
  CHECK(h.stats().misses == 3);

  const int32_t causal = FFPA_CAUSAL_TOP_LEFT;
  REQUIRE_OK(ffpaSetAttentionAttribute(attn, FFPA_ATTENTION_CAUSAL_MODE, &causal, sizeof causal));
  plan(h, attn, 100);
  CHECK(h.stats().misses == 4);

  // The same dims with BNHD strides are another plan.
  Tensor q(FFPA_DATA_TYPE_FLOAT16, {1, 2, 100, 64}, {100 * 2 * 64, 64, 2 * 64, 1});
  Problem p(FFPA_DATA_TYPE_FLOAT16, 1, 2, 2, 100, 100, 64, 64);
  size_t bytes = 0;
  REQUIRE_OK(ffpaGetAttentionForwardWorkspaceSize(h, attn, q, p.k, p.v, p.o, p.lse, &bytes));
  CHECK(h.stats().misses == 5);
  CHECK(h.stats().evictions == 0);
}

TEST_CASE("the least recently used plan is evicted first") {
  Handle h;
  Attention attn;
  h.set<int32_t>(FFPA_POLICY_PLAN_CACHE_CAPACITY, 2);
  plan(h, attn, 10);  // A
  plan(h, attn, 20);  // B
  plan(h, attn, 10);  // A again: B is now least recent
  plan(h, attn, 30);  // C evicts B
  ffpaPlanCacheStats_t s = h.stats();
  CHECK(s.size == 2);
  CHECK(s.evictions == 1);
  CHECK(s.capacity == 2);
  const uint64_t misses = s.misses;
  plan(h, attn, 10);  // A still cached
  CHECK(h.stats().misses == misses);
  plan(h, attn, 20);  // B was evicted
  CHECK(h.stats().misses == misses + 1);

  h.set<int32_t>(FFPA_POLICY_PLAN_CACHE_CAPACITY, 1);  // shrinking evicts at once
  CHECK(h.stats().size == 1);
}

TEST_CASE("capacity 0 caches nothing; clearing drops plans and counters") {
  Handle h;
  Attention attn;
  h.set<int32_t>(FFPA_POLICY_PLAN_CACHE_CAPACITY, 0);
  plan(h, attn, 10);
  plan(h, attn, 10);
  CHECK(h.stats().misses == 2);
  CHECK(h.stats().size == 0);

  h.set<int32_t>(FFPA_POLICY_PLAN_CACHE_CAPACITY, 8);
  plan(h, attn, 10);
  plan(h, attn, 10);
  CHECK(h.stats().size == 1);
  REQUIRE_OK(ffpaClearPlanCache(h));
  const ffpaPlanCacheStats_t s = h.stats();
  CHECK(s.size == 0);
  CHECK(s.hits == 0);
  CHECK(s.misses == 0);
  CHECK(s.capacity == 8);

  ffpaPlanCacheStats_t small{};
  small.structSize = 8;
  CHECK_FAILS_WITH(ffpaGetPlanCacheStats(h, &small), FFPA_STATUS_BAD_PARAM_SIZE_INSUFFICIENT, "structSize");
  CHECK_FAILS_WITH(ffpaGetPlanCacheStats(h, nullptr), FFPA_STATUS_BAD_PARAM_NULL_POINTER, "stats");
  CHECK_FAILS_WITH(ffpaClearPlanCache(nullptr), FFPA_STATUS_BAD_PARAM_NULL_POINTER, "handle");
}

TEST_CASE("many threads plan on one handle while its capacity and policies change") {
  Handle h;
  Attention attn;
  h.set<int32_t>(FFPA_POLICY_PLAN_CACHE_CAPACITY, 8);
  constexpr int kThreads = 8;
  constexpr int kLookups = 300;
  std::atomic<int> failures{0};
  std::atomic<uint64_t> total{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kLookups; ++i) {
        Problem p(FFPA_DATA_TYPE_FLOAT16, 1, 2, 2, 16 + (i * 7 + t) % 16, 64, 64, 64);
        size_t bytes = 0;
        if (p.forwardWorkspace(h, attn, &bytes) != FFPA_STATUS_SUCCESS) ++failures;
        ++total;
        if (t == 0 && i % 50 == 0) {  // one thread keeps changing a plan-relevant knob
          const int32_t value = (i / 50) % 2;
          if (ffpaSetPolicy(h, FFPA_POLICY_PREFETCH_QKV, &value, sizeof value) != FFPA_STATUS_SUCCESS) ++failures;
        }
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  CHECK(failures == 0);
  const ffpaPlanCacheStats_t s = h.stats();
  CHECK(s.hits + s.misses == total.load());
  CHECK(s.size <= 8);
  CHECK(s.misses >= 16);  // at least every distinct problem once
  CHECK(s.evictions + s.size <= s.misses);
}

TEST_CASE("a plan explains itself: problem, kernel, config, workspace") {
  Handle h(describedA100());
  Attention attn(FFPA_CAUSAL_TOP_LEFT);
  Problem p(FFPA_DATA_TYPE_BFLOAT16, 1, 8, 2, 300, 300, 576, 512);
  size_t length = 0;
  REQUIRE_OK(ffpaDescribeAttentionForwardPlan(h, attn, p.q, p.k, p.v, p.o, p.lse, nullptr, 0, &length));
  std::string text(length, '\0');
  REQUIRE_OK(ffpaDescribeAttentionForwardPlan(h, attn, p.q, p.k, p.v, p.o, p.lse, text.data(), length + 1, nullptr));
  CHECK(text.find("problem: forward bf16 B=1 Hq=8 Hkv=2 Nq=300") == 0);
  CHECK(text.find("\nkernel: sm80.forward.bf16.d512.acc_f32\n") != std::string::npos);
  CHECK(text.find("\nconfig: Br=64 Bc=64 warps=4x2") != std::string::npos);
  size_t bytes = 0;
  REQUIRE_OK(p.forwardWorkspace(h, attn, &bytes));
  CHECK(text.find("\nworkspace: " + std::to_string(bytes) + " bytes\n") != std::string::npos);
  CHECK(h.stats().hits >= 2);  // the description and the query share the cached plan

  char small[10];
  REQUIRE_OK(ffpaDescribeAttentionBackwardPlan(h, attn, p.q, p.k, p.v, p.o, p.dO, p.lse, p.dq, p.dk, p.dv, small,
                                               sizeof small, &length));
  CHECK(length > sizeof small);
  CHECK(std::string(small) == "problem: ");
  CHECK_FAILS_WITH(ffpaDescribeAttentionBackwardPlan(h, attn, p.q, p.k, p.v, p.o, p.dO, nullptr, p.dq, p.dk, p.dv,
                                                     nullptr, 0, nullptr),
                   FFPA_STATUS_BAD_PARAM_NULL_POINTER, "lseDesc");
}
