// Attention slices through the public API, on a described device: the list object, its
// attachment to attention descriptors, and what the planner does with a sliced problem.
#include "plan_text.h"
#include "test_support.h"

using namespace ffpa_test;

namespace {

class Slices {
 public:
  explicit Slices(ffpaHandle_t h) { REQUIRE_OK(ffpaCreateAttentionSlices(h, &slices_)); }
  ~Slices() { ffpaDestroyAttentionSlices(slices_); }
  Slices(const Slices&) = delete;
  Slices& operator=(const Slices&) = delete;
  operator ffpaAttentionSlices_t() const { return slices_; }
  ffpaAttentionSlices_t release() {
    ffpaAttentionSlices_t s = slices_;
    slices_ = nullptr;
    return s;
  }

 private:
  ffpaAttentionSlices_t slices_ = nullptr;
};

// A packed batch of three sequences (5, 11 and 16 tokens), token-major: [T, H, D] memory.
struct PackedProblem {
  static constexpr int64_t kTokens = 32, kHeads = 4, kDim = 512;
  Tensor q{FFPA_DATA_TYPE_BFLOAT16, {1, kHeads, kTokens, kDim}, {kTokens * kHeads * kDim, kDim, kHeads * kDim, 1}};
  Tensor k{FFPA_DATA_TYPE_BFLOAT16, {1, kHeads, kTokens, kDim}, {kTokens * kHeads * kDim, kDim, kHeads * kDim, 1}};
  Tensor v{FFPA_DATA_TYPE_BFLOAT16, {1, kHeads, kTokens, kDim}, {kTokens * kHeads * kDim, kDim, kHeads * kDim, 1}};
  Tensor o{FFPA_DATA_TYPE_BFLOAT16, {1, kHeads, kTokens, kDim}, {kTokens * kHeads * kDim, kDim, kHeads * kDim, 1}};
  Tensor lse{FFPA_DATA_TYPE_FLOAT32, {1, kHeads, kTokens}, {kTokens * kHeads, 1, kHeads}};
  static constexpr int32_t kOffsets[] = {0, 5, 16, 32};

  Described describe(const Handle& h, ffpaAttentionDescriptor_t attn) const {
    return describeForward(h, attn, q, k, v, o, lse);
  }
};

}  // namespace

TEST_CASE("slices api: create, set, read back, destroy") {
  Handle h;
  Slices slices(h);
  int32_t count = -1;
  CHECK_FAILS_WITH(ffpaGetAttentionSlicesInfo(slices, &count, nullptr, nullptr, nullptr),
                   FFPA_STATUS_BAD_PARAM_NOT_FINALIZED, "slices was never set");
  REQUIRE_OK(ffpaSetAttentionSlicesFromOffsets(slices, 3, PackedProblem::kOffsets, nullptr, FFPA_SLICE_MASK_CAUSAL));
  int64_t queryExtent = 0, keyExtent = 0, pairs = 0;
  REQUIRE_OK(ffpaGetAttentionSlicesInfo(slices, &count, &queryExtent, &keyExtent, &pairs));
  CHECK(count == 3);
  CHECK(queryExtent == 32);
  CHECK(keyExtent == 32);
  CHECK(pairs == 5 * 6 / 2 + 11 * 12 / 2 + 16 * 17 / 2);
  REQUIRE_OK(ffpaGetAttentionSlicesInfo(slices, nullptr, nullptr, nullptr, nullptr));

  // A failed set keeps the previous slices.
  const int32_t q[] = {0, 8, 0, 8};
  const int32_t k[] = {0, 8, 4, 12};
  CHECK_FAILS_WITH(ffpaSetAttentionSlices(slices, 2, q, k, nullptr), FFPA_STATUS_BAD_PARAM,
                   "slice 0 (queries [0, 8), keys [0, 8), full) and slice 1", "key 4");
  REQUIRE_OK(ffpaGetAttentionSlicesInfo(slices, &count, nullptr, nullptr, nullptr));
  CHECK(count == 3);
  const int32_t masks[] = {FFPA_SLICE_MASK_CAUSAL, FFPA_SLICE_MASK_INVERSE_CAUSAL};
  const int32_t kShifted[] = {0, 8, 1, 8};
  const int32_t qShifted[] = {0, 8, 0, 7};
  REQUIRE_OK(ffpaSetAttentionSlices(slices, 2, qShifted, kShifted, masks));
  REQUIRE_OK(ffpaGetAttentionSlicesInfo(slices, &count, nullptr, nullptr, &pairs));
  CHECK(count == 2);
  CHECK(pairs == 64);

  CHECK_FAILS_WITH(ffpaCreateAttentionSlices(h, nullptr), FFPA_STATUS_BAD_PARAM_NULL_POINTER, "slices");
  ffpaAttentionSlices_t none = reinterpret_cast<ffpaAttentionSlices_t>(&count);
  CHECK_FAILS_WITH(ffpaCreateAttentionSlices(nullptr, &none), FFPA_STATUS_BAD_PARAM_NULL_POINTER, "handle");
  CHECK(none == nullptr);
  CHECK_FAILS_WITH(ffpaSetAttentionSlices(nullptr, 2, q, k, nullptr), FFPA_STATUS_BAD_PARAM_NULL_POINTER, "slices");
  REQUIRE_OK(ffpaDestroyAttentionSlices(nullptr));
}

TEST_CASE("slices api: a packed batch plans the sm80 forward and backward") {
  Handle h;
  h.set<int32_t>(FFPA_POLICY_HOPPER_KERNELS, 0);  // on the described H100 they would serve it
  PackedProblem p;
  Attention attn;
  const Described plain = p.describe(h, attn);
  REQUIRE_MESSAGE(plain.status == FFPA_STATUS_SUCCESS, plain.text);
  const ffpaPlanCacheStats_t start = h.stats();
  Slices slices(h);
  REQUIRE_OK(ffpaSetAttentionSlicesFromOffsets(slices, 3, PackedProblem::kOffsets, nullptr, FFPA_SLICE_MASK_CAUSAL));
  REQUIRE_OK(ffpaSetAttentionDescriptorSlices(attn, slices));
  const Described sliced = p.describe(h, attn);
  REQUIRE_MESSAGE(sliced.status == FFPA_STATUS_SUCCESS, sliced.text);
  CHECK(sliced.kernel.rfind("sm80.forward.bf16.d512", 0) == 0);
  CHECK(sliced.kernel == plain.kernel);
  CHECK(sliced.text.find("slices=3") != std::string::npos);
  // Its own plan: the cache keys on the presence of slices.
  CHECK(h.stats().misses == start.misses + 1);
  const ffpaPlanCacheStats_t before = h.stats();
  REQUIRE_OK(ffpaSetAttentionDescriptorSlices(attn, nullptr));
  const Described again = p.describe(h, attn);
  CHECK(again.kernel == plain.kernel);
  CHECK(h.stats().misses == before.misses);  // found, not planned again: asked twice (size, text)
  CHECK(h.stats().hits == before.hits + 2);

  // The backward runs on the sm80 kernels too, in a plan of its own; its workspace holds the
  // row statistics (delta and LSE, fp32, per query row: 2 x 4 heads x 32 rows).
  Tensor dO{FFPA_DATA_TYPE_BFLOAT16, {1, 4, 32, 512}};
  const Described plainBackward = describeBackward(h, attn, p.q, p.k, p.v, p.o, dO, p.lse, p.q, p.k, p.v);
  REQUIRE_OK(ffpaSetAttentionDescriptorSlices(attn, slices));
  const ffpaPlanCacheStats_t beforeBackward = h.stats();
  const Described backward = describeBackward(h, attn, p.q, p.k, p.v, p.o, dO, p.lse, p.q, p.k, p.v);
  REQUIRE_MESSAGE(backward.status == FFPA_STATUS_SUCCESS, backward.text);
  CHECK_MESSAGE(backward.kernel.rfind("sm80.backward.bf16.d512", 0) == 0, backward.text);
  CHECK(backward.kernel == plainBackward.kernel);
  CHECK(h.stats().misses == beforeBackward.misses + 1);
  size_t bytes = 0;
  REQUIRE_OK(ffpaGetAttentionBackwardWorkspaceSize(h, attn, p.q, p.k, p.v, p.o, dO, p.lse, p.q, p.k, p.v, &bytes));
  CHECK(bytes >= 2 * 4 * 32 * sizeof(float));
}

TEST_CASE("slices api: the descriptor keeps its slices; the slices must fit the tensors") {
  Handle h;
  PackedProblem p;
  Attention attn;
  {
    Slices slices(h);
    REQUIRE_OK(ffpaSetAttentionSlicesFromOffsets(slices, 3, PackedProblem::kOffsets, nullptr, FFPA_SLICE_MASK_FULL));
    REQUIRE_OK(ffpaSetAttentionDescriptorSlices(attn, slices));
    // Setting the list again does not reach the descriptor.
    const int32_t offsets[] = {0, 64};
    REQUIRE_OK(ffpaSetAttentionSlicesFromOffsets(slices, 1, offsets, nullptr, FFPA_SLICE_MASK_FULL));
  }  // destroyed
  const Described kept = p.describe(h, attn);
  REQUIRE_MESSAGE(kept.status == FFPA_STATUS_SUCCESS, kept.text);
  CHECK(kept.text.find("slices=3") != std::string::npos);

  // Slices reaching past Nq or Nkv.
  Slices wide(h);
  const int32_t q[] = {0, 40};
  const int32_t k[] = {0, 8};
  REQUIRE_OK(ffpaSetAttentionSlices(wide, 1, q, k, nullptr));
  REQUIRE_OK(ffpaSetAttentionDescriptorSlices(attn, wide));
  size_t bytes = 0;
  CHECK_FAILS_WITH(ffpaGetAttentionForwardWorkspaceSize(h, attn, p.q, p.k, p.v, p.o, p.lse, &bytes),
                   FFPA_STATUS_BAD_PARAM_SHAPE_MISMATCH, "slices reach query row 39", "Nq = 32");
  const int32_t kWide[] = {8, 33};
  const int32_t qNarrow[] = {0, 8};
  REQUIRE_OK(ffpaSetAttentionSlices(wide, 1, qNarrow, kWide, nullptr));
  REQUIRE_OK(ffpaSetAttentionDescriptorSlices(attn, wide));
  CHECK_FAILS_WITH(ffpaGetAttentionForwardWorkspaceSize(h, attn, p.q, p.k, p.v, p.o, p.lse, &bytes),
                   FFPA_STATUS_BAD_PARAM_SHAPE_MISMATCH, "slices reach key 32", "Nkv = 32");

  // Slices and a causal mode exclude each other.
  const int32_t causal = FFPA_CAUSAL_BOTTOM_RIGHT;
  REQUIRE_OK(ffpaSetAttentionSlices(wide, 1, qNarrow, qNarrow, nullptr));
  REQUIRE_OK(ffpaSetAttentionDescriptorSlices(attn, wide));
  REQUIRE_OK(ffpaSetAttentionAttribute(attn, FFPA_ATTENTION_CAUSAL_MODE, &causal, sizeof causal));
  CHECK_FAILS_WITH(ffpaGetAttentionForwardWorkspaceSize(h, attn, p.q, p.k, p.v, p.o, p.lse, &bytes),
                   FFPA_STATUS_BAD_PARAM_EXCLUSIVE_OPTIONS, "the slices are the mask");

  // Never-set and dead lists.
  Slices unset(h);
  CHECK_FAILS_WITH(ffpaSetAttentionDescriptorSlices(attn, unset), FFPA_STATUS_BAD_PARAM_NOT_FINALIZED, "never set");
  CHECK_FAILS_WITH(ffpaSetAttentionDescriptorSlices(nullptr, unset), FFPA_STATUS_BAD_PARAM_NULL_POINTER, "desc");
  ffpaAttentionSlices_t dead = unset.release();
  REQUIRE_OK(ffpaDestroyAttentionSlices(dead));
}

TEST_CASE("slices api: executing needs slices copied to the device, and a device") {
  Handle h;
  PackedProblem p;
  Attention attn;
  Slices slices(h);
  REQUIRE_OK(ffpaSetAttentionSlicesFromOffsets(slices, 3, PackedProblem::kOffsets, nullptr, FFPA_SLICE_MASK_CAUSAL));
  REQUIRE_OK(ffpaSetAttentionDescriptorSlices(attn, slices));
  size_t bytes = 0;
  REQUIRE_OK(ffpaGetAttentionForwardWorkspaceSize(h, attn, p.q, p.k, p.v, p.o, p.lse, &bytes));
  const uintptr_t base = uintptr_t{1} << 40;
  const auto at = [&](uintptr_t i) { return reinterpret_cast<void*>(base + (i << 32)); };
  // A described device cannot execute: the handle's status comes first.
  CHECK_FAILS_WITH(ffpaAttentionForward(h, attn, p.q, at(0), p.k, at(1), p.v, at(2), p.o, at(3), p.lse,
                                        static_cast<float*>(at(4)), at(5), bytes),
                   FFPA_STATUS_NOT_INITIALIZED_NO_DEVICE);
}
