#include "sm80/forward_variant.h"

#include "sm80/forward_resolve.h"
#include "core/kernel_attributes.h"

#include "core/cuda_check.h"
#include "core/descriptors.h"
#include "core/error.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <vector>

namespace ffpa::sm80 {
namespace {

class ForwardPlan final : public PlanPayload {
 public:
  explicit ForwardPlan(const ForwardLaunch& d) : d_(d) {}

  void launch(const LaunchArgs& args) const override {
    ForwardParams p = forwardCallParams(d_, args.problem, args.tensors, args.workspace);
    void* arguments[] = {&p};
    uint32_t extents[3];
    forwardCallGrid(d_, args.problem, p, extents);
    const dim3 grid(extents[0], extents[1], extents[2]);
    checkCuda(cudaLaunchKernel(d_.instance->kernel, grid, dim3(d_.shape.threads()), arguments,
                               p.sharedBytes, static_cast<cudaStream_t>(args.stream)),
              "the sm80 forward kernel launch");
    if (d_.split.splits > 1) {
      enqueueKeySplitMerge(d_.split, args.problem, args.workspace, args.tensors.out, args.tensors.lseOut,
                           args.stream);
    }
  }

 private:
  ForwardLaunch d_;
};

Support supports(const PlanRequest& r) {
  if (r.device.smVersion < 80) return Support::notApplicable("needs sm_80 or newer");
  return resolveForward(r).refusal;
}

Plan plan(const PlanRequest& r) {
  const ForwardResolution resolution = resolveForward(r);
  const ForwardLaunch& d = *resolution.launch;
  if (r.runtime != nullptr) {
    // Once per plan, not per call: the execute path only launches.
    allowDynamicSharedMemory(d.instance->kernel, r.device, "sm80 forward kernel");
  }
  Plan plan;
  plan.kernel = instanceName(*d.instance);
  plan.config = describeForwardConfig(d);
  plan.kernelWorkspaceBytes = d.split.bytes;
  plan.payload = std::make_unique<ForwardPlan>(d);
  return plan;
}

// Runtime autotune's search space around the built-in defaults: fast varies the stage count and
// the step widths a little (not at all with whole K and V tiles per step, where they change
// nothing); max tries every compiled stage count and step width, with prefetch and the
// persistence choices; both try 32- and 64-key tiles where the instance comes with both, and
// where the grid leaves the GPU idle, split-KV's choices (keySplitCandidates).
std::vector<tuning::LaunchConfig> candidates(const PlanRequest& r) {
  const tuning::LaunchConfig none;
  PlanRequest defaults = r;
  defaults.launchConfig = &none;
  const ForwardResolution resolution = resolveForward(defaults);
  if (!resolution.launch) return {};
  const ForwardLaunch& d = *resolution.launch;
  const bool max = r.policy.value(FFPA_POLICY_AUTOTUNE_MODE) == FFPA_AUTOTUNE_MODE_MAX;
  const int qkLimit = std::min<int>(128, static_cast<int>(r.problem.headDimQk));
  const int vLimit = std::min(64, d.shape.warpColumns);
  // The default Q K^T step (as the planner resolved it), or that of the tile size `keys`.
  const auto qkDefaultFor = [&](int keys) {
    if (keys < 0) return d.layout.qkPanelsPerStep * 16;
    return defaultScoreStepPanels(forwardShape(d.instance->headDimV, false, keys == 64)) * 16;
  };
  std::vector<int> stages, qkSteps, vSteps = {16, 32, 64}, prefetch = {1}, persistQ = {-1}, persistKv = {-1},
                   tileKeys = {-1};
  if (d.tileKeysChoice) tileKeys = {32, 64};
  for (int s = 1; s <= (max ? maxCompiledStages() : std::min(2, maxCompiledStages())); ++s) stages.push_back(s);
  if (max) {
    qkSteps = {16, 32, 64, 128};
    prefetch = {0, 1};
    if (r.problem.headDimQk <= 320) persistQ = {0, 1};
    if (coarseTiling(d.shape, r.problem.headDimQk, r.problem.headDimV)) persistKv = {0, 1};
  } else if (d.choice.persistKv) {
    qkSteps = vSteps = {-1};  // not named
  }
  std::vector<tuning::LaunchConfig> configs;
  for (int keys : tileKeys) {
    if (!max && !d.choice.persistKv) {
      // The tile's default and its neighbours on both sides, half and twice it (whole panels
      // within the limits; the others are dropped below).
      const int qkDefault = qkDefaultFor(keys);
      qkSteps = {qkDefault / 2, qkDefault, 2 * qkDefault};
    }
    for (int s : stages)
      for (int qk : qkSteps)
        for (int v : vSteps)
          for (int f : prefetch)
            for (int pq : persistQ)
              for (int pkv : persistKv) {
                if (qk != -1 && (qk < 16 || qk % 16 != 0 || qk > qkLimit || v > vLimit)) continue;
                tuning::LaunchConfig c{{"stages", s}, {"prefetch", f}};
                if (qk != -1) {
                  c["qk_step"] = qk;
                  c["v_step"] = v;
                }
                if (pq >= 0) c["persist_q"] = pq;
                if (pkv >= 0) c["persist_kv"] = pkv;
                if (keys >= 0) c["tile_keys"] = keys;
                configs.push_back(std::move(c));
              }
  }
  // Split-KV, where the grid leaves the GPU idle: the planner's choice against the others.
  if (d.split.tunable) {
    for (tuning::LaunchConfig& c : keySplitCandidates()) configs.push_back(std::move(c));
  }
  return configs;
}

}  // namespace

std::string instanceName(const ForwardInstance& instance) {
  const char* accumulators[] = {"acc_f32", "acc_qk_f16", "acc_pv_f16", "acc_f16"};
  std::string name = cat(kForwardVariantName, ".", instance.dtype == FFPA_DATA_TYPE_FLOAT16 ? "f16" : "bf16",
                         ".d", instance.headDimV, ".", accumulators[instance.accumulator]);
  if (instance.pipeKv) name += ".pipe_kv";
  if (instance.qInRegisters) name += ".q_s2r";
  if (instance.vInRegisters) name += ".v_s2r";
  if (instance.wideKeys) name += ".bc64";
  return name;
}

void registerForwardVariant(KernelRegistry& registry) {
  registry.add({kForwardVariantName, Direction::Forward, 100, false, supports, plan, candidates});
}

}  // namespace ffpa::sm80
