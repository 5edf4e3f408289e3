// The sm80 forward kernels on the CPU warp emulator, planned by the library's own planner, against
// float64 attention with outputs poisoned: every instance the build compiles; the head-dim matrix
// (d_v below the instance's, d_qk != d_v) with tails, both causal alignments, MHA/GQA/MQA, packed
// and padded layouts, both dtypes; every value of every pipeline knob; shuffled thread schedules.
// What this cannot show: speed, and races that no schedule of the emulator exposes (racecheck on a
// GPU covers those).
#include "case_matrix.h"
#include "emulated_kernels.h"
#include "forward_runner.h"

#include "ffpa_build_config.h"
#include "sm80/cta_geometry.cuh"
#include "sm80/forward_params.h"
#include "sm80/forward_variant.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

using namespace emulation_test;
using ffpa_tools::CausalMask;
using ffpa_tools::DType;
using ffpa_tools::LayoutKind;

namespace {

// Runs `c` and CHECKs that the planner chose `expectedKernel` for it, and the result.
void runExpecting(const AttentionCase& c, const std::string& expectedKernel) {
  try {
    const ForwardOutcome outcome = runForward(c);
    CHECK_MESSAGE(outcome.kernel == expectedKernel,
                  c.toString() << "\n  planned " << outcome.kernel << ", not " << expectedKernel);
    checkForward(c, outcome);
  } catch (const std::exception& e) {
    FAIL_CHECK(c.toString() << "\n  " << std::string(e.what()));
  }
}

// The case of `shape` with `knobs`, `layout` and an LSE or not, inputs from `start` (fp16 and
// bf16 alternating with it).
AttentionCase caseOf(const ffpa_tools::AttentionProblem& shape, const Knobs& knobs, LayoutKind layout, bool withLse,
                     uint64_t start) {
  AttentionCase c;
  c.shape = shape;
  c.knobs = knobs;
  c.layout = layout;
  c.withLse = withLse;
  c.dtype = start % 2 ? DType::bfloat16 : DType::float16;
  c.start = start;
  return c;
}

}  // namespace

TEST_SUITE_BEGIN("forward kernels");

TEST_CASE("every compiled instance is planned by its knobs and computes attention") {
  const EmulatedForwardList& instances = emulatedForwardInstances();
  REQUIRE(!instances.empty());
  int index = 0;
  for (const EmulatedForwardInstance& instance : instances) {
    const ffpa::sm80::ForwardInstance& i = instance.described;
    AttentionCase c;
    c.dtype = i.dtype == FFPA_DATA_TYPE_FLOAT16 ? DType::float16 : DType::bfloat16;
    c.knobs = {{FFPA_POLICY_ACCUMULATOR, i.accumulator},
               {FFPA_POLICY_REGISTERS_PIPE_KV, i.pipeKv},
               {FFPA_POLICY_PERSIST_Q_S2R, i.qInRegisters},
               {FFPA_POLICY_PERSIST_V_S2R, i.vInRegisters}};
    // 32- or 64-key tiles where the shape comes with both (the launch parameter, not a knob).
    if (ffpa::sm80::hasWideKeyTiles(i.headDimV, i.qInRegisters)) c.launchConfig = {{"tile_keys", i.wideKeys ? 64 : 32}};
    // Q fragments in registers serve d_qk <= 128 only.
    const int dimQk = i.qInRegisters ? 128 : i.headDimV;
    c.shape = problem(1, 2, index % 2 ? 1 : 2, 70, 100, dimQk, i.headDimV, kMasks[index % 3]);
    c.layout = kLayouts[index % 3];
    c.start = 100 + index;
    runExpecting(c, ffpa::sm80::instanceName(i));
    ++index;
  }
  MESSAGE(index << " instances run");
}

TEST_CASE("the fp32-accumulator instances compute the same attention under shuffled thread schedules") {
  // Warps hand tiles to each other through barriers and cp.async groups only: any order in which
  // the emulator resumes waiting threads is one the GPU may take.
  int index = 0;
  for (const EmulatedForwardInstance& instance : emulatedForwardInstances()) {
    const ffpa::sm80::ForwardInstance& i = instance.described;
    if (i.accumulator != FFPA_ACCUMULATOR_F32 || i.pipeKv || i.qInRegisters) continue;
    AttentionCase c;
    c.dtype = i.dtype == FFPA_DATA_TYPE_FLOAT16 ? DType::float16 : DType::bfloat16;
    c.knobs = {{FFPA_POLICY_PERSIST_V_S2R, i.vInRegisters}};
    if (ffpa::sm80::hasWideKeyTiles(i.headDimV)) c.launchConfig = {{"tile_keys", i.wideKeys ? 64 : 32}};
    c.shape = problem(1, 2, 1, 70, 130, i.headDimV, i.headDimV, kMasks[index % 3]);
    c.layout = kLayouts[index % 3];
    c.start = 300 + index;
    c.scheduleSeed = 11 + index;
    runExpecting(c, ffpa::sm80::instanceName(i));
    ++index;
  }
  CHECK(index > 0);
  MESSAGE(index << " instances run under shuffled schedules");
}

TEST_CASE("a NaN in one query row reaches that row's O and LSE, and no other row") {
  // One instance per tile shape (fp32 accumulators); the row shares its tile with finite rows.
  std::vector<int> done;
  for (const EmulatedForwardInstance& instance : emulatedForwardInstances()) {
    const ffpa::sm80::ForwardInstance& i = instance.described;
    if (i.accumulator != FFPA_ACCUMULATOR_F32 || i.pipeKv || i.qInRegisters) continue;
    if (std::find(done.begin(), done.end(), i.headDimV) != done.end()) continue;
    done.push_back(i.headDimV);
    AttentionCase c;
    c.dtype = done.size() % 2 ? DType::float16 : DType::bfloat16;
    c.knobs = {{FFPA_POLICY_PERSIST_V_S2R, i.vInRegisters}};
    c.shape = problem(1, 2, 1, 70, 100, i.headDimV, i.headDimV, CausalMask::none);
    c.start = 500 + i.headDimV;
    try {
      checkNanRow(c, runForward(c, nanInQueryRow(1, 37)), 1, 37);
    } catch (const std::exception& e) {
      FAIL_CHECK(c.toString() << "\n  " << std::string(e.what()));
    }
  }
  CHECK(!done.empty());
}

TEST_CASE("the head-dim matrix: tails, masks, GQA/MQA, layouts, both dtypes") {
  struct Dims {
    int qk, v;
  };
  const Dims dims[] = {{32, 32},   {64, 64},   {128, 128}, {256, 256}, {320, 320}, {384, 384},
                       {448, 448}, {512, 512}, {576, 512}, {640, 640}, {768, 768}, {1024, 1024},
                       {96, 64},   {128, 320}};
  // (Hq, Hkv, Nq, Nkv): equal lengths, fewer queries, more queries (bottom-right leaves the first
  // rows without keys), single rows and keys, rows over several row tiles of every shape.
  const int64_t shapes[][4] = {{2, 2, 65, 65}, {4, 1, 33, 100},  {3, 3, 100, 47}, {4, 2, 1, 80},
                               {2, 1, 77, 1},  {2, 2, 128, 128}, {1, 1, 290, 270}};
  constexpr int kShapes = sizeof(shapes) / sizeof(shapes[0]);
  const int largest = largestCompiledHeadDim();
  int index = 0, run = 0;
  for (const Dims& d : dims) {
    for (DType dtype : {DType::float16, DType::bfloat16}) {
      const int64_t* s = shapes[index % kShapes];
      AttentionCase c;
      c.shape = problem(index % 4 == 3 ? 2 : 1, s[0], s[1], s[2], s[3], d.qk, d.v,
                                kMasks[index % 3]);
      if (index % 5 == 2) c.shape.scale = 0.6 / std::sqrt(double(d.qk));
      c.dtype = dtype;
      c.layout = kLayouts[(index / 3) % 3];
      c.withLse = index % 7 != 4;
      c.start = 1000 + index;
      ++index;
      if (d.v > largest) continue;
      runAndCheckForward(c);
      ++run;
    }
  }
  MESSAGE(run << " problems run (d_v up to " << largest << ", the build's largest head dim)");
}

TEST_CASE("query heads as rows: decode and short queries of GQA and MQA, merged where they may be") {
  const MergeCase cases[] = {
      // decode of GQA; one bottom-right row sees every key; short MQA queries in [B, N, H, D]
      // (rows of a head G heads apart) without an LSE, whose [B, H, N] layout (heads Nq rows
      // apart) merges the other way; packed short GQA queries (heads Nq rows apart); MLA decode
      {2, 8, 2, 1, 300, 128, 128, CausalMask::none, LayoutKind::bhnd, true, true},
      {1, 16, 1, 1, 200, 64, 64, CausalMask::bottom_right, LayoutKind::bnhd, true, true},
      {1, 8, 1, 3, 150, 64, 64, CausalMask::none, LayoutKind::bnhd, false, true},
      {1, 6, 2, 5, 150, 128, 128, CausalMask::none, LayoutKind::bhnd, true, true},
      {1, 16, 1, 1, 130, 576, 512, CausalMask::none, LayoutKind::bhnd, true, true},
      // no merge: Q and O one way, the LSE the other; GQA in [B, N, H, D]; one top-left row sees
      // key 0 only; causal rows see different keys; padded rows and heads
      {1, 8, 1, 3, 150, 64, 64, CausalMask::none, LayoutKind::bnhd, true, false},
      {1, 6, 2, 5, 150, 128, 128, CausalMask::none, LayoutKind::bnhd, false, false},
      {1, 4, 1, 1, 150, 64, 64, CausalMask::top_left, LayoutKind::bhnd, true, false},
      {1, 4, 1, 7, 150, 64, 64, CausalMask::bottom_right, LayoutKind::bhnd, true, false},
      {1, 8, 2, 3, 100, 320, 320, CausalMask::none, LayoutKind::padded_aligned, true, false},
  };
  const int largest = largestCompiledHeadDim();
  uint64_t start = 3000;
  int run = 0;
  for (const MergeCase& m : cases) {
    if (std::max(m.dimQk, m.dimV) > largest) continue;
    for (const bool on : {true, false}) {
      runMergeCase(m, start++, on, [](const AttentionCase& c) { return runForward(c); });
    }
    run += 2;
  }
  CHECK(run >= 18);
}

TEST_CASE("split-KV: few row tiles split their keys into runs, merged as ffpaAttentionMerge merges") {
  // Decode of MQA (merged into one row tile) with many keys, split as the planner chooses; runs
  // asked for by the knob over a causal mask (runs past a tile's last visible key are empty), a
  // tail run, no LSE; a NaN row; 1 (never) and the (N/Br, H, B) grid (no split).
  struct SplitCase {
    ffpa_tools::AttentionProblem shape;
    Knobs knobs;
    LayoutKind layout;
    bool withLse;
    bool splits;
  };
  const SplitCase cases[] = {
      {problem(1, 8, 1, 1, 2000, 128, 128, CausalMask::none), {}, LayoutKind::bhnd, true, true},
      {problem(2, 2, 2, 5, 700, 512, 512, CausalMask::bottom_right), {{FFPA_POLICY_KEY_SPLITS, 3}},
       LayoutKind::bnhd, true, true},
      {problem(1, 3, 1, 300, 650, 64, 64, CausalMask::top_left), {{FFPA_POLICY_KEY_SPLITS, 5}},
       LayoutKind::padded_aligned, false, true},
      {problem(1, 2, 1, 3, 1300, 320, 320, CausalMask::none), {{FFPA_POLICY_KEY_SPLITS, 4}}, LayoutKind::bhnd,
       true, true},
      {problem(1, 8, 1, 1, 2000, 128, 128, CausalMask::none), {{FFPA_POLICY_KEY_SPLITS, 1}}, LayoutKind::bhnd,
       true, false},
      {problem(1, 8, 1, 1, 2000, 128, 128, CausalMask::none),
       {{FFPA_POLICY_KEY_SPLITS, 4}, {FFPA_POLICY_LAUNCH_GRID_DNHB, 1}}, LayoutKind::bhnd, true, false},
  };
  const int largest = largestCompiledHeadDim();
  uint64_t start = 3100;
  for (const SplitCase& s : cases) {
    const AttentionCase c = caseOf(s.shape, s.knobs, s.layout, s.withLse, start++);
    if (std::max(s.shape.dim_qk, s.shape.dim_v) > largest) continue;
    runNaming(c, "key_splits=", s.splits, [](const AttentionCase& one) { return runForward(one); });
  }
  // A NaN in one query row reaches that row's O and LSE through every run, and no other row.
  AttentionCase nan;
  nan.shape = problem(1, 2, 2, 70, 900, 128, 128, CausalMask::none);
  nan.knobs = {{FFPA_POLICY_KEY_SPLITS, 3}};
  nan.start = 3150;
  try {
    const ForwardOutcome outcome = runForward(nan, nanInQueryRow(1, 37));
    CHECK_MESSAGE(outcome.config.find("key_splits=3") != std::string::npos, outcome.config);
    checkNanRow(nan, outcome, 1, 37);
  } catch (const std::exception& e) {
    FAIL_CHECK(nan.toString() << "\n  " << std::string(e.what()));
  }
}

TEST_CASE("per-batch key lengths: each batch entry attends to its own keys, and no key past them is read") {
  // FFPA_ATTENTION_KEY_LENGTHS: entries of no key, of one, of a partial last tile and of all keys;
  // counts past Nkv and below 0 (clamped); a bottom-right diagonal at each entry's last key (rows
  // of a short entry that see no key) and a top-left one; short GQA queries and GQA decode merged
  // into one row tile per entry and split (the runs past an entry's keys are empty). K and V hold
  // NaN past each entry's keys.
  struct LengthCase {
    ffpa_tools::AttentionProblem shape;
    std::vector<int64_t> lengths;
    Knobs knobs;
    LayoutKind layout;
    bool withLse;
    bool splits;
  };
  const LengthCase cases[] = {
      {problem(4, 2, 1, 37, 300, 64, 64, CausalMask::none), {0, 1, 130, 300}, {}, LayoutKind::bhnd, true, true},
      {problem(3, 2, 2, 70, 200, 128, 96, CausalMask::bottom_right), {200, 65, 20}, {}, LayoutKind::bnhd, true,
       false},
      {problem(3, 4, 2, 50, 150, 320, 320, CausalMask::top_left), {-5, 999, 100}, {}, LayoutKind::padded_aligned,
       false, false},
      {problem(2, 8, 1, 1, 2000, 128, 128, CausalMask::none), {1500, 37}, {}, LayoutKind::bhnd, true, true},
      {problem(2, 4, 1, 1, 900, 512, 512, CausalMask::bottom_right), {900, 450}, {{FFPA_POLICY_KEY_SPLITS, 3}},
       LayoutKind::bnhd, true, true},
  };
  const int largest = largestCompiledHeadDim();
  uint64_t start = 3300;
  for (const LengthCase& l : cases) {
    AttentionCase c = caseOf(l.shape, l.knobs, l.layout, l.withLse, start++);
    c.shape.key_lengths = l.lengths;
    if (std::max(l.shape.dim_qk, l.shape.dim_v) > largest) continue;
    runNaming(c, "key_splits=", l.splits,
              [&](const AttentionCase& one) { return runForward(one, nanPastKeyLengths(one.shape)); });
  }
}

TEST_CASE("every pipeline knob value computes the same attention") {
  const int largest = largestCompiledHeadDim();
  std::vector<Knobs> settings = {
      {},
      {{FFPA_POLICY_PREFETCH_QKV, 0}},
      {{FFPA_POLICY_QKV_SMEM_SHARE, 1}},
      {{FFPA_POLICY_SMEM_SWIZZLE_Q, 0}},
      {{FFPA_POLICY_SMEM_SWIZZLE_K, 0}},
      {{FFPA_POLICY_SMEM_SWIZZLE_V, 0}},
      {{FFPA_POLICY_PERSIST_Q_G2S, 0}},
      {{FFPA_POLICY_PERSIST_KV_G2S, 0}},
      {{FFPA_POLICY_LAUNCH_GRID_DNHB, 1}},
      {{FFPA_POLICY_QKV_SMEM_SHARE, 1}, {FFPA_POLICY_PREFETCH_QKV, 0}, {FFPA_POLICY_STAGES, 1}},
      {{FFPA_POLICY_SMEM_SWIZZLE_Q, 0}, {FFPA_POLICY_SMEM_SWIZZLE_K, 0},
       {FFPA_POLICY_SMEM_SWIZZLE_V, 0}, {FFPA_POLICY_PERSIST_Q_G2S, 0}},
  };
  for (int stages : listOf(FFPA_BUILD_STAGES)) {
    settings.push_back({{FFPA_POLICY_STAGES, stages}});
    settings.push_back({{FFPA_POLICY_STAGES, stages}, {FFPA_POLICY_QKV_SMEM_SHARE, 1}});
  }
  int index = 0, run = 0;
  for (int d : {64, 128, 256, 320, 512, 1024}) {
    if (d > largest) continue;
    for (const Knobs& knobs : settings) {
      AttentionCase c;
      c.shape = problem(2, 2, 1, 90, 150, d, d, kMasks[index % 3]);
      c.dtype = index % 2 ? DType::bfloat16 : DType::float16;
      c.layout = kLayouts[index % 3];
      c.knobs = knobs;
      c.start = 5000 + index;
      ++index;
      runAndCheckForward(c);
      ++run;
    }
  }
  MESSAGE(run << " problems run");
}

TEST_CASE("knobs at their defaults give way to an A100's shared memory, and still compute") {
  for (int d : {256, 320, 512}) {
    if (d > largestCompiledHeadDim()) continue;
    AttentionCase c;
    c.shape = problem(1, 2, 2, 80, 130, d, d, CausalMask::bottom_right);
    c.device = PlannedDevice::ampere;
    runAndCheckForward(c);
  }
}

TEST_CASE("every value of the launch parameters tuned configs set computes the same attention") {
  const int largest = largestCompiledHeadDim();
  int index = 0;
  for (int d : {128, 320, 1024}) {
    if (d > largest) continue;
    for (int qkStep : {16, 32, 64, 128}) {
      for (int vStep : {16, 32, 64}) {
        AttentionCase c;
        c.shape = problem(1, 2, 1, 70, 100, d, d, kMasks[index % 3]);
        c.dtype = index % 2 ? DType::bfloat16 : DType::float16;
        c.launchConfig = {{"qk_step", qkStep}, {"v_step", vStep}, {"stages", 1 + index % 2},
                          {"prefetch", (index / 2) % 2}};
        // d = 128 in fine steps (whole tiles would ignore the widths), 32- and 64-key tiles in turn.
        if (d == 128) {
          c.launchConfig["persist_kv"] = 0;
          c.launchConfig["tile_keys"] = (index / 4) % 2 ? 64 : 32;
        }
        c.start = 9000 + index;
        ++index;
        runAndCheckForward(c);
      }
    }
  }
}

TEST_CASE("attention slices: packed batches, shared prefixes, windows, overlapping and uncovered rows") {
  int run = 0;
  for (const AttentionCase& c : sliceCases()) {
    if (c.shape.dim_v > largestCompiledHeadDim()) continue;
    runAndCheckForward(c);
    ++run;
  }
  CHECK(run >= 3);
}

TEST_CASE("query-major CTAs take the row tiles of a causal problem longest first") {
  // 1000 queries in 16 tiles of 64 rows: under a causal mask (either alignment) CTA x takes tile
  // 15 - x, so the first CTAs see the most KV tiles; without a mask tile x, in order.
  ffpa::sm80::ForwardParams p{};
  p.seqQ = 1000;
  p.seqKv = 1200;
  for (const int64_t offset : {int64_t{0}, int64_t{200}}) {
    p.causal = 1;
    p.causalOffset = offset;
    std::vector<int> taken, seen;
    for (int x = 0; x < 16; ++x) {
      taken.push_back(ffpa::kernels::sm80::rowTileInOrder(p, x, 64));
      seen.push_back(ffpa::kernels::sm80::visibleKeyTiles(1000, 1200, 64, 64 * taken.back(), 64, true, offset));
    }
    CHECK(taken.front() == 15);
    CHECK(taken.back() == 0);
    CHECK(std::is_sorted(seen.rbegin(), seen.rend()));
    CHECK(seen.front() > seen.back());
    std::sort(taken.begin(), taken.end());
    for (int x = 0; x < 16; ++x) CHECK(taken[x] == x);
  }
  p.causal = 0;
  for (int x = 0; x < 16; ++x) CHECK(ffpa::kernels::sm80::rowTileInOrder(p, x, 64) == x);
}

TEST_SUITE_END();
