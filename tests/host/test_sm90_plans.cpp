// The plans of the sm90 forward and backward kernels on described devices: with
// FFPA_POLICY_HOPPER_KERNELS on (the default), on compute capability 9.0 the forward serves d_v
// up to 256 with the rows of a CTA split between its consumers (or the columns), 257..512
// (d_qk <= 576) with one CTA per 64 rows and 513..1024 (d_qk <= 1024) with clusters of two, and
// the gradient kernels every head dim up to 1024 (one CTA up to 256, clusters above), in fp16
// and bf16, before the mma.sync kernels; elsewhere, or when the caller sets a knob only the
// mma.sync kernels have, the plan says why it was passed over.
#include "plan_text.h"
#include "test_support.h"

#include <string>
#include <utility>
#include <vector>

using namespace ffpa_test;

namespace {

// The "skipped: sm90.forward: ..." line of a plan description ("" when there is none; the sm90
// variant comes first, so its line is the first).
std::string sm90Skip(const Described& d) {
  const std::string line = planLine(d.text, "skipped");
  return line.rfind("sm90.forward: ", 0) == 0 ? line : std::string();
}

// A handle on `device` with the Hopper kernels enabled.
struct HopperHandle : Handle {
  explicit HopperHandle(const ffpaDeviceDesc_t& device = describedH100()) : Handle(device) {
    set<int32_t>(FFPA_POLICY_HOPPER_KERNELS, 1);
  }
};

}  // namespace

TEST_CASE("the Hopper kernels are on by default, and off they say so") {
  Handle h;
  CHECK(h.get(FFPA_POLICY_HOPPER_KERNELS) == 1);
  const Problem p(FFPA_DATA_TYPE_FLOAT16, 1, 8, 8, 1000, 1000, 512, 512);
  if (hopperCompiled()) {
    const Described byDefault = describeForward(h, p);
    REQUIRE(byDefault.status == FFPA_STATUS_SUCCESS);
    CHECK(byDefault.kernel.rfind("sm90.forward", 0) == 0);
  }
  h.set<int32_t>(FFPA_POLICY_HOPPER_KERNELS, 0);
  const Described d = describeForward(h, p);
  REQUIRE(d.status == FFPA_STATUS_SUCCESS);
  CHECK(d.kernel.rfind("sm80.forward", 0) == 0);
  CHECK(sm90Skip(d) == "sm90.forward: FFPA_POLICY_HOPPER_KERNELS=0");
  ScopedEnvironment off({{"ENABLE_FFPA_HOPPER_KERNELS", "0"}});
  Handle fromEnvironment;
  CHECK(fromEnvironment.get(FFPA_POLICY_HOPPER_KERNELS) == 0);
}

TEST_CASE("without sm_90a code the H100 plan says so and uses the mma.sync kernel") {
  if (hopperCompiled()) {
    MESSAGE("skipped: this build compiles sm_90a code");
    return;
  }
  HopperHandle h;
  const Problem p(FFPA_DATA_TYPE_FLOAT16, 1, 8, 8, 1000, 1000, 512, 512);
  const Described d = describeForward(h, p);
  REQUIRE(d.status == FFPA_STATUS_SUCCESS);
  CHECK_HAS(d.text, "skipped: sm90.forward: this build compiles no sm_90a code");
}

TEST_CASE("the sm90 forward serves d_v 65..1024 on compute capability 9.0") {
  if (!hopperCompiled()) {
    MESSAGE("skipped: this build compiles no sm_90a code");
    return;
  }
  HopperHandle h;
  struct Case {
    ffpaDataType_t dtype;
    int64_t dqk, dv;
    const char* kernel;
  };
  const Case cases[] = {
      {FFPA_DATA_TYPE_FLOAT16, 512, 512, "sm90.forward.f16.d512"},
      {FFPA_DATA_TYPE_BFLOAT16, 320, 320, "sm90.forward.bf16.d320"},
      {FFPA_DATA_TYPE_BFLOAT16, 576, 512, "sm90.forward.bf16.d512"},  // absorbed MLA
      {FFPA_DATA_TYPE_FLOAT16, 384, 272, "sm90.forward.f16.d320"},
      {FFPA_DATA_TYPE_FLOAT16, 448, 448, "sm90.forward.f16.d448"},
      {FFPA_DATA_TYPE_BFLOAT16, 1024, 1024, "sm90.forward.bf16.d1024"},
      {FFPA_DATA_TYPE_FLOAT16, 576, 528, "sm90.forward.f16.d640"},
      {FFPA_DATA_TYPE_FLOAT16, 64, 768, "sm90.forward.f16.d768"},
      {FFPA_DATA_TYPE_BFLOAT16, 896, 880, "sm90.forward.bf16.d896"},
      // d_v up to 256: the rows split between the consumers, each with all columns (16..64 on the
      // 64 instance); d_qk 576 does not fit its shared memory: the split of the columns (65..128
      // on the 128 instance, a block per consumer). Up to d_v 128, KV tiles of 128 keys where two
      // K buffers of them fit (d_qk up to 192 at d_v 128, 256 at 64), else of 64.
      {FFPA_DATA_TYPE_FLOAT16, 128, 128, "sm90.forward.f16.d128.row_split.bc128"},
      {FFPA_DATA_TYPE_BFLOAT16, 64, 80, "sm90.forward.bf16.d128.row_split.bc128"},
      {FFPA_DATA_TYPE_FLOAT16, 192, 128, "sm90.forward.f16.d128.row_split.bc128"},
      {FFPA_DATA_TYPE_FLOAT16, 256, 128, "sm90.forward.f16.d128.row_split"},
      {FFPA_DATA_TYPE_FLOAT16, 576, 128, "sm90.forward.f16.d128"},
      {FFPA_DATA_TYPE_BFLOAT16, 192, 144, "sm90.forward.bf16.d192.row_split"},
      {FFPA_DATA_TYPE_FLOAT16, 256, 256, "sm90.forward.f16.d256.row_split"},
      {FFPA_DATA_TYPE_FLOAT16, 64, 64, "sm90.forward.f16.d64.row_split.bc128"},
      {FFPA_DATA_TYPE_BFLOAT16, 32, 48, "sm90.forward.bf16.d64.row_split.bc128"},
      {FFPA_DATA_TYPE_BFLOAT16, 256, 64, "sm90.forward.bf16.d64.row_split.bc128"},
      {FFPA_DATA_TYPE_BFLOAT16, 320, 64, "sm90.forward.bf16.d64.row_split"},
      // d_qk 448 leaves the row split one K buffer (384 two, with P in registers): the split of the
      // columns by default, unless d_v is 64 or less (the row split alone serves it).
      {FFPA_DATA_TYPE_FLOAT16, 384, 128, "sm90.forward.f16.d128.row_split"},
      {FFPA_DATA_TYPE_FLOAT16, 448, 128, "sm90.forward.f16.d128"},
      {FFPA_DATA_TYPE_FLOAT16, 448, 64, "sm90.forward.f16.d64.row_split"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.kernel);
    const Problem p(c.dtype, 2, 8, 2, 1000, 777, c.dqk, c.dv);
    for (const ffpaCausalMode_t causal : {FFPA_CAUSAL_NONE, FFPA_CAUSAL_TOP_LEFT, FFPA_CAUSAL_BOTTOM_RIGHT}) {
      const Described d = describeForward(h, p, causal);
      REQUIRE(d.status == FFPA_STATUS_SUCCESS);
      CHECK(d.kernel == c.kernel);
      CHECK_HAS(d.config, "warpgroups=1+2 threads=384");
      CHECK_HAS(d.config, "grid=(N/Br,B*H)");
    }
  }
  // One CTA splits its columns evenly by default (the skewed split is a launch parameter, below).
  const Problem p512(FFPA_DATA_TYPE_FLOAT16, 1, 8, 8, 1000, 1000, 512, 512);
  CHECK_HAS(describeForward(h, p512).config, "columns=256+256 split=even");
  const Problem p320(FFPA_DATA_TYPE_FLOAT16, 1, 8, 8, 1000, 1000, 320, 320);
  // The two splits agree at 320: none named. The plan names whether the consumers overlap (on by
  // default; the "overlap" launch parameter).
  CHECK_HAS(describeForward(h, p320).config, "columns=128+192 overlap=1 smem=");
  CHECK_HAS(describeForward(h, p512).config, "split=even overlap=1 smem=");
  CHECK_HAS(describeForward(h, p512).config, "cluster=1 ");
  // Above 512, two CTAs of a cluster split the head dims and exchange partial scores; the grid
  // has two CTAs per 64 rows.
  const Problem p1024(FFPA_DATA_TYPE_BFLOAT16, 1, 8, 8, 1000, 1000, 1024, 1024);
  const Described d1024 = describeForward(h, p1024);
  // In a cluster consumer 1 takes about five eighths of a CTA's columns (consumer 0 also
  // exchanges partial scores).
  CHECK_HAS(d1024.config, "cluster=2 columns=192+320 split=skewed overlap=1 exchange=S:dsmem k_buffers=1");
  // Up to 384 columns of d_qk per CTA shared memory holds a second K buffer (K loads a tile
  // ahead): 640 and 768, not 896 and 1024.
  const Problem p640(FFPA_DATA_TYPE_FLOAT16, 1, 8, 8, 1000, 1000, 640, 640);
  CHECK_HAS(describeForward(h, p640).config, "cluster=2 columns=128+192 overlap=1 exchange=S:dsmem k_buffers=2 smem=198536 ");
  const Problem p768(FFPA_DATA_TYPE_FLOAT16, 1, 8, 8, 1000, 1000, 768, 768);
  CHECK_HAS(describeForward(h, p768).config, "cluster=2 columns=128+256 split=skewed overlap=1 exchange=S:dsmem k_buffers=2");
  // d_qk decides: 1024 / 640 keeps half of 1024 per CTA, one buffer.
  const Problem wideQk(FFPA_DATA_TYPE_FLOAT16, 1, 8, 8, 1000, 1000, 1024, 640);
  CHECK_HAS(describeForward(h, wideQk).config, "k_buffers=1");
  const Problem p896(FFPA_DATA_TYPE_FLOAT16, 1, 8, 8, 1000, 1000, 896, 896);
  CHECK_HAS(describeForward(h, p896).config, "cluster=2 columns=128+320 split=skewed");
  // The row split: 128 rows per CTA, two K buffers where they fit (d_qk 256 with d_v 64 does, 448
  // does not), no P blocks; at d_v 128 KV tiles of 128 keys (K and V blocks of two boxes each,
  // S m64n128), at 256 of 64.
  const Problem p128(FFPA_DATA_TYPE_FLOAT16, 1, 8, 8, 1000, 1000, 128, 128);
  CHECK_HAS(describeForward(h, p128).config,
            "Br=128 Bc=128 warpgroups=1+2 threads=384 d_v<=128 cluster=1 rows=64+64 columns=128 pingpong=1 "
            "k_buffers=2 v_buffers=2 smem=165000 tma=64x64 swizzle=128B wgmma=m64n128k16 ");
  const Problem p256(FFPA_DATA_TYPE_FLOAT16, 1, 8, 8, 1000, 1000, 256, 256);
  CHECK_HAS(describeForward(h, p256).config,
            "Br=128 Bc=64 warpgroups=1+2 threads=384 d_v<=256 cluster=1 rows=64+64 columns=256 pingpong=1 "
            "k_buffers=2 v_buffers=2 smem=197768 tma=64x64 swizzle=128B wgmma=m64n64k16 ");
  const Problem wide(FFPA_DATA_TYPE_FLOAT16, 1, 8, 8, 1000, 1000, 256, 64);
  CHECK_HAS(describeForward(h, wide).config, "Bc=128 warpgroups=1+2 threads=384 d_v<=64 ");
  CHECK_HAS(describeForward(h, wide).config, "columns=64 pingpong=1 k_buffers=2 ");
  const Problem wider(FFPA_DATA_TYPE_FLOAT16, 1, 8, 8, 1000, 1000, 448, 64);
  CHECK_HAS(describeForward(h, wider).config, "columns=64 pingpong=1 k_buffers=1 ");
  // P stays in the consumers' registers: two Q tiles, one K and two V buffers of d_qk 512 fit.
  const Problem widest(FFPA_DATA_TYPE_FLOAT16, 1, 8, 8, 1000, 1000, 512, 64);
  CHECK_HAS(describeForward(h, widest).config, "columns=64 pingpong=1 k_buffers=1 ");
  // With attention slices, or K and V shared, the split of the columns below 320 too; the splits
  // agree there (a block or two each; 192: consumer 1 the larger half), none named.
  Handle sharing(describedH100());
  sharing.set<int32_t>(FFPA_POLICY_HOPPER_KV_MULTICAST, 1);
  for (const auto& [d, columns] : {std::pair{128, "64+64"}, std::pair{192, "64+128"}, std::pair{256, "128+128"}}) {
    const Problem small(FFPA_DATA_TYPE_BFLOAT16, 1, 8, 8, 1000, 1000, d, d);
    const Described shared = describeForward(sharing, small);
    CHECK(shared.kernel == "sm90.forward.bf16.d" + std::to_string(d) + ".kv2");
    CHECK_HAS(shared.config, std::string("cluster=2 columns=") + columns + " kv=multicast:2 row tiles");
  }
}

TEST_CASE("outside its domain the sm90 forward gives way to the mma.sync kernels, saying why") {
  if (!hopperCompiled()) {
    MESSAGE("skipped: this build compiles no sm_90a code");
    return;
  }
  REQUIRE_COMPILED(128, 512, 1024);
  HopperHandle h;
  struct Case {
    int64_t dqk, dv;
    const char* why;
  };
  const Case cases[] = {
      {640, 512, "d_qk = 640 is not a multiple of 16 up to 576 (with d_v = 512)"},
      {1024, 48,
       "d_v = 48 is outside the sm90 forward's 65..1024; the row split needs 410760 bytes of shared memory at d_qk = "
       "1024"},
  };
  for (const Case& c : cases) {
    INFO(c.why);
    const Problem p(FFPA_DATA_TYPE_FLOAT16, 1, 4, 4, 300, 300, c.dqk, c.dv);
    const Described d = describeForward(h, p);
    REQUIRE(d.status == FFPA_STATUS_SUCCESS);
    CHECK_MESSAGE(d.kernel.rfind("sm80.forward", 0) == 0, d.kernel);
    CHECK_HAS(sm90Skip(d), c.why);
  }
  // TMA steps over rows in multiples of 16 bytes: rows of 324 fp16 elements (648 bytes) are not.
  const int64_t rows = 300, d = 320, padded = 324;
  const std::vector<int64_t> strides = {4 * rows * padded, rows * padded, padded, 1};
  const Tensor q(FFPA_DATA_TYPE_FLOAT16, {1, 4, rows, d}, strides), k(FFPA_DATA_TYPE_FLOAT16, {1, 4, rows, d}, strides),
      v(FFPA_DATA_TYPE_FLOAT16, {1, 4, rows, d}, strides), o(FFPA_DATA_TYPE_FLOAT16, {1, 4, rows, d}),
      lse(FFPA_DATA_TYPE_FLOAT32, {1, 4, rows});
  const Described padded648 = describeForward(h, q, k, v, o, lse);
  REQUIRE(padded648.status == FFPA_STATUS_SUCCESS);
  CHECK(padded648.kernel.rfind("sm90", 0) != 0);
  CHECK_HAS(sm90Skip(padded648), "strides (batch, head, row) that are positive multiples of 16 bytes");
  // O is stored in 4-byte pairs: an odd row stride keeps the sm90 kernel out.
  const Tensor q320(FFPA_DATA_TYPE_FLOAT16, {1, 4, rows, d}), k320(FFPA_DATA_TYPE_FLOAT16, {1, 4, rows, d}),
      v320(FFPA_DATA_TYPE_FLOAT16, {1, 4, rows, d});
  const Tensor oddRows(FFPA_DATA_TYPE_FLOAT16, {1, 4, rows, d}, {4 * rows * 321, rows * 321, 321, 1});
  const Described oddO = describeForward(h, q320, k320, v320, oddRows, lse);
  REQUIRE(oddO.status == FFPA_STATUS_SUCCESS);
  CHECK(oddO.kernel.rfind("sm90", 0) != 0);
  CHECK_HAS(sm90Skip(oddO), "O strides must be multiples of 2 elements (4 bytes); stride 2 is 321");
  // An Ampere device never gets sm_90a code.
  HopperHandle a100(describedA100());
  const Problem p(FFPA_DATA_TYPE_FLOAT16, 1, 8, 8, 1000, 1000, 512, 512);
  const Described ampere = describeForward(a100, p);
  CHECK(ampere.kernel == "sm80.forward.f16.d512.acc_f32");
  CHECK_HAS(sm90Skip(ampere), "compute capability 9.0 only");
  // Nor does a 9.0 device with too little shared memory for the tiles.
  ffpaDeviceDesc_t small = describedH100();
  small.sharedMemPerBlockOptin = 160 * 1024;
  HopperHandle cramped(small);
  CHECK_HAS(sm90Skip(describeForward(cramped, p)), "bytes of shared memory per block; the device allows 163840");
}

TEST_CASE("a knob of the mma.sync kernels asks for them; the grid layout is honoured by both") {
  if (!hopperCompiled()) {
    MESSAGE("skipped: this build compiles no sm_90a code");
    return;
  }
  REQUIRE_COMPILED(512);
  const Problem p(FFPA_DATA_TYPE_FLOAT16, 1, 8, 8, 1000, 1000, 512, 512);
  struct Flip {
    ffpaPolicyKnob_t knob;
    int32_t value;
    const char* message;
  };
  const Flip flips[] = {
      {FFPA_POLICY_STAGES, 2, "FFPA_POLICY_STAGES=2 is a knob of the mma.sync kernels"},
      {FFPA_POLICY_PREFETCH_QKV, 0, "FFPA_POLICY_PREFETCH_QKV=0"},
      {FFPA_POLICY_SMEM_SWIZZLE_K, 0, "FFPA_POLICY_SMEM_SWIZZLE_K=0"},
      {FFPA_POLICY_REGISTERS_PIPE_KV, 1, "FFPA_POLICY_REGISTERS_PIPE_KV=1"},
      {FFPA_POLICY_ACCUMULATOR, FFPA_ACCUMULATOR_QK_F16, "FFPA_POLICY_ACCUMULATOR=qk_f16"},
  };
  for (const Flip& flip : flips) {
    CAPTURE(flip.message);
    HopperHandle h;
    h.set<int32_t>(flip.knob, flip.value);
    const Described d = describeForward(h, p);
    REQUIRE(d.status == FFPA_STATUS_SUCCESS);
    CHECK(d.kernel.rfind("sm80.forward.f16.d512", 0) == 0);
    CHECK_HAS(sm90Skip(d), flip.message);
  }
  // A knob set to its default value changes nothing.
  HopperHandle same;
  same.set<int32_t>(FFPA_POLICY_PREFETCH_QKV, 1);
  CHECK(describeForward(same, p).kernel == "sm90.forward.f16.d512");
  HopperHandle dnhb;
  dnhb.set<int32_t>(FFPA_POLICY_LAUNCH_GRID_DNHB, 1);
  const Described d = describeForward(dnhb, p);
  CHECK(d.kernel == "sm90.forward.f16.d512");
  CHECK_HAS(d.config, "grid=(N/Br,H,B)");
  // The reference backend still wins when asked for.
  HopperHandle reference;
  reference.set<int32_t>(FFPA_POLICY_REFERENCE_BACKEND, 1);
  CHECK(describeForward(reference, p).kernel.rfind("reference", 0) == 0);
}

TEST_CASE("exp2 emulation: a knob of the Hopper forward, refused by name elsewhere") {
  const Problem p(FFPA_DATA_TYPE_BFLOAT16, 1, 8, 8, 1000, 1000, 512, 512);
  Handle plain;
  CHECK(plain.get(FFPA_POLICY_EXP2_EMULATION) == 0);
  plain.set<int32_t>(FFPA_POLICY_HOPPER_KERNELS, 0);
  plain.set<int32_t>(FFPA_POLICY_EXP2_EMULATION, 4);
  const Described refused = describeForward(plain, p);
  CHECK(refused.status == FFPA_STATUS_NOT_SUPPORTED_KNOB_COMBINATION);
  CHECK_HAS(refused.text, "FFPA_POLICY_EXP2_EMULATION=4 needs the Hopper forward");
  CHECK(describeBackward(plain, p).status == FFPA_STATUS_SUCCESS);  // the backward ignores it
  int32_t nine = 9;
  CHECK_FAILS_WITH(ffpaSetPolicy(plain, FFPA_POLICY_EXP2_EMULATION, &nine, sizeof nine),
                   FFPA_STATUS_BAD_PARAM_OUT_OF_BOUND, "FFPA_POLICY_EXP2_EMULATION", "0 to 8");
  if (!hopperCompiled()) {
    MESSAGE("skipped: this build compiles no sm_90a code");
    return;
  }
  HopperHandle h;
  CHECK_HAS(describeForward(h, p).config, "exp2_emulated=0/8");
  h.set<int32_t>(FFPA_POLICY_EXP2_EMULATION, 8);
  const Described emulated = describeForward(h, p);
  CHECK(emulated.kernel == "sm90.forward.bf16.d512");
  CHECK_HAS(emulated.config, "exp2_emulated=8/8");
  // A problem the Hopper kernel does not serve fails rather than losing the knob.
  const Problem uncovered(FFPA_DATA_TYPE_BFLOAT16, 1, 8, 8, 1000, 1000, 1024, 48);
  CHECK(describeForward(h, uncovered).status == FFPA_STATUS_NOT_SUPPORTED_KNOB_COMBINATION);
  const Problem d64(FFPA_DATA_TYPE_BFLOAT16, 1, 8, 8, 1000, 1000, 64, 64);
  CHECK_HAS(describeForward(h, d64).config, "exp2_emulated=8/8");
}

TEST_CASE("the sm90 backward: Hopper dQ and dK/dV kernels where they serve, the mma.sync ones elsewhere") {
  if (!hopperCompiled()) {
    MESSAGE("skipped: this build compiles no sm_90a code");
    return;
  }
  REQUIRE_COMPILED(128, 256, 320, 512, 1024);
  HopperHandle h;
  struct Case {
    ffpaDataType_t dtype;
    int64_t dqk, dv;
    const char* kernel;
    const char* config;
  };
  const Case cases[] = {
      // One CTA for both kernels up to 256, with two K (dQ) and two Q (dK/dV) buffers.
      {FFPA_DATA_TYPE_FLOAT16, 128, 128, "sm90.backward.f16.dq128.dkdv128",
       "dQ: sm90 Br=64 Bc=64 warpgroups=1+2 threads=384 cluster=1 columns=64+64 k_buffers=2"},
      {FFPA_DATA_TYPE_FLOAT16, 128, 128, "sm90.backward.f16.dq128.dkdv128",
       "dK/dV: sm90 Br=64 Bc=64 warpgroups=1+2 threads=384 cluster=1 columns=64+64 q_buffers=2"},
      {FFPA_DATA_TYPE_BFLOAT16, 256, 256, "sm90.backward.bf16.dq256.dkdv256",
       "dK/dV: sm90 Br=64 Bc=64 warpgroups=1+2 threads=384 cluster=1 columns=128+128 q_buffers=2"},
      {FFPA_DATA_TYPE_BFLOAT16, 176, 208, "sm90.backward.bf16.dq192.dkdv256", "dQ: sm90 "},
      {FFPA_DATA_TYPE_FLOAT16, 96, 80, "sm90.backward.f16.dq128.dkdv128", "cluster=1 columns=64+64"},
      // Up to 64 columns consumer 1 holds all of the gradient, consumer 0 none.
      {FFPA_DATA_TYPE_FLOAT16, 64, 128, "sm90.backward.f16.dq64.dkdv128", "dQ: sm90 Br=64 Bc=64 warpgroups=1+2 "
                                                                         "threads=384 cluster=1 columns=0+64"},
      {FFPA_DATA_TYPE_BFLOAT16, 32, 48, "sm90.backward.bf16.dq64.dkdv64", "dK/dV: sm90 Br=64 Bc=64 warpgroups=1+2 "
                                                                          "threads=384 cluster=1 columns=0+64"},
      {FFPA_DATA_TYPE_FLOAT16, 320, 320, "sm90.backward.f16.dq320.dkdv384x2", "dQ: sm90 Br=64 Bc=64 warpgroups=1+2"},
      {FFPA_DATA_TYPE_BFLOAT16, 384, 384, "sm90.backward.bf16.dq384.dkdv384x2",
       "cluster=1 columns=192+192 k_buffers=1 smem=230576"},
      {FFPA_DATA_TYPE_FLOAT16, 272, 304, "sm90.backward.f16.dq320.dkdv384x2", "dK/dV: sm90 "},
      // Two Q (dK/dV) and two K (dQ) buffers where 227 KiB holds them: 20 and 22 barriers.
      {FFPA_DATA_TYPE_BFLOAT16, 512, 512, "sm90.backward.bf16.dq512x2.dkdv512x2",
       "dK/dV: sm90 Br=64 Bc=64 warpgroups=1+2 threads=384 cluster=2 columns=128+128 exchange=S^T,dP^T:dsmem "
       "q_buffers=2 smem=230560"},
      {FFPA_DATA_TYPE_BFLOAT16, 512, 512, "sm90.backward.bf16.dq512x2.dkdv512x2",
       "dQ: sm90 Br=64 Bc=64 warpgroups=1+2 threads=384 cluster=2 columns=128+128 exchange=S,dP:dsmem "
       "k_buffers=2 smem=230576"},
      // Clusters of four for dK/dV above 512: the 768 instance's CTAs hold 3 of 576's 9 K blocks,
      // 2 of 512's 8 V blocks, two buffers of 3 Q blocks, 3 dO blocks, P, dS, dP and two stages
      // of two exchanges.
      {FFPA_DATA_TYPE_BFLOAT16, 576, 512, "sm90.backward.bf16.dq640x2.dkdv768x4",
       "dK/dV: sm90 Br=64 Bc=64 warpgroups=1+2 threads=384 cluster=4 columns=64+128 exchange=S^T,dP^T:dsmem "
       "q_buffers=2 smem=214176"},
      {FFPA_DATA_TYPE_FLOAT16, 640, 640, "sm90.backward.f16.dq640x2.dkdv768x4",
       "cluster=2 columns=128+192 exchange=S,dP:dsmem"},
      {FFPA_DATA_TYPE_FLOAT16, 320, 640, "sm90.backward.f16.dq384x2.dkdv768x4", "cluster=2 columns=64+128"},
      // d_qk 128 beside a d_v that needs a cluster: the cluster's smallest dQ instance.
      {FFPA_DATA_TYPE_FLOAT16, 128, 512, "sm90.backward.f16.dq384x2.dkdv512x2", "cluster=2 columns=64+128"},
      // Clusters of four for dQ above 640: a quarter of Q, dO, K and V (4 blocks each; no room
      // for a second K buffer), two dS slots, dP and two stages of two exchanges, 22 barriers,
      // 1024 bytes of alignment.
      {FFPA_DATA_TYPE_BFLOAT16, 1024, 1024, "sm90.backward.bf16.dq1024x4.dkdv1024x4",
       "dQ: sm90 Br=64 Bc=64 warpgroups=1+2 threads=384 cluster=4 columns=128+128 exchange=S,dP:dsmem k_buffers=1 "
       "smem=230576"},
      {FFPA_DATA_TYPE_FLOAT16, 704, 640, "sm90.backward.f16.dq768x4.dkdv768x4", "cluster=4 columns=64+128"},
      {FFPA_DATA_TYPE_FLOAT16, 128, 1024, "sm90.backward.f16.dq768x4.dkdv1024x4", "cluster=4 columns=64+128"},
  };
  for (const Case& c : cases) {
    const std::string kernel = c.kernel;
    CAPTURE(kernel);
    const Problem p(c.dtype, 2, 8, 2, 1000, 777, c.dqk, c.dv);
    for (const ffpaCausalMode_t causal : {FFPA_CAUSAL_NONE, FFPA_CAUSAL_BOTTOM_RIGHT}) {
      const Described d = describeBackward(h, p, causal);
      REQUIRE(d.status == FFPA_STATUS_SUCCESS);
      CHECK(d.kernel == c.kernel);
      CHECK_HAS(d.config, c.config);
      CHECK_HAS(d.config, "mma.sync part: sm80.backward.");  // the row statistics' instance, named
    }
  }
  // Where a knob of the mma.sync kernels is set, the sm80 backward runs all three kernels and the
  // plan says why (the sm90 kernels serve every head dim; a tuned config may also hand a problem
  // back: test_tuned_plans.cpp).
  const Problem p(FFPA_DATA_TYPE_FLOAT16, 1, 8, 8, 1000, 1000, 512, 512);
  HopperHandle staged;
  staged.set<int32_t>(FFPA_POLICY_STAGES, 2);
  const Described knob = describeBackward(staged, p);
  CHECK(knob.kernel == "sm80.backward.f16.d512");
  CHECK_HAS(knob.text, "skipped: sm90.backward: FFPA_POLICY_STAGES=2 is a knob of the mma.sync kernels");
  Handle off;
  off.set<int32_t>(FFPA_POLICY_HOPPER_KERNELS, 0);
  CHECK(describeBackward(off, p).kernel == "sm80.backward.f16.d512");
  if (hopperCompiled()) {
    Handle byDefault;  // on by default
    CHECK(describeBackward(byDefault, p).kernel.rfind("sm90.backward", 0) == 0);
  }
  HopperHandle dnhb;
  dnhb.set<int32_t>(FFPA_POLICY_LAUNCH_GRID_DNHB, 1);
  CHECK_HAS(describeBackward(dnhb, p).config, "grid=(N/Br,H,B)");
  HopperHandle deterministic;  // no atomics: the same plan serves the deterministic policy
  deterministic.set<int32_t>(FFPA_POLICY_DETERMINISTIC, 1);
  CHECK(describeBackward(deterministic, p).kernel == "sm90.backward.f16.dq512x2.dkdv512x2");
}

TEST_CASE("K and V multicast: two row tiles share them when the knob asks and the problem allows") {
  if (!hopperCompiled()) {
    MESSAGE("skipped: this build compiles no sm_90a code");
    return;
  }
  HopperHandle h;
  CHECK(h.get(FFPA_POLICY_HOPPER_KV_MULTICAST) == 0);
  const Problem p(FFPA_DATA_TYPE_BFLOAT16, 2, 8, 2, 1000, 777, 512, 512);
  CHECK(describeForward(h, p).kernel == "sm90.forward.bf16.d512");
  h.set<int32_t>(FFPA_POLICY_HOPPER_KV_MULTICAST, 1);
  for (const ffpaCausalMode_t causal : {FFPA_CAUSAL_NONE, FFPA_CAUSAL_TOP_LEFT, FFPA_CAUSAL_BOTTOM_RIGHT}) {
    const Described d = describeForward(h, p, causal);
    REQUIRE(d.status == FFPA_STATUS_SUCCESS);
    CHECK(d.kernel == "sm90.forward.bf16.d512.kv2");
    CHECK_HAS(d.config, "cluster=2 columns=256+256 kv=multicast:2 row tiles");
  }
  const Problem p320(FFPA_DATA_TYPE_FLOAT16, 1, 4, 4, 65, 65, 384, 272);
  CHECK(describeForward(h, p320).kernel == "sm90.forward.f16.d320.kv2");
  // One row tile has no neighbour to share with; above 512 the clusters split the head dims.
  const Problem oneTile(FFPA_DATA_TYPE_FLOAT16, 1, 4, 4, 64, 1000, 512, 512);
  CHECK(describeForward(h, oneTile).kernel == "sm90.forward.f16.d512");
  const Problem wide(FFPA_DATA_TYPE_BFLOAT16, 1, 8, 8, 1000, 1000, 1024, 1024);
  CHECK(describeForward(h, wide).kernel == "sm90.forward.bf16.d1024");
  // The environment variable, and the backward, which ignores the knob.
  ScopedEnvironment on({{"FFPA_HOPPER_KV_MULTICAST", "1"}});
  Handle fromEnvironment(describedH100());
  CHECK(fromEnvironment.get(FFPA_POLICY_HOPPER_KV_MULTICAST) == 1);
  CHECK(describeForward(fromEnvironment, p).kernel == "sm90.forward.bf16.d512.kv2");
  const Described bwd = describeBackward(h, p);
  REQUIRE(bwd.status == FFPA_STATUS_SUCCESS);
  CHECK(bwd.kernel.rfind("sm90.backward", 0) == 0);
}

TEST_CASE("attention slices: the sm90 forward and gradient kernels serve them") {
  if (!hopperCompiled()) {
    MESSAGE("skipped: this build compiles no sm_90a code");
    return;
  }
  REQUIRE_COMPILED(512);
  HopperHandle h;
  const Problem p(FFPA_DATA_TYPE_BFLOAT16, 1, 8, 8, 1000, 1000, 512, 512);
  ffpaAttentionSlices_t slices = nullptr;
  REQUIRE_OK(ffpaCreateAttentionSlices(h, &slices));
  const int32_t documents[] = {0, 300, 333, 1000};  // three packed causal documents
  REQUIRE_OK(ffpaSetAttentionSlicesFromOffsets(slices, 3, documents, nullptr, FFPA_SLICE_MASK_CAUSAL));
  Attention attn;
  REQUIRE_OK(ffpaSetAttentionDescriptorSlices(attn, slices));
  const Described fwd = describeForward(h, attn, p.q, p.k, p.v, p.o, p.lse);
  REQUIRE_MESSAGE(fwd.status == FFPA_STATUS_SUCCESS, fwd.text);
  CHECK(fwd.kernel == "sm90.forward.bf16.d512");
  // Row tiles of different segments walk different keys: no sharing of K and V with slices.
  h.set<int32_t>(FFPA_POLICY_HOPPER_KV_MULTICAST, 1);
  CHECK(describeForward(h, attn, p.q, p.k, p.v, p.o, p.lse).kernel == "sm90.forward.bf16.d512");
  const Described bwd = describeBackward(h, attn, p.q, p.k, p.v, p.o, p.dO, p.lse, p.dq, p.dk, p.dv);
  REQUIRE_MESSAGE(bwd.status == FFPA_STATUS_SUCCESS, bwd.text);
  CHECK(bwd.kernel == "sm90.backward.bf16.dq512x2.dkdv512x2");
  ffpaDestroyAttentionSlices(slices);
}
