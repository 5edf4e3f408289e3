#include "sm90/forward_variant.h"

#include "sm90/forward_call.h"
#include "sm90/forward_instances.h"
#include "sm90/tensor_map_encoding.h"

#include "core/cuda_check.h"
#include "core/error.h"
#include "core/kernel_attributes.h"
#include "core/launch_grid.h"
#include "sm80/resolve_common.h"

#include "ffpa_build_config.h"

#include <cuda_runtime.h>

namespace ffpa::sm90 {
namespace {

const ForwardInstanceList& instances() {
#if FFPA_BUILD_SM90
  return forwardInstances();
#else
  static const ForwardInstanceList none;
  return none;
#endif
}

const ForwardInstance* findInstance(const AttentionProblem& problem, int kvSharing, int split, bool rowSplit,
                                    int tileKeys) {
  const int headDimV = rowSplit ? rowSplitHeadDimV(problem.headDimV) : instanceHeadDimV(problem.headDimV);
  for (const ForwardInstance& instance : instances()) {
    if (instance.headDimV == headDimV && instance.dtype == problem.dtype && instance.kvSharing == kvSharing &&
        instance.split == split && instance.rowSplit == rowSplit && instance.tileKeys == tileKeys) {
      return &instance;
    }
  }
  return nullptr;
}

// The columns of one CTA of the instance for d_v `instanceHeadDimV`.
int ctaColumnsOf(int instanceHeadDimV) { return instanceHeadDimV / clusterSizeFor(instanceHeadDimV); }

// Whether the consumers' split of the columns is a choice for `problem`: a kernel that does not
// share K and V (those split evenly), with 384, 448 or 512 columns per CTA.
bool splitTunable(const AttentionProblem& problem, int kvSharing) {
  return kvSharing == 1 && forwardSplitsDiffer(ctaColumnsOf(instanceHeadDimV(problem.headDimV)));
}

// The kernel takes its parameters by value (the maps as __grid_constant__ CUtensorMaps, which
// must stay 64-byte aligned): within the 4 KiB of kernel parameters of every CUDA 12 driver.
static_assert(sizeof(ForwardParams) <= 4096, "sm90 forward parameters exceed 4 KiB");
static_assert(alignof(ForwardParams) % 64 == 0, "CUtensorMap parameters must be 64-byte aligned");

class ForwardPlan final : public PlanPayload {
 public:
  ForwardPlan(const ForwardInstance& instance, bool gridDnhb, int exp2Emulated, int overlap, int pingpong,
              const KeySplitPlan& split)
      : instance_(instance), gridDnhb_(gridDnhb), exp2Emulated_(exp2Emulated), overlap_(overlap), pingpong_(pingpong),
        split_(split) {}

  void launch(const LaunchArgs& args) const override {
    const ForwardCall call = describeForwardCall(args.problem, args.tensors, gridDnhb_, exp2Emulated_,
                                                 instance_.kvSharing, overlap_, instance_.rowSplit, pingpong_,
                                                 instance_.tileKeys, split_, args.workspace);
    ForwardParams p;
    static_cast<ForwardArguments&>(p) = call.arguments;
    p.qMap = encodeTensorMap(call.q);
    p.kMap = encodeTensorMap(call.k);
    p.vMap = encodeTensorMap(call.v);
    void* arguments[] = {&p};
    checkCuda(cudaLaunchKernel(instance_.kernel, dim3(call.grid[0], call.grid[1], call.grid[2]), dim3(kThreads),
                               arguments, p.sharedBytes, static_cast<cudaStream_t>(args.stream)),
              "the sm90 forward kernel launch");
    if (split_.splits > 1) {
      enqueueKeySplitMerge(split_, args.problem, args.workspace, args.tensors.out, args.tensors.lseOut, args.stream);
    }
  }

 private:
  const ForwardInstance& instance_;  // an element of the process-wide instance list
  bool gridDnhb_;
  int exp2Emulated_;
  int overlap_;
  int pingpong_;
  KeySplitPlan split_;
};

// The instance's launch choices: whether two row tiles share K and V (kvSharingFor; the caller's
// FFPA_POLICY_HOPPER_KV_MULTICAST when set) and the consumers' split of the columns (0 even, 1
// skewed; forward_params.h), each from the autotune candidate or the device's tuned config
// ("kv_multicast", "split") where it is a choice for the problem, else its default (a kernel
// that shares K and V splits evenly). Appends where the values came from to `notes`.
struct LaunchChoice {
  int kvSharing;
  int split;
  int overlap;  // ForwardArguments::overlap, where overlapApplies
  bool rowSplit;
  int pingpong;  // ForwardArguments::pingpong, the row split's
  int tileKeys;  // keys per KV tile: the row split's choice, else kKeys
  KeySplitTuning keySplits;  // split-KV's "split_kv" and "split_min_tiles"
};

// Where the problem has both arrangements (d_v 65..256 without slices), the row split is the
// default ("row_split": 1) where its shared memory holds two K buffers, unless K and V sharing
// is asked for, which the split of the columns does; d_v up to 64 has the row split only, sliced
// problems the split of the columns only. The row split's KV tiles ("tile_keys"): 128 keys by
// default where they fit with two K buffers (rowSplitTileKeysByDefault), else 64.
LaunchChoice launchChoiceOf(const PlanRequest& r, std::string& notes) {
  const AttentionProblem& problem = r.problem;
  const bool rowSplitServes = rowSplitRefusal(problem).empty();
  const bool columnsServe = forwardRefusal(problem).empty();
  int rowSplit = rowSplitByDefault(problem) ? 1 : 0;
  bool multicast = r.policy.flag(FFPA_POLICY_HOPPER_KV_MULTICAST);
  const int defaultSplit = defaultForwardSplit(clusterSizeFor(instanceHeadDimV(problem.headDimV)));
  int split = defaultSplit;
  // The consumers overlap by default: by the count of kernels.rst, consumer 1's P V under the
  // softmax takes about a sixth off a tile at d_v 512.
  int overlap = 1;
  // The row split's consumers take turns by default, as FlashAttention-3's (kernels.rst).
  int pingpong = 1;
  int tileKeys = rowSplitTileKeysByDefault(problem);
  const int wideKeys = rowSplitWideKeysServe(problem) ? kRowSplitWideKeys : kKeys;
  // Every problem has a choice (the overlap, at least), so a launch config always applies; what
  // is no choice for the problem is reset below.
  const bool sharable = kvSharingFor(problem, true) > 1;
  KeySplitTuning keySplits;
  std::vector<sm80::LaunchParameter> parameters{
      {"kv_multicast", 0, 1, 1, FFPA_POLICY_HOPPER_KV_MULTICAST, [&](int64_t value) { multicast = value != 0; }},
      {"split", kEvenSplit, kSkewedSplit, 1, std::nullopt, [&](int64_t value) { split = int(value); }},
      {"overlap", 0, 1, 1, std::nullopt, [&](int64_t value) { overlap = int(value); }},
      {"row_split", 0, 1, 1, std::nullopt, [&](int64_t value) { rowSplit = int(value); }},
      {"pingpong", 0, 1, 1, std::nullopt, [&](int64_t value) { pingpong = int(value); }},
      {"tile_keys", kKeys, wideKeys, kKeys, std::nullopt, [&](int64_t value) { tileKeys = int(value); }}};
  sm80::addKeySplitParameters(parameters, keySplits);
  sm80::applyTunedConfig(r, kForwardVariantName, parameters, notes);
  // K and V sharing, where asked for (the knob or a tuned config), is the split of the columns'.
  const bool sharing = sharable && multicast && columnsServe;
  if (rowSplitServes && (rowSplit != 0 || !columnsServe) && !sharing) {
    return {1, kEvenSplit, 0, true, pingpong, tileKeys, keySplits};
  }
  const int kvSharing = kvSharingFor(problem, sharable && multicast);
  if (!splitTunable(problem, kvSharing)) split = defaultSplit;  // K and V sharing: one CTA, even
  if (!overlapApplies(problem, kvSharing)) overlap = 0;
  return {kvSharing, split, overlap, false, 0, kKeys, keySplits};
}

// What the planner decided, or why not.
struct Resolution {
  Support support;
  const ForwardInstance* instance = nullptr;
  int overlap = 0;
  int pingpong = 0;
  bool gridDnhb = false;
  KeySplitPlan split;  // split-KV: grid z is the split
  std::string notes;  // adaptations of knobs left at their defaults
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
  if (!compiled()) return notApplicable("this build compiles no sm_90a code (build_arch without 90a)");
  if (std::string why = forwardRefusal(problem); !why.empty()) {
    // The row split's reason too where d_v is within its reach.
    if (problem.headDimV > kRowSplitMaxHeadDimV) return notApplicable(std::move(why));
    if (std::string rowWhy = rowSplitRefusal(problem); !rowWhy.empty()) {
      return notApplicable(cat(why, "; ", rowWhy));
    }
  }
  Resolution d;
  const LaunchChoice choice = launchChoiceOf(r, d.notes);
  d.instance = findInstance(problem, choice.kvSharing, choice.split, choice.rowSplit, choice.tileKeys);
  d.overlap = choice.overlap;
  d.pingpong = choice.pingpong;
  if (d.instance == nullptr) return notApplicable(cat("no instance for d_v = ", problem.headDimV));
  if (std::string why = mmaSyncKnobSet(r.policy); !why.empty()) return notApplicable(std::move(why));
  const uint32_t shared = forwardLayoutFor(problem, choice.rowSplit, choice.tileKeys).sharedBytes;
  if (shared > r.device.sharedMemPerBlockOptin) {
    return notApplicable(cat("needs ", shared, " bytes of shared memory per block; the device allows ",
                             r.device.sharedMemPerBlockOptin));
  }
  uint32_t grid[3];
  if (auto why =
          chooseGrid(r.policy, forwardGridBlocksX(problem, d.instance->kvSharing, d.instance->rowSplit), problem.batch,
                     problem.headsQ, d.gridDnhb, grid, d.notes)) {
    return refusal(Support::rejected(FFPA_STATUS_NOT_SUPPORTED_KNOB_COMBINATION, std::move(*why)));
  }
  // Split-KV where the grid leaves the GPU idle: one CTA per SM (384 threads, most of its shared
  // memory); not for CTAs that share K and V (a pair walks the same tiles) or the (N/Br, H, B) grid.
  const int64_t ctas = int64_t{grid[0]} * grid[1] * grid[2];
  d.split = planKeySplits(r.policy, problem, r.device, {ctas, 1, d.instance->tileKeys},
                          !d.gridDnhb && d.instance->kvSharing == 1, choice.keySplits);
  return d;
}

Support supports(const PlanRequest& r) { return resolve(r).support; }

// Runtime autotune's search space: for the kernel that does not share K and V, each split of
// the columns where the split is a choice, each with and without the consumers' overlap; where
// sharing applies, also the kernel that shares them (which splits evenly and does not overlap);
// where the row split serves too, it besides them, with and without its consumers' turns, each
// with KV tiles of 64 keys and, where they serve, 128 (where it alone serves, d_v up to 64, only
// those).
std::vector<tuning::LaunchConfig> arrangementCandidates(const PlanRequest& r) {
  const bool rowSplit = rowSplitRefusal(r.problem).empty();
  std::vector<tuning::LaunchConfig> all;
  if (rowSplit) {
    const bool alone = !forwardRefusal(r.problem).empty();
    const std::vector<int> tileKeys =
        rowSplitWideKeysServe(r.problem) ? std::vector<int>{kRowSplitWideKeys, kKeys} : std::vector<int>{-1};
    for (const int keys : tileKeys) {
      for (const int pingpong : {1, 0}) {
        tuning::LaunchConfig config{{"pingpong", pingpong}};
        if (!alone) config["row_split"] = 1;
        if (keys >= 0) config["tile_keys"] = keys;
        all.push_back(std::move(config));
      }
    }
    if (alone) return all;
  }
  const bool sharing = kvSharingFor(r.problem, true) > 1;
  const std::vector<int> splits =
      splitTunable(r.problem, 1) ? std::vector<int>{kEvenSplit, kSkewedSplit} : std::vector<int>{-1};
  const std::vector<int> overlaps = overlapApplies(r.problem, 1) ? std::vector<int>{0, 1} : std::vector<int>{-1};
  for (const int split : splits) {
    for (const int overlap : overlaps) {
      tuning::LaunchConfig config;
      if (split >= 0) config["split"] = split;
      if (overlap >= 0) config["overlap"] = overlap;
      if (sharing) config["kv_multicast"] = 0;
      if (rowSplit) config["row_split"] = 0;
      if (!config.empty()) all.push_back(std::move(config));
    }
  }
  if (sharing) all.push_back({{"kv_multicast", 1}});
  return all;
}

// Those of the arrangements and, where the default plan's grid leaves the GPU idle, split-KV's
// choices (keySplitCandidates).
std::vector<tuning::LaunchConfig> candidates(const PlanRequest& r) {
  std::vector<tuning::LaunchConfig> all = arrangementCandidates(r);
  const tuning::LaunchConfig none;
  PlanRequest defaults = r;
  defaults.launchConfig = &none;
  const Resolution d = resolve(defaults);
  if (d.support.verdict == Support::Verdict::Applies && d.split.tunable) {
    for (tuning::LaunchConfig& c : keySplitCandidates()) all.push_back(std::move(c));
  }
  return all;
}

Plan plan(const PlanRequest& r) {
  const Resolution d = resolve(r);
  const int exp2Emulated = static_cast<int>(r.policy.value(FFPA_POLICY_EXP2_EMULATION));
  const ForwardInstance& instance = *d.instance;
  if (r.runtime != nullptr) {
    // Once per plan, not per call: the execute path only launches.
    allowDynamicSharedMemory(instance.kernel, r.device, "sm90 forward kernel");
  }
  Plan plan;
  plan.kernel = instanceName(r.problem.dtype, instance.headDimV, instance.kvSharing, instance.split, instance.rowSplit,
                             instance.tileKeys);
  plan.payload = std::make_unique<ForwardPlan>(instance, d.gridDnhb, exp2Emulated, d.overlap, d.pingpong, d.split);
  plan.kernelWorkspaceBytes = d.split.bytes;
  const std::string grid = cat(" grid=", d.gridDnhb ? "(N/Br,H,B)" : "(N/Br,B*H)", " exp2_emulated=", exp2Emulated,
                               "/8", d.notes, describeKeySplits(d.split));
  if (instance.rowSplit) {
    const ForwardArguments layout = forwardLayoutFor(r.problem, true, instance.tileKeys);
    plan.config = cat("Br=", kRowSplitRows, " Bc=", instance.tileKeys, " warpgroups=1+2 threads=", kThreads,
                      " d_v<=", instance.headDimV, " cluster=1 rows=", kRows, "+", kRows, " columns=", instance.headDimV,
                      " pingpong=", d.pingpong, " k_buffers=", layout.kBuffers,
                      " v_buffers=2 smem=", layout.sharedBytes,
                      " tma=64x64 swizzle=128B wgmma=m64n", instance.tileKeys, "k16", grid);
    return plan;
  }
  const int columnCtas = clusterSizeFor(instance.headDimV);
  const int ctaColumns = ctaColumnsOf(instance.headDimV);
  const bool shared = instance.kvSharing > 1;
  const ForwardArguments layout = forwardLayoutFor(r.problem, false);
  plan.config = cat("Br=", kRows, " Bc=", kKeys, " warpgroups=1+2 threads=", kThreads, " d_v<=", instance.headDimV,
                    " cluster=", shared ? instance.kvSharing : columnCtas, " columns=",
                    forwardConsumer0Columns(ctaColumns, instance.split), "+",
                    forwardConsumer1Columns(ctaColumns, instance.split),
                    splitTunable(r.problem, instance.kvSharing) ? cat(" split=", instance.split == kEvenSplit ? "even" : "skewed") : std::string(),
                    overlapApplies(r.problem, instance.kvSharing) ? cat(" overlap=", d.overlap) : std::string(),
                    columnCtas > 1 ? cat(" exchange=S:dsmem k_buffers=", layout.kBuffers) : "",
                    shared ? " kv=multicast:2 row tiles" : "", " smem=", layout.sharedBytes, " tma=64x64 swizzle=128B wgmma=m64n64k16",
                    grid);
  return plan;
}

}  // namespace

// The knobs of seed 000 that shape the mma.sync kernels only (the grid layout is honoured here).
// A value other than the default asks for those kernels.
constexpr ffpaPolicyKnob_t kMmaSyncKnobs[] = {
    FFPA_POLICY_ACCUMULATOR,     FFPA_POLICY_PREFETCH_QKV,    FFPA_POLICY_QKV_SMEM_SHARE,
    FFPA_POLICY_SMEM_SWIZZLE_Q,  FFPA_POLICY_SMEM_SWIZZLE_K,  FFPA_POLICY_SMEM_SWIZZLE_V,
    FFPA_POLICY_PERSIST_Q_G2S,   FFPA_POLICY_PERSIST_KV_G2S,  FFPA_POLICY_PERSIST_Q_S2R,
    FFPA_POLICY_PERSIST_V_S2R,   FFPA_POLICY_REGISTERS_PIPE_KV, FFPA_POLICY_STAGES,
};

std::string mmaSyncKnobSet(const Policy& policy) {
  for (const ffpaPolicyKnob_t knob : kMmaSyncKnobs) {
    const KnobSpec& spec = knobSpec(knob);
    const int64_t value = policy.value(knob);
    if (value != spec.defaultValue) {
      const std::string shown = spec.type == FFPA_POLICY_TYPE_ENUM ? knobValueName(knob, value) : cat(value);
      return cat(spec.name, "=", shown, " is a knob of the mma.sync kernels");
    }
  }
  return {};
}

bool compiled() { return !instances().empty(); }

std::string instanceName(ffpaDataType_t dtype, int instanceHeadDimV, int kvSharing, int split, bool rowSplit,
                         int tileKeys) {
  const bool otherSplit = !rowSplit && split != defaultForwardSplit(clusterSizeFor(instanceHeadDimV));
  return cat(kForwardVariantName, ".", dtype == FFPA_DATA_TYPE_FLOAT16 ? "f16" : "bf16", ".d", instanceHeadDimV,
             kvSharing > 1 ? cat(".kv", kvSharing) : std::string(), rowSplit ? ".row_split" : "",
             tileKeys != kKeys ? cat(".bc", tileKeys) : std::string(),
             otherSplit ? (split == kEvenSplit ? ".even" : ".skewed") : "");
}

void registerForwardVariant(KernelRegistry& registry) {
  registry.add({kForwardVariantName, Direction::Forward, 200, false, supports, plan, candidates});
}

}  // namespace ffpa::sm90
