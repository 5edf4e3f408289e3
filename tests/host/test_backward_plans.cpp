// The plans of the sm80 backward kernels on described devices: the fast backward serves fp16 and
// bf16 problems the build has head dims for, with its workspace (the row statistics), and follows
// the pipeline knobs; everything else goes to the reference path.
#include "plan_text.h"
#include "test_support.h"

#include <string>

using namespace ffpa_test;

TEST_CASE("backward: the fast kernels serve fp16 and bf16, deterministically, with a row-statistics workspace") {
  REQUIRE_COMPILED(512, 1024);
  Handle h;
  h.set<int32_t>(FFPA_POLICY_HOPPER_KERNELS, 0);  // on the described H100 they would serve these
  for (const ffpaDataType_t dtype : {FFPA_DATA_TYPE_FLOAT16, FFPA_DATA_TYPE_BFLOAT16}) {
    const Problem p(dtype, 2, 8, 2, 1000, 700, 512, 512);
    const Described d = describeBackward(h, p, FFPA_CAUSAL_BOTTOM_RIGHT);
    REQUIRE(d.status == FFPA_STATUS_SUCCESS);
    CHECK(d.kernel == std::string("sm80.backward.") + (dtype == FFPA_DATA_TYPE_FLOAT16 ? "f16" : "bf16") + ".d512");
    for (const char* part : {"dQ: Br=64 Bc=64 warps=4x2", "dK/dV: Bk=32 Bq=64 warps=2x4", "stages=2",
                             "prefetch=1", "acc=f32", "deterministic=1"}) {
      CHECK_HAS(d.config, part);
    }
    // delta and lse2 of every query row, in fp32, rounded up to 256 bytes.
    size_t bytes = 0;
    Attention attn(FFPA_CAUSAL_BOTTOM_RIGHT);
    REQUIRE_OK(p.backwardWorkspace(h, attn, &bytes));
    const size_t stats = 2 * 2 * 8 * 1000 * sizeof(float);
    CHECK(bytes >= stats);
    CHECK(bytes < stats + 256 + 4096);  // plus what the planner's own checks may need
  }
  // d_qk != d_v and head dims between the compiled ones take the next instance up.
  CHECK(describeBackward(h, Problem(FFPA_DATA_TYPE_BFLOAT16, 1, 4, 1, 300, 300, 576, 512)).kernel ==
        "sm80.backward.bf16.d1024");
}

TEST_CASE("backward: what the fast kernels do not serve goes to the reference path, which says why") {
  Handle h;
  const Described fp32 = describeBackward(h, Problem(FFPA_DATA_TYPE_FLOAT32, 1, 2, 2, 100, 100, 128, 128));
  CHECK(fp32.kernel == "reference.cublaslt.backward");
  CHECK_HAS(fp32.text, "fp16 and bf16 only");
  const Described odd = describeBackward(h, Problem(FFPA_DATA_TYPE_FLOAT16, 1, 2, 2, 100, 100, 72, 72));
  CHECK(odd.kernel == "reference.cublaslt.backward");
  CHECK_HAS(odd.text, "multiples of 16");
  Handle reference;
  reference.set<int32_t>(FFPA_POLICY_REFERENCE_BACKEND, 1);
  CHECK(describeBackward(reference, Problem(FFPA_DATA_TYPE_FLOAT16, 1, 2, 2, 100, 100, 128, 128)).kernel ==
        "reference.cublaslt.backward");
}

TEST_CASE("backward: the pipeline knobs change the plan; illegal values fail naming the knob") {
  REQUIRE_COMPILED(512);
  const Problem p(FFPA_DATA_TYPE_FLOAT16, 1, 8, 8, 1000, 1000, 512, 512);
  Handle base;
  const std::string defaults = describeBackward(base, p).config;
  CHECK_HAS(defaults, "persist_q=1");
  CHECK_HAS(defaults, "grid=(N/B,B*H)");

  Handle knobs;
  knobs.set<int32_t>(FFPA_POLICY_STAGES, 1);
  knobs.set<int32_t>(FFPA_POLICY_PREFETCH_QKV, 0);
  knobs.set<int32_t>(FFPA_POLICY_QKV_SMEM_SHARE, 1);
  knobs.set<int32_t>(FFPA_POLICY_PERSIST_Q_G2S, 0);
  knobs.set<int32_t>(FFPA_POLICY_LAUNCH_GRID_DNHB, 1);
  const std::string changed = describeBackward(knobs, p).config;
  for (const char* part : {"stages=1", "prefetch=0", "smem_share=1", "persist_q=0", "grid=(N/B,H,B)"}) {
    CHECK_HAS(changed, part);
  }

  // The forward's fp16 accumulators do not apply: gradients always accumulate in fp32.
  Handle f16;
  f16.set<int32_t>(FFPA_POLICY_ACCUMULATOR, FFPA_ACCUMULATOR_F16);
  CHECK(describeBackward(f16, p).kernel == "sm80.backward.f16.d512");

  if (!compiled(1024)) return;
  const std::string stages = ffpaGetBuildInfo();
  if (has(stages, "stages 1,2;")) {
    Handle four;
    four.set<int32_t>(FFPA_POLICY_STAGES, 4);
    const Described refused = describeBackward(four, p);
    CHECK(refused.status == FFPA_STATUS_NOT_SUPPORTED_KNOB_COMBINATION);
    CHECK_HAS(refused.text, "FFPA_POLICY_STAGES=4");
  }
}

TEST_CASE("backward: knobs at their defaults give way to an A100's shared memory; set ones fail") {
  REQUIRE_COMPILED(1024);
  const Problem p(FFPA_DATA_TYPE_BFLOAT16, 1, 4, 4, 500, 500, 1024, 1024);
  Handle a100(describedA100());
  const Described adapted = describeBackward(a100, p);
  CHECK(adapted.kernel == "sm80.backward.bf16.d1024");
  CHECK_HAS(adapted.config, "(fit)");

  Handle insisting(describedA100());
  insisting.set<int32_t>(FFPA_POLICY_PERSIST_Q_G2S, 1);
  insisting.set<int32_t>(FFPA_POLICY_STAGES, 2);
  const Described refused = describeBackward(insisting, p);
  CHECK(refused.status == FFPA_STATUS_NOT_SUPPORTED_KNOB_COMBINATION);
  CHECK_HAS(refused.text, "bytes of shared memory");
}
