#include "sm90/backward_variant.h"

#include "sm80/backward_resolve.h"
#include "sm80/backward_variant.h"
#include "sm90/forward_variant.h"
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

const QueryGradientInstanceList& instances() {
#if FFPA_BUILD_SM90
  return queryGradientInstances();
#else
  static const QueryGradientInstanceList none;
  return none;
#endif
}

const QueryGradientInstance* findInstance(const AttentionProblem& problem) {
  const QueryGradientShape shape = queryGradientShape(problem);
  for (const QueryGradientInstance& instance : instances()) {
    if (instance.headDimQk == shape.headDimQk && instance.clusterSize == shape.clusterSize &&
        instance.dtype == problem.dtype) {
      return &instance;
    }
  }
  return nullptr;
}

static_assert(sizeof(QueryGradientParams) <= 4096, "sm90 dQ parameters exceed 4 KiB");
static_assert(alignof(QueryGradientParams) % 64 == 0, "CUtensorMap parameters must be 64-byte aligned");

// What the planner decided, or why not.
struct Resolution {
  Support support;
  std::optional<sm80::BackwardLaunch> mmaSync;  // row statistics and dK/dV
  const QueryGradientInstance* instance = nullptr;
  bool gridDnhb = false;
  uint32_t grid[3] = {1, 1, 1};
  std::string notes;
};

Resolution refusal(Support why) {
  Resolution d;
  d.support = std::move(why);
  return d;
}

Resolution resolve(const PlanRequest& r) {
  const AttentionProblem& problem = r.problem;
  const auto notApplicable = [](std::string why) { return refusal(Support::notApplicable(std::move(why))); };
  if (!r.policy.flag(FFPA_POLICY_HOPPER_KERNELS)) return notApplicable("FFPA_POLICY_HOPPER_KERNELS=0");
  if (r.device.smVersion != 90) return notApplicable("sm_90a code runs on compute capability 9.0 only");
  if (instances().empty()) return notApplicable("this build compiles no sm_90a code (build_arch without 90a)");
  if (std::string why = queryGradientRefusal(problem); !why.empty()) return notApplicable(std::move(why));
  Resolution d;
  d.instance = findInstance(problem);
  if (d.instance == nullptr) return notApplicable(cat("no sm90 dQ instance for d_qk = ", problem.headDimQk));
  if (std::string why = mmaSyncKnobSet(r.policy); !why.empty()) return notApplicable(std::move(why));
  const uint32_t shared = queryGradientSharedBytes(problem);
  if (shared > r.device.sharedMemPerBlockOptin) {
    return notApplicable(cat("the sm90 dQ kernel needs ", shared, " bytes of shared memory per block; the device allows ",
                             r.device.sharedMemPerBlockOptin));
  }
  sm80::BackwardResolution mmaSync = sm80::resolveBackward(r);
  if (!mmaSync.launch) return refusal(std::move(mmaSync.refusal));
  d.mmaSync = std::move(mmaSync.launch);
  if (auto why = chooseGrid(r.policy, queryGradientBlocksX(problem), problem.batch, problem.headsQ, d.gridDnhb,
                            d.grid, d.notes)) {
    return refusal(Support::rejected(FFPA_STATUS_NOT_SUPPORTED_KNOB_COMBINATION, std::move(*why)));
  }
  return d;
}

class BackwardPlan final : public PlanPayload {
 public:
  BackwardPlan(const sm80::BackwardLaunch& mmaSync, const QueryGradientInstance& instance, bool gridDnhb)
      : mmaSync_(mmaSync), instance_(instance), gridDnhb_(gridDnhb) {}

  // Three launches on the stream, in order: row statistics, dQ (sm90), dK/dV.
  void launch(const LaunchArgs& args) const override {
    const auto stream = static_cast<cudaStream_t>(args.stream);
    sm80::BackwardParams p = sm80::backwardCallParams(mmaSync_, args.problem, args.tensors, args.workspace);
    void* arguments[] = {&p};
    checkCuda(cudaLaunchKernel(mmaSync_.instance->rowStats, dim3(mmaSync_.rowStatsGrid),
                               dim3(32 * sm80::kRowStatsWarps), arguments, 0, stream),
              "the sm80 backward row-statistics kernel launch");

    const QueryGradientCall call =
        describeQueryGradientCall(args.problem, args.tensors, static_cast<const float*>(args.workspace), gridDnhb_);
    QueryGradientParams q;
    static_cast<QueryGradientArguments&>(q) = call.arguments;
    q.qMap = encodeTensorMap(call.q);
    q.kMap = encodeTensorMap(call.k);
    q.vMap = encodeTensorMap(call.v);
    q.dOMap = encodeTensorMap(call.dO);
    void* queryArguments[] = {&q};
    checkCuda(cudaLaunchKernel(instance_.kernel, dim3(call.grid[0], call.grid[1], call.grid[2]), dim3(kThreads),
                               queryArguments, q.sharedBytes, stream),
              "the sm90 backward dQ kernel launch");

    const sm80::BackwardLaunch& d = mmaSync_;
    checkCuda(cudaLaunchKernel(d.instance->keyGradient, dim3(d.keyGrid[0], d.keyGrid[1], d.keyGrid[2]),
                               dim3(d.keyShape.threads()), arguments, p.keyLayout.sharedBytes, stream),
              "the sm80 backward dK/dV kernel launch");
  }

 private:
  sm80::BackwardLaunch mmaSync_;
  const QueryGradientInstance& instance_;  // an element of the process-wide instance list
  bool gridDnhb_;
};

Support supports(const PlanRequest& r) { return resolve(r).support; }

Plan plan(const PlanRequest& r) {
  const Resolution d = resolve(r);
  const QueryGradientInstance& instance = *d.instance;
  const sm80::BackwardLaunch& mmaSync = *d.mmaSync;
  if (r.runtime != nullptr) {
    // Once per plan, not per call: the execute path only launches.
    allowDynamicSharedMemory(instance.kernel, r.device, "sm90 backward dQ kernel");
    allowDynamicSharedMemory(mmaSync.instance->keyGradient, r.device, "sm80 backward dK/dV kernel");
  }
  const QueryGradientShape shape{instance.headDimQk, instance.clusterSize};
  const int ctaColumns = shape.headDimQk / shape.clusterSize;
  const std::string mmaSyncConfig = sm80::describeBackwardConfig(mmaSync);
  const auto keyPart = mmaSyncConfig.find("dK/dV:");
  Plan plan;
  plan.kernel = backwardInstanceName(r.problem.dtype, shape);
  plan.config = cat("dQ: sm90 Br=", kRows, " Bc=", kKeys, " warpgroups=1+2 threads=", kThreads,
                    " d_qk<=", shape.headDimQk, " cluster=", shape.clusterSize, " columns=",
                    consumer0Columns(ctaColumns), "+", consumer1Columns(ctaColumns),
                    shape.clusterSize > 1 ? " exchange=S,dP:dsmem" : "", " smem=", queryGradientSharedBytes(r.problem),
                    " grid=", d.gridDnhb ? "(N/Br,H,B)" : "(N/Br,B*H)", "; ",  // notes: the mma.sync part's
                    keyPart == std::string::npos ? mmaSyncConfig : mmaSyncConfig.substr(keyPart),
                    " (", sm80::backwardInstanceName(*mmaSync.instance), ")");
  plan.kernelWorkspaceBytes = mmaSync.workspaceBytes;
  plan.payload = std::make_unique<BackwardPlan>(mmaSync, instance, d.gridDnhb);
  return plan;
}

}  // namespace

std::string backwardInstanceName(ffpaDataType_t dtype, QueryGradientShape shape) {
  return cat(kBackwardVariantName, ".", dtype == FFPA_DATA_TYPE_FLOAT16 ? "f16" : "bf16", ".d", shape.headDimQk,
             shape.clusterSize > 1 ? ".cluster2" : "");
}

void registerBackwardVariant(KernelRegistry& registry) {
  registry.add({kBackwardVariantName, Direction::Backward, 200, false, supports, plan, nullptr});
}

}  // namespace ffpa::sm90
