// The plans of the sm80 forward kernels on described devices (an A100 unless noted: on an H100 the
// sm90 kernel serves d_v 257..512, see test_sm90_plans.cpp): which instance and which launch
// configuration each knob leads to, and the knob combinations that fail with a reason.
#include "plan_text.h"
#include "test_support.h"

#include <string>

using namespace ffpa_test;

namespace {

const Problem& large() {
  static const Problem p(FFPA_DATA_TYPE_FLOAT16, 1, 8, 8, 1000, 1000, 512, 512);
  return p;
}
const Problem& small() {
  static const Problem p(FFPA_DATA_TYPE_FLOAT16, 1, 8, 8, 1000, 1000, 128, 128);
  return p;
}

}  // namespace

TEST_CASE("the defaults of seed 000 pick the fast kernel with its default configuration") {
  REQUIRE_COMPILED(128, 256, 320, 512);
  Handle h(describedA100());
  const Described d = describeForward(h, large());
  REQUIRE(d.status == FFPA_STATUS_SUCCESS);
  CHECK(d.kernel == "sm80.forward.f16.d512.acc_f32");
  for (const char* part : {"Br=64 Bc=64 warps=4x2 threads=256", "stages=2", "prefetch=1", "smem_share=0",
                           "q=swizzle k=swizzle v=swizzle", "persist_q=0", "persist_kv=0", "grid=(N/Br,B*H)"}) {
    CHECK_HAS(d.config, part);
  }
  // Small head dims: one warp per row group of two row tiles, coarse tiles (whole d per step), Q
  // persisted, V fragments in registers.
  const Described s = describeForward(h, small());
  CHECK(s.kernel == "sm80.forward.f16.d128.acc_f32.v_s2r");
  for (const char* part : {"Br=128 Bc=32 warps=4x1 threads=128 warp_rows=32", "persist_q=1", "persist_kv=1",
                           "qk_step=128", "v_step=128"}) {
    CHECK_HAS(s.config, part);
  }
  // d_v <= 256: still one warp per row group (no exchange of P), 16 rows each on 8 warps.
  const Described d256 = describeForward(h, Problem(FFPA_DATA_TYPE_FLOAT16, 1, 8, 8, 1000, 1000, 256, 256));
  CHECK(d256.kernel == "sm80.forward.f16.d256.acc_f32.v_s2r");
  CHECK_HAS(d256.config, "Br=128 Bc=64 warps=8x1 threads=256 warp_rows=16");
  // Q fragments in registers leave room for one row tile of 16 rows per warp.
  h.set<int32_t>(FFPA_POLICY_PERSIST_Q_S2R, 1);
  const Described q = describeForward(h, small());
  CHECK(q.kernel == "sm80.forward.f16.d128.acc_f32.q_s2r.v_s2r");
  CHECK_HAS(q.config, "Br=64 Bc=64 warps=4x1 threads=128 warp_rows=16");
}

TEST_CASE("each accumulator mode runs its own instance; bf16 accumulates in fp32 only") {
  REQUIRE_COMPILED(128, 256, 320, 512);
  Handle h(describedA100());
  const std::pair<ffpaAccumulator_t, const char*> modes[] = {
      {FFPA_ACCUMULATOR_F32, ".acc_f32"}, {FFPA_ACCUMULATOR_QK_F16, ".acc_qk_f16"},
      {FFPA_ACCUMULATOR_PV_F16, ".acc_pv_f16"}, {FFPA_ACCUMULATOR_F16, ".acc_f16"}};
  for (const auto& [mode, suffix] : modes) {
    h.set<int32_t>(FFPA_POLICY_ACCUMULATOR, mode);
    CHECK(describeForward(h, large()).kernel == std::string("sm80.forward.f16.d512") + suffix);
  }
  const Problem bf16(FFPA_DATA_TYPE_BFLOAT16, 1, 8, 8, 1000, 1000, 512, 512);
  CHECK(describeForward(h, bf16).status == FFPA_STATUS_NOT_SUPPORTED_KNOB_COMBINATION);
  h.set<int32_t>(FFPA_POLICY_ACCUMULATOR, FFPA_ACCUMULATOR_F32);
  CHECK(describeForward(h, bf16).kernel == "sm80.forward.bf16.d512.acc_f32");
}

TEST_CASE("every pipeline and layout knob shows in the plan") {
  REQUIRE_COMPILED(128, 256, 320, 512);
  Handle h(describedA100());
  const std::string base = describeForward(h, large()).config;
  struct Flip {
    ffpaPolicyKnob_t knob;
    const char* before;
    const char* after;
  };
  const Flip flips[] = {
      {FFPA_POLICY_PREFETCH_QKV, "prefetch=1", "prefetch=0"},
      {FFPA_POLICY_QKV_SMEM_SHARE, "smem_share=0", "smem_share=1"},
      {FFPA_POLICY_SMEM_SWIZZLE_Q, "q=swizzle", "q=pad"},
      {FFPA_POLICY_SMEM_SWIZZLE_K, "k=swizzle", "k=pad"},
      {FFPA_POLICY_SMEM_SWIZZLE_V, "v=swizzle", "v=pad"},
      {FFPA_POLICY_LAUNCH_GRID_DNHB, "grid=(N/Br,B*H)", "grid=(N/Br,H,B)"},
  };
  for (const Flip& flip : flips) {
    CAPTURE(flip.after);
    Handle flipped(describedA100());
    const int32_t value = has(flip.before, "=1") || has(flip.before, "swizzle") ? 0 : 1;
    flipped.set<int32_t>(flip.knob, value);
    const Described d = describeForward(flipped, large());
    REQUIRE(d.status == FFPA_STATUS_SUCCESS);
    CHECK_HAS(base, flip.before);
    CHECK_HAS(d.config, flip.after);
    CHECK(d.kernel == "sm80.forward.f16.d512.acc_f32");
  }
  // Sharing one ring between Q/K and V steps needs less shared memory.
  Handle shared(describedA100());
  shared.set<int32_t>(FFPA_POLICY_QKV_SMEM_SHARE, 1);
  auto smem = [](const std::string& config) { return std::stol(config.substr(config.find("smem=") + 5)); };
  CHECK(smem(describeForward(shared, large()).config) < smem(base));

  h.set<int32_t>(FFPA_POLICY_STAGES, 1);
  CHECK_HAS(describeForward(h, large()).config, "stages=1");
  h.set<int32_t>(FFPA_POLICY_STAGES, 4);
  const Described four = describeForward(h, large());
  if (four.status == FFPA_STATUS_SUCCESS) {
    CHECK_HAS(four.config, "stages=4");  // a build with -Dall_stages=true
  } else {
    CHECK(four.status == FFPA_STATUS_NOT_SUPPORTED_KNOB_COMBINATION);
    CHECK_HAS(four.text, "FFPA_POLICY_STAGES=4 is not in this build's stage set");
  }
}

TEST_CASE("persisting Q and K/V follows the knobs within seed 000's head-dim bounds") {
  REQUIRE_COMPILED(128, 256, 320, 512);
  Handle h(describedA100());
  const Problem d320(FFPA_DATA_TYPE_FLOAT16, 1, 8, 8, 1000, 1000, 320, 320);
  CHECK_HAS(describeForward(h, d320).config, "persist_q=1");  // d_qk <= 320
  CHECK_HAS(describeForward(h, large()).config, "persist_q=0");  // d_qk = 512: not persisted
  h.set<int32_t>(FFPA_POLICY_PERSIST_Q_G2S, 0);
  CHECK_HAS(describeForward(h, d320).config, "persist_q=0");
  h.set<int32_t>(FFPA_POLICY_PERSIST_KV_G2S, 0);
  const Described fine = describeForward(h, small());
  CHECK_HAS(fine.config, "persist_kv=0");
  CHECK_LACKS(fine.config, "qk_step=128");
}

TEST_CASE("fragment knobs select their compiled instance or fail naming the knob") {
  REQUIRE_COMPILED(128, 256, 320, 512);
  Handle h(describedA100());
  h.set<int32_t>(FFPA_POLICY_REGISTERS_PIPE_KV, 1);
  CHECK(describeForward(h, large()).kernel == "sm80.forward.f16.d512.acc_f32.pipe_kv");
  h.set<int32_t>(FFPA_POLICY_ACCUMULATOR, FFPA_ACCUMULATOR_QK_F16);
  const Described notCompiled = describeForward(h, large());
  CHECK(notCompiled.status == FFPA_STATUS_NOT_SUPPORTED_KNOB_COMBINATION);
  CHECK_HAS(notCompiled.text, "FFPA_POLICY_REGISTERS_PIPE_KV=1");

  Handle q(describedA100());
  q.set<int32_t>(FFPA_POLICY_PERSIST_Q_S2R, 1);
  CHECK(describeForward(q, small()).kernel == "sm80.forward.f16.d128.acc_f32.q_s2r.v_s2r");
  const Described tooLarge = describeForward(q, large());
  CHECK(tooLarge.status == FFPA_STATUS_NOT_SUPPORTED_KNOB_COMBINATION);
  CHECK_HAS(tooLarge.text, "FFPA_POLICY_PERSIST_Q_S2R=1 needs d_qk <= 128");
  // d_qk = 128 fits, d_v = 256 does not: O's 128 registers leave no room for Q's fragments.
  const Described wideV = describeForward(q, Problem(FFPA_DATA_TYPE_FLOAT16, 1, 8, 8, 1000, 1000, 128, 256));
  CHECK(wideV.status == FFPA_STATUS_NOT_SUPPORTED_KNOB_COMBINATION);
  CHECK_HAS(wideV.text, "needs d_qk <= 128 and d_v <= 128 (here 128/256)");

  Handle v(describedA100());
  v.set<int32_t>(FFPA_POLICY_PERSIST_V_S2R, 0);
  CHECK(describeForward(v, small()).kernel == "sm80.forward.f16.d128.acc_f32");
  CHECK(describeForward(v, Problem(FFPA_DATA_TYPE_FLOAT16, 1, 8, 8, 1000, 1000, 256, 256)).kernel ==
        "sm80.forward.f16.d256.acc_f32");
  // Large head dims split V's columns over warps: the knob is for the small-d kernel only.
  CHECK(describeForward(v, large()).kernel == "sm80.forward.f16.d512.acc_f32");
}

TEST_CASE("knobs left at their defaults give way to the device's shared memory; set ones fail") {
  REQUIRE_COMPILED(128, 256, 320, 512);
  const Problem d256(FFPA_DATA_TYPE_FLOAT16, 1, 8, 8, 1000, 1000, 256, 256);
  Handle h100;
  h100.set<int32_t>(FFPA_POLICY_HOPPER_KERNELS, 0);  // the mma.sync kernel (the Hopper one serves d 256 there)
  CHECK_HAS(describeForward(h100, d256).config, "stages=2");
  CHECK_HAS(describeForward(h100, d256).config, "persist_kv=1");
  Handle a100(describedA100());
  const Described adapted = describeForward(a100, d256);
  CHECK_HAS(adapted.config, "stages=1(fit)");
  a100.set<int32_t>(FFPA_POLICY_STAGES, 2);
  CHECK_HAS(describeForward(a100, d256).config, "persist_kv=0(fit)");
  a100.set<int32_t>(FFPA_POLICY_PERSIST_KV_G2S, 1);
  const Described refused = describeForward(a100, d256);
  CHECK(refused.status == FFPA_STATUS_NOT_SUPPORTED_KNOB_COMBINATION);
  CHECK_HAS(refused.text, "bytes of shared memory per block and the device allows 166912");
}

TEST_CASE("default pipeline steps hold about 32 MMAs per warp and halve to keep two stages where they do not fit") {
  REQUIRE_COMPILED(128, 512);
  // d = 512: 32 keys per column warp (4 n8 tiles), so 8 Q K^T panels per step, and 4 V panels.
  Handle a100(describedA100());
  const Described roomy = describeForward(a100, large());
  CHECK_HAS(roomy.config, "qk_step=128");
  CHECK_HAS(roomy.config, "v_step=64");
  CHECK_HAS(roomy.config, "stages=2");
  CHECK_LACKS(roomy.config, "(fit)");
  Handle ada(describedAda());
  const Described halved = describeForward(ada, large());
  CHECK(halved.status == FFPA_STATUS_SUCCESS);
  CHECK_HAS(halved.config, "qk_step=64");
  CHECK_HAS(halved.config, "v_step=32");
  CHECK_HAS(halved.config, "stages=2");
  CHECK_HAS(halved.config, "steps/2(fit)");
  // Stages the caller set stay; the default steps still halve to make room for them.
  ada.set<int32_t>(FFPA_POLICY_STAGES, 2);
  CHECK_HAS(describeForward(ada, large()).config, "steps/2(fit)");
  // d = 128 in fine steps: the A100 holds two CTAs of 64-key tiles then, which become the default;
  // two row tiles of 64 keys are 16 MMAs per panel, so 2 Q K^T panels (32-key tiles: 4).
  a100.set<int32_t>(FFPA_POLICY_PERSIST_KV_G2S, 0);
  const Described fine = describeForward(a100, small());
  CHECK_HAS(fine.config, "Bc=64");
  CHECK_HAS(fine.config, "qk_step=32");
}

TEST_CASE("P V covers only the output panels below d_v on an instance of a wider d_v") {
  REQUIRE_COMPILED(128);
  // d_v 80 runs on the d_v 128 instance (no build compiles 80): whole tiles of 5 V panels, not 8,
  // so less shared memory (the step counts: test_sm80_step_bounds.cpp).
  Handle a100(describedA100());
  const Problem narrow(FFPA_DATA_TYPE_FLOAT16, 1, 8, 8, 1000, 1000, 128, 80);
  const Described whole = describeForward(a100, narrow);
  CHECK(whole.kernel == "sm80.forward.f16.d128.acc_f32.v_s2r");
  CHECK_HAS(whole.config, "v_step=80");
  CHECK_HAS(whole.config, "smem=60160B");  // 66304 with all 8 panels of V
  a100.set<int32_t>(FFPA_POLICY_PERSIST_KV_G2S, 0);
  CHECK_HAS(describeForward(a100, narrow).config, "v_step=64");
}

TEST_CASE("d_v <= 128: 64-key tiles unless an SM holds more CTAs of 32-key tiles") {
  REQUIRE_COMPILED(128);
  // An H100 holds two CTAs of either layout with two stages (99072 and 66304 bytes), an Ada GPU
  // (100 KiB per SM) one of either: both take 64-key tiles. An A100 (164 KiB) holds two of the
  // 32-key layout and one of the 64-key one: 32-key tiles.
  for (const ffpaDeviceDesc_t& device : {describedH100(), describedAda()}) {
    Handle h(device);
    h.set<int32_t>(FFPA_POLICY_HOPPER_KERNELS, 0);  // on an H100 the Hopper forward serves d_v 128 by default
    const Described wide = describeForward(h, small());
    CHECK(wide.kernel == "sm80.forward.f16.d128.acc_f32.v_s2r.bc64");
    CHECK_HAS(wide.config, "Br=128 Bc=64 warps=4x1 threads=128 warp_rows=32");
    CHECK_HAS(wide.config, "stages=2");
    CHECK_HAS(wide.config, "smem=99072B");
  }
  Handle h100;
  h100.set<int32_t>(FFPA_POLICY_HOPPER_KERNELS, 0);
  Handle narrow(describedA100());
  const Described d = describeForward(narrow, small());
  CHECK(d.kernel == "sm80.forward.f16.d128.acc_f32.v_s2r");
  CHECK_HAS(d.config, "Br=128 Bc=32");
  // One stage: the 64-key layout fits twice on the A100 too.
  Handle staged(describedA100());
  staged.set<int32_t>(FFPA_POLICY_STAGES, 1);
  CHECK(describeForward(staged, small()).kernel == "sm80.forward.f16.d128.acc_f32.v_s2r.bc64");
  // bf16 alike; other accumulators and fragment handlings have 32-key tiles only.
  const Problem bf16(FFPA_DATA_TYPE_BFLOAT16, 1, 8, 8, 1000, 1000, 128, 128);
  CHECK(describeForward(h100, bf16).kernel == "sm80.forward.bf16.d128.acc_f32.v_s2r.bc64");
  Handle piped;
  piped.set<int32_t>(FFPA_POLICY_REGISTERS_PIPE_KV, 1);
  CHECK(describeForward(piped, small()).kernel == "sm80.forward.f16.d128.acc_f32.pipe_kv.v_s2r");
  Handle half;
  half.set<int32_t>(FFPA_POLICY_ACCUMULATOR, FFPA_ACCUMULATOR_F16);
  CHECK(describeForward(half, small()).kernel == "sm80.forward.f16.d128.acc_f16.v_s2r");
}

TEST_CASE("problems outside the fast kernels' domain go to the reference, saying why") {
  REQUIRE_COMPILED(128, 256, 320, 512);
  Handle h(describedA100());
  const Problem fp32(FFPA_DATA_TYPE_FLOAT32, 1, 2, 2, 64, 64, 128, 128);
  CHECK(describeForward(h, fp32).kernel == "reference.cublaslt.forward");
  const Described odd = describeForward(h, Problem(FFPA_DATA_TYPE_FLOAT16, 1, 2, 2, 64, 64, 72, 72));
  CHECK(odd.kernel == "reference.cublaslt.forward");
  CHECK_HAS(odd.text, "sm80.forward: head dims 72/72 (needs multiples of 16");
  // d_qk != d_v (absorbed MLA), GQA, causal: the fast kernel.
  const Problem mla(FFPA_DATA_TYPE_BFLOAT16, 2, 16, 1, 300, 700, 576, 512);
  CHECK(describeForward(h, mla, FFPA_CAUSAL_BOTTOM_RIGHT).kernel == "sm80.forward.bf16.d512.acc_f32");
  // The reference backend policy overrides the planner's choice.
  h.set<int32_t>(FFPA_POLICY_REFERENCE_BACKEND, 1);
  CHECK(describeForward(h, large()).kernel == "reference.cublaslt.forward");
}

TEST_CASE("huge batch x heads switches the default grid layout, an explicit one fails") {
  REQUIRE_COMPILED(128, 256, 320, 512);
  const Problem many(FFPA_DATA_TYPE_FLOAT16, 512, 256, 256, 64, 64, 128, 128);  // B*H = 131072
  Handle h(describedA100());
  const std::string config = describeForward(h, many).config;
  CHECK_HAS(config, "grid=(N/Br,H,B)");
  CHECK_HAS(config, "grid=dnhb(B*H>65535)");
  h.set<int32_t>(FFPA_POLICY_LAUNCH_GRID_DNHB, 0);
  const Described refused = describeForward(h, many);
  CHECK(refused.status == FFPA_STATUS_NOT_SUPPORTED_KNOB_COMBINATION);
  CHECK_HAS(refused.text, "FFPA_POLICY_LAUNCH_GRID_DNHB");
}
