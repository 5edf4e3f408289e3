// The planner's decision path against a test registry and a described device: fast variants win
// where they apply, the reference serves the rest, a rejected knob combination fails instead of
// falling back, and the reference-backend policy overrides everything.
#include "core/error.h"
#include "core/kernel_registry.h"
#include "core/key_splits.h"
#include "core/planner.h"

#include "core_device.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

using namespace ffpa;
using ffpa_test::builtinVariant;
using ffpa_test::hopper;

namespace {

AttentionProblem problem(int64_t headDim, Direction direction = Direction::Forward) {
  AttentionProblem p;
  p.direction = direction;
  p.dtype = FFPA_DATA_TYPE_FLOAT16;
  p.batch = 1;
  p.headsQ = p.headsKv = 8;
  p.seqQ = p.seqKv = 1024;
  p.headDimQk = p.headDimV = headDim;
  return p;
}

// The same with packed [B, H, N, D] tensors, whose strides the fast kernels (and TMA) take.
AttentionProblem packedProblem(int64_t headDim, Direction direction = Direction::Forward) {
  AttentionProblem p = problem(headDim, direction);
  const Strides qko = {p.headsQ * p.seqQ * headDim, p.seqQ * headDim, headDim, 1};
  p.q = p.k = p.v = p.o = qko;
  p.lse = {p.headsQ * p.seqQ, p.seqQ, 1, 0};
  if (direction == Direction::Backward) p.dO = p.dq = p.dk = p.dv = qko;
  return p;
}

// The built-in kernel variant named `name` (null if there is none).
// A policy with runtime autotune on.
Policy autotunePolicy() {
  Policy policy;
  policy.setValue(FFPA_POLICY_AUTOTUNE, 1);
  return policy;
}

class ThrowsWith {
 public:
  ThrowsWith(ffpaStatus_t status, std::string fragment) : status_(status), fragment_(std::move(fragment)) {}
  template <class Fn>
  void check(Fn&& fn) const {
    try {
      fn();
      FAIL("no error thrown");
    } catch (const Error& e) {
      CHECK(e.status() == status_);
      CHECK_MESSAGE(std::string(e.what()).find(fragment_) != std::string::npos, std::string(e.what()));
    }
  }

 private:
  ffpaStatus_t status_;
  std::string fragment_;
};

Plan dummyPlan(const char* config, size_t bytes) {
  Plan plan;
  plan.config = config;
  plan.kernelWorkspaceBytes = bytes;
  return plan;
}

// A registry with a reference and a "fast" variant for head dims >= 256 that refuses the fp16
// accumulator (as if it were not compiled).
KernelRegistry testRegistry() {
  KernelRegistry r;
  r.add({"test.reference", Direction::Forward, 0, true,
         [](const PlanRequest&) { return Support::applies(); },
         [](const PlanRequest&) { return dummyPlan("reference", 1000); }, {}});
  r.add({"test.fast", Direction::Forward, 10, false,
         [](const PlanRequest& q) {
           if (q.problem.headDimQk < 256) return Support::notApplicable("head dim below 256");
           if (q.policy.accumulator() == FFPA_ACCUMULATOR_F16) {
             return Support::rejected(FFPA_STATUS_NOT_SUPPORTED_KNOB_COMBINATION,
                                      "FFPA_ACCUMULATOR_F16 is not compiled into this build");
           }
           return Support::applies();
         },
         [](const PlanRequest& q) {
           // An autotune candidate shows in the config: "fast speed=2".
           std::string config = q.device.smVersion >= 90 ? "fast sm90" : "fast";
           if (q.launchConfig != nullptr && q.launchConfig->count("speed")) {
             config += " speed=" + std::to_string(q.launchConfig->at("speed"));
           }
           return dummyPlan(config.c_str(), 300);
         },
         [](const PlanRequest&) {
           return std::vector<tuning::LaunchConfig>{{{"speed", 1}}, {{"speed", 2}}, {{"speed", 3}}};
         }});
  return r;
}

// A timer that knows the speed of each candidate: speed=2 is fastest, the defaults slowest;
// speed=3 cannot run.
class FakeTimer : public CandidateTimer {
 public:
  double milliseconds(const Plan& plan) override {
    ++calls;
    if (plan.config.find("speed=3") != std::string::npos) {
      throw Error(FFPA_STATUS_EXECUTION_FAILED_CUDA, "speed=3 ran out of registers");
    }
    if (plan.config.find("speed=2") != std::string::npos) return 1.0;
    if (plan.config.find("speed=1") != std::string::npos) return 2.0;
    return 4.0;
  }
  int calls = 0;
};

// Timers on which a plan whose config names `part` takes 1 ms and any other 2 (the reverse with
// `faster` false): the candidate autotune must pick.
TimerFactory timersFavouring(std::string part, bool faster = true) {
  class Favouring : public CandidateTimer {
   public:
    Favouring(std::string part, bool faster) : part_(std::move(part)), faster_(faster) {}
    double milliseconds(const Plan& plan) override {
      return (plan.config.find(part_) != std::string::npos) == faster_ ? 1 : 2;
    }

   private:
    std::string part_;
    bool faster_;
  };
  return [part = std::move(part), faster](const PlanRequest&) { return std::make_unique<Favouring>(part, faster); };
}

TimerFactory fakeTimers(int* made) {
  return [made](const PlanRequest&) -> std::unique_ptr<CandidateTimer> {
    ++*made;
    return std::make_unique<FakeTimer>();
  };
}

}  // namespace

TEST_CASE("the registry orders variants by priority") {
  const KernelRegistry r = testRegistry();
  REQUIRE(r.variants().size() == 2);
  CHECK(r.variants()[0].name == "test.fast");
  CHECK(r.variants()[1].name == "test.reference");
}

TEST_CASE("a fast variant is chosen where it applies, the reference elsewhere") {
  const KernelRegistry registry = testRegistry();
  const Planner planner(registry);
  const Policy policy;
  const DeviceInfo device = hopper();

  const AttentionProblem large = problem(512);
  const Plan fast = planner.plan({large, policy, device, nullptr});
  CHECK(fast.kernel == "test.fast");
  CHECK(fast.config == "fast sm90");  // the device reached the variant
  CHECK(fast.workspaceBytes == 300);

  const AttentionProblem small = problem(128);
  CHECK(planner.plan({small, policy, device, nullptr}).kernel == "test.reference");
}

TEST_CASE("a rejected knob combination fails with the variant's reason instead of falling back") {
  const KernelRegistry registry = testRegistry();
  const Planner planner(registry);
  Policy policy;
  policy.setValue(FFPA_POLICY_ACCUMULATOR, FFPA_ACCUMULATOR_F16);
  const DeviceInfo device = hopper();
  const AttentionProblem large = problem(512);
  ThrowsWith(FFPA_STATUS_NOT_SUPPORTED_KNOB_COMBINATION, "FFPA_ACCUMULATOR_F16 is not compiled").check([&] {
    planner.plan({large, policy, device, nullptr});
  });
  // Outside the fast variant's domain this test registry's reference serves (the real one would
  // refuse a reduced-precision accumulator unless asked for explicitly).
  const AttentionProblem small = problem(64);
  CHECK(planner.plan({small, policy, device, nullptr}).kernel == "test.reference");
  // The reference backend policy always wins, even over a rejection.
  policy.setValue(FFPA_POLICY_REFERENCE_BACKEND, 1);
  CHECK(planner.plan({large, policy, device, nullptr}).kernel == "test.reference");
}

TEST_CASE("no variant for a direction is NOT_SUPPORTED, with the problem described") {
  const KernelRegistry registry = testRegistry();
  const Planner planner(registry);
  const Policy policy;
  const DeviceInfo device = hopper();
  const AttentionProblem backward = problem(512, Direction::Backward);
  ThrowsWith(FFPA_STATUS_NOT_SUPPORTED, "no kernel serves backward fp16").check([&] {
    planner.plan({backward, policy, device, nullptr});
  });
}

TEST_CASE("the sanity check appends aligned scratch after the kernel's workspace") {
  const KernelRegistry registry = testRegistry();
  const Planner planner(registry);
  Policy policy;
  policy.setValue(FFPA_POLICY_SANITY_CHECK, 1);
  const DeviceInfo device = hopper();
  const AttentionProblem large = problem(512);
  const Plan plan = planner.plan({large, policy, device, nullptr});
  CHECK(plan.kernelWorkspaceBytes == 300);
  CHECK(plan.sanityScratchOffset == 512);
  CHECK(plan.workspaceBytes == 512 + kSanityScratchBytes);
}

TEST_CASE("a reduced-precision accumulator on bf16 is refused before any variant is asked") {
  const Planner planner(builtinKernels());
  Policy policy;
  policy.setValue(FFPA_POLICY_ACCUMULATOR, FFPA_ACCUMULATOR_PV_F16);
  const DeviceInfo device = hopper();
  AttentionProblem p = problem(512);
  p.dtype = FFPA_DATA_TYPE_BFLOAT16;
  ThrowsWith(FFPA_STATUS_NOT_SUPPORTED_KNOB_COMBINATION, "pv_f16 needs fp16 tensors").check([&] {
    planner.plan({p, policy, device, nullptr});
  });
}

TEST_CASE("the built-in registry serves forward and backward through the reference") {
  const Planner planner(builtinKernels());
  const Policy policy;
  const DeviceInfo device = hopper();
  for (const Direction direction : {Direction::Forward, Direction::Backward}) {
    const AttentionProblem p = problem(320, direction);
    const Plan plan = planner.plan({p, policy, device, nullptr});
    CHECK(plan.kernel.find("reference.cublaslt") == 0);
    CHECK(plan.workspaceBytes > 0);
    CHECK(plan.payload != nullptr);
  }
}

TEST_CASE("runtime autotune times every candidate and keeps the fastest, with its tuned entry") {
  const KernelRegistry registry = testRegistry();
  int timersMade = 0;
  const Planner planner(registry, fakeTimers(&timersMade));
  const DeviceInfo device = hopper();
  const AttentionProblem p = problem(512);
  Policy policy;

  const Plan untuned = planner.plan({p, policy, device, nullptr});
  CHECK(untuned.config == "fast sm90");
  CHECK(untuned.tuned == nullptr);
  CHECK(timersMade == 0);

  policy.setValue(FFPA_POLICY_AUTOTUNE, 1);
  const Plan tuned = planner.plan({p, policy, device, nullptr});
  CHECK(timersMade == 1);
  CHECK(tuned.kernel == "test.fast");
  CHECK(tuned.config.rfind("fast sm90 speed=2 autotuned(3 configs: 1 ms; defaults 4 ms)", 0) == 0);
  REQUIRE(tuned.tuned != nullptr);
  CHECK(tuned.tuned->config == tuning::LaunchConfig{{"speed", 2}});
  CHECK(tuned.tuned->kernel == "test.fast");
  CHECK(tuned.tuned->headDim == 512);
  CHECK(tuned.tuned->seqlenKv == 1024);
  CHECK(tuned.tuned->timeMs == 1.0);
  CHECK(tuned.tuned->defaultTimeMs == 4.0);
  CHECK_FALSE(tuned.autotunePending);
}

TEST_CASE("runtime autotune waits when planning may not run kernels, and is off without a device") {
  const KernelRegistry registry = testRegistry();
  int timersMade = 0;
  const Planner planner(registry, fakeTimers(&timersMade));
  const DeviceInfo device = hopper();
  const AttentionProblem p = problem(512);
  Policy policy;
  policy.setValue(FFPA_POLICY_AUTOTUNE, 1);
  DeviceRuntime runtime;  // a real device, as far as the planner is concerned
  const Plan pending = planner.plan({p, policy, device, &runtime}, /*mayTune=*/false);
  CHECK(pending.autotunePending);
  CHECK(pending.config == "fast sm90 autotune(pending)");
  CHECK(timersMade == 0);
  // A described device: nothing to time on, nothing pending.
  const Plan described = planner.plan({p, policy, device, nullptr}, false);
  CHECK_FALSE(described.autotunePending);

  const Planner noTimers(registry, [](const PlanRequest&) { return std::unique_ptr<CandidateTimer>(); });
  const Plan off = noTimers.plan({p, policy, device, nullptr});
  CHECK(off.config == "fast sm90 autotune(off: no GPU to time on)");
  CHECK(off.tuned == nullptr);
  // The reference path has nothing to tune.
  const Plan reference = planner.plan({problem(128), policy, device, nullptr});
  CHECK(reference.kernel == "test.reference");
  CHECK(reference.config == "reference");
}

TEST_CASE("runtime autotune leaves a problem untuned when its variant has no candidates for it") {
  KernelRegistry registry;
  registry.add({"test.reference", Direction::Forward, 0, true, [](const PlanRequest&) { return Support::applies(); },
                [](const PlanRequest&) { return dummyPlan("reference", 1000); }, {}});
  registry.add({"test.fixed", Direction::Forward, 10, false, [](const PlanRequest&) { return Support::applies(); },
                [](const PlanRequest&) { return dummyPlan("fixed", 0); },
                [](const PlanRequest& q) {
                  // Something to tune above 256 only.
                  return q.problem.headDimQk > 256 ? std::vector<tuning::LaunchConfig>{{{"speed", 2}}}
                                                   : std::vector<tuning::LaunchConfig>{};
                }});
  int timersMade = 0;
  const Planner planner(registry, fakeTimers(&timersMade));
  Policy policy;
  policy.setValue(FFPA_POLICY_AUTOTUNE, 1);
  const Plan small = planner.plan({problem(128), policy, hopper(), nullptr});
  CHECK(small.config == "fixed");
  CHECK(small.tuned == nullptr);
  CHECK(timersMade == 0);
  const Plan large = planner.plan({problem(512), policy, hopper(), nullptr});
  CHECK(timersMade == 1);
  REQUIRE(large.tuned != nullptr);
}

TEST_CASE("runtime autotune of the Hopper forward times K and V shared by two row tiles and the consumers' splits") {
  const KernelRegistry& registry = builtinKernels();
  const KernelVariant* sm90 = builtinVariant("sm90.forward");
  REQUIRE(sm90 != nullptr);
  const Policy policy = autotunePolicy();
  const AttentionProblem p = packedProblem(512);
  const PlanRequest request{p, policy, hopper(), nullptr};
  if (const Support support = sm90->supports(request); support.verdict != Support::Verdict::Applies) {
    MESSAGE("skipped: " << support.reason);
    return;
  }
  // d_v 512: each split of the kernel of one CTA per row tile, with and without the consumers'
  // overlap, and the kernel that shares K and V (which splits evenly and does not overlap).
  const std::vector<tuning::LaunchConfig> candidates = sm90->candidates(request);
  CHECK(candidates == std::vector<tuning::LaunchConfig>{{{"kv_multicast", 0}, {"overlap", 0}, {"split", 0}},
                                                        {{"kv_multicast", 0}, {"overlap", 1}, {"split", 0}},
                                                        {{"kv_multicast", 0}, {"overlap", 0}, {"split", 1}},
                                                        {{"kv_multicast", 0}, {"overlap", 1}, {"split", 1}},
                                                        {{"kv_multicast", 1}}});
  // Sharing is faster on this timer: the plan and its tuned entry share K and V.
  const Planner planner(registry, timersFavouring("kv=multicast"));
  const Plan tuned = planner.plan(request);
  CHECK(tuned.kernel == "sm90.forward.f16.d512.kv2");
  REQUIRE(tuned.tuned != nullptr);
  CHECK(tuned.tuned->config == tuning::LaunchConfig{{"kv_multicast", 1}});
  // d_v 320: the two splits agree, the overlap and sharing are the choices.
  const AttentionProblem narrow = packedProblem(320);
  CHECK(sm90->candidates({narrow, policy, hopper(), nullptr}) ==
        std::vector<tuning::LaunchConfig>{{{"kv_multicast", 0}, {"overlap", 0}},
                                          {{"kv_multicast", 0}, {"overlap", 1}},
                                          {{"kv_multicast", 1}}});
  // Above 512 (clusters that split the head dims, sharing no K and V) the splits, where they
  // differ, and the overlap are the choices.
  const AttentionProblem wide = packedProblem(1024);
  CHECK(sm90->candidates({wide, policy, hopper(), nullptr}) ==
        std::vector<tuning::LaunchConfig>{{{"overlap", 0}, {"split", 0}},
                                          {{"overlap", 1}, {"split", 0}},
                                          {{"overlap", 0}, {"split", 1}},
                                          {{"overlap", 1}, {"split", 1}}});
  CHECK(sm90->candidates({packedProblem(640), policy, hopper(), nullptr}) ==
        std::vector<tuning::LaunchConfig>{{{"overlap", 0}}, {{"overlap", 1}}});
  // The skewed split faster on this timer: the plan and its tuned entry take it.
  const Planner skewed(registry, timersFavouring("split=skewed"));
  const Plan tunedSplit = skewed.plan({packedProblem(448), policy, hopper(), nullptr});
  CHECK(tunedSplit.kernel == "sm90.forward.f16.d448.skewed");
  REQUIRE(tunedSplit.tuned != nullptr);
  CHECK(tunedSplit.tuned->config == tuning::LaunchConfig{{"kv_multicast", 0}, {"overlap", 0}, {"split", 1}});
}

TEST_CASE("runtime autotune of the Hopper forward times the row split against the split of the columns") {
  const KernelRegistry& registry = builtinKernels();
  const KernelVariant* sm90 = builtinVariant("sm90.forward");
  REQUIRE(sm90 != nullptr);
  Policy policy = autotunePolicy();
  policy.setValue(FFPA_POLICY_KEY_SPLITS, 1);  // no split-KV candidates here (test_key_splits.cpp)
  const PlanRequest request{packedProblem(128), policy, hopper(), nullptr};
  if (const Support support = sm90->supports(request); support.verdict != Support::Verdict::Applies) {
    MESSAGE("skipped: " << support.reason);
    return;
  }
  // d_v 128: the row split with and without its consumers' turns, each with KV tiles of 128 and
  // of 64 keys, the split of the columns with and without the overlap, and the columns' kernel
  // that shares K and V. d_v 64: the row split alone, with and without the turns, 128 and 64 keys.
  CHECK(sm90->candidates(request) ==
        std::vector<tuning::LaunchConfig>{{{"pingpong", 1}, {"row_split", 1}, {"tile_keys", 128}},
                                          {{"pingpong", 0}, {"row_split", 1}, {"tile_keys", 128}},
                                          {{"pingpong", 1}, {"row_split", 1}, {"tile_keys", 64}},
                                          {{"pingpong", 0}, {"row_split", 1}, {"tile_keys", 64}},
                                          {{"kv_multicast", 0}, {"overlap", 0}, {"row_split", 0}},
                                          {{"kv_multicast", 0}, {"overlap", 1}, {"row_split", 0}},
                                          {{"kv_multicast", 1}}});
  const PlanRequest narrow{packedProblem(64), policy, hopper(), nullptr};
  CHECK(sm90->candidates(narrow) == std::vector<tuning::LaunchConfig>{{{"pingpong", 1}, {"tile_keys", 128}},
                                                                     {{"pingpong", 0}, {"tile_keys", 128}},
                                                                     {{"pingpong", 1}, {"tile_keys", 64}},
                                                                     {{"pingpong", 0}, {"tile_keys", 64}}});
  // Consumers that do not take turns faster on this timer at d_v 64: the tuned entry says so.
  const Plan apart = Planner(registry, timersFavouring("pingpong=0")).plan(narrow);
  CHECK(apart.kernel == "sm90.forward.f16.d64.row_split.bc128");
  REQUIRE(apart.tuned != nullptr);
  CHECK(apart.tuned->config == tuning::LaunchConfig{{"pingpong", 0}, {"tile_keys", 128}});
  // KV tiles of 64 keys faster: the first such candidate (the consumers taking turns).
  const Plan narrowTiles = Planner(registry, timersFavouring("Bc=64 ")).plan(narrow);
  CHECK(narrowTiles.kernel == "sm90.forward.f16.d64.row_split");
  REQUIRE(narrowTiles.tuned != nullptr);
  CHECK(narrowTiles.tuned->config == tuning::LaunchConfig{{"pingpong", 1}, {"tile_keys", 64}});
  // Where d_qk leaves no room for tiles of 128 keys (448 at d_v 64), no tile_keys to choose.
  AttentionProblem deepQk = packedProblem(64);
  deepQk.headDimQk = 448;
  deepQk.q = deepQk.k = {deepQk.headsQ * deepQk.seqQ * 448, deepQk.seqQ * 448, 448, 1};
  const PlanRequest deep{deepQk, policy, hopper(), nullptr};
  CHECK(sm90->candidates(deep) == std::vector<tuning::LaunchConfig>{{{"pingpong", 1}}, {{"pingpong", 0}}});
  // The split of the columns faster on this timer: the plan and its tuned entry take it.
  const Planner planner(registry, timersFavouring("rows=64+64", false));
  const Plan tuned = planner.plan(request);
  CHECK(tuned.kernel == "sm90.forward.f16.d128");
  REQUIRE(tuned.tuned != nullptr);
  CHECK(tuned.tuned->config == tuning::LaunchConfig{{"kv_multicast", 0}, {"overlap", 0}, {"row_split", 0}});
  // Without autotune, the row split (tiles of 128 keys).
  CHECK(Planner(registry).plan({packedProblem(128), Policy(), hopper(), nullptr}).kernel ==
        "sm90.forward.f16.d128.row_split.bc128");
}

TEST_CASE("runtime autotune of the Hopper backward times each gradient kernel against its mma.sync version") {
  const KernelRegistry& registry = builtinKernels();
  const KernelVariant* sm90 = builtinVariant("sm90.backward");
  REQUIRE(sm90 != nullptr);
  const Policy policy = autotunePolicy();
  const AttentionProblem p = packedProblem(128, Direction::Backward);
  const PlanRequest request{p, policy, hopper(), nullptr};
  if (const Support support = sm90->supports(request); support.verdict != Support::Verdict::Applies) {
    MESSAGE("skipped: " << support.reason);
    return;
  }
  // Both sm90 kernels serve d 128: each replaced in turn (the defaults take part anyway). Where
  // only one serves (d 384 on a device with less shared memory than one dQ CTA's 230,576 bytes,
  // which the dK/dV kernel's cluster of two still fits), nothing to tune.
  CHECK(sm90->candidates(request) == std::vector<tuning::LaunchConfig>{{{"sm90_dq", 0}}, {{"sm90_dkdv", 0}}});
  DeviceInfo smaller = hopper();
  smaller.sharedMemPerBlockOptin = 220 * 1024;
  const PlanRequest oneServes{packedProblem(384, Direction::Backward), policy, smaller, nullptr};
  REQUIRE(sm90->supports(oneServes).verdict == Support::Verdict::Applies);
  CHECK(sm90->candidates(oneServes).empty());
  // The mma.sync dK/dV kernel faster on this timer: the plan and its tuned entry take it, beside
  // the sm90 dQ kernel.
  const Planner planner(registry, timersFavouring("dK/dV: mma.sync (launch parameter sm90_dkdv=0)"));
  const Plan tuned = planner.plan(request);
  CHECK(tuned.kernel == "sm90.backward.f16.dq128");
  REQUIRE(tuned.tuned != nullptr);
  CHECK(tuned.tuned->config == tuning::LaunchConfig{{"sm90_dkdv", 0}});
  // Without autotune, both sm90 kernels.
  CHECK(Planner(registry).plan({p, Policy(), hopper(), nullptr}).kernel == "sm90.backward.f16.dq128.dkdv128");
}

TEST_CASE("runtime autotune of the mma.sync forward tries its default Q K^T step, half of it and twice it") {
  const KernelVariant* sm80 = builtinVariant("sm80.forward");
  REQUIRE(sm80 != nullptr);
  const Policy policy = autotunePolicy();
  DeviceInfo a100 = hopper();
  a100.smVersion = 80;
  a100.sharedMemPerBlockOptin = 163 * 1024;
  a100.sharedMemPerSm = 164 * 1024;
  const PlanRequest request{packedProblem(512), policy, a100, nullptr};
  if (const Support support = sm80->supports(request); support.verdict != Support::Verdict::Applies) {
    MESSAGE("skipped: " << support.reason);
    return;
  }
  // d = 512: the default is 8 panels (128 columns); 256 is past the 128 a step may hold.
  std::vector<int64_t> qkSteps;
  for (const tuning::LaunchConfig& c : sm80->candidates(request)) {
    const int64_t qk = c.at("qk_step");
    if (std::find(qkSteps.begin(), qkSteps.end(), qk) == qkSteps.end()) qkSteps.push_back(qk);
  }
  std::sort(qkSteps.begin(), qkSteps.end());
  CHECK(qkSteps == std::vector<int64_t>{64, 128});
  // d = 128: whole K and V tiles per step (no step widths to try), 32- and 64-key tiles, one and
  // two stages (and split-KV's choices, where its grid leaves the GPU idle, unless the caller
  // asked for a count).
  Policy unsplit = policy;
  unsplit.setValue(FFPA_POLICY_KEY_SPLITS, 1);
  const PlanRequest small{packedProblem(128), unsplit, a100, nullptr};
  const PlanRequest idle{packedProblem(128), policy, a100, nullptr};
  CHECK(sm80->candidates(idle).size() == 4 + keySplitCandidates().size());
  const std::vector<tuning::LaunchConfig> configs = sm80->candidates(small);
  CHECK(configs.size() == 4);
  for (const tuning::LaunchConfig& c : configs) {
    CHECK(c.count("qk_step") == 0);
    CHECK(c.count("tile_keys") == 1);
  }
}
