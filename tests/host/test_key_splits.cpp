// Split-KV (core/key_splits.h): how many runs of KV tiles the planner cuts a forward's row tiles
// into, and when none; the workspace of the partial results and where each split's lie; the
// built-in planner's plans for decode on an H100 and an A100; what launch configs may change of the
// split, and runtime autotune of it.
#include "core/autotune.h"
#include "core/key_splits.h"
#include "core/kernel_registry.h"
#include "core/planner.h"
#include "core/query_rows.h"

#include "core_device.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

using namespace ffpa;
using ffpa_test::hopper;

namespace {

// bf16, B batches of H heads with Nq rows of d = 128 against Nkv keys, packed.
AttentionProblem forward(int64_t batch, int64_t heads, int64_t seqQ, int64_t seqKv, int64_t d = 128) {
  AttentionProblem p;
  p.dtype = FFPA_DATA_TYPE_BFLOAT16;
  p.batch = batch;
  p.headsQ = p.headsKv = heads;
  p.seqQ = seqQ;
  p.seqKv = seqKv;
  p.headDimQk = p.headDimV = d;
  p.hasLse = true;
  p.q = p.o = {heads * seqQ * d, seqQ * d, d, 1};
  p.k = p.v = {heads * seqKv * d, seqKv * d, d, 1};
  p.lse = {heads * seqQ, seqQ, 1, 0};
  return p;
}

}  // namespace

TEST_CASE("split-KV: none where the grid fills 80% of the CTA slots, else the fewest good runs") {
  const Policy policy;
  const DeviceInfo device = hopper();  // 132 SMs
  const AttentionProblem p = forward(1, 1, 64, 8192);  // 128 KV tiles of 64 keys
  // 106 of 132 slots (80%): no split.
  CHECK(planKeySplits(policy, p, device, {106, 1, 64}, true).splits == 1);
  CHECK(planKeySplits(policy, p, device, {200, 1, 64}, true).bytes == 0);
  // 64 CTAs: two runs give 128 of 132 slots (97%), the best count within reach.
  const KeySplitPlan two = planKeySplits(policy, p, device, {64, 1, 64}, true);
  CHECK(two.splits == 2);
  CHECK(two.tilesPerSplit == 64);
  // 2 CTAs: up to 32 runs (FFPA_MAX_MERGE_PARTIALS), each of at least 4 tiles.
  const KeySplitPlan many = planKeySplits(policy, p, device, {2, 1, 64}, true);
  CHECK(many.splits >= 24);
  CHECK(many.splits <= FFPA_MAX_MERGE_PARTIALS);
  CHECK(many.tilesPerSplit >= kMinTilesPerSplit);
  CHECK((many.splits - 1) * many.tilesPerSplit < 128);  // no empty run
  CHECK(many.splits * many.tilesPerSplit >= 128);
  // Two CTAs per SM: 64 CTAs fill 24% of 264 slots; four runs fill 97%.
  CHECK(planKeySplits(policy, p, device, {64, 2, 64}, true).splits == 4);
  // Too few tiles for two runs of 4: none.
  CHECK(planKeySplits(policy, forward(1, 1, 64, 7 * 64), device, {2, 1, 64}, true).splits == 1);
  // A causal mask: only the tiles the last row sees are cut (top-left, 64 rows: the first tile;
  // bottom-right: every tile).
  AttentionProblem causal = p;
  causal.causal = FFPA_CAUSAL_TOP_LEFT;
  CHECK(planKeySplits(policy, causal, device, {2, 1, 64}, true).splits == 1);
  causal.seqQ = 64 * 20;  // 20 tiles seen: five runs of 4
  CHECK(planKeySplits(policy, causal, device, {2, 1, 64}, true).splits == 5);
  causal.causal = FFPA_CAUSAL_BOTTOM_RIGHT;
  CHECK(planKeySplits(policy, causal, device, {2, 1, 64}, true).splits == many.splits);
}

TEST_CASE("split-KV: the knob asks for runs or forbids them; slices and other grids never split") {
  Policy policy;
  const DeviceInfo device = hopper();
  const AttentionProblem p = forward(1, 1, 64, 1000);  // 16 tiles of 64 keys (the last of 40)
  policy.setValue(FFPA_POLICY_KEY_SPLITS, 1);
  CHECK(planKeySplits(policy, p, device, {2, 1, 64}, true).splits == 1);
  policy.setValue(FFPA_POLICY_KEY_SPLITS, 3);
  const KeySplitPlan three = planKeySplits(policy, p, device, {500, 1, 64}, true);  // even a full grid
  CHECK(three.splits == 3);
  CHECK(three.tilesPerSplit == 6);  // 6 + 6 + 4
  // Runs of equal length but the last, none empty: 7 asked of 16 tiles are 3 tiles each, 6 runs.
  policy.setValue(FFPA_POLICY_KEY_SPLITS, 7);
  const KeySplitPlan seven = planKeySplits(policy, p, device, {2, 1, 64}, true);
  CHECK(seven.tilesPerSplit == 3);
  CHECK(seven.splits == 6);
  // More runs than tiles: a tile each.
  policy.setValue(FFPA_POLICY_KEY_SPLITS, 32);
  CHECK(planKeySplits(policy, p, device, {2, 1, 64}, true).splits == 16);
  // Where the kernel's grid has no z to spare, or with attention slices: none.
  CHECK(planKeySplits(policy, p, device, {2, 1, 64}, false).splits == 1);
  AttentionProblem sliced = p;
  sliced.slices = reinterpret_cast<const slices::SliceTable*>(&sliced);  // present; never read
  CHECK(planKeySplits(policy, sliced, device, {2, 1, 64}, true).splits == 1);
}

TEST_CASE("split-KV: the partial results' workspace, and where each split's O and LSE lie") {
  Policy policy;
  policy.setValue(FFPA_POLICY_KEY_SPLITS, 4);
  const AttentionProblem p = forward(2, 3, 5, 2000, 64);
  const KeySplitPlan split = planKeySplits(policy, p, hopper(), {6, 1, 64}, true);
  REQUIRE(split.splits == 4);
  const size_t rows = 2 * 3 * 5;
  CHECK(split.partialOBytes >= 4 * rows * 64 * sizeof(float));
  CHECK(split.bytes >= split.partialOBytes + 4 * rows * sizeof(float));
  CHECK(split.partialOBytes % 256 == 0);
  alignas(256) static char workspace[1 << 16];
  REQUIRE(split.bytes <= sizeof workspace);
  const PartialOutputs parts = partialOutputs(split, p, workspace);
  CHECK(static_cast<void*>(parts.o) == workspace);
  CHECK(reinterpret_cast<char*>(parts.lse) == workspace + split.partialOBytes);
  CHECK(parts.oStrides == Strides{3 * 5 * 64, 5 * 64, 64, 1});
  CHECK(parts.lseStrides == Strides{3 * 5, 5, 1, 0});
  CHECK(parts.fields.splits == 4);
  CHECK(parts.fields.tilesPerSplit == split.tilesPerSplit);
  CHECK(parts.fields.partialOStride == int64_t(rows) * 64);
  CHECK(parts.fields.partialLseStride == int64_t(rows));
  // The last split's partials end within the workspace.
  CHECK(reinterpret_cast<char*>(parts.o + 4 * parts.fields.partialOStride) <= reinterpret_cast<char*>(parts.lse));
  CHECK(reinterpret_cast<char*>(parts.lse + 4 * parts.fields.partialLseStride) <= workspace + split.bytes);
  CHECK(describeKeySplits(split) == " key_splits=4 split_tiles=" + std::to_string(split.tilesPerSplit));
  CHECK(describeKeySplits(KeySplitPlan{}).empty());
}

TEST_CASE("split-KV: decode with the built-in kernels, on an H100 and with the mma.sync kernels") {
  const Planner planner(builtinKernels());
  Policy policy;
  policy.setValue(FFPA_POLICY_SKIP_PERSISTENT_TUNED_CONFIG, 1);
  // One batch entry of MQA decode: 32 query heads as the 32 rows of one row tile.
  AttentionProblem p = forward(1, 32, 1, 8192);
  p.headsKv = 1;
  p.q = p.o = {32 * 128, 128, 0, 1};
  p.k = p.v = {8192 * 128, 0, 128, 1};
  p.lse = {32, 1, 0, 0};
  // The merged problem is one CTA: of the row split (128 rows, KV tiles of 128 keys, one CTA per
  // SM) on the Hopper kernels, of the mma.sync kernel's 128 rows (64-key tiles, two CTAs per SM)
  // otherwise; the planner's count is planKeySplits' for that grid.
  const AttentionProblem merged = queryHeadsAsRows(p)->problem;
  for (const bool hopperKernels : {true, false}) {
    policy.setValue(FFPA_POLICY_HOPPER_KERNELS, hopperKernels ? 1 : 0);
    const Plan plan = planner.plan({p, policy, hopper(), nullptr});
    INFO(plan.kernel << " " << plan.config);
    CHECK(plan.config.find("query_heads_as_rows=32") != std::string::npos);
    // (A build without sm_90a code plans the mma.sync kernel either way.)
    const bool sm90 = plan.kernel.rfind("sm90.", 0) == 0;
    CHECK(sm90 == (hopperKernels && plan.skipped.find("compiles no sm_90a code") == std::string::npos));
    const ForwardGrid grid = sm90 ? ForwardGrid{1, 1, 128} : ForwardGrid{1, 2, 64};
    const KeySplitPlan expected = planKeySplits(policy, merged, hopper(), grid, true);
    REQUIRE(expected.splits > 1);
    CHECK(plan.config.find(describeKeySplits(expected)) != std::string::npos);
    CHECK(plan.kernelWorkspaceBytes == expected.bytes);
  }
  // A full prefill grid: no split, no workspace.
  const Plan prefill = planner.plan({forward(4, 32, 4096, 4096), policy, hopper(), nullptr});
  CHECK(prefill.config.find("key_splits=") == std::string::npos);
  CHECK(prefill.kernelWorkspaceBytes == 0);
}

TEST_CASE("split-KV: a launch config may turn the split off or ask for longer runs, never fix a count") {
  const Policy policy;
  const DeviceInfo device = hopper();
  const AttentionProblem p = forward(1, 2, 1, 8192);  // 128 tiles of 64 keys
  const ForwardGrid small{2, 1, 64};
  const KeySplitPlan chosen = planKeySplits(policy, p, device, small, true);
  CHECK(chosen.tunable);
  REQUIRE(chosen.splits > 8);
  // "split_kv": 0: one run, no workspace; the choice was still the planner's to make.
  const KeySplitPlan off = planKeySplits(policy, p, device, small, true, {false, kMinTilesPerSplit});
  CHECK(off.splits == 1);
  CHECK(off.bytes == 0);
  CHECK(off.tunable);
  // "split_min_tiles": 16: at most 128 / 16 runs.
  const KeySplitPlan longer = planKeySplits(policy, p, device, small, true, {true, 16});
  CHECK(longer.splits > 1);
  CHECK(longer.splits <= 8);
  CHECK(longer.tilesPerSplit >= 16);
  // 8 tiles: runs of 4 make 2 of them, runs of 1 tile make 8.
  const AttentionProblem shortKeys = forward(1, 2, 1, 512);
  CHECK(planKeySplits(policy, shortKeys, device, small, true).splits == 2);
  const KeySplitPlan single = planKeySplits(policy, shortKeys, device, small, true, {true, 1});
  CHECK(single.splits == 8);
  CHECK(single.tilesPerSplit == 1);
  // A grid that fills the GPU has no choice to tune, whatever the config.
  const KeySplitPlan full = planKeySplits(policy, p, device, {200, 1, 64}, true, {true, 1});
  CHECK_FALSE(full.tunable);
  CHECK(full.splits == 1);
  // Nor has a count the caller asked for: it stands.
  Policy asked;
  asked.setValue(FFPA_POLICY_KEY_SPLITS, 3);
  const KeySplitPlan three = planKeySplits(asked, p, device, small, true, {false, 16});
  CHECK_FALSE(three.tunable);
  CHECK(three.splits == 3);
}

namespace {

// A timer on which a plan without a split takes 1 ms and one with a split 2.
class UnsplitFaster : public CandidateTimer {
 public:
  double milliseconds(const Plan& plan) override {
    return plan.config.find("key_splits=") == std::string::npos ? 1 : 2;
  }
};

}  // namespace

TEST_CASE("split-KV: runtime autotune times the split's choices where the grid leaves the GPU idle") {
  Policy policy;
  policy.setValue(FFPA_POLICY_SKIP_PERSISTENT_TUNED_CONFIG, 1);
  policy.setValue(FFPA_POLICY_AUTOTUNE, 1);
  AttentionProblem p = forward(1, 32, 1, 8192);  // MQA decode, as above
  p.headsKv = 1;
  p.q = p.o = {32 * 128, 128, 0, 1};
  p.k = p.v = {8192 * 128, 0, 128, 1};
  p.lse = {32, 1, 0, 0};
  const AttentionProblem merged = queryHeadsAsRows(p)->problem;
  const AttentionProblem prefill = forward(4, 32, 4096, 4096);
  const auto has = [](const std::vector<tuning::LaunchConfig>& all, const tuning::LaunchConfig& c) {
    return std::count(all.begin(), all.end(), c) == 1;
  };
  int checked = 0;
  for (const char* name : {"sm90.forward", "sm80.forward"}) {
    const KernelVariant* variant = ffpa_test::builtinVariant(name);
    REQUIRE(variant != nullptr);
    policy.setValue(FFPA_POLICY_HOPPER_KERNELS, std::string(name) == "sm90.forward" ? 1 : 0);
    const PlanRequest request{merged, policy, hopper(), nullptr};
    if (variant->supports(request).verdict != Support::Verdict::Applies) {
      MESSAGE(name << " is not compiled");
      continue;
    }
    ++checked;
    INFO(name);
    const std::vector<tuning::LaunchConfig> candidates = variant->candidates(request);
    const std::vector<tuning::LaunchConfig> full = variant->candidates({prefill, policy, hopper(), nullptr});
    for (const tuning::LaunchConfig& c : keySplitCandidates()) {
      CHECK(has(candidates, c));
      CHECK_FALSE(has(full, c));
    }
    // Unsplit is faster on this timer: the plan does not split, and its tuned entry is the
    // caller's decode problem (one query row of 32 heads on one KV head), not the merged one.
    const Planner planner(builtinKernels(), [](const PlanRequest&) { return std::make_unique<UnsplitFaster>(); });
    const Plan tuned = planner.plan({p, policy, hopper(), nullptr});
    INFO(tuned.config);
    CHECK(tuned.config.find("key_splits=") == std::string::npos);
    CHECK(tuned.config.find("query_heads_as_rows=32") != std::string::npos);
    REQUIRE(tuned.tuned.get() != nullptr);
    CHECK(tuned.tuned->config == tuning::LaunchConfig{{"split_kv", 0}});
    CHECK(tuned.tuned->seqlenQ == 1);
    CHECK(tuned.tuned->seqlenKv == 8192);
    CHECK(tuned.tuned->headsQ == 32);
    CHECK(tuned.tuned->headsKv == 1);
  }
  CHECK(checked >= 1);
}
