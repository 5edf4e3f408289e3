// The planner's decision path against a test registry and a described device: fast variants win
// where they apply, the reference serves the rest, a rejected knob combination fails instead of
// falling back, and the reference-backend policy overrides everything.
#include "core/error.h"
#include "core/planner.h"

#include <doctest/doctest.h>

using namespace ffpa;

namespace {

DeviceInfo hopper() {
  DeviceInfo d;
  d.smVersion = 90;
  d.smCount = 132;
  d.sharedMemPerBlockOptin = 227 * 1024;
  d.sharedMemPerSm = 228 * 1024;
  d.globalMemBytes = int64_t{80} << 30;
  d.name = "test";
  return d;
}

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
         [](const PlanRequest&) { return dummyPlan("reference", 1000); }});
  r.add({"test.fast", Direction::Forward, 10, false,
         [](const PlanRequest& q) {
           if (q.problem.headDimQk < 256) return Support::notApplicable("head dim below 256");
           if (q.policy.accumulator() == FFPA_ACCUMULATOR_F16) {
             return Support::rejected(FFPA_STATUS_NOT_SUPPORTED_KNOB_COMBINATION,
                                      "FFPA_ACCUMULATOR_F16 is not compiled into this build");
           }
           return Support::applies();
         },
         [](const PlanRequest& q) { return dummyPlan(q.device.smVersion >= 90 ? "fast sm90" : "fast", 300); }});
  return r;
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
