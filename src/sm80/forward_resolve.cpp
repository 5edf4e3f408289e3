#include "sm80/forward_resolve.h"

#include "core/descriptors.h"
#include "core/error.h"
#include "core/slice_table.h"
#include "ffpa_build_config.h"
#include "sm80/forward_variant.h"
#include "sm80/resolve_common.h"

#include <algorithm>
#include <cstdint>

namespace ffpa::sm80 {
namespace {

ForwardResolution refuse(Support why) { return {std::nullopt, std::move(why)}; }

// The query axis of a sliced call as the forward kernel walks it.
slices::SlicedAxis slicedRows(const ForwardLaunch& launch, const AttentionProblem& problem,
                              const slices::SliceView& view) {
  return slices::slicedAxis(view.queries, launch.shape.rows(), problem.seqQ, problem.slices->queryExtent());
}

const ForwardInstance* findInstance(int headDimV, ffpaDataType_t dtype, ffpaAccumulator_t accumulator,
                                    bool pipeKv, bool qInRegisters, bool vInRegisters, bool wideKeys = false) {
  for (const ForwardInstance& i : forwardInstances()) {
    if (i.headDimV == headDimV && i.dtype == dtype && i.accumulator == accumulator &&
        i.pipeKv == pipeKv && i.qInRegisters == qInRegisters && i.vInRegisters == vInRegisters &&
        i.wideKeys == wideKeys) {
      return &i;
    }
  }
  return nullptr;
}

// The smallest compiled d_v >= the problem's, for this dtype and accumulator (0 if none).
int compiledHeadDimV(int64_t headDimV, ffpaDataType_t dtype, ffpaAccumulator_t accumulator) {
  int best = 0;
  for (const ForwardInstance& i : forwardInstances()) {
    if (i.dtype == dtype && i.accumulator == accumulator && i.headDimV >= headDimV &&
        (best == 0 || i.headDimV < best)) {
      best = i.headDimV;
    }
  }
  return best;
}

// CTAs of `sharedBytes` bytes of shared memory each that an SM of `device` holds at once.
int64_t sharedMemoryCtasPerSm(const DeviceInfo& device, int64_t sharedBytes) {
  constexpr int64_t kReservedPerBlock = 1024;  // the shared memory the runtime keeps per block
  return device.sharedMemPerSm / (sharedBytes + kReservedPerBlock);
}

// Whether the 64-key tiles are the default for a problem of these head dims on the two-row-tile
// instance of `instanceHeadDimV` (d_v <= 128): wherever an SM holds as many CTAs of their layout
// (`choice`) as of the 32-key tiles' (at most two: the registers of 128 threads). An H100 holds
// two of either with two stages of whole tiles; an A100 two of the 32-key layout but one of the
// 64-key one; an sm_86/89 GPU one of either.
bool wideKeysByDefault(const DeviceInfo& device, const PipelineChoice& choice, int64_t headDimQk, int64_t headDimV,
                       int instanceHeadDimV) {
  // CTAs of a layout per SM, as shared memory allows: at most 2, what the registers of 128 threads
  // at up to 255 registers each allow (both tiles' launch bounds).
  const auto ctasPerSm = [&](bool wideKeys) -> int64_t {
    ForwardParams scratch{};
    scratch.headDimQk = static_cast<int32_t>(headDimQk);
    scratch.headDimV = static_cast<int32_t>(headDimV);
    const int64_t bytes = forwardLayout(forwardShape(instanceHeadDimV, false, wideKeys), choice, scratch);
    if (bytes > device.sharedMemPerBlockOptin) return 0;
    return std::min<int64_t>(2, sharedMemoryCtasPerSm(device, bytes));
  };
  return ctasPerSm(true) >= ctasPerSm(false);
}

}  // namespace

std::vector<LaunchParameter> forwardLaunchParameters(PipelineChoice& c, const AttentionProblem& problem,
                                                     const ForwardShape& shape, bool qInRegisters,
                                                     bool tileKeysChoice) {
  // Q kept in registers is loaded through the persisted tile: persist_q stays on then.
  const bool persistableQ = problem.headDimQk <= 320;
  const bool persistableKv = coarseTiling(shape, problem.headDimQk, problem.headDimV);
  const int keys = shape.keys();
  return {
      {"stages", 1, maxCompiledStages(), 1, FFPA_POLICY_STAGES, [&c](int64_t v) { c.stages = int(v); }},
      {"qk_step", 16, 128, 16, std::nullopt, [&c](int64_t v) { c.qkPanelsPerStep = int(v / 16); }},
      {"v_step", 16, 64, 16, std::nullopt, [&c](int64_t v) { c.vPanelsPerStep = int(v / 16); }},
      {"prefetch", 0, 1, 1, FFPA_POLICY_PREFETCH_QKV, [&c](int64_t v) { c.prefetch = v != 0; }},
      {"smem_share", 0, 1, 1, FFPA_POLICY_QKV_SMEM_SHARE, [&c](int64_t v) { c.shareSmem = v != 0; }},
      {"persist_q", 0, 1, 1, FFPA_POLICY_PERSIST_Q_G2S,
       [&c, persistableQ, qInRegisters](int64_t v) {
         if (!qInRegisters) c.persistQ = persistableQ && v != 0;
       }},
      {"persist_kv", 0, 1, 1, FFPA_POLICY_PERSIST_KV_G2S,
       [&c, persistableKv](int64_t v) { c.persistKv = persistableKv && v != 0; }},
      {"tile_keys", tileKeysChoice ? 32 : keys, tileKeysChoice ? 64 : keys, 32, std::nullopt,
       [&c](int64_t v) { c.tileKeys = int(v); }},
  };
}

ForwardResolution resolveForward(const PlanRequest& r) {
  const AttentionProblem& problem = r.problem;
  const Policy& policy = r.policy;
  if (auto why = unservedProblem(problem)) return refuse(notApplicable(*why));
  // Unit stride on d, 16-byte rows for cp.async, 4-byte O pairs.
  if (auto why = strideProblem({{"Q", problem.q, 8}, {"K", problem.k, 8}, {"V", problem.v, 8},
                                {"O", problem.o, 2}})) {
    return refuse(notApplicable(*why));
  }

  const ffpaAccumulator_t accumulator = policy.accumulator();
  const int headDimV = compiledHeadDimV(problem.headDimV, problem.dtype, accumulator);
  if (headDimV == 0) {
    return refuse(notApplicable(cat("no instance is compiled for d_v=", problem.headDimV,
                                    " (compiled head dims: ", FFPA_BUILD_HEADDIMS, ")")));
  }
  if (const int64_t emulated = policy.value(FFPA_POLICY_EXP2_EMULATION); emulated != 0) {
    return refuse(rejected(cat("FFPA_POLICY_EXP2_EMULATION=", emulated,
                               " needs the Hopper forward (FFPA_POLICY_HOPPER_KERNELS=1 on compute capability "
                               "9.0, d_v 65..1024); the mma.sync kernels compute every exp2 on the "
                               "special-function unit: set it to 0")));
  }
  ForwardLaunch d;
  // Fragment handling: template parameters, so each setting is its own compiled instance. Q
  // fragments kept in registers leave room for one m16 row tile per warp.
  const bool pipeKv = policy.flag(FFPA_POLICY_REGISTERS_PIPE_KV);
  const bool qInRegisters = policy.flag(FFPA_POLICY_PERSIST_Q_S2R);
  d.shape = forwardShape(headDimV, qInRegisters);
  const bool vInRegisters = d.shape.colWarps == 1 && policy.flag(FFPA_POLICY_PERSIST_V_S2R);
  if (qInRegisters && (problem.headDimQk > 128 || problem.headDimV > 128)) {
    return refuse(rejected(cat("FFPA_POLICY_PERSIST_Q_S2R=1 needs d_qk <= 128 and d_v <= 128 (here ",
                               problem.headDimQk, "/", problem.headDimV, "): the Q fragments of d_qk=",
                               problem.headDimQk, " would take ", problem.headDimQk / 4,
                               " registers per thread; set it to 0")));
  }
  d.instance = findInstance(headDimV, problem.dtype, accumulator, pipeKv, qInRegisters, vInRegisters);
  if (d.instance == nullptr) {
    return refuse(rejected(cat(
        "no instance is compiled for FFPA_POLICY_ACCUMULATOR=", knobValueName(FFPA_POLICY_ACCUMULATOR, accumulator),
        " with FFPA_POLICY_REGISTERS_PIPE_KV=", pipeKv, ", FFPA_POLICY_PERSIST_Q_S2R=", qInRegisters,
        ", FFPA_POLICY_PERSIST_V_S2R=", policy.flag(FFPA_POLICY_PERSIST_V_S2R),
        ": the fragment-handling variants are compiled with FFPA_ACCUMULATOR_F32 only, and "
        "PERSIST_V_S2R=0 only for d_v <= 256 and PERSIST_Q_S2R=1 only for d_v <= 128")));
  }

  // Pipeline knobs: run-time parameters of every instance.
  if (auto why = stagesProblem(policy)) return refuse(rejected(*why));
  const bool stagesAtDefault = policy.value(FFPA_POLICY_STAGES) == 0;
  PipelineChoice& c = d.choice;
  c.stages = stagesOf(policy);
  c.prefetch = policy.flag(FFPA_POLICY_PREFETCH_QKV);
  c.shareSmem = policy.flag(FFPA_POLICY_QKV_SMEM_SHARE);
  c.swizzleQ = policy.flag(FFPA_POLICY_SMEM_SWIZZLE_Q);
  c.swizzleK = policy.flag(FFPA_POLICY_SMEM_SWIZZLE_K);
  c.swizzleV = policy.flag(FFPA_POLICY_SMEM_SWIZZLE_V);
  // Persisting is for small enough head dims (seed 000's bounds); Q in registers loads Q through
  // the persisted tile.
  c.persistQ = qInRegisters || (policy.flag(FFPA_POLICY_PERSIST_Q_G2S) && problem.headDimQk <= 320);
  c.persistKv = policy.flag(FFPA_POLICY_PERSIST_KV_G2S) && coarseTiling(d.shape, problem.headDimQk, problem.headDimV);
  // A tuned config (or autotune candidate) sets what the caller left at its default.
  // The instance's twin of 64-key tiles, where the build compiles one (instance set of forward_instance_set.h).
  // (Not with per-batch key lengths where it does not read them: readsKeyLengths.)
  const bool wideServes = problem.keyLengths == nullptr || readsKeyLengths(true);
  const ForwardInstance* wide =
      wideServes ? findInstance(headDimV, problem.dtype, accumulator, pipeKv, qInRegisters, vInRegisters, true)
                 : nullptr;
  d.tileKeysChoice = wide != nullptr;
  std::vector<LaunchParameter> parameters =
      forwardLaunchParameters(c, problem, d.shape, qInRegisters, d.tileKeysChoice);
  KeySplitTuning splitTuning;
  addKeySplitParameters(parameters, splitTuning);
  applyTunedConfig(r, kForwardVariantName, parameters, d.notes);
  // 64-key tiles where the config asks for them, else where they are the device's default.
  if (wide != nullptr && (c.tileKeys == 0 ? wideKeysByDefault(r.device, c, problem.headDimQk, problem.headDimV, headDimV)
                                          : c.tileKeys == 64)) {
    d.instance = wide;
    d.shape = forwardShape(headDimV, qInRegisters, true);
  }

  ForwardParams& p = d.layout;
  p.headDimQk = static_cast<int32_t>(problem.headDimQk);
  p.headDimV = static_cast<int32_t>(problem.headDimV);
  const int64_t limit = r.device.sharedMemPerBlockOptin;
  auto fits = [&] { return forwardLayout(d.shape, c, p) <= limit; };
  // Knobs left at their defaults give way, one after the other, to fit the device's shared
  // memory; a knob the caller set is never changed behind their back. Pipeline steps of their
  // default size (those no tuned config chose) halve first, so that a device with about 100 KiB
  // per block (sm_86, sm_89) keeps two stages of smaller steps rather than one stage.
  bool halved = false;
  auto halveDefaultSteps = [&] {
    const bool qkDefault = c.qkPanelsPerStep == 0, vDefault = c.vPanelsPerStep == 0;
    if (halved || c.persistKv || !(qkDefault || vDefault) || fits()) return;
    // fits() left the layout of the default steps in p.
    if (qkDefault) c.qkPanelsPerStep = std::max(1, p.qkPanelsPerStep / 2);
    if (vDefault) c.vPanelsPerStep = std::max(1, p.vPanelsPerStep / 2);
    halved = true;
    d.notes += " steps/2(fit)";
  };
  halveDefaultSteps();
  if (!fits() && stagesAtDefault && c.stages > 1) {
    c.stages = 1;
    d.notes += " stages=1(fit)";
  }
  if (!fits() && c.persistKv && isDefault(policy, FFPA_POLICY_PERSIST_KV_G2S)) {
    c.persistKv = false;
    d.notes += " persist_kv=0(fit)";
  }
  halveDefaultSteps();
  if (!fits() && c.persistQ && !qInRegisters && isDefault(policy, FFPA_POLICY_PERSIST_Q_G2S)) {
    c.persistQ = false;
    d.notes += " persist_q=0(fit)";
  }
  halveDefaultSteps();
  if (!fits()) {
    return refuse(rejected(cat("these pipeline knobs need ", forwardLayout(d.shape, c, p),
                               " bytes of shared memory per block and the device allows ", limit,
                               "; lower FFPA_POLICY_STAGES or turn off FFPA_POLICY_PERSIST_KV_G2S / "
                               "FFPA_POLICY_PERSIST_Q_G2S, or set FFPA_POLICY_QKV_SMEM_SHARE=1")));
  }

  // The grid: (N/Br, B*H) or (N/Br, H, B).
  const int64_t rowTiles = (problem.seqQ + d.shape.rows() - 1) / d.shape.rows();
  if (auto why = chooseGrid(policy, rowTiles, problem.batch, problem.headsQ, d.gridDnhb, d.grid, d.notes)) {
    return refuse(rejected(*why));
  }
  // Split-KV where the grid leaves the GPU idle (grid z is the split; the (N/Br, H, B) grid's z is
  // B). CTAs per SM: two of 128 threads (their launch bounds), one of 256; fewer where shared
  // memory holds fewer.
  const int64_t sharedCtas = std::max<int64_t>(1, sharedMemoryCtasPerSm(r.device, p.sharedBytes));
  const int ctasPerSm = static_cast<int>(std::min<int64_t>(d.shape.threads() <= 128 ? 2 : 1, sharedCtas));
  const int64_t ctas = int64_t{d.grid[0]} * d.grid[1] * d.grid[2];
  d.split = planKeySplits(policy, problem, r.device, {ctas, ctasPerSm, d.shape.keys()}, !d.gridDnhb, splitTuning);
  if (d.split.splits > 1) d.grid[2] = static_cast<uint32_t>(d.split.splits);
  return {std::move(d), Support::applies()};
}

std::string describeForwardConfig(const ForwardLaunch& d) {
  const ForwardParams& p = d.layout;
  const char* swizzle[] = {"pad", "swizzle"};
  return cat("Br=", d.shape.rows(), " Bc=", d.shape.keys(), " warps=", d.shape.rowWarps, "x",
             d.shape.colWarps, " threads=", d.shape.threads(), " warp_rows=", 16 * d.shape.rowTiles, " d_v<=", d.instance->headDimV,
             " stages=", p.rings.stages, " qk_step=", p.qkPanelsPerStep * 16, " v_step=", p.vPanelsPerStep * 16,
             " prefetch=", p.rings.prefetch, " smem_share=", p.rings.shared, " q=", swizzle[d.choice.swizzleQ],
             " k=", swizzle[d.choice.swizzleK], " v=", swizzle[d.choice.swizzleV],
             " persist_q=", p.persistQ, " persist_kv=", d.choice.persistKv,
             " grid=", d.gridDnhb ? "(N/Br,H,B)" : "(N/Br,B*H)", " smem=", p.sharedBytes, "B", d.notes,
             describeKeySplits(d.split));
}

ForwardParams forwardCallParams(const ForwardLaunch& launch, const AttentionProblem& problem,
                                const TensorArgs& tensors, void* workspace) {
  ForwardParams p = launch.layout;
  p.q = tensors.q;
  p.k = tensors.k;
  p.v = tensors.v;
  p.o = tensors.out;
  p.lse = problem.hasLse ? tensors.lseOut : nullptr;
  for (int i = 0; i < 3; ++i) {
    p.qStrides[i] = problem.q[i];
    p.kStrides[i] = problem.k[i];
    p.vStrides[i] = problem.v[i];
    p.oStrides[i] = problem.o[i];
    p.lseStrides[i] = problem.lse[i];
  }
  p.split = KeySplit{};
  if (launch.split.splits > 1) usePartialOutputs(launch.split, problem, workspace, p);
  copyProblemSizes(problem, p);
  p.gridDnhb = launch.gridDnhb;
  p.slices = tensors.slices;
  p.rowTiles = nullptr;
  p.rowTileCount = 0;
  if (p.slices.slices != nullptr) {
    const slices::SlicedAxis rows = slicedRows(launch, problem, p.slices);
    p.rowTiles = rows.tiles;
    p.rowTileCount = rows.tileCount;
  }
  return p;
}

void forwardCallGrid(const ForwardLaunch& launch, const AttentionProblem& problem, const ForwardParams& params,
                     uint32_t (&grid)[3]) {
  for (int i = 0; i < 3; ++i) grid[i] = launch.grid[i];
  if (problem.slices == nullptr) return;
  grid[0] = slicedRows(launch, problem, params.slices).ctas;
}

}  // namespace ffpa::sm80
