// Per-batch key lengths (FFPA_ATTENTION_KEY_LENGTHS) through the public API, on a described H100:
// the attribute holds a device pointer; slices exclude it; the forward plans the Hopper kernels
// that read the counts (the row split, the split of the columns) and the Hopper backward (the
// mma.sync ones without Hopper kernels), in plans of their own.
#include "plan_text.h"
#include "test_support.h"

#include <cstdint>

using namespace ffpa_test;

namespace {

const int32_t* fakeDeviceCounts() { return reinterpret_cast<const int32_t*>(uintptr_t{0x7f0000001000}); }

void setKeyLengths(ffpaAttentionDescriptor_t attn, const int32_t* counts) {
  REQUIRE_OK(ffpaSetAttentionAttribute(attn, FFPA_ATTENTION_KEY_LENGTHS, &counts, sizeof counts));
}

}  // namespace

TEST_CASE("key lengths: the attribute holds a device pointer, and NULL detaches it") {
  Attention attn;
  size_t size = 0;
  REQUIRE_OK(ffpaGetAttentionAttribute(attn, FFPA_ATTENTION_KEY_LENGTHS, nullptr, 0, &size));
  CHECK(size == sizeof(const int32_t*));
  const int32_t* read = fakeDeviceCounts();
  REQUIRE_OK(ffpaGetAttentionAttribute(attn, FFPA_ATTENTION_KEY_LENGTHS, &read, sizeof read, nullptr));
  CHECK(read == nullptr);  // the default: every batch entry has all keys
  setKeyLengths(attn, fakeDeviceCounts());
  REQUIRE_OK(ffpaGetAttentionAttribute(attn, FFPA_ATTENTION_KEY_LENGTHS, &read, sizeof read, nullptr));
  CHECK(read == fakeDeviceCounts());
  // The counts themselves are not the value: the address of the pointer is.
  const int32_t count = 5;
  CHECK_FAILS_WITH(ffpaSetAttentionAttribute(attn, FFPA_ATTENTION_KEY_LENGTHS, &count, sizeof count),
                   FFPA_STATUS_BAD_PARAM_ATTRIBUTE_TYPE, "the address of the pointer");
  int32_t small = 0;
  CHECK_FAILS_WITH(ffpaGetAttentionAttribute(attn, FFPA_ATTENTION_KEY_LENGTHS, &small, sizeof small, nullptr),
                   FFPA_STATUS_BAD_PARAM_ATTRIBUTE_TYPE, "size must be 8");
  setKeyLengths(attn, nullptr);
  REQUIRE_OK(ffpaGetAttentionAttribute(attn, FFPA_ATTENTION_KEY_LENGTHS, &read, sizeof read, nullptr));
  CHECK(read == nullptr);
  CHECK_FAILS_WITH(ffpaSetAttentionAttribute(attn, static_cast<ffpaAttentionAttribute_t>(3), &count, sizeof count),
                   FFPA_STATUS_BAD_PARAM_OUT_OF_BOUND, "FFPA_ATTENTION_KEY_LENGTHS (2)");
}

TEST_CASE("key lengths: not with attention slices, whose key ranges say which keys a sequence has") {
  Handle h;
  const Problem p(FFPA_DATA_TYPE_BFLOAT16, 1, 4, 4, 32, 32, 128, 128);
  Attention attn;
  ffpaAttentionSlices_t slices = nullptr;
  REQUIRE_OK(ffpaCreateAttentionSlices(h, &slices));
  const int32_t offsets[] = {0, 10, 32};
  REQUIRE_OK(ffpaSetAttentionSlicesFromOffsets(slices, 2, offsets, nullptr, FFPA_SLICE_MASK_CAUSAL));
  REQUIRE_OK(ffpaSetAttentionDescriptorSlices(attn, slices));
  REQUIRE_OK(ffpaDestroyAttentionSlices(slices));
  setKeyLengths(attn, fakeDeviceCounts());
  size_t bytes = 0;
  CHECK_FAILS_WITH(p.forwardWorkspace(h, attn, &bytes), FFPA_STATUS_BAD_PARAM_EXCLUSIVE_OPTIONS,
                   "FFPA_ATTENTION_KEY_LENGTHS");
  CHECK_FAILS_WITH(p.backwardWorkspace(h, attn, &bytes), FFPA_STATUS_BAD_PARAM_EXCLUSIVE_OPTIONS,
                   "slices' key ranges");
  setKeyLengths(attn, nullptr);
  REQUIRE_OK(p.forwardWorkspace(h, attn, &bytes));
}

TEST_CASE("key lengths: the forward and the backward plan kernels that read them") {
  REQUIRE_COMPILED(128);
  if (!hopperCompiled()) {
    MESSAGE("skipped: this build compiles no sm_90a code");
    return;
  }
  Handle h;  // a described H100, the Hopper kernels on
  // GQA decode (its query heads as rows of one problem per KV head) and a causal prefill.
  for (const ffpaCausalMode_t causal : {FFPA_CAUSAL_NONE, FFPA_CAUSAL_BOTTOM_RIGHT}) {
    const bool decode = causal == FFPA_CAUSAL_NONE;
    const Problem p(FFPA_DATA_TYPE_BFLOAT16, 4, 32, 8, decode ? 1 : 300, 4096, 128, 128);
    Attention attn(causal);
    const Described plain = describeForward(h, attn, p.q, p.k, p.v, p.o, p.lse);
    REQUIRE_MESSAGE(plain.status == FFPA_STATUS_SUCCESS, plain.text);
    CHECK_HAS(plain.kernel, ".row_split");  // d_v 128 without counts: the Hopper row split
    const ffpaPlanCacheStats_t before = h.stats();
    setKeyLengths(attn, fakeDeviceCounts());
    const Described counted = describeForward(h, attn, p.q, p.k, p.v, p.o, p.lse);
    REQUIRE_MESSAGE(counted.status == FFPA_STATUS_SUCCESS, counted.text);
    INFO(counted.text);
    // The row split reads the counts: the same kernel serves.
    CHECK(counted.kernel == plain.kernel);
    CHECK_HAS(counted.text, "key_lengths");
    if (decode) CHECK_HAS(counted.config, "query_heads_as_rows=4");
    CHECK(h.stats().misses > before.misses);  // a plan of its own: the cache keys on the counts' presence

    // The backward: both Hopper gradient kernels read the counts, in a plan of their own; without
    // the Hopper kernels, the mma.sync ones do.
    const Described backward = describeBackward(h, attn, p.q, p.k, p.v, p.o, p.dO, p.lse, p.dq, p.dk, p.dv);
    REQUIRE_MESSAGE(backward.status == FFPA_STATUS_SUCCESS, backward.text);
    CHECK(backward.kernel == "sm90.backward.bf16.dq128.dkdv128");
    CHECK_HAS(backward.text, "key_lengths");
    Handle mmaSync;
    mmaSync.set<int32_t>(FFPA_POLICY_HOPPER_KERNELS, 0);
    const Described mmaSyncBackward =
        describeBackward(mmaSync, attn, p.q, p.k, p.v, p.o, p.dO, p.lse, p.dq, p.dk, p.dv);
    REQUIRE_MESSAGE(mmaSyncBackward.status == FFPA_STATUS_SUCCESS, mmaSyncBackward.text);
    CHECK(mmaSyncBackward.kernel.rfind("sm80.backward.bf16.d128", 0) == 0);

    // Without the Hopper kernels, the mma.sync forward. Its 64-key instance, the default at d
    // 128, reads no counts: its 32-key twin serves.
    const Described portable = describeForward(mmaSync, attn, p.q, p.k, p.v, p.o, p.lse);
    REQUIRE_MESSAGE(portable.status == FFPA_STATUS_SUCCESS, portable.text);
    CHECK(portable.kernel.rfind("sm80.forward.bf16.d128", 0) == 0);
    CHECK(portable.kernel.find(".bc64") == std::string::npos);
    Attention uncounted(causal);
    CHECK_HAS(describeForward(mmaSync, uncounted, p.q, p.k, p.v, p.o, p.lse).kernel, ".bc64");

    // Detached, the problem finds its first plan again.
    setKeyLengths(attn, nullptr);
    const ffpaPlanCacheStats_t again = h.stats();
    CHECK(describeForward(h, attn, p.q, p.k, p.v, p.o, p.lse).kernel == plain.kernel);
    CHECK(h.stats().misses == again.misses);
  }
}

TEST_CASE("key lengths on Hopper: K and V shared between row tiles, and d_v up to 64 on the row split") {
  REQUIRE_COMPILED(64, 512);
  if (!hopperCompiled()) {
    MESSAGE("skipped: this build compiles no sm_90a code");
    return;
  }
  Handle h;  // a described H100
  Attention attn(FFPA_CAUSAL_BOTTOM_RIGHT);
  setKeyLengths(attn, fakeDeviceCounts());
  // The pair of CTAs that share K and V (one batch entry: the same count) reads them too.
  const Problem wide(FFPA_DATA_TYPE_FLOAT16, 2, 8, 8, 1000, 4096, 512, 512);
  h.set<int32_t>(FFPA_POLICY_HOPPER_KV_MULTICAST, 1);
  const Described shared = describeForward(h, attn, wide.q, wide.k, wide.v, wide.o, wide.lse);
  REQUIRE_MESSAGE(shared.status == FFPA_STATUS_SUCCESS, shared.text);
  CHECK_HAS(shared.kernel, "sm90.forward.f16.d512.kv2");
  // d_v 64: the row split alone serves it on Hopper, and reads the counts.
  const Problem narrow(FFPA_DATA_TYPE_FLOAT16, 2, 8, 8, 1000, 4096, 64, 64);
  const Described small = describeForward(h, attn, narrow.q, narrow.k, narrow.v, narrow.o, narrow.lse);
  REQUIRE_MESSAGE(small.status == FFPA_STATUS_SUCCESS, small.text);
  INFO(small.text);
  CHECK(small.kernel.rfind("sm90.forward.f16.d64", 0) == 0);
  CHECK_HAS(small.kernel, ".row_split");
}
