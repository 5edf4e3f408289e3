#include "core/key_splits.h"

#include "core/error.h"
#include "core/workspace_layout.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace ffpa {
namespace {

int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// FlashAttention-2's choice: of the run counts up to `most`, the fewest whose waves of CTAs fill
// the GPU's slots within 85% of the best; a count that leaves every run as many tiles as one
// fewer runs do is not a choice.
int chooseSplits(int64_t ctas, int64_t slots, int64_t keyTiles, int64_t most) {
  std::vector<double> efficiency(static_cast<size_t>(most) + 1, 0.0);
  double best = 0.0;
  for (int64_t s = 1; s <= most; ++s) {
    const double waves = double(ctas * s) / double(slots);
    efficiency[s] = waves / std::ceil(waves);
    best = std::max(best, efficiency[s]);
  }
  for (int64_t s = 1; s <= most; ++s) {
    if (s > 1 && ceilDiv(keyTiles, s) == ceilDiv(keyTiles, s - 1)) continue;
    if (efficiency[s] >= 0.85 * best) return static_cast<int>(s);
  }
  return 1;
}

}  // namespace

KeySplitPlan planKeySplits(const Policy& policy, const AttentionProblem& problem, const DeviceInfo& device,
                           const ForwardGrid& grid, bool allowed, const KeySplitTuning& tuning) {
  KeySplitPlan plan;
  const int64_t asked = policy.value(FFPA_POLICY_KEY_SPLITS);
  if (!allowed || problem.slices != nullptr || asked == 1 || grid.tileKeys <= 0 || problem.seqKv <= 0) return plan;
  // The tiles the last query row sees: a causal mask hides the rest from every row, and runs of
  // them would be CTAs with nothing to do.
  const int64_t keys = problem.causal == FFPA_CAUSAL_NONE
                           ? problem.seqKv
                           : std::min<int64_t>(problem.seqKv, problem.seqQ + problem.causalOffset());
  if (keys <= 0) return plan;
  const int64_t keyTiles = ceilDiv(keys, grid.tileKeys);
  int64_t splits = asked;
  if (asked == 0) {
    const int64_t slots = int64_t{std::max(device.smCount, 1)} * std::max(grid.ctasPerSm, 1);
    if (grid.ctas * 5 >= slots * 4) return plan;  // the grid fills 80% of the slots already
    plan.tunable = keyTiles >= 2;
    const int64_t most = std::min<int64_t>(FFPA_MAX_MERGE_PARTIALS, keyTiles / std::max(tuning.minTiles, 1));
    if (!tuning.split || most < 2) return plan;
    splits = chooseSplits(grid.ctas, slots, keyTiles, most);
  }
  splits = std::min(splits, keyTiles);
  if (splits <= 1) return plan;
  // Runs of equal length but the last, none of them empty.
  plan.tilesPerSplit = static_cast<int>(ceilDiv(keyTiles, splits));
  plan.splits = static_cast<int>(ceilDiv(keyTiles, plan.tilesPerSplit));
  if (plan.splits <= 1) return KeySplitPlan{1, 0, 0, 0, plan.tunable};
  const size_t rows = size_t(problem.batch) * size_t(problem.headsQ) * size_t(problem.seqQ);
  plan.partialOBytes = alignUp(size_t(plan.splits) * rows * size_t(problem.headDimV) * sizeof(float));
  plan.bytes = alignUp(plan.partialOBytes + size_t(plan.splits) * rows * sizeof(float));
  return plan;
}

std::vector<tuning::LaunchConfig> keySplitCandidates() {
  return {{{"split_kv", 0}}, {{"split_min_tiles", 1}}, {{"split_min_tiles", 2}}, {{"split_min_tiles", 8}},
          {{"split_min_tiles", 16}}};
}

std::string describeKeySplits(const KeySplitPlan& split) {
  return split.splits > 1 ? cat(" key_splits=", split.splits, " split_tiles=", split.tilesPerSplit) : std::string();
}

PartialOutputs partialOutputs(const KeySplitPlan& split, const AttentionProblem& problem, void* workspace) {
  const int64_t heads = problem.headsQ, rows = problem.seqQ, d = problem.headDimV;
  PartialOutputs out;
  out.o = static_cast<float*>(workspace);
  out.lse = reinterpret_cast<float*>(static_cast<char*>(workspace) + split.partialOBytes);
  out.oStrides = {heads * rows * d, rows * d, d, 1};
  out.lseStrides = {heads * rows, rows, 1, 0};
  out.fields.splits = split.splits;
  out.fields.tilesPerSplit = split.tilesPerSplit;
  out.fields.partialOStride = problem.batch * heads * rows * d;
  out.fields.partialLseStride = problem.batch * heads * rows;
  return out;
}

KeySplitMerge keySplitMerge(const KeySplitPlan& split, const AttentionProblem& problem, void* workspace, void* o,
                            float* lse) {
  const PartialOutputs partials = partialOutputs(split, problem, workspace);
  KeySplitMerge call;
  MergeProblem& merge = call.problem;
  merge.count = split.splits;
  merge.partialType = FFPA_DATA_TYPE_FLOAT32;
  merge.outType = problem.dtype;
  merge.batch = problem.batch;
  merge.heads = problem.headsQ;
  merge.seq = problem.seqQ;
  merge.headDim = problem.headDimV;
  merge.partialO = partials.oStrides;
  merge.partialLse = partials.lseStrides;
  merge.o = problem.o;
  merge.lse = problem.lse;
  merge.hasLse = problem.hasLse && lse != nullptr;
  MergeTensors& tensors = call.tensors;
  for (int s = 0; s < split.splits; ++s) {
    tensors.partialO[s] = partials.o + s * partials.fields.partialOStride;
    tensors.partialLse[s] = partials.lse + s * partials.fields.partialLseStride;
  }
  tensors.o = o;
  tensors.lse = merge.hasLse ? lse : nullptr;
  return call;
}

void enqueueKeySplitMerge(const KeySplitPlan& split, const AttentionProblem& problem, void* workspace, void* o,
                          float* lse, ffpaStream_t stream) {
  const KeySplitMerge call = keySplitMerge(split, problem, workspace, o, lse);
  enqueueMerge(call.problem, call.tensors, stream);
}

}  // namespace ffpa
