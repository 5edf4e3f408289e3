// The sm80 backward kernels (row statistics, dQ, dK/dV) on the CPU warp emulator, planned by the
// library's own planner, against float64 attention with gradients and workspace poisoned: every
// instance the build compiles; head dims 32 to 1024 with d_qk != d_v, tails, both causal
// alignments, MHA/GQA/MQA, packed and padded layouts, both dtypes; the pipeline knobs; bit-identical
// repeats; shuffled thread schedules. What this cannot show: speed, and races that no schedule of
// the emulator exposes.
#include "backward_runner.h"
#include "case_matrix.h"
#include "common/error_metrics.h"
#include "emulated_kernels.h"

#include "ffpa_build_config.h"
#include "sm80/backward_variant.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

using namespace emulation_test;
using ffpa_tools::CausalMask;
using ffpa_tools::DType;
using ffpa_tools::LayoutKind;

TEST_SUITE_BEGIN("backward kernels");

TEST_CASE("backward: every compiled instance computes the gradients") {
  const EmulatedBackwardList& instances = emulatedBackwardInstances();
  REQUIRE(!instances.empty());
  int index = 0;
  for (const EmulatedBackwardInstance& instance : instances) {
    const ffpa::sm80::BackwardInstance& i = instance.described;
    AttentionCase c;
    c.dtype = i.dtype == FFPA_DATA_TYPE_FLOAT16 ? DType::float16 : DType::bfloat16;
    c.shape = problem(1, 2, index % 2 ? 1 : 2, 70, 100, i.headDim, i.headDim, kMasks[index % 3]);
    c.layout = kLayouts[index % 3];
    c.start = 200 + index;
    try {
      const BackwardOutcome outcome = runBackward(c);
      CHECK_MESSAGE(outcome.kernel == ffpa::sm80::backwardInstanceName(i),
                    c.toString() << "\n  planned " << outcome.kernel);
      checkBackward(c, outcome);
    } catch (const std::exception& e) {
      FAIL_CHECK(c.toString() << "\n  " << std::string(e.what()));
    }
    ++index;
  }
  MESSAGE(index << " instances run");
}

TEST_CASE("backward: every instance computes the same gradients under shuffled thread schedules") {
  int index = 0;
  for (const EmulatedBackwardInstance& instance : emulatedBackwardInstances()) {
    const ffpa::sm80::BackwardInstance& i = instance.described;
    AttentionCase c;
    c.dtype = i.dtype == FFPA_DATA_TYPE_FLOAT16 ? DType::float16 : DType::bfloat16;
    c.shape = problem(1, 2, 1, 90, 70, i.headDim, i.headDim, kMasks[(index + 1) % 3]);
    c.layout = kLayouts[(index + 1) % 3];
    c.start = 400 + index;
    c.scheduleSeed = 21 + index;
    try {
      checkBackward(c, runBackward(c));
    } catch (const std::exception& e) {
      FAIL_CHECK(c.toString() << "\n  " << std::string(e.what()));
    }
    ++index;
  }
  CHECK(index > 0);
  MESSAGE(index << " instances run under shuffled schedules");
}

TEST_CASE("backward: the head-dim matrix: tails, masks, GQA/MQA, layouts, both dtypes") {
  struct Dims {
    int qk, v;
  };
  const Dims dims[] = {{32, 32},   {64, 64},   {128, 128}, {256, 256}, {320, 320}, {384, 384},
                       {512, 512}, {576, 512}, {640, 640}, {1024, 1024}, {96, 64},  {128, 320}};
  // (Hq, Hkv, Nq, Nkv): equal lengths, fewer queries, more queries (bottom-right leaves the first
  // rows without keys), a single query, two keys. (With a single key dQ and dK are exactly 0: see
  // the test below.)
  const int64_t shapes[][4] = {{2, 2, 65, 65}, {4, 1, 33, 100}, {3, 3, 100, 47}, {4, 2, 1, 80},
                               {2, 1, 77, 2},  {2, 2, 96, 96}};
  const int largest = largestCompiledHeadDim();
  int index = 0, run = 0;
  for (const Dims& d : dims) {
    for (DType dtype : {DType::float16, DType::bfloat16}) {
      const int64_t* s = shapes[index % 6];
      AttentionCase c;
      c.shape = problem(index % 4 == 3 ? 2 : 1, s[0], s[1], s[2], s[3], d.qk, d.v, kMasks[index % 3]);
      if (index % 5 == 2) c.shape.scale = 0.6 / std::sqrt(double(d.qk));
      c.dtype = dtype;
      c.layout = kLayouts[(index / 3) % 3];
      c.start = 3000 + index;
      ++index;
      if (std::max(d.qk, d.v) > largest) continue;
      runAndCheckBackward(c);
      ++run;
    }
  }
  MESSAGE(run << " problems run (head dims up to " << largest << ", the build's largest)");
}

TEST_CASE("backward: pipeline knobs") {
  const int largest = largestCompiledHeadDim();
  std::vector<Knobs> settings = {
      {{FFPA_POLICY_PREFETCH_QKV, 0}},
      {{FFPA_POLICY_QKV_SMEM_SHARE, 1}},
      {{FFPA_POLICY_PERSIST_Q_G2S, 0}},
      {{FFPA_POLICY_LAUNCH_GRID_DNHB, 1}},
      {{FFPA_POLICY_QKV_SMEM_SHARE, 1}, {FFPA_POLICY_PREFETCH_QKV, 0}, {FFPA_POLICY_STAGES, 1}},
  };
  for (int stages : listOf(FFPA_BUILD_STAGES)) settings.push_back({{FFPA_POLICY_STAGES, stages}});
  int index = 0;
  for (int d : {64, 256, 512, 1024}) {
    if (d > largest) continue;
    for (const Knobs& knobs : settings) {
      AttentionCase c;
      c.shape = problem(2, 2, 1, 50, 70, d, d, kMasks[index % 3]);
      c.dtype = index % 2 ? DType::bfloat16 : DType::float16;
      c.layout = kLayouts[index % 3];
      c.knobs = knobs;
      c.start = 7000 + index;
      ++index;
      runAndCheckBackward(c);
    }
  }
}

TEST_CASE("backward: knobs at their defaults give way to an A100's shared memory") {
  for (int d : {320, 512, 1024}) {
    if (d > largestCompiledHeadDim()) continue;
    AttentionCase c;
    c.shape = problem(1, 2, 1, 40, 70, d, d, CausalMask::bottom_right);
    c.device = PlannedDevice::ampere;
    runAndCheckBackward(c);
  }
}

TEST_CASE("backward: results are bit-identical from run to run") {
  AttentionCase c;
  c.shape = problem(1, 4, 2, 70, 90, 128, 128, CausalMask::none);
  c.dtype = DType::bfloat16;
  const BackwardOutcome first = runBackward(c);
  for (int run = 0; run < 2; ++run) {
    const BackwardOutcome again = runBackward(c);
    CHECK(bytesOf(again.dq) == bytesOf(first.dq));
    CHECK(bytesOf(again.dk) == bytesOf(first.dk));
    CHECK(bytesOf(again.dv) == bytesOf(first.dv));
  }
}

TEST_CASE("backward: with a single key, dV is dO summed and dQ, dK vanish") {
  // P = 1 for every query, so dS = P (dP - delta) = 0 up to the rounding of fp32 sums: no relative
  // error can be measured against the exact zeros, so their size is bounded instead.
  for (int d : {64, 512}) {
    if (d > largestCompiledHeadDim()) continue;
    AttentionCase c;
    c.shape = problem(1, 4, 2, 50, 1, d, d, CausalMask::none);
    c.dtype = DType::bfloat16;
    try {
      const BackwardOutcome outcome = runBackward(c);
      const ffpa_tools::ErrorStats dv = ffpa_tools::compare(outcome.dv.to_dense(), outcome.exact[2]);
      CHECK_MESSAGE(dv.rel_l2 <= 2 * ffpa_tools::unit_roundoff(c.dtype),
                    c.toString() << ": dV " << dv.to_string());
      for (const ffpa_tools::HostTensor* zero : {&outcome.dq, &outcome.dk}) {
        const std::vector<double> zeros(static_cast<size_t>(zero->layout().element_count()), 0.0);
        const ffpa_tools::ErrorStats error = ffpa_tools::compare(zero->to_dense(), zeros);
        CHECK_MESSAGE(error.max_abs <= 1e-4, c.toString() << ": " << error.to_string());
      }
    } catch (const std::exception& e) {
      FAIL_CHECK(c.toString() << "\n  " << std::string(e.what()));
    }
  }
}

TEST_CASE("backward: every value of the launch parameters tuned configs set") {
  const int largest = largestCompiledHeadDim();
  int index = 0;
  for (int d : {64, 256, 512, 1024}) {
    if (d > largest) continue;
    for (int scoreStep : {16, 32, 64, 128}) {
      for (int outputStep : {16, 32, 64}) {
        AttentionCase c;
        c.shape = problem(1, 2, 1, 50, 70, d, d, kMasks[index % 3]);
        c.dtype = index % 2 ? DType::bfloat16 : DType::float16;
        c.launchConfig = {{"score_step", scoreStep}, {"output_step", outputStep}, {"stages", 1 + index % 2},
                          {"persist_q", (index / 2) % 2}};
        c.start = 9500 + index;
        ++index;
        runAndCheckBackward(c);
      }
    }
  }
}

TEST_CASE("backward: per-batch key lengths, NaN in K and V past each entry's keys") {
  // FFPA_ATTENTION_KEY_LENGTHS (backwardKeyLengthCases, on the head dims this build compiles):
  // keys past a count get dK = dV = 0 exactly; a NaN there that reaches any gradient fails the
  // bounds.
  const int largest = largestCompiledHeadDim();
  int run = 0;
  for (const AttentionCase& c : backwardKeyLengthCases()) {
    if (std::max(c.shape.dim_qk, c.shape.dim_v) > largest) continue;
    runAndCheckBackward(c);
    ++run;
  }
  CHECK(run >= 2);
}

TEST_CASE("backward with attention slices: packed batches, shared prefixes, windows, uncovered rows and keys") {
  int run = 0;
  for (const AttentionCase& c : sliceCases()) {
    if (std::max(c.shape.dim_qk, c.shape.dim_v) > largestCompiledHeadDim()) continue;
    runAndCheckBackward(c);
    ++run;
  }
  CHECK(run >= 3);
}

TEST_SUITE_END();
