// Split-KV for the fast forward kernels (kernels/common/key_split.h): how many runs of KV tiles a
// problem's row tiles are cut into, the workspace the partial results take, and the merge that
// turns them into the call's O and LSE.
#pragma once

#include "common/key_split.h"
#include "core/device.h"
#include "core/plan.h"
#include "core/policy.h"
#include "core/problem.h"
#include "merge/merge_call.h"
#include "tuning/tuned_config.h"

#include <cstddef>
#include <cstdint>
#include <vector>

namespace ffpa {

// A plan's split of the keys: `splits` runs of `tilesPerSplit` KV tiles, and the workspace their
// partial outputs ([splits, B, H, Nq, d_v] fp32, then [splits, B, H, Nq] fp32 log-sum-exps) take.
struct KeySplitPlan {
  int splits = 1;
  int tilesPerSplit = 0;
  size_t partialOBytes = 0;  // where the log-sum-exps start
  size_t bytes = 0;          // 0 without a split
  // Whether the planner's choice was the problem's to make and a launch config could change it
  // (KeySplitTuning): FFPA_POLICY_KEY_SPLITS at 0, a grid that leaves slots idle, 2 tiles or more.
  bool tunable = false;
};

// How a kernel's grid fills the GPU without a split: its CTAs, how many an SM runs at once, and
// the keys of its KV tiles.
struct ForwardGrid {
  int64_t ctas;
  int ctasPerSm;
  int tileKeys;
};

constexpr int kMinTilesPerSplit = 4;

// What a launch config (a tuned config, an autotune candidate) may change of the planner's own
// choice: whether it splits at all ("split_kv" 0 or 1) and the fewest KV tiles a run holds
// ("split_min_tiles"). Neither names a count of runs, which would suit one batch and head count
// only: the count still follows the grid, so that a config tuned at batch 1 serves batch 64 too.
struct KeySplitTuning {
  bool split = true;
  int minTiles = kMinTilesPerSplit;
};

// The split for `problem` on `device` (FFPA_POLICY_KEY_SPLITS: 0 lets this choose, 1 never
// splits, N asks for N runs, fewer where the keys have fewer tiles: under a causal mask those the
// last query row sees). Without attention slices
// only, and where `allowed` (the kernel's grid has z free). The choice (FlashAttention-2's):
// none where the grid fills 80% of the GPU's CTA slots; else the fewest runs, each of at least
// `tuning.minTiles` tiles, whose waves use the GPU within 85% of the best count up to
// FFPA_MAX_MERGE_PARTIALS; none where `tuning.split` is false.
KeySplitPlan planKeySplits(const Policy& policy, const AttentionProblem& problem, const DeviceInfo& device,
                           const ForwardGrid& grid, bool allowed, const KeySplitTuning& tuning = {});

// The launch configs runtime autotune times besides the planner's choice where a split is
// tunable: never splitting, and runs of at least 1, 2, 8 and 16 tiles.
std::vector<tuning::LaunchConfig> keySplitCandidates();

// " key_splits=N" for a plan's config, or "" without a split.
std::string describeKeySplits(const KeySplitPlan& split);

// Where the partial results of a split live in `workspace`, and the kernels' fields for them.
struct PartialOutputs {
  float* o;
  float* lse;
  Strides oStrides;    // [B, H, Nq, d_v] of one split, packed
  Strides lseStrides;  // [B, H, Nq] of one split, packed
  KeySplit fields;
};
PartialOutputs partialOutputs(const KeySplitPlan& split, const AttentionProblem& problem, void* workspace);

// Points a forward kernel's parameters (o, lse, oStrides, lseStrides, split) at the partial
// results of a split in `workspace`.
template <class Params>
void usePartialOutputs(const KeySplitPlan& split, const AttentionProblem& problem, void* workspace, Params& p) {
  const PartialOutputs partials = partialOutputs(split, problem, workspace);
  p.o = partials.o;
  p.lse = partials.lse;
  for (int i = 0; i < 3; ++i) {
    p.oStrides[i] = partials.oStrides[i];
    p.lseStrides[i] = partials.lseStrides[i];
  }
  p.split = partials.fields;
}

// The merge of the partial results in `workspace` into O (and `lse` where the problem has one and
// it is not null): the problem and pointers enqueueKeySplitMerge hands the merge kernel.
struct KeySplitMerge {
  MergeProblem problem;
  MergeTensors tensors;
};
KeySplitMerge keySplitMerge(const KeySplitPlan& split, const AttentionProblem& problem, void* workspace, void* o,
                            float* lse);

// Enqueues that merge; allocates nothing, waits for nothing. Throws ffpa::Error when the launch
// fails.
void enqueueKeySplitMerge(const KeySplitPlan& split, const AttentionProblem& problem, void* workspace, void* o,
                          float* lse, ffpaStream_t stream);

}  // namespace ffpa
