#include "sm80/backward_resolve.h"

#include "core/error.h"
#include "core/slice_table.h"
#include "ffpa_build_config.h"
#include "sm80/backward_variant.h"
#include "sm80/resolve_common.h"

#include <algorithm>
#include <climits>

namespace ffpa::sm80 {
namespace {

BackwardResolution refuse(Support why) { return {std::nullopt, std::move(why)}; }

// The axes of a sliced call as the dQ kernel (rows) and the dK/dV kernel (keys) walk them.
slices::SlicedAxis slicedRows(const BackwardLaunch& launch, const AttentionProblem& problem,
                              const slices::SliceView& view) {
  return slices::slicedAxis(view.queries, launch.queryShape.rows(), problem.seqQ,
                            problem.slices->queryExtent());
}
slices::SlicedAxis slicedKeys(const BackwardLaunch& launch, const AttentionProblem& problem,
                              const slices::SliceView& view) {
  return slices::slicedAxis(view.keys, launch.keyShape.keys(), problem.seqKv, problem.slices->keyExtent());
}

// The instance of the smallest compiled head dim >= both of the problem's, for its dtype.
const BackwardInstance* findInstance(int64_t headDim, ffpaDataType_t dtype) {
  const BackwardInstance* best = nullptr;
  for (const BackwardInstance& i : backwardInstances()) {
    if (i.dtype == dtype && i.headDim >= headDim && (best == nullptr || i.headDim < best->headDim)) {
      best = &i;
    }
  }
  return best;
}

}  // namespace

std::vector<LaunchParameter> backwardLaunchParameters(GradientChoice& c) {
  return {
      {"stages", 1, maxCompiledStages(), 1, FFPA_POLICY_STAGES, [&c](int64_t v) { c.stages = int(v); }},
      {"score_step", 16, 128, 16, std::nullopt, [&c](int64_t v) { c.scorePanelsPerStep = int(v / 16); }},
      {"output_step", 16, 64, 16, std::nullopt, [&c](int64_t v) { c.outputPanelsPerStep = int(v / 16); }},
      {"prefetch", 0, 1, 1, FFPA_POLICY_PREFETCH_QKV, [&c](int64_t v) { c.prefetch = v != 0; }},
      {"smem_share", 0, 1, 1, FFPA_POLICY_QKV_SMEM_SHARE, [&c](int64_t v) { c.shareSmem = v != 0; }},
      {"persist_q", 0, 1, 1, FFPA_POLICY_PERSIST_Q_G2S, [&c](int64_t v) { c.persistQueryRows = v != 0; }},
  };
}

BackwardResolution resolveBackward(const PlanRequest& r) {
  const AttentionProblem& problem = r.problem;
  const Policy& policy = r.policy;
  if (auto why = unservedProblem(problem)) return refuse(notApplicable(*why));
  // Inputs read by cp.async (16-byte rows) or as 4-byte pairs (O); outputs written as pairs.
  if (auto why = strideProblem({{"Q", problem.q, 8},
                                {"K", problem.k, 8},
                                {"V", problem.v, 8},
                                {"dO", problem.dO, 8},
                                {"O", problem.o, 2},
                                {"dQ", problem.dq, 2},
                                {"dK", problem.dk, 2},
                                {"dV", problem.dv, 2}})) {
    return refuse(notApplicable(*why));
  }
  const int64_t headDim = std::max(problem.headDimQk, problem.headDimV);
  BackwardLaunch d;
  d.instance = findInstance(headDim, problem.dtype);
  if (d.instance == nullptr) {
    return refuse(notApplicable(cat("no backward instance is compiled for head dim ", headDim,
                                    " (compiled head dims: ", FFPA_BUILD_HEADDIMS, ")")));
  }
  d.queryShape = queryGradientShape(d.instance->headDim);
  d.keyShape = keyGradientShape(d.instance->headDim);

  if (auto why = stagesProblem(policy)) return refuse(rejected(*why));
  GradientChoice& c = d.choice;
  c.stages = stagesOf(policy);
  c.prefetch = policy.flag(FFPA_POLICY_PREFETCH_QKV);
  c.shareSmem = policy.flag(FFPA_POLICY_QKV_SMEM_SHARE);
  c.persistQueryRows = policy.flag(FFPA_POLICY_PERSIST_Q_G2S);
  // A tuned config (or autotune candidate) sets what the caller left at its default.
  applyTunedConfig(r, kBackwardVariantName, backwardLaunchParameters(c), d.notes);

  BackwardParams& p = d.layout;
  const int qk = static_cast<int>(problem.headDimQk), v = static_cast<int>(problem.headDimV);
  const int64_t limit = r.device.sharedMemPerBlockOptin;
  auto queryFits = [&] { return queryGradientLayout(d.queryShape, c, qk, v, p.queryLayout) <= limit; };
  auto keyFits = [&] { return keyGradientLayout(d.keyShape, c, qk, v, p.keyLayout) <= limit; };
  auto fits = [&] { return queryFits() && keyFits(); };
  // Knobs left at their defaults give way to fit the device's shared memory: the dK/dV kernel
  // needs fewer stages, the dQ kernel streams its rows instead of persisting them, then fewer
  // stages.
  const bool stagesAtDefault = policy.value(FFPA_POLICY_STAGES) == 0;
  if (!keyFits() && stagesAtDefault && c.stages > 1) {
    c.stages = 1;
    d.notes += " stages=1(fit)";
  }
  if (!queryFits() && c.persistQueryRows && isDefault(policy, FFPA_POLICY_PERSIST_Q_G2S)) {
    c.persistQueryRows = false;
    d.notes += " persist_q=0(fit)";
  }
  if (!queryFits() && stagesAtDefault && c.stages > 1) {
    c.stages = 1;
    d.notes += " stages=1(fit)";
  }
  if (!fits()) {
    queryFits();  // both layouts as they are, for the message
    keyFits();
    return refuse(rejected(cat("these pipeline knobs need ", p.queryLayout.sharedBytes, " (dQ) and ",
                               p.keyLayout.sharedBytes, " (dK/dV) bytes of shared memory per block and the "
                               "device allows ", limit, "; lower FFPA_POLICY_STAGES, turn off "
                               "FFPA_POLICY_PERSIST_Q_G2S, or set FFPA_POLICY_QKV_SMEM_SHARE=1")));
  }

  const int64_t rows = problem.batch * problem.headsQ * problem.seqQ;
  const int64_t rowStatsBlocks = (rows + kRowStatsWarps - 1) / kRowStatsWarps;
  if (rowStatsBlocks > INT32_MAX) {
    return refuse(notApplicable(cat("B*Hq*Nq = ", rows, " query rows exceed the row-statistics grid")));
  }
  d.rowStatsGrid = static_cast<uint32_t>(rowStatsBlocks);
  d.workspaceBytes = alignUp(static_cast<uint64_t>(2 * rows) * sizeof(float), 256);
  const int64_t queryTiles = (problem.seqQ + d.queryShape.rows() - 1) / d.queryShape.rows();
  if (auto why = chooseGrid(policy, queryTiles, problem.batch, problem.headsQ, d.gridDnhb, d.queryGrid,
                            d.notes)) {
    return refuse(rejected(*why));
  }
  // The dK/dV grid has fewer heads (Hkv <= Hq): the same layout fits whenever the dQ grid does.
  const int64_t keyTiles = (problem.seqKv + d.keyShape.keys() - 1) / d.keyShape.keys();
  d.keyGrid[0] = static_cast<uint32_t>(keyTiles);
  d.keyGrid[1] = static_cast<uint32_t>(d.gridDnhb ? problem.headsKv : problem.batch * problem.headsKv);
  d.keyGrid[2] = static_cast<uint32_t>(d.gridDnhb ? problem.batch : 1);
  return {std::move(d), Support::applies()};
}

BackwardParams backwardCallParams(const BackwardLaunch& launch, const AttentionProblem& problem,
                                  const TensorArgs& tensors, void* rowStats) {
  BackwardParams p = launch.layout;
  p.q = tensors.q;
  p.k = tensors.k;
  p.v = tensors.v;
  p.o = tensors.o;
  p.dO = tensors.dO;
  p.lse = tensors.lse;
  p.dq = tensors.dq;
  p.dk = tensors.dk;
  p.dv = tensors.dv;
  p.rowStats = static_cast<float*>(rowStats);
  for (int i = 0; i < 3; ++i) {
    p.qStrides[i] = problem.q[i];
    p.kStrides[i] = problem.k[i];
    p.vStrides[i] = problem.v[i];
    p.oStrides[i] = problem.o[i];
    p.dOStrides[i] = problem.dO[i];
    p.lseStrides[i] = problem.lse[i];
    p.dqStrides[i] = problem.dq[i];
    p.dkStrides[i] = problem.dk[i];
    p.dvStrides[i] = problem.dv[i];
  }
  copyProblemSizes(problem, p);
  p.headsKv = static_cast<int32_t>(problem.headsKv);
  p.scale = problem.scale;
  p.gridDnhb = launch.gridDnhb;
  p.slices = tensors.slices;
  p.rowTiles = p.keyTiles = nullptr;
  p.rowTileCount = p.keyTileCount = 0;
  if (p.slices.slices != nullptr) {
    const slices::SlicedAxis rows = slicedRows(launch, problem, p.slices);
    const slices::SlicedAxis keys = slicedKeys(launch, problem, p.slices);
    p.rowTiles = rows.tiles;
    p.rowTileCount = rows.tileCount;
    p.keyTiles = keys.tiles;
    p.keyTileCount = keys.tileCount;
  }
  return p;
}

BackwardGrids backwardCallGrids(const BackwardLaunch& launch, const AttentionProblem& problem,
                                const BackwardParams& params) {
  BackwardGrids grids;
  for (int i = 0; i < 3; ++i) {
    grids.query[i] = launch.queryGrid[i];
    grids.key[i] = launch.keyGrid[i];
  }
  if (problem.slices == nullptr) return grids;
  grids.query[0] = slicedRows(launch, problem, params.slices).ctas;
  grids.key[0] = slicedKeys(launch, problem, params.slices).ctas;
  return grids;
}

std::string describeBackwardConfig(const BackwardLaunch& d) {
  const ForwardShape& qs = d.queryShape;
  const KeyShape& ks = d.keyShape;
  const GradientLayout& ql = d.layout.queryLayout;
  const GradientLayout& kl = d.layout.keyLayout;
  return cat("head_dim<=", d.instance->headDim, " dQ: Br=", qs.rows(), " Bc=", qs.keys(), " warps=",
             qs.rowWarps, "x", qs.colWarps, " smem=", ql.sharedBytes, "B; dK/dV: Bk=", ks.keys(),
             " Bq=", ks.queries(), " warps=", ks.rowWarps, "x", ks.colWarps, " smem=", kl.sharedBytes,
             "B; stages=", ql.rings.stages, " prefetch=", ql.rings.prefetch, " smem_share=",
             ql.rings.shared, " persist_q=", ql.persistRows, " score_step=", ql.scorePanelsPerStep * 16, "/", kl.scorePanelsPerStep * 16,
             " output_step=", ql.outputPanelsPerStep * 16, "/", kl.outputPanelsPerStep * 16, " grid=",
             d.gridDnhb ? "(N/B,H,B)" : "(N/B,B*H)", " acc=f32 deterministic=1", d.notes);
}

}  // namespace ffpa::sm80
