// Workspace queries and execute calls: every argument check, on a described device (the checks
// run before anything touches a GPU, so all of them are covered here).
#include "test_support.h"

using namespace ffpa_test;

namespace {

// Fake device addresses: aligned, far apart, never dereferenced by the argument checks.
void* address(uintptr_t gib) { return reinterpret_cast<void*>(gib << 30); }

}  // namespace

TEST_CASE("workspace queries plan the reference path for any valid problem, fp32 included") {
  Handle h;
  h.set<int32_t>(FFPA_POLICY_REFERENCE_BACKEND, 1);
  Attention attn(FFPA_CAUSAL_BOTTOM_RIGHT);
  for (const ffpaDataType_t dtype : {FFPA_DATA_TYPE_FLOAT16, FFPA_DATA_TYPE_BFLOAT16, FFPA_DATA_TYPE_FLOAT32}) {
    Problem p(dtype, 2, 8, 2, 100, 300, 576, 512);  // GQA, Nq != Nkv, Dqk != Dv
    size_t forward = 0, backward = 0, noLse = 0;
    REQUIRE_OK(p.forwardWorkspace(h, attn, &forward));
    REQUIRE_OK(p.forwardWorkspace(h, attn, &noLse, false));
    REQUIRE_OK(p.backwardWorkspace(h, attn, &backward));
    CHECK(forward > 0);
    CHECK(noLse == forward);
    CHECK(backward > forward);
    CHECK(forward % 256 == 0);
  }
  CHECK_FAILS_WITH(Problem(FFPA_DATA_TYPE_FLOAT16, 1, 1, 1, 8, 8, 64, 64).forwardWorkspace(h, attn, nullptr),
                   FFPA_STATUS_BAD_PARAM_NULL_POINTER, "bytes");
}

TEST_CASE("shape, type and stride mismatches name the descriptor and what was expected") {
  Handle h;
  Attention attn;
  size_t bytes = 0;
  Tensor q(FFPA_DATA_TYPE_FLOAT16, {2, 8, 64, 128});
  Tensor o(FFPA_DATA_TYPE_FLOAT16, {2, 8, 64, 128});
  Tensor v(FFPA_DATA_TYPE_FLOAT16, {2, 2, 96, 128});

  Tensor kWrongDim(FFPA_DATA_TYPE_FLOAT16, {2, 2, 96, 64});
  CHECK_FAILS_WITH(ffpaGetAttentionForwardWorkspaceSize(h, attn, q, kWrongDim, v, o, nullptr, &bytes),
                   FFPA_STATUS_BAD_PARAM_SHAPE_MISMATCH, "kDesc is [2, 2, 96, 64]", "expected [2, 2, 96, 128]");
  Tensor k3(FFPA_DATA_TYPE_FLOAT16, {2, 3, 96, 128});
  Tensor v3(FFPA_DATA_TYPE_FLOAT16, {2, 3, 96, 128});
  CHECK_FAILS_WITH(ffpaGetAttentionForwardWorkspaceSize(h, attn, q, k3, v3, o, nullptr, &bytes),
                   FFPA_STATUS_BAD_PARAM_SHAPE_MISMATCH, "multiple");
  Tensor k(FFPA_DATA_TYPE_FLOAT16, {2, 2, 96, 128});
  Tensor vBf16(FFPA_DATA_TYPE_BFLOAT16, {2, 2, 96, 128});
  CHECK_FAILS_WITH(ffpaGetAttentionForwardWorkspaceSize(h, attn, q, k, vBf16, o, nullptr, &bytes),
                   FFPA_STATUS_BAD_PARAM_TYPE_MISMATCH, "vDesc is bf16");
  Tensor vShortSeq(FFPA_DATA_TYPE_FLOAT16, {2, 2, 95, 128});
  CHECK_FAILS_WITH(ffpaGetAttentionForwardWorkspaceSize(h, attn, q, k, vShortSeq, o, nullptr, &bytes),
                   FFPA_STATUS_BAD_PARAM_SHAPE_MISMATCH, "vDesc");
  Tensor oWrong(FFPA_DATA_TYPE_FLOAT16, {2, 8, 64, 64});
  CHECK_FAILS_WITH(ffpaGetAttentionForwardWorkspaceSize(h, attn, q, k, v, oWrong, nullptr, &bytes),
                   FFPA_STATUS_BAD_PARAM_SHAPE_MISMATCH, "oDesc");
  Tensor qStrided(FFPA_DATA_TYPE_FLOAT16, {2, 8, 64, 128}, {8 * 64 * 256, 64 * 256, 256, 2});
  CHECK_FAILS_WITH(ffpaGetAttentionForwardWorkspaceSize(h, attn, qStrided, k, v, o, nullptr, &bytes),
                   FFPA_STATUS_BAD_PARAM_STRIDE, "qDesc", "stride of D");
  Tensor q3d(FFPA_DATA_TYPE_FLOAT16, {2, 8, 64});
  CHECK_FAILS_WITH(ffpaGetAttentionForwardWorkspaceSize(h, attn, q3d, k, v, o, nullptr, &bytes),
                   FFPA_STATUS_BAD_PARAM_SHAPE_MISMATCH, "qDesc has 3 dimensions");
  Tensor lseHalf(FFPA_DATA_TYPE_FLOAT16, {2, 8, 64});
  CHECK_FAILS_WITH(ffpaGetAttentionForwardWorkspaceSize(h, attn, q, k, v, o, lseHalf, &bytes),
                   FFPA_STATUS_BAD_PARAM_TYPE_MISMATCH, "lseDesc is fp16");
  Tensor lseShape(FFPA_DATA_TYPE_FLOAT32, {2, 8, 63});
  CHECK_FAILS_WITH(ffpaGetAttentionForwardWorkspaceSize(h, attn, q, k, v, o, lseShape, &bytes),
                   FFPA_STATUS_BAD_PARAM_SHAPE_MISMATCH, "lseDesc", "[2, 8, 64]");

  Tensor qHuge(FFPA_DATA_TYPE_FLOAT16, {1, 1, 4, 2048});
  Tensor kHuge(FFPA_DATA_TYPE_FLOAT16, {1, 1, 4, 2048});
  Tensor vHuge(FFPA_DATA_TYPE_FLOAT16, {1, 1, 4, 64});
  Tensor oHuge(FFPA_DATA_TYPE_FLOAT16, {1, 1, 4, 64});
  CHECK_FAILS_WITH(ffpaGetAttentionForwardWorkspaceSize(h, attn, qHuge, kHuge, vHuge, oHuge, nullptr, &bytes),
                   FFPA_STATUS_NOT_SUPPORTED_SHAPE, "FFPA_MAX_HEAD_DIM");

  Tensor unset;
  CHECK_FAILS_WITH(ffpaGetAttentionForwardWorkspaceSize(h, attn, q, unset, v, o, nullptr, &bytes),
                   FFPA_STATUS_BAD_PARAM_NOT_FINALIZED, "kDesc was never set");
  CHECK_FAILS_WITH(ffpaGetAttentionForwardWorkspaceSize(h, attn, nullptr, k, v, o, nullptr, &bytes),
                   FFPA_STATUS_BAD_PARAM_NULL_POINTER, "qDesc is NULL");
  CHECK_FAILS_WITH(ffpaGetAttentionForwardWorkspaceSize(h, nullptr, q, k, v, o, nullptr, &bytes),
                   FFPA_STATUS_BAD_PARAM_NULL_POINTER, "attn is NULL");
  CHECK_FAILS_WITH(ffpaGetAttentionForwardWorkspaceSize(nullptr, attn, q, k, v, o, nullptr, &bytes),
                   FFPA_STATUS_BAD_PARAM_NULL_POINTER, "handle is NULL");
}

TEST_CASE("backward gradients must match their tensors") {
  Handle h;
  Attention attn;
  size_t bytes = 0;
  Problem p(FFPA_DATA_TYPE_BFLOAT16, 1, 4, 2, 32, 48, 320, 256);
  Tensor dkWrong(FFPA_DATA_TYPE_BFLOAT16, {1, 4, 48, 320});
  CHECK_FAILS_WITH(ffpaGetAttentionBackwardWorkspaceSize(h, attn, p.q, p.k, p.v, p.o, p.dO, p.lse, p.dq, dkWrong,
                                                         p.dv, &bytes),
                   FFPA_STATUS_BAD_PARAM_SHAPE_MISMATCH, "dkDesc", "the shape of kDesc");
  Tensor dvHalf(FFPA_DATA_TYPE_FLOAT16, {1, 2, 48, 256});
  CHECK_FAILS_WITH(ffpaGetAttentionBackwardWorkspaceSize(h, attn, p.q, p.k, p.v, p.o, p.dO, p.lse, p.dq, p.dk,
                                                         dvHalf, &bytes),
                   FFPA_STATUS_BAD_PARAM_TYPE_MISMATCH, "dvDesc");
  CHECK_FAILS_WITH(ffpaGetAttentionBackwardWorkspaceSize(h, attn, p.q, p.k, p.v, p.o, p.dO, nullptr, p.dq, p.dk,
                                                         p.dv, &bytes),
                   FFPA_STATUS_BAD_PARAM_NULL_POINTER, "lseDesc");
  // Gradients may have their own strides (here BNHD for dQ).
  Tensor dqBnhd(FFPA_DATA_TYPE_BFLOAT16, {1, 4, 32, 320}, {32 * 4 * 320, 320, 4 * 320, 1});
  REQUIRE_OK(ffpaGetAttentionBackwardWorkspaceSize(h, attn, p.q, p.k, p.v, p.o, p.dO, p.lse, dqBnhd, p.dk, p.dv,
                                                   &bytes));
}

TEST_CASE("execute checks pointers, overlaps and the workspace before it needs a device") {
  Handle h;
  h.set<int32_t>(FFPA_POLICY_REFERENCE_BACKEND, 1);  // a plan with a workspace to check
  Attention attn;
  Problem p(FFPA_DATA_TYPE_FLOAT16, 1, 4, 4, 64, 64, 128, 128);
  size_t need = 0;
  REQUIRE_OK(p.forwardWorkspace(h, attn, &need));
  void* q = address(1);
  void* k = address(2);
  void* v = address(3);
  void* o = address(4);
  auto* lse = static_cast<float*>(address(5));
  void* ws = address(6);

  CHECK_FAILS_WITH(ffpaAttentionForward(h, attn, p.q, nullptr, p.k, k, p.v, v, p.o, o, p.lse, lse, ws, need),
                   FFPA_STATUS_BAD_PARAM_NULL_POINTER, "q is NULL");
  void* misaligned = static_cast<char*>(k) + 2;
  CHECK_FAILS_WITH(ffpaAttentionForward(h, attn, p.q, q, p.k, misaligned, p.v, v, p.o, o, p.lse, lse, ws, need),
                   FFPA_STATUS_BAD_PARAM_MISALIGNED_POINTER, "k (", "16 bytes");
  void* insideQ = static_cast<char*>(q) + 1024;
  CHECK_FAILS_WITH(ffpaAttentionForward(h, attn, p.q, q, p.k, k, p.v, v, p.o, insideQ, p.lse, lse, ws, need),
                   FFPA_STATUS_BAD_PARAM, "output o overlaps q");
  CHECK_FAILS_WITH(ffpaAttentionForward(h, attn, p.q, q, p.k, k, p.v, v, p.o, o, p.lse, static_cast<float*>(o), ws,
                                        need),
                   FFPA_STATUS_BAD_PARAM, "overlaps");
  CHECK_FAILS_WITH(ffpaAttentionForward(h, attn, p.q, q, p.k, k, p.v, v, p.o, o, nullptr, lse, ws, need),
                   FFPA_STATUS_BAD_PARAM_NULL_POINTER, "lseDesc is NULL but lse is not");
  CHECK_FAILS_WITH(ffpaAttentionForward(h, attn, p.q, q, p.k, k, p.v, v, p.o, o, p.lse, nullptr, ws, need),
                   FFPA_STATUS_BAD_PARAM_NULL_POINTER, "lse is NULL but lseDesc is not");
  CHECK_FAILS_WITH(ffpaAttentionForward(h, attn, p.q, q, p.k, k, p.v, v, p.o, o, p.lse, lse, ws, need - 1),
                   FFPA_STATUS_BAD_PARAM_SIZE_INSUFFICIENT, "needs", "ffpaGetAttentionForwardWorkspaceSize");
  CHECK_FAILS_WITH(ffpaAttentionForward(h, attn, p.q, q, p.k, k, p.v, v, p.o, o, p.lse, lse, nullptr, need),
                   FFPA_STATUS_BAD_PARAM_NULL_POINTER, "workspace is NULL");
  void* wsOff = static_cast<char*>(ws) + 128;
  CHECK_FAILS_WITH(ffpaAttentionForward(h, attn, p.q, q, p.k, k, p.v, v, p.o, o, p.lse, lse, wsOff, need),
                   FFPA_STATUS_BAD_PARAM_MISALIGNED_POINTER, "workspace", "256 bytes");
  // Everything valid: only the missing device remains.
  CHECK_FAILS_WITH(ffpaAttentionForward(h, attn, p.q, q, p.k, k, p.v, v, p.o, o, p.lse, lse, ws, need),
                   FFPA_STATUS_NOT_INITIALIZED_NO_DEVICE, "described device", "cannot execute");
  CHECK_FAILS_WITH(ffpaAttentionForward(h, attn, p.q, q, p.k, k, p.v, v, p.o, o, nullptr, nullptr, ws, need),
                   FFPA_STATUS_NOT_INITIALIZED_NO_DEVICE);

  size_t needBack = 0;
  REQUIRE_OK(p.backwardWorkspace(h, attn, &needBack));
  void* dO = address(7);
  void* dq = address(8);
  void* dk = address(9);
  void* dv = address(10);
  CHECK_FAILS_WITH(ffpaAttentionBackward(h, attn, p.q, q, p.k, k, p.v, v, p.o, o, p.dO, dO, p.lse, lse, p.dq, dq,
                                         p.dk, dk, p.dv, dk, ws, needBack),
                   FFPA_STATUS_BAD_PARAM, "output dk overlaps dv");
  CHECK_FAILS_WITH(ffpaAttentionBackward(h, attn, p.q, q, p.k, k, p.v, v, p.o, o, p.dO, nullptr, p.lse, lse, p.dq,
                                         dq, p.dk, dk, p.dv, dv, ws, needBack),
                   FFPA_STATUS_BAD_PARAM_NULL_POINTER, "dO is NULL");
  CHECK_FAILS_WITH(ffpaAttentionBackward(h, attn, p.q, q, p.k, k, p.v, v, p.o, o, p.dO, dO, p.lse, lse, p.dq, dq,
                                         p.dk, dk, p.dv, dv, ws, needBack / 2),
                   FFPA_STATUS_BAD_PARAM_SIZE_INSUFFICIENT, "ffpaGetAttentionBackwardWorkspaceSize");
  CHECK_FAILS_WITH(ffpaAttentionBackward(h, attn, p.q, q, p.k, k, p.v, v, p.o, o, p.dO, dO, p.lse, lse, p.dq, dq,
                                         p.dk, dk, p.dv, dv, ws, needBack),
                   FFPA_STATUS_NOT_INITIALIZED_NO_DEVICE);
}

TEST_CASE("the sanity check adds its scratch to the workspace; the chunk budget shrinks it") {
  Handle h;
  h.set<int32_t>(FFPA_POLICY_REFERENCE_BACKEND, 1);
  Attention attn;
  Problem p(FFPA_DATA_TYPE_BFLOAT16, 2, 16, 4, 1024, 1024, 512, 512);
  size_t plain = 0, checked = 0, small = 0;
  REQUIRE_OK(p.forwardWorkspace(h, attn, &plain));
  h.set<int32_t>(FFPA_POLICY_SANITY_CHECK, 1);
  REQUIRE_OK(p.forwardWorkspace(h, attn, &checked));
  CHECK(checked == plain + 256);
  h.set<int32_t>(FFPA_POLICY_SANITY_CHECK, 0);
  h.set<int64_t>(FFPA_POLICY_REFERENCE_CHUNK_BYTES, int64_t{16} << 20);
  REQUIRE_OK(p.forwardWorkspace(h, attn, &small));
  CHECK(small < plain);
  CHECK(small <= (size_t{16} << 20) + (size_t{8} << 20) + 8 * 256);  // budget + cuBLASLt scratch + alignment
}

TEST_CASE("reduced-precision accumulators need fp16 and a fast kernel; the reference never pretends") {
  Handle h;
  Attention attn;
  size_t bytes = 0;
  Problem bf16(FFPA_DATA_TYPE_BFLOAT16, 1, 2, 2, 64, 64, 512, 512);
  Problem fp16(FFPA_DATA_TYPE_FLOAT16, 1, 2, 2, 64, 64, 520, 512);  // d_qk % 16 != 0: no fast kernel
  h.set<int32_t>(FFPA_POLICY_ACCUMULATOR, FFPA_ACCUMULATOR_F16);
  CHECK_FAILS_WITH(bf16.forwardWorkspace(h, attn, &bytes), FFPA_STATUS_NOT_SUPPORTED_KNOB_COMBINATION,
                   "FFPA_POLICY_ACCUMULATOR=f16 needs fp16 tensors", "bf16");
  h.set<int32_t>(FFPA_POLICY_ACCUMULATOR, FFPA_ACCUMULATOR_QK_F16);
  CHECK_FAILS_WITH(fp16.forwardWorkspace(h, attn, &bytes), FFPA_STATUS_NOT_SUPPORTED_KNOB_COMBINATION,
                   "qk_f16 needs a fast kernel", "FFPA_POLICY_REFERENCE_BACKEND");
  h.set<int32_t>(FFPA_POLICY_REFERENCE_BACKEND, 1);  // asked for explicitly: fp32 reference
  REQUIRE_OK(fp16.forwardWorkspace(h, attn, &bytes));
  CHECK_FAILS_WITH(bf16.forwardWorkspace(h, attn, &bytes), FFPA_STATUS_NOT_SUPPORTED_KNOB_COMBINATION);
}

TEST_CASE("shapes whose scratch cannot exist are refused, never crash or wrap") {
  Handle h;
  Attention attn;
  size_t bytes = 0;
  const int64_t big = (int64_t{1} << 31) - 1;
  // 2^31 keys of 1024 + 1024 dims: K and V of one head in fp32 take 16 TiB. Sized exactly (the
  // caller will not find that much memory, but no size wraps around to something small).
  Problem longSequence(FFPA_DATA_TYPE_FLOAT16, 1, 2, 2, big, big, 1024, 1024);
  REQUIRE_OK(longSequence.forwardWorkspace(h, attn, &bytes));
  CHECK(bytes >= (size_t{16} << 40));
  REQUIRE_OK(longSequence.backwardWorkspace(h, attn, &bytes));
  CHECK(bytes >= (size_t{32} << 40));
  // 2^31 query heads on one K/V head of 2^31 keys: one row of scores per query head is 2^64 bytes.
  // (The forward, by default, runs the query heads of the group as 2^31 - 1 rows of one head,
  // whose scratch is a chunk of rows: that plan exists.)
  Problem manyHeads(FFPA_DATA_TYPE_FLOAT16, 1, big, 1, 1, big, 1, 1);
  REQUIRE_OK(manyHeads.forwardWorkspace(h, attn, &bytes));
  CHECK_FAILS_WITH(manyHeads.backwardWorkspace(h, attn, &bytes), FFPA_STATUS_NOT_SUPPORTED_SHAPE, "2^62");
  h.set<int32_t>(FFPA_POLICY_QUERY_HEADS_AS_ROWS, 0);
  CHECK_FAILS_WITH(manyHeads.forwardWorkspace(h, attn, &bytes), FFPA_STATUS_NOT_SUPPORTED_SHAPE, "2^62");
}

TEST_CASE("outputs are checked element by element: interleaved gradients pass, real overlaps fail") {
  Handle h;
  Attention attn;
  // dQ, dK, dV as slices of one packed [B, N, 3, H, D] buffer, the layout of a fused QKV gradient.
  const int64_t n = 128, heads = 8, d = 64;
  const std::vector<int64_t> packed = {n * 3 * heads * d, d, 3 * heads * d, 1};
  Problem p(FFPA_DATA_TYPE_FLOAT16, 1, heads, heads, n, n, d, d);
  Tensor dqkv(FFPA_DATA_TYPE_FLOAT16, {1, heads, n, d}, packed);
  size_t need = 0;
  REQUIRE_OK(ffpaGetAttentionBackwardWorkspaceSize(h, attn, p.q, p.k, p.v, p.o, p.dO, p.lse, dqkv, dqkv, dqkv, &need));
  char* buffer = static_cast<char*>(address(20));
  void* dq = buffer;
  void* dk = buffer + heads * d * 2;
  void* dv = buffer + 2 * heads * d * 2;
  const auto backward = [&](void* dqPtr, void* dkPtr, void* dvPtr, void* ws) {
    return ffpaAttentionBackward(h, attn, p.q, address(1), p.k, address(2), p.v, address(3), p.o, address(4), p.dO,
                                 address(5), p.lse, static_cast<const float*>(address(6)), dqkv, dqPtr, dqkv, dkPtr,
                                 dqkv, dvPtr, ws, need);
  };
  CHECK_FAILS_WITH(backward(dq, dk, dv, address(30)), FFPA_STATUS_NOT_INITIALIZED_NO_DEVICE);  // all checks passed
  void* dkShifted = buffer + 64 * d * 2 * 3 * heads + heads * d * 2;  // row 64 of dk's slice: inside dq's rows
  CHECK_FAILS_WITH(backward(dq, dkShifted, dv, address(30)), FFPA_STATUS_NOT_INITIALIZED_NO_DEVICE);
  void* dkOnDq = buffer + 3 * heads * d * 2;  // dk shifted by exactly one row of the packed buffer
  CHECK_FAILS_WITH(backward(dq, dkOnDq, dv, address(30)), FFPA_STATUS_BAD_PARAM, "output dq overlaps dk");
  CHECK_FAILS_WITH(backward(dq, dk, dv, address(1)), FFPA_STATUS_BAD_PARAM, "workspace overlaps q");
}

TEST_CASE("problems past 2^31 and 2^32 elements are planned with 64-bit sizes") {
  Handle h;
  Attention attn;
  Problem p(FFPA_DATA_TYPE_FLOAT16, 64, 64, 64, 32768, 32768, 128, 128);  // 2^34 elements per tensor
  char text[1024];
  // The fast kernel takes it (64-bit offsets; 512 row tiles x 4096 heads), with no workspace.
  size_t fast = 1;
  REQUIRE_OK(p.forwardWorkspace(h, attn, &fast));
  CHECK(fast == 0);
  REQUIRE_OK(ffpaDescribeAttentionForwardPlan(h, attn, p.q, p.k, p.v, p.o, nullptr, text, sizeof text, nullptr));
  // The Hopper forward where the build has it (the default device is an H100), else mma.sync.
  const std::string plan(text);
  CHECK((plan.find("kernel: sm90.forward.f16.d128") != std::string::npos ||
         plan.find("kernel: sm80.forward.f16.d128") != std::string::npos));
  h.set<int32_t>(FFPA_POLICY_REFERENCE_BACKEND, 1);
  size_t forward = 0, backward = 0;
  REQUIRE_OK(p.forwardWorkspace(h, attn, &forward));
  REQUIRE_OK(p.backwardWorkspace(h, attn, &backward));
  CHECK(forward > (size_t{1} << 29));  // a full 512 MiB chunk of scratch and more
  CHECK(backward > (size_t{1} << 29));
  REQUIRE_OK(ffpaDescribeAttentionForwardPlan(h, attn, p.q, p.k, p.v, p.o, nullptr, text, sizeof text, nullptr));
  CHECK(std::string(text).find("units=4096") != std::string::npos);
}
