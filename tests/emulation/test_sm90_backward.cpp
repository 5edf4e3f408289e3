// The sm90 (Hopper) dQ kernel of the backward on the CPU warp emulator, between the mma.sync
// row-statistics and dK/dV kernels as the planner pairs them: TMA boxes, mbarrier phases, wgmma
// from descriptors, the producer / two-consumer schedule and, above d = 384, clusters of two CTAs
// (four above 640) summing partial S and dP through distributed shared memory; the dK/dV kernel's
// clusters of two and four likewise; against float64 gradients with
// outputs and workspace poisoned. Arguments and tensor maps come from the library's own
// describeQueryGradientCall(). What this cannot show: speed, and the hardware's agreement with
// the ISA as the emulator reads it (a GPU run under compute-sanitizer covers that).
#include "backward_runner.h"
#include "case_matrix.h"

#include "emulation/launch.h"
#include "sm90/backward_variant.h"
#include "sm90/key_gradient_call.h"
#include "sm90/key_gradient_kernel.cuh"
#include "sm90/query_gradient_call.h"
#include "sm90/query_gradient_kernel.cuh"

#include <doctest/doctest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

using namespace emulation_test;
using ffpa_tools::CausalMask;
using ffpa_tools::DType;

namespace {

// Runs gradient kernel `Kernel` (its run(params)) on clusters of kCluster blocks.
template <class Kernel, int kCluster, class Params>
void launchClustered(const ffpa::emulation::Config& config, const Params& params) {
  ffpa::emulation::launch(ffpa::emulation::clustered(config, kCluster), [](const Params& p) { Kernel::run(p); },
                          params);
}

template <class Tag, int kHeadDimQk, int kCluster>
void launchInstance(const ffpa::emulation::Config& config, const ffpa::sm90::QueryGradientParams& params) {
  launchClustered<ffpa::kernels::sm90::QueryGradientKernel<Tag, kHeadDimQk, kCluster>, kCluster>(config, params);
}

// The instances of kernels/sm90/query_gradient_instances.cu.
template <class Tag>
void launchFor(ffpa::sm90::QueryGradientShape shape, const ffpa::emulation::Config& config,
               const ffpa::sm90::QueryGradientParams& params) {
  switch (shape.headDimQk * 10 + shape.clusterSize) {
    case 641: return launchInstance<Tag, 64, 1>(config, params);
    case 1281: return launchInstance<Tag, 128, 1>(config, params);
    case 1921: return launchInstance<Tag, 192, 1>(config, params);
    case 2561: return launchInstance<Tag, 256, 1>(config, params);
    case 3201: return launchInstance<Tag, 320, 1>(config, params);
    case 3841: return launchInstance<Tag, 384, 1>(config, params);
    case 3842: return launchInstance<Tag, 384, 2>(config, params);
    case 5122: return launchInstance<Tag, 512, 2>(config, params);
    case 6402: return launchInstance<Tag, 640, 2>(config, params);
    case 7684: return launchInstance<Tag, 768, 4>(config, params);
    case 10244: return launchInstance<Tag, 1024, 4>(config, params);
    default:
      throw std::invalid_argument("no sm90 dQ instance for d_qk " + std::to_string(shape.headDimQk) + " x" +
                                  std::to_string(shape.clusterSize));
  }
}

// The kernel parameters of `call` (arguments and tensor-map descriptions) and the emulator's
// launch configuration for them.
template <class Params, class Call>
Params paramsOf(const Call& call) {
  Params params;
  static_cast<decltype(call.arguments)&>(params) = call.arguments;
  params.qMap = call.maps.q;
  params.kMap = call.maps.k;
  params.vMap = call.maps.v;
  params.dOMap = call.maps.dO;
  if (params.sharedBytes > 227 * 1024) throw std::runtime_error("the layout exceeds 227 KiB of shared memory");
  return params;
}

template <class Call>
ffpa::emulation::Config configOf(const Call& call, uint32_t sharedBytes, std::vector<ffpa::emulation::Buffer> buffers,
                                 uint64_t scheduleSeed) {
  ffpa::emulation::Config config({int(call.grid[0]), int(call.grid[1]), int(call.grid[2])}, ffpa::sm90::kThreads,
                                 sharedBytes, std::move(buffers));
  config.scheduleSeed = scheduleSeed;
  return config;
}

std::string runSm90QueryGradient(const ffpa::AttentionProblem& problem, const ffpa::TensorArgs& tensors,
                                 const float* rowStats, std::vector<ffpa::emulation::Buffer> buffers,
                                 uint64_t scheduleSeed) {
  const std::string refusal = ffpa::sm90::queryGradientRefusal(problem);
  if (!refusal.empty()) throw std::runtime_error("the sm90 dQ kernel refuses the problem: " + refusal);
  const ffpa::sm90::QueryGradientCall call = ffpa::sm90::describeQueryGradientCall(problem, tensors, rowStats, false);
  const auto params = paramsOf<ffpa::sm90::QueryGradientParams>(call);
  const auto config = configOf(call, params.sharedBytes, std::move(buffers), scheduleSeed);
  const ffpa::sm90::QueryGradientShape shape = ffpa::sm90::queryGradientShape(problem);
  if (problem.dtype == FFPA_DATA_TYPE_BFLOAT16) {
    launchFor<ffpa::kernels::Bf16Tag>(shape, config, params);
  } else {
    launchFor<ffpa::kernels::HalfTag>(shape, config, params);
  }
  return ffpa::sm90::backwardInstanceName(problem.dtype, shape, std::nullopt);
}

template <class Tag, int kHeadDim, int kCluster>
void launchKeyInstance(const ffpa::emulation::Config& config, const ffpa::sm90::KeyGradientParams& params) {
  launchClustered<ffpa::kernels::sm90::KeyGradientKernel<Tag, kHeadDim, kCluster>, kCluster>(config, params);
}

// The instances of kernels/sm90/key_gradient_instances.cu.
template <class Tag>
void launchKeyGradient(ffpa::sm90::KeyGradientShape shape, const ffpa::emulation::Config& config,
                       const ffpa::sm90::KeyGradientParams& params) {
  switch (shape.headDim * 10 + shape.clusterSize) {
    case 641: return launchKeyInstance<Tag, 64, 1>(config, params);
    case 1281: return launchKeyInstance<Tag, 128, 1>(config, params);
    case 1921: return launchKeyInstance<Tag, 192, 1>(config, params);
    case 2561: return launchKeyInstance<Tag, 256, 1>(config, params);
    case 3842: return launchKeyInstance<Tag, 384, 2>(config, params);
    case 5122: return launchKeyInstance<Tag, 512, 2>(config, params);
    case 7684: return launchKeyInstance<Tag, 768, 4>(config, params);
    case 10244: return launchKeyInstance<Tag, 1024, 4>(config, params);
    default:
      throw std::invalid_argument("no sm90 dK/dV instance for d " + std::to_string(shape.headDim) + " x" +
                                  std::to_string(shape.clusterSize));
  }
}

std::string runSm90KeyGradient(const ffpa::AttentionProblem& problem, const ffpa::TensorArgs& tensors,
                               const float* rowStats, std::vector<ffpa::emulation::Buffer> buffers,
                               uint64_t scheduleSeed) {
  const std::string refusal = ffpa::sm90::keyGradientRefusal(problem);
  if (!refusal.empty()) throw std::runtime_error("the sm90 dK/dV kernel refuses the problem: " + refusal);
  const ffpa::sm90::KeyGradientCall call = ffpa::sm90::describeKeyGradientCall(problem, tensors, rowStats, false);
  const auto params = paramsOf<ffpa::sm90::KeyGradientParams>(call);
  const auto config = configOf(call, params.sharedBytes, std::move(buffers), scheduleSeed);
  if (problem.dtype == FFPA_DATA_TYPE_BFLOAT16) {
    launchKeyGradient<ffpa::kernels::Bf16Tag>(call.shape, config, params);
  } else {
    launchKeyGradient<ffpa::kernels::HalfTag>(call.shape, config, params);
  }
  return ffpa::sm90::backwardInstanceName(problem.dtype, std::nullopt, call.shape);
}

AttentionCase sweepCase(int index, const int (&dim)[2], int kvLength, uint64_t start) {
  AttentionCase c;
  c.dtype = index % 2 ? DType::bfloat16 : DType::float16;
  c.shape = problem(1, 2, index % 2 ? 1 : 2, 70 + 13 * (index % 3), kvLength + 29 * (index % 2), dim[0], dim[1],
                    kMasks[index % 3]);
  c.layout = kLayouts[index % 3];
  c.start = start + index;
  return c;
}

// A case of `shape` in `dtype` (BHND), its inputs from `start`.
AttentionCase caseOf(const ffpa_tools::AttentionProblem& shape, DType dtype, uint64_t start) {
  AttentionCase c;
  c.shape = shape;
  c.dtype = dtype;
  c.start = start;
  return c;
}

// Runs `c` under each schedule of `seeds` with the given gradient kernels (the mma.sync ones for
// those not given), checks every outcome, and CHECKs that dQ, dK and dV keep the bits of the
// first schedule: no atomics, so no order of the warps may change a bit.
void checkSameBitsUnderSchedules(AttentionCase c, std::initializer_list<uint64_t> seeds, GradientRun queryGradient,
                                 GradientRun keyGradient) {
  static const char* const kNames[3] = {"dQ", "dK", "dV"};
  std::vector<uint8_t> first[3];
  for (const uint64_t seed : seeds) {
    c.scheduleSeed = seed;
    try {
      const BackwardOutcome outcome = runBackward(c, queryGradient, keyGradient);
      checkBackward(c, outcome);
      const std::vector<uint8_t> bits[3] = {bytesOf(outcome.dq), bytesOf(outcome.dk), bytesOf(outcome.dv)};
      for (int g = 0; g < 3; ++g) {
        if (first[g].empty()) first[g] = bits[g];
        CHECK_MESSAGE(bits[g] == first[g], c.toString() << ": " << std::string(kNames[g]) << " differs from schedule "
                                                         << *seeds.begin() << "'s");
      }
    } catch (const std::exception& e) {
      FAIL_CHECK(c.toString() << "\n  " << std::string(e.what()));
    }
  }
}

// Runs and checks the sweep cases of head dims `dims` (sweepCase: dtypes, masks, layouts, head
// groups and lengths varying with the index).
template <std::size_t kCount>
void runSweep(const int (&dims)[kCount][2], int kvLength, uint64_t start, GradientRun queryGradient,
              GradientRun keyGradient = nullptr) {
  int index = 0;
  for (const auto& dim : dims) {
    runAndCheckBackward(sweepCase(index++, dim, kvLength, start), queryGradient, keyGradient);
  }
}

}  // namespace

TEST_SUITE_BEGIN("sm90 kernels");

TEST_CASE("sm90 backward up to d 256: dQ and dK/dV on one CTA, tails, masks, layouts, GQA/MQA") {
  // 64, 128, 192 and 256 are the instances (at 64 consumer 1 holds all of dQ, dK and dV);
  // 96 / 80 runs the 128 one with a partial last block of each operand; 80 / 256 pairs dQ's 128
  // instance with dK/dV's 256; 256 / 48 leaves dQ's consumer 1 its K blocks but d_v one block;
  // 32 / 48 and 16 / 16 run the 64 instances on one partial block; 64 / 128 pairs dQ's 64 with
  // dK/dV's 128; 128 / 384 pairs dQ on one CTA with dK/dV on a cluster of two; 128 / 512 runs dQ
  // on the cluster's 384 instance (rank 1's K blocks 2 and 3 past d_qk, zeros).
  const int dims[][2] = {{128, 128}, {192, 192}, {256, 256}, {96, 80},  {80, 256},  {256, 48},
                         {176, 208}, {64, 64},   {32, 48},   {16, 16},  {64, 128},  {128, 384},
                         {128, 512}};
  runSweep(dims, 100, 1000, runSm90QueryGradient, runSm90KeyGradient);
  // MQA, queries 0..79 seeing no key; then keys 70..199 seen by no query.
  runAndCheckBackward(caseOf(problem(1, 4, 1, 150, 70, 64, 128, CausalMask::bottom_right), DType::bfloat16, 1010),
                      runSm90QueryGradient, runSm90KeyGradient);
  runAndCheckBackward(caseOf(problem(2, 2, 2, 70, 200, 128, 128, CausalMask::top_left), DType::float16, 1011),
                      runSm90QueryGradient, runSm90KeyGradient);
}

TEST_CASE("sm90 backward up to d 256: shuffled schedules give the same bits") {
  // One CTA with two K (Q) buffers and no exchange: the dP-empty, dS-empty and tiles-empty waits
  // alone order the consumers, whatever the schedule. The race that dropping the tiles-empty
  // wait opens (P^T of the next step written over the one consumer 1 still reads) shows in every
  // schedule that lags a warp of consumer 1 (emulation/scheduler.cpp).
  const int dims[][2] = {{128, 128}, {256, 192}, {64, 64}};
  for (const auto& dim : dims) {
    checkSameBitsUnderSchedules(
        caseOf(problem(1, 2, 1, 150, 170, dim[0], dim[1], CausalMask::bottom_right), DType::bfloat16, 1020 + dim[0]),
        {1, 2, 3, 4}, runSm90QueryGradient, runSm90KeyGradient);
  }
}

TEST_CASE("sm90 backward dQ: one CTA (d up to 384), every instance, tails, masks, layouts, GQA") {
  // 272 / 304 rounds up to the 320 instance with a partial last block; d_v 48 is one block.
  const int dims[][2] = {{320, 320}, {384, 384}, {272, 304}, {336, 48}};
  runSweep(dims, 90, 1100, runSm90QueryGradient);
}

TEST_CASE("sm90 backward dQ: clusters of two CTAs (d above 384), each half of the head dims") {
  // 576 / 512 is the absorbed-MLA shape; 320 / 640 runs the cluster's 384 instance, whose rank 1
  // loads a K block past d_qk (zeros) and drops the columns it does not own; d_v 64 leaves rank 1
  // no dO or V block (its partial dP is 0); 640 / 640 is the largest layout.
  const int dims[][2] = {{512, 512}, {640, 640}, {576, 512}, {320, 640}, {448, 64}, {400, 416}};
  runSweep(dims, 80, 1200, runSm90QueryGradient);
}

TEST_CASE("sm90 backward dQ: clusters of four CTAs (d above 640), two exchange stages") {
  // 1024 / 1024 is the largest layout; 704 / 640 runs the 768 instance (shares of 3, 3, 3, 2
  // blocks); 320 / 1024 leaves the last rank no Q block and ranks 2 and 3 zeros past d_qk;
  // 832 / 64 leaves ranks 1..3 no dO or V block (their partial dP is 0).
  const int dims[][2] = {{1024, 1024}, {704, 640}, {320, 1024}, {832, 64}};
  runSweep(dims, 80, 1250, runSm90QueryGradient);
}

TEST_CASE("sm90 backward dQ: many KV tiles, queries that see no key, a single query") {
  AttentionCase c;
  c.shape = problem(1, 2, 1, 130, 333, 384, 320, CausalMask::none);
  c.start = 1300;
  runAndCheckBackward(c, runSm90QueryGradient);
  c.shape = problem(1, 1, 1, 200, 70, 512, 512, CausalMask::bottom_right);  // queries 0..129 see no key
  c.dtype = DType::bfloat16;
  c.start = 1301;
  runAndCheckBackward(c, runSm90QueryGradient);
  // One query (bottom-right: it sees all 257 keys; top-left would leave it one key, and exact
  // gradients of 0 that no relative error can measure).
  c.shape = problem(1, 3, 3, 1, 257, 320, 320, CausalMask::bottom_right);
  c.start = 1302;
  runAndCheckBackward(c, runSm90QueryGradient);
}

TEST_CASE("sm90 backward dQ: shuffled schedules give the same bits") {
  // The warpgroups (and the two CTAs of a cluster) hand S, dP and dS over through mbarriers only;
  // under seeded schedules st.async lands at once and one CTA runs ahead for long streaks. No
  // atomics: every schedule must give the same dQ bits.
  const int dims[][2] = {{352, 384}, {512, 448}, {768, 1024}};
  for (const auto& dim : dims) {
    checkSameBitsUnderSchedules(
        caseOf(problem(1, 2, 1, 100, 200, dim[0], dim[1], CausalMask::bottom_right), DType::bfloat16, 1400 + dim[0]),
        {1, 2, 3}, runSm90QueryGradient, nullptr);
  }
}

TEST_CASE("sm90 backward dK/dV: clusters of two CTAs (max d 257..512), tails, masks, layouts, GQA/MQA") {
  // d_v 64 leaves rank 1 no V or dO block; 272 / 304 partial last blocks; GQA and MQA sum the
  // group's query heads inside the CTA; queries that see no key, keys no query sees.
  const int dims[][2] = {{512, 512}, {384, 384}, {272, 304}, {448, 64}, {320, 512}, {512, 400}};
  runSweep(dims, 110, 1500, runSm90QueryGradient, runSm90KeyGradient);
  // MQA, queries 0..79 seeing no key; then keys 70..199 seen by no query.
  runAndCheckBackward(caseOf(problem(1, 4, 1, 150, 70, 384, 320, CausalMask::bottom_right), DType::bfloat16, 1510),
                      nullptr, runSm90KeyGradient);
  runAndCheckBackward(caseOf(problem(1, 2, 2, 70, 200, 512, 512, CausalMask::top_left), DType::float16, 1511), nullptr,
                      runSm90KeyGradient);
}

TEST_CASE("sm90 backward dK/dV: clusters of four CTAs (max d 513..1024), two exchange stages") {
  // 640 / 640 gives the 768 instance's ranks 3, 3, 3 and 1 blocks; 576 / 512 (absorbed MLA)
  // leaves rank 3 no K block; 1024 / 64 leaves ranks 1..3 no V or dO block; 1024 / 1024 is the
  // largest layout; GQA sums the group's query heads.
  const int dims[][2] = {{640, 640}, {576, 512}, {1024, 64}, {1024, 1024}, {304, 800}};
  runSweep(dims, 100, 1530, runSm90QueryGradient, runSm90KeyGradient);
  // MQA; keys 70..149 seen by no query.
  runAndCheckBackward(caseOf(problem(1, 3, 1, 70, 150, 768, 768, CausalMask::top_left), DType::bfloat16, 1540), nullptr,
                      runSm90KeyGradient);
}

TEST_CASE("sm90 backward dK/dV: shuffled schedules give the same bits") {
  // Clusters of two (448 / 512) and of four (704 / 768), whose two exchange stages must agree
  // on every CTA whatever order the partials arrive in.
  const int dims[][2] = {{448, 512}, {704, 768}};
  for (const auto& dim : dims) {
    checkSameBitsUnderSchedules(
        caseOf(problem(1, 2, 1, 200, 100, dim[0], dim[1], CausalMask::bottom_right), DType::bfloat16, 1520 + dim[0]),
        {1, 2, 3}, nullptr, runSm90KeyGradient);
  }
}

TEST_CASE("sm90 backward with attention slices: dQ and dK/dV walk the slices' tiles") {
  // The mma.sync kernels' slice cases the sm90 gradient kernels serve: row and key tiles shorter
  // than 64 at segment ends, walks from queries and keys that are no multiple of 64, queries
  // that see no key and keys no query sees (gradients exactly 0), one slice kind after another.
  const auto servesQuery = [](const AttentionCase& c) {
    return c.shape.dim_qk <= 1024 && c.shape.dim_v <= 1024;
  };
  const auto servesKey = [](const AttentionCase& c) {
    return std::max(c.shape.dim_qk, c.shape.dim_v) <= 1024;
  };
  int runs = 0;
  for (const AttentionCase& c : sliceCases()) {
    if (!servesQuery(c) && !servesKey(c)) continue;
    runAndCheckBackward(c, servesQuery(c) ? runSm90QueryGradient : nullptr,
                        servesKey(c) ? runSm90KeyGradient : nullptr);
    ++runs;
  }
  CHECK(runs == 5);  // d 128 (one CTA), 512, 1024 (clusters of four), 576 / 512 and 320

  // GQA: both query heads of the group summed into one dK/dV; every schedule gives the same bits.
  AttentionCase packed;
  packed.shape = problem(1, 2, 1, 300, 300, 384, 384, CausalMask::none);
  packed.shape.slices = documentsWithPrefix();
  packed.dtype = DType::bfloat16;
  packed.start = 1600;
  checkSameBitsUnderSchedules(packed, {0, 5}, runSm90QueryGradient, runSm90KeyGradient);
  // dQ in clusters of two (d_qk 576), then dK/dV at d 448 / 512 (the 512 instance).
  AttentionCase clustered;
  clustered.shape = problem(1, 2, 2, 210, 200, 576, 512, CausalMask::none);
  clustered.shape.slices = bandsAndDiagonal();
  clustered.dtype = DType::float16;
  clustered.start = 1601;
  runAndCheckBackward(clustered, runSm90QueryGradient);
  clustered.shape = problem(1, 2, 1, 210, 200, 448, 512, CausalMask::none);
  clustered.shape.slices = bandsAndDiagonal();
  clustered.start = 1602;
  clustered.scheduleSeed = 6;
  runAndCheckBackward(clustered, nullptr, runSm90KeyGradient);
  // Both kernels on slices with more rows than keys: wholly masked tiles, keys between slices.
  AttentionCase tall;
  tall.shape = problem(1, 2, 1, 200, 120, 512, 512, CausalMask::none);
  tall.shape.slices = tallSlices();
  tall.dtype = DType::bfloat16;
  tall.start = 1603;
  runAndCheckBackward(tall, runSm90QueryGradient, runSm90KeyGradient);
}

TEST_CASE("sm90 backward: per-batch key lengths, NaN in K and V past each entry's keys, one CTA and clusters") {
  // FFPA_ATTENTION_KEY_LENGTHS on both gradient kernels (backwardKeyLengthCases: dQ and dK/dV on
  // one CTA and clusters of two and four). K and V are NaN past every count (runBackward): a dQ
  // consumer that leaves its K or V rows past the count in place, a dK/dV CTA that leaves its V
  // rows, or a mask that misses a key puts NaN in a gradient; keys past a count must get dK = dV
  // = 0 exactly.
  for (const AttentionCase& c : backwardKeyLengthCases()) {
    runAndCheckBackward(c, runSm90QueryGradient, runSm90KeyGradient);
  }
  // The same bits under every schedule: the zeros land before any product reads them.
  AttentionCase shuffled;
  shuffled.shape = problem(2, 2, 1, 100, 170, 448, 384, CausalMask::bottom_right);
  shuffled.shape.key_lengths = {150, 77};
  shuffled.dtype = DType::bfloat16;
  shuffled.start = 1710;
  checkSameBitsUnderSchedules(shuffled, {1, 2, 3}, runSm90QueryGradient, runSm90KeyGradient);
}

TEST_SUITE_END();
