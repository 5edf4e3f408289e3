// Context parallelism through the public API on a described device: the objects made for
// descriptions, their shards, the ring plans of the forward and backward (steps, blocks, the
// kernels serving them, the workspace), and the arguments refused.
#include "plan_text.h"
#include "test_support.h"

using namespace ffpa_test;

namespace {

class Ring {
 public:
  Ring(ffpaHandle_t h, int32_t ranks, int32_t rank, ffpaSharding_t sharding) {
    REQUIRE_OK(ffpaCreateContextParallelForDescription(h, &cp_, ranks, rank, sharding));
  }
  ~Ring() { ffpaDestroyContextParallel(cp_); }
  Ring(const Ring&) = delete;
  Ring& operator=(const Ring&) = delete;
  operator ffpaContextParallel_t() const { return cp_; }

 private:
  ffpaContextParallel_t cp_ = nullptr;
};

int count(const std::string& text, const std::string& part) {
  int n = 0;
  for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
  return n;
}

}  // namespace

TEST_CASE("context parallel api: objects for descriptions, their facts and shards") {
  Handle h;
  Ring ring(h, 4, 1, FFPA_SHARDING_ZIGZAG);
  int32_t ranks = 0, rank = -1;
  ffpaSharding_t sharding = FFPA_SHARDING_CONTIGUOUS;
  REQUIRE_OK(ffpaGetContextParallelInfo(ring, &ranks, &rank, &sharding));
  CHECK(ranks == 4);
  CHECK(rank == 1);
  CHECK(sharding == FFPA_SHARDING_ZIGZAG);
  REQUIRE_OK(ffpaGetContextParallelInfo(ring, nullptr, nullptr, nullptr));

  int64_t ranges[4] = {};
  int32_t n = 0;
  REQUIRE_OK(ffpaGetContextParallelShard(ring, 1024, ranges, &n));
  CHECK(n == 2);  // chunks 1 and 6 of 8 chunks of 512 tokens
  CHECK(ranges[0] == 512);
  CHECK(ranges[1] == 1024);
  CHECK(ranges[2] == 3072);
  CHECK(ranges[3] == 3584);
  CHECK_FAILS_WITH(ffpaGetContextParallelShard(ring, 1023, ranges, &n), FFPA_STATUS_BAD_PARAM_SHAPE_MISMATCH,
                   "localLength is 1023", "must be even");
  CHECK_FAILS_WITH(ffpaGetContextParallelShard(ring, 0, ranges, &n), FFPA_STATUS_BAD_PARAM_OUT_OF_BOUND,
                   "localLength is 0");
  CHECK_FAILS_WITH(ffpaGetContextParallelShard(ring, 1024, nullptr, &n), FFPA_STATUS_BAD_PARAM_NULL_POINTER, "ranges");

  Ring contiguous(h, 4, 3, FFPA_SHARDING_CONTIGUOUS);
  REQUIRE_OK(ffpaGetContextParallelShard(contiguous, 1000, ranges, &n));
  CHECK(n == 1);
  CHECK(ranges[0] == 3000);
  CHECK(ranges[1] == 4000);
}

TEST_CASE("context parallel api: creation refuses bad arguments with the reason") {
  Handle h;
  ffpaContextParallel_t cp = reinterpret_cast<ffpaContextParallel_t>(&h);
  CHECK_FAILS_WITH(ffpaCreateContextParallelForDescription(h, &cp, 0, 0, FFPA_SHARDING_ZIGZAG),
                   FFPA_STATUS_BAD_PARAM_OUT_OF_BOUND, "ranks is 0", "1 to 65536");
  CHECK(cp == nullptr);
  CHECK_FAILS_WITH(ffpaCreateContextParallelForDescription(h, &cp, 4, 4, FFPA_SHARDING_ZIGZAG),
                   FFPA_STATUS_BAD_PARAM_OUT_OF_BOUND, "rank is 4", "0 to ranks - 1 (3)");
  CHECK_FAILS_WITH(ffpaCreateContextParallelForDescription(h, &cp, 4, 0, static_cast<ffpaSharding_t>(7)),
                   FFPA_STATUS_BAD_PARAM_OUT_OF_BOUND, "sharding is 7", "FFPA_SHARDING_ZIGZAG (1)");
  CHECK_FAILS_WITH(ffpaCreateContextParallelForDescription(h, nullptr, 4, 0, FFPA_SHARDING_ZIGZAG),
                   FFPA_STATUS_BAD_PARAM_NULL_POINTER, "cp");
  CHECK_FAILS_WITH(ffpaCreateContextParallelForDescription(nullptr, &cp, 4, 0, FFPA_SHARDING_ZIGZAG),
                   FFPA_STATUS_BAD_PARAM_NULL_POINTER);
  // A real one needs a communicator, and a handle that executes.
  CHECK_FAILS_WITH(ffpaCreateContextParallel(h, &cp, nullptr, FFPA_SHARDING_ZIGZAG),
                   FFPA_STATUS_BAD_PARAM_NULL_POINTER, "comm");
  CHECK_FAILS_WITH(ffpaCreateContextParallel(h, &cp, reinterpret_cast<struct ncclComm*>(&h), FFPA_SHARDING_ZIGZAG),
                   FFPA_STATUS_NOT_INITIALIZED_NO_DEVICE);
  CHECK(cp == nullptr);
  CHECK(ffpaDestroyContextParallel(nullptr) == FFPA_STATUS_SUCCESS);
  Attention attn;
  CHECK_FAILS_WITH(ffpaSetAttentionDescriptorContextParallel(attn, reinterpret_cast<ffpaContextParallel_t>(&h)),
                   FFPA_STATUS_BAD_PARAM_INVALID_HANDLE, "not a live context-parallel object");
}

TEST_CASE("context parallel api: a causal zigzag ring plans two blocks on its own step, one on the others") {
  Handle h;
  h.set<int32_t>(FFPA_POLICY_HOPPER_KERNELS, 0);  // the mma.sync plans, whatever the build's architectures
  Problem p(FFPA_DATA_TYPE_BFLOAT16, 1, 8, 8, 1024, 1024, 512, 512);  // the local shards
  Attention attn(FFPA_CAUSAL_BOTTOM_RIGHT);
  Ring ring(h, 4, 1, FFPA_SHARDING_ZIGZAG);
  REQUIRE_OK(ffpaSetAttentionDescriptorContextParallel(attn, ring));
  const Described fwd = describeForward(h, attn, p.q, p.k, p.v, p.o, p.lse);
  REQUIRE(fwd.status == FFPA_STATUS_SUCCESS);
  const std::string& t = fwd.text;
  CHECK_MESSAGE(has(t, "context parallel: rank 1 of 4, zigzag sharding, 4 ring steps"), t);
  // Step 0, the rank's own block: chunk 1 against itself (causal), chunk 6 against both (causal,
  // aligned bottom-right). Step 1 holds rank 0 (chunks 0 and 7): both chunks see chunk 0.
  // Steps 2 and 3 hold ranks 3 and 2: only chunk 6 sees them, whole.
  CHECK(has(t, "step 0: K/V of rank 1\n  queries [0, 512) keys [0, 512) causal: "));
  CHECK(has(t, "  queries [512, 1024) keys [0, 1024) causal: "));
  CHECK(has(t, "step 1: K/V of rank 0\n  queries [0, 1024) keys [0, 512) full: "));
  CHECK(has(t, "step 2: K/V of rank 3\n  queries [512, 1024) keys [0, 1024) full: "));
  CHECK(has(t, "step 3: K/V of rank 2\n  queries [512, 1024) keys [0, 1024) full: "));
  CHECK(count(t, "  queries [") == 5);
  CHECK(has(t, "sm80.forward"));  // each block on a fast kernel

  size_t ringBytes = 0, plainBytes = 0;
  REQUIRE_OK(p.forwardWorkspace(h, attn, &ringBytes));
  Attention plain(FFPA_CAUSAL_BOTTOM_RIGHT);
  REQUIRE_OK(p.forwardWorkspace(h, plain, &plainBytes));
  // Two K/V blocks, a partial O and the fp32 running O at least.
  const size_t kv = 2 * 8 * 1024 * 512 * 2;
  const size_t o = 8 * 1024 * 512;
  CHECK(ringBytes >= plainBytes);
  CHECK(ringBytes >= 2 * kv + o * 2 + o * 4);
  CHECK(has(t, "workspace: " + std::to_string(ringBytes) + " bytes"));

  const Described bwd = describeBackward(h, attn, p.q, p.k, p.v, p.o, p.dO, p.lse, p.dq, p.dk, p.dv);
  REQUIRE_MESSAGE(bwd.status == FFPA_STATUS_SUCCESS, bwd.text);
  CHECK(has(bwd.text, "step 1: K/V of rank 0\n  queries [0, 1024) keys [0, 512) full: "));
  size_t backwardBytes = 0;
  REQUIRE_OK(p.backwardWorkspace(h, attn, &backwardBytes));
  CHECK(backwardBytes >= 2 * kv + 3 * kv * 2);  // K/V ring, fp32 dK/dV partial and its two sums

  // Detached, the descriptor plans a plain call again.
  REQUIRE_OK(ffpaSetAttentionDescriptorContextParallel(attn, nullptr));
  CHECK_FALSE(has(describeForward(h, attn, p.q, p.k, p.v, p.o, p.lse).text, "context parallel"));
}

TEST_CASE("context parallel api: contiguous shards, no mask, and the shapes a ring refuses") {
  Handle h;
  Attention attn;
  Ring ring(h, 3, 2, FFPA_SHARDING_CONTIGUOUS);
  REQUIRE_OK(ffpaSetAttentionDescriptorContextParallel(attn, ring));
  // Without a mask every step is one block over everything, also with Nq != Nkv.
  Problem cross(FFPA_DATA_TYPE_FLOAT16, 2, 8, 2, 100, 300, 576, 512);
  const Described d = describeForward(h, attn, cross.q, cross.k, cross.v, cross.o, cross.lse);
  REQUIRE_MESSAGE(d.status == FFPA_STATUS_SUCCESS, d.text);
  CHECK(count(d.text, "  queries [0, 100) keys [0, 300) full: ") == 3);
  CHECK(has(d.text, "step 1: K/V of rank 1\n"));

  // A causal mask shards Q and K/V alike.
  Attention causal(FFPA_CAUSAL_TOP_LEFT);
  REQUIRE_OK(ffpaSetAttentionDescriptorContextParallel(causal, ring));
  size_t bytes = 0;
  CHECK_FAILS_WITH(cross.forwardWorkspace(h, causal, &bytes), FFPA_STATUS_BAD_PARAM_SHAPE_MISMATCH,
                   "as many local queries as keys (Nq = 100, Nkv = 300)");
  // Contiguous causal: the last rank sees every earlier block whole, its own causally.
  Problem same(FFPA_DATA_TYPE_FLOAT16, 1, 4, 4, 256, 256, 512, 512);
  const Described c = describeForward(h, causal, same.q, same.k, same.v, same.o, same.lse);
  CHECK(has(c.text, "step 0: K/V of rank 2\n  queries [0, 256) keys [0, 256) causal: "));
  CHECK(has(c.text, "step 1: K/V of rank 1\n  queries [0, 256) keys [0, 256) full: "));
  Ring first(h, 3, 0, FFPA_SHARDING_CONTIGUOUS);
  REQUIRE_OK(ffpaSetAttentionDescriptorContextParallel(causal, first));
  CHECK(count(describeForward(h, causal, same.q, same.k, same.v, same.o, same.lse).text, "nothing seen") == 2);

  // Zigzag needs two chunks of equal length per rank.
  Ring zigzag(h, 3, 0, FFPA_SHARDING_ZIGZAG);
  REQUIRE_OK(ffpaSetAttentionDescriptorContextParallel(causal, zigzag));
  Problem odd(FFPA_DATA_TYPE_FLOAT16, 1, 4, 4, 255, 255, 512, 512);
  CHECK_FAILS_WITH(odd.forwardWorkspace(h, causal, &bytes), FFPA_STATUS_BAD_PARAM_SHAPE_MISMATCH, "must be even");
}

TEST_CASE("context parallel api: slices mask the whole sequence, cut into one sliced call per step") {
  Handle h;
  h.set<int32_t>(FFPA_POLICY_HOPPER_KERNELS, 0);  // the mma.sync plans, whatever the build's architectures
  Problem p(FFPA_DATA_TYPE_BFLOAT16, 1, 8, 8, 256, 256, 512, 512);  // 2 ranks of 256 tokens
  Attention attn;
  Ring ring(h, 2, 0, FFPA_SHARDING_ZIGZAG);  // rank 0: global chunks [0, 128) and [384, 512)
  REQUIRE_OK(ffpaSetAttentionDescriptorContextParallel(attn, ring));
  ffpaAttentionSlices_t slices = nullptr;
  REQUIRE_OK(ffpaCreateAttentionSlices(h, &slices));
  // Two causal documents of the whole sequence, [0, 200) and [200, 512): past one rank's rows.
  const int32_t documents[] = {0, 200, 512};
  REQUIRE_OK(ffpaSetAttentionSlicesFromOffsets(slices, 2, documents, nullptr, FFPA_SLICE_MASK_CAUSAL));
  REQUIRE_OK(ffpaSetAttentionDescriptorSlices(attn, slices));
  const Described fwd = describeForward(h, attn, p.q, p.k, p.v, p.o, p.lse);
  REQUIRE_MESSAGE(fwd.status == FFPA_STATUS_SUCCESS, fwd.text);
  // Step 0: each chunk against itself; step 1 (chunks 1 and 2 of rank 1): chunk 3's rows see
  // document 1's keys [200, 384), local keys [72, 256).
  CHECK_MESSAGE(has(fwd.text, "step 0: K/V of rank 0\n  queries [0, 256) keys [0, 256) 2 slices: sm80.forward"),
                fwd.text);
  CHECK(has(fwd.text, "step 1: K/V of rank 1\n  queries [128, 256) keys [72, 256) 2 slices: sm80.forward"));
  const Described bwd = describeBackward(h, attn, p.q, p.k, p.v, p.o, p.dO, p.lse, p.dq, p.dk, p.dv);
  REQUIRE_MESSAGE(bwd.status == FFPA_STATUS_SUCCESS, bwd.text);
  CHECK(has(bwd.text, "step 1: K/V of rank 1\n  queries [128, 256) keys [72, 256) 2 slices: "));
  size_t ringBytes = 0, plainBytes = 0;
  REQUIRE_OK(p.forwardWorkspace(h, attn, &ringBytes));
  Attention plain;
  REQUIRE_OK(p.forwardWorkspace(h, plain, &plainBytes));
  CHECK(ringBytes > plainBytes);

  // New slices on the same shapes give a new ring plan: documents inside each rank's chunks
  // leave rank 1's block unseen.
  const int32_t chunks[] = {0, 128, 384, 512};
  REQUIRE_OK(ffpaSetAttentionSlicesFromOffsets(slices, 3, chunks, nullptr, FFPA_SLICE_MASK_FULL));
  REQUIRE_OK(ffpaSetAttentionDescriptorSlices(attn, slices));
  const Described local = describeForward(h, attn, p.q, p.k, p.v, p.o, p.lse);
  CHECK_MESSAGE(has(local.text, "step 0: K/V of rank 0\n  queries [0, 256) keys [0, 256) 2 slices: "), local.text);
  CHECK(has(local.text, "step 1: K/V of rank 1, nothing seen\n"));

  // More lists than the object keeps ring plans of: the first comes back planned alike.
  for (int32_t end = 300; end < 320; ++end) {
    const int32_t other[] = {0, 100, end};
    REQUIRE_OK(ffpaSetAttentionSlicesFromOffsets(slices, 2, other, nullptr, FFPA_SLICE_MASK_CAUSAL));
    REQUIRE_OK(ffpaSetAttentionDescriptorSlices(attn, slices));
    REQUIRE(describeForward(h, attn, p.q, p.k, p.v, p.o, p.lse).status == FFPA_STATUS_SUCCESS);
  }
  REQUIRE_OK(ffpaSetAttentionSlicesFromOffsets(slices, 3, chunks, nullptr, FFPA_SLICE_MASK_FULL));
  REQUIRE_OK(ffpaSetAttentionDescriptorSlices(attn, slices));
  CHECK(describeForward(h, attn, p.q, p.k, p.v, p.o, p.lse).text == local.text);

  // The slices may reach past the local rows, not past the whole sequence.
  const int32_t tooLong[] = {0, 200, 513};
  REQUIRE_OK(ffpaSetAttentionSlicesFromOffsets(slices, 2, tooLong, nullptr, FFPA_SLICE_MASK_CAUSAL));
  REQUIRE_OK(ffpaSetAttentionDescriptorSlices(attn, slices));
  size_t bytes = 0;
  CHECK_FAILS_WITH(p.forwardWorkspace(h, attn, &bytes), FFPA_STATUS_BAD_PARAM_SHAPE_MISMATCH,
                   "reach query row 512 but qDesc has Nq = 256 rows on each of 2 context-parallel ranks");
  // A causal mode with slices is refused as in a plain call.
  REQUIRE_OK(ffpaSetAttentionDescriptorSlices(attn, nullptr));
  Attention causal(FFPA_CAUSAL_BOTTOM_RIGHT);
  REQUIRE_OK(ffpaSetAttentionSlicesFromOffsets(slices, 2, documents, nullptr, FFPA_SLICE_MASK_CAUSAL));
  REQUIRE_OK(ffpaSetAttentionDescriptorContextParallel(causal, ring));
  REQUIRE_OK(ffpaSetAttentionDescriptorSlices(causal, slices));
  CHECK_FAILS_WITH(p.forwardWorkspace(h, causal, &bytes), FFPA_STATUS_BAD_PARAM_EXCLUSIVE_OPTIONS,
                   "the slices are the mask");
  ffpaDestroyAttentionSlices(slices);
}

TEST_CASE("context parallel api: the descriptor keeps the object; description objects do not execute") {
  Handle h;
  Attention attn(FFPA_CAUSAL_BOTTOM_RIGHT);
  ffpaContextParallel_t cp = nullptr;
  REQUIRE_OK(ffpaCreateContextParallelForDescription(h, &cp, 2, 0, FFPA_SHARDING_ZIGZAG));
  REQUIRE_OK(ffpaSetAttentionDescriptorContextParallel(attn, cp));
  REQUIRE_OK(ffpaDestroyContextParallel(cp));
  Problem p(FFPA_DATA_TYPE_BFLOAT16, 1, 2, 2, 64, 64, 128, 128);
  const Described d = describeForward(h, attn, p.q, p.k, p.v, p.o, p.lse);
  CHECK_MESSAGE(has(d.text, "context parallel: rank 0 of 2"), d.text);
  size_t bytes = 0;
  REQUIRE_OK(p.forwardWorkspace(h, attn, &bytes));
  const uintptr_t base = uintptr_t{1} << 40;
  const auto at = [&](uintptr_t i) { return reinterpret_cast<void*>(base + (i << 32)); };
  CHECK_FAILS_WITH(ffpaAttentionForward(h, attn, p.q, at(0), p.k, at(1), p.v, at(2), p.o, at(3), p.lse,
                                        static_cast<float*>(at(4)), at(5), bytes),
                   FFPA_STATUS_NOT_INITIALIZED_NO_DEVICE);
}
