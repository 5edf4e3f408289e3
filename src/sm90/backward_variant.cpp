#include "sm90/backward_variant.h"

#include "sm80/backward_resolve.h"
#include "sm80/backward_variant.h"
#include "sm80/resolve_common.h"
#include "sm90/forward_variant.h"
#include "sm90/key_gradient_call.h"
#include "sm90/key_gradient_instances.h"
#include "sm90/query_gradient_instances.h"
#include "sm90/tensor_map_encoding.h"

#include "core/cuda_check.h"
#include "core/error.h"
#include "core/kernel_attributes.h"
#include "core/launch_grid.h"

#include "ffpa_build_config.h"

#include <cuda_runtime.h>

#include <optional>

namespace ffpa::sm90 {
namespace {

#if FFPA_BUILD_SM90
const QueryGradientInstanceList& queryInstances() { return queryGradientInstances(); }
const KeyGradientInstanceList& keyInstances() { return keyGradientInstances(); }
#else
const QueryGradientInstanceList& queryInstances() {
  static const QueryGradientInstanceList none;
  return none;
}
const KeyGradientInstanceList& keyInstances() {
  static const KeyGradientInstanceList none;
  return none;
}
#endif

const QueryGradientInstance* findQueryInstance(const AttentionProblem& problem) {
  const QueryGradientShape shape = queryGradientShape(problem);
  for (const QueryGradientInstance& instance : queryInstances()) {
    if (instance.headDimQk == shape.headDimQk && instance.clusterSize == shape.clusterSize &&
        instance.dtype == problem.dtype) {
      return &instance;
    }
  }
  return nullptr;
}

const KeyGradientInstance* findKeyInstance(const AttentionProblem& problem) {
  const KeyGradientShape shape = keyGradientShape(problem);
  for (const KeyGradientInstance& instance : keyInstances()) {
    if (instance.headDim == shape.headDim && instance.clusterSize == shape.clusterSize &&
        instance.dtype == problem.dtype) {
      return &instance;
    }
  }
  return nullptr;
}

static_assert(sizeof(QueryGradientParams) <= 4096 && sizeof(KeyGradientParams) <= 4096,
              "sm90 gradient kernel parameters exceed 4 KiB");
static_assert(alignof(QueryGradientParams) % 64 == 0 && alignof(KeyGradientParams) % 64 == 0,
              "CUtensorMap parameters must be 64-byte aligned");

// What the planner decided, or why not. Each gradient kernel is the sm90 one where it applies
// and its launch parameter ("sm90_dq", "sm90_dkdv") is 1, the mma.sync one otherwise; at least
// one is sm90.
struct Resolution {
  Support support;
  std::optional<sm80::BackwardLaunch> mmaSync;  // the row statistics, and the gradients sm90 leaves
  const QueryGradientInstance* query = nullptr;
  const KeyGradientInstance* key = nullptr;
  std::string queryWhy, keyWhy;  // why a kernel is the mma.sync one
  bool gridDnhb = false;
  std::string notes;  // where the launch parameters came from
};

Resolution refusal(Support why) {
  Resolution d;
  d.support = std::move(why);
  return d;
}

Resolution notApplicable(std::string why) { return refusal(Support::notApplicable(std::move(why))); }

// Why the sm90 kernel of `name` cannot serve (empty when it can): its refusal, no instance, or
// too little shared memory.
std::string fitRefusal(const char* name, std::string why, bool found, uint32_t shared, const DeviceInfo& device) {
  if (!why.empty()) return why;
  if (!found) return cat("no sm90 ", name, " instance");
  if (shared > device.sharedMemPerBlockOptin) {
    return cat("the sm90 ", name, " kernel needs ", shared, " bytes of shared memory per block; the device allows ",
               device.sharedMemPerBlockOptin);
  }
  return {};
}

// The sm90 gradient kernels that can serve the problem (instance, shared memory), before launch
// parameters, and why not for the one that cannot; a refusal where neither can.
Resolution servable(const PlanRequest& r) {
  const AttentionProblem& problem = r.problem;
  if (!r.policy.flag(FFPA_POLICY_HOPPER_KERNELS)) return notApplicable("FFPA_POLICY_HOPPER_KERNELS=0");
  if (r.device.smVersion != 90) return notApplicable("sm_90a code runs on compute capability 9.0 only");
  if (queryInstances().empty()) return notApplicable("this build compiles no sm_90a code (build_arch without 90a)");
  Resolution d;
  d.query = findQueryInstance(problem);
  d.key = findKeyInstance(problem);
  d.queryWhy = fitRefusal("dQ", queryGradientRefusal(problem), d.query != nullptr, queryGradientSharedBytes(problem),
                          r.device);
  d.keyWhy = fitRefusal("dK/dV", keyGradientRefusal(problem), d.key != nullptr, keyGradientSharedBytes(problem),
                        r.device);
  if (!d.queryWhy.empty()) d.query = nullptr;
  if (!d.keyWhy.empty()) d.key = nullptr;
  if (d.query == nullptr && d.key == nullptr) return notApplicable(cat(d.queryWhy, "; ", d.keyWhy));
  return d;
}

Resolution resolve(const PlanRequest& r) {
  Resolution d = servable(r);
  if (d.support.verdict != Support::Verdict::Applies) return d;
  // Where an sm90 kernel serves, a tuned config or an autotune candidate may still ask for the
  // mma.sync one (the benchmark's verdict for the device and shape); both asked for leave the
  // problem to the sm80 backward.
  int sm90Query = 1, sm90Key = 1;
  sm80::applyTunedConfig(r, kBackwardVariantName,
                         {{"sm90_dq", 0, 1, 1, std::nullopt, [&](int64_t value) { sm90Query = int(value); }},
                          {"sm90_dkdv", 0, 1, 1, std::nullopt, [&](int64_t value) { sm90Key = int(value); }}},
                         d.notes);
  if (d.query != nullptr && sm90Query == 0) {
    d.query = nullptr;
    d.queryWhy = "launch parameter sm90_dq=0";
  }
  if (d.key != nullptr && sm90Key == 0) {
    d.key = nullptr;
    d.keyWhy = "launch parameter sm90_dkdv=0";
  }
  if (d.query == nullptr && d.key == nullptr) return notApplicable(cat(d.queryWhy, "; ", d.keyWhy));  // both asked
  if (std::string why = mmaSyncKnobSet(r.policy); !why.empty()) return notApplicable(std::move(why));
  // The row statistics (and the gradients left to mma.sync) with the sm80 backward's own launch
  // parameters: its tuned config, not this variant's candidate.
  const PlanRequest mmaSyncRequest{r.problem, r.policy, r.device, r.runtime, nullptr};
  sm80::BackwardResolution mmaSync = sm80::resolveBackward(mmaSyncRequest);
  if (!mmaSync.launch) return refusal(std::move(mmaSync.refusal));
  d.mmaSync = std::move(mmaSync.launch);
  // The grid layout the mma.sync kernels chose (FFPA_POLICY_LAUNCH_GRID_DNHB, or B*H past the y
  // extent) holds for the sm90 grids too: their y and z extents are the same.
  d.gridDnhb = d.mmaSync->gridDnhb;
  return d;
}

class BackwardPlan final : public PlanPayload {
 public:
  BackwardPlan(const Resolution& d) : mmaSync_(*d.mmaSync), query_(d.query), key_(d.key), gridDnhb_(d.gridDnhb) {}

  // Three launches on the stream, in order: row statistics, dQ, dK/dV.
  void launch(const LaunchArgs& args) const override {
    const auto stream = static_cast<cudaStream_t>(args.stream);
    const sm80::BackwardLaunch& m = mmaSync_;
    sm80::BackwardParams p = sm80::backwardCallParams(m, args.problem, args.tensors, args.workspace);
    const sm80::BackwardGrids grids = sm80::backwardCallGrids(m, args.problem, p);
    void* arguments[] = {&p};
    checkCuda(cudaLaunchKernel(m.instance->rowStats, dim3(m.rowStatsGrid), dim3(32 * sm80::kRowStatsWarps), arguments,
                               0, stream),
              "the sm80 backward row-statistics kernel launch");
    const auto* rowStats = static_cast<const float*>(args.workspace);
    if (query_ != nullptr) {
      launchGradient<QueryGradientParams>(query_->kernel,
                                          describeQueryGradientCall(args.problem, args.tensors, rowStats, gridDnhb_),
                                          stream, "the sm90 backward dQ kernel launch");
    } else {
      checkCuda(cudaLaunchKernel(m.instance->queryGradient, dim3(grids.query[0], grids.query[1], grids.query[2]),
                                 dim3(m.queryShape.threads()), arguments, p.queryLayout.sharedBytes, stream),
                "the sm80 backward dQ kernel launch");
    }
    if (key_ != nullptr) {
      launchGradient<KeyGradientParams>(key_->kernel,
                                        describeKeyGradientCall(args.problem, args.tensors, rowStats, gridDnhb_),
                                        stream, "the sm90 backward dK/dV kernel launch");
    } else {
      checkCuda(cudaLaunchKernel(m.instance->keyGradient, dim3(grids.key[0], grids.key[1], grids.key[2]),
                                 dim3(m.keyShape.threads()), arguments, p.keyLayout.sharedBytes, stream),
                "the sm80 backward dK/dV kernel launch");
    }
  }

 private:
  // One sm90 gradient kernel: the call's arguments, its four operand maps encoded, one launch.
  template <class Params, class Call>
  static void launchGradient(const void* kernel, const Call& call, cudaStream_t stream, const char* what) {
    Params params;
    static_cast<decltype(call.arguments)&>(params) = call.arguments;
    params.qMap = encodeTensorMap(call.maps.q);
    params.kMap = encodeTensorMap(call.maps.k);
    params.vMap = encodeTensorMap(call.maps.v);
    params.dOMap = encodeTensorMap(call.maps.dO);
    void* arguments[] = {&params};
    checkCuda(cudaLaunchKernel(kernel, dim3(call.grid[0], call.grid[1], call.grid[2]), dim3(kThreads), arguments,
                               params.sharedBytes, stream),
              what);
  }

  sm80::BackwardLaunch mmaSync_;
  const QueryGradientInstance* query_;  // elements of the process-wide instance lists, or null
  const KeyGradientInstance* key_;
  bool gridDnhb_;
};

Support supports(const PlanRequest& r) { return resolve(r).support; }

// Runtime autotune's search space: where both sm90 gradient kernels serve, each of them replaced
// by its mma.sync version in turn (the defaults, both sm90, always take part); where one serves,
// nothing to tune (turning it off leaves the sm80 backward, another variant).
std::vector<tuning::LaunchConfig> candidates(const PlanRequest& r) {
  const Resolution d = servable(r);
  if (d.query == nullptr || d.key == nullptr) return {};
  return {{{"sm90_dq", 0}}, {{"sm90_dkdv", 0}}};
}

// "dQ: sm90 ..." or "dK/dV: sm90 ...": the sm90 kernel's part of a plan's config; `buffers`
// names the streamed operand whose buffers the layout doubles where it can ("k_buffers=2").
std::string sm90Config(const char* what, int clusterSize, int ctaColumns, const char* exchange,
                       const std::string& buffers, uint32_t shared, bool gridDnhb) {
  return cat(what, ": sm90 Br=", kRows, " Bc=", kKeys, " warpgroups=1+2 threads=", kThreads,
             " cluster=", clusterSize, " columns=", consumer0Columns(ctaColumns), "+", consumer1Columns(ctaColumns),
             clusterSize > 1 ? exchange : "", " ", buffers, " smem=", shared,
             " grid=", gridDnhb ? "(N/Br,H,B)" : "(N/Br,B*H)");
}

Plan plan(const PlanRequest& r) {
  const Resolution d = resolve(r);
  const sm80::BackwardLaunch& mmaSync = *d.mmaSync;
  if (r.runtime != nullptr) {
    // Once per plan, not per call: the execute path only launches.
    if (d.query != nullptr) {
      allowDynamicSharedMemory(d.query->kernel, r.device, "sm90 backward dQ kernel");
    } else {
      allowDynamicSharedMemory(mmaSync.instance->queryGradient, r.device, "sm80 backward dQ kernel");
    }
    if (d.key != nullptr) {
      allowDynamicSharedMemory(d.key->kernel, r.device, "sm90 backward dK/dV kernel");
    } else {
      allowDynamicSharedMemory(mmaSync.instance->keyGradient, r.device, "sm80 backward dK/dV kernel");
    }
  }
  const std::optional<QueryGradientShape> queryShape =
      d.query ? std::optional<QueryGradientShape>({d.query->headDimQk, d.query->clusterSize}) : std::nullopt;
  const std::optional<KeyGradientShape> keyShape =
      d.key ? std::optional<KeyGradientShape>({d.key->headDim, d.key->clusterSize}) : std::nullopt;
  std::string config;
  if (queryShape) {
    const QueryGradientArguments layout = queryGradientLayoutOf(r.problem);
    config = sm90Config("dQ", queryShape->clusterSize, queryShape->headDimQk / queryShape->clusterSize,
                        " exchange=S,dP:dsmem", cat("k_buffers=", layout.kBuffers), layout.sharedBytes, d.gridDnhb) +
             "; ";
  } else {
    config = cat("dQ: mma.sync (", d.queryWhy, "); ");
  }
  if (keyShape) {
    const KeyGradientArguments layout = keyGradientLayoutOf(r.problem);
    config += sm90Config("dK/dV", keyShape->clusterSize, keyShape->headDim / keyShape->clusterSize,
                         " exchange=S^T,dP^T:dsmem", cat("q_buffers=", layout.qBuffers), layout.sharedBytes,
                         d.gridDnhb) +
              "; ";
  } else {
    config += cat("dK/dV: mma.sync (", d.keyWhy, "); ");
  }
  Plan plan;
  plan.kernel = backwardInstanceName(r.problem.dtype, queryShape, keyShape);
  plan.config = cat(config, "mma.sync part: ", sm80::backwardInstanceName(*mmaSync.instance), " ",
                    sm80::describeBackwardConfig(mmaSync), d.notes);
  plan.kernelWorkspaceBytes = mmaSync.workspaceBytes;
  plan.payload = std::make_unique<BackwardPlan>(d);
  return plan;
}

}  // namespace

std::string backwardInstanceName(ffpaDataType_t dtype, std::optional<QueryGradientShape> query,
                                 std::optional<KeyGradientShape> key) {
  std::string name = cat(kBackwardVariantName, ".", dtype == FFPA_DATA_TYPE_FLOAT16 ? "f16" : "bf16");
  if (query) name += cat(".dq", query->headDimQk, query->clusterSize > 1 ? cat("x", query->clusterSize) : "");
  if (key) name += cat(".dkdv", key->headDim, key->clusterSize > 1 ? cat("x", key->clusterSize) : "");
  return name;
}

void registerBackwardVariant(KernelRegistry& registry) {
  registry.add({kBackwardVariantName, Direction::Backward, 200, false, supports, plan, candidates});
}

}  // namespace ffpa::sm90
