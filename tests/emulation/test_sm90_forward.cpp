// The sm90 (Hopper) forward kernel on the CPU warp emulator: TMA boxes with the 128-byte swizzle,
// mbarrier phases, wgmma from shared-memory descriptors and the producer / two-consumer schedule,
// against float64 attention with outputs poisoned. Arguments and tensor maps come from the
// library's own describeForwardCall(); the emulator decodes descriptors and copies boxes as the
// PTX ISA defines them, independently of how the kernel builds them. What this cannot show:
// speed, the hardware's agreement with the ISA as read here, and races that the emulator's fixed
// schedule hides (a GPU run under compute-sanitizer covers those).
#include "case_matrix.h"
#include "forward_runner.h"

#include "emulation/launch.h"
#include "sm90/forward_call.h"
#include "sm90/forward_kernel.cuh"
#include "sm90/forward_row_split_kernel.cuh"

#include <doctest/doctest.h>

#include <memory>
#include <stdexcept>
#include <string>

using namespace emulation_test;
using ffpa_tools::CausalMask;
using ffpa_tools::DType;
using ffpa_tools::LayoutKind;

namespace {

// `kvSharing` > 1: the kernel whose CTAs of two adjacent row tiles share K and V (d_v <= 512);
// `split`: the consumers' split of the columns (sm90/forward_params.h; -1: the default). Returns
// the output columns of consumer 0 of the kernel that ran.
template <class Tag, int kHeadDimV>
int launchInstance(const ffpa::emulation::Config& config, const ffpa::sm90::ForwardParams& params, int kvSharing,
                    int split) {
  constexpr int kCluster = ffpa::sm90::clusterSizeFor(kHeadDimV);
  if constexpr (kCluster == 1) {
    if (kvSharing > 1) {
      ffpa::emulation::launch(
          ffpa::emulation::clustered(config, ffpa::sm90::kKvSharingCtas),
          [](const ffpa::sm90::ForwardParams& p) { ffpa::kernels::sm90::ForwardKernel<Tag, kHeadDimV, 1, true>::run(p); },
          params);
      return ffpa::kernels::sm90::ForwardKernel<Tag, kHeadDimV, 1, true>::kColumns0;
    }
  }
  constexpr int kOtherSplit = 1 - ffpa::sm90::defaultForwardSplit(kCluster);
  if constexpr (ffpa::sm90::forwardSplitsDiffer(kHeadDimV / kCluster)) {
    if (split == kOtherSplit) {
      ffpa::emulation::launch(
          ffpa::emulation::clustered(config, kCluster),
          [](const ffpa::sm90::ForwardParams& p) {
            ffpa::kernels::sm90::ForwardKernel<Tag, kHeadDimV, kCluster, false, kOtherSplit>::run(p);
          },
          params);
      return ffpa::kernels::sm90::ForwardKernel<Tag, kHeadDimV, kCluster, false, kOtherSplit>::kColumns0;
    }
  }
  ffpa::emulation::launch(
      ffpa::emulation::clustered(config, kCluster),
      [](const ffpa::sm90::ForwardParams& p) { ffpa::kernels::sm90::ForwardKernel<Tag, kHeadDimV, kCluster>::run(p); },
      params);
  return ffpa::kernels::sm90::ForwardKernel<Tag, kHeadDimV, kCluster>::kColumns0;
}

template <class Tag>
int launchFor(int headDimV, const ffpa::emulation::Config& config, const ffpa::sm90::ForwardParams& params,
               int kvSharing, int split) {
  switch (headDimV) {
    case 128: return launchInstance<Tag, 128>(config, params, kvSharing, split);
    case 192: return launchInstance<Tag, 192>(config, params, kvSharing, split);
    case 256: return launchInstance<Tag, 256>(config, params, kvSharing, split);
    case 320: return launchInstance<Tag, 320>(config, params, kvSharing, split);
    case 384: return launchInstance<Tag, 384>(config, params, kvSharing, split);
    case 448: return launchInstance<Tag, 448>(config, params, kvSharing, split);
    case 512: return launchInstance<Tag, 512>(config, params, kvSharing, split);
    case 640: return launchInstance<Tag, 640>(config, params, kvSharing, split);
    case 768: return launchInstance<Tag, 768>(config, params, kvSharing, split);
    case 896: return launchInstance<Tag, 896>(config, params, kvSharing, split);
    case 1024: return launchInstance<Tag, 1024>(config, params, kvSharing, split);
    default: throw std::invalid_argument("no sm90 instance for d_v " + std::to_string(headDimV));
  }
}

template <class Tag, int kHeadDimV, int kTileKeys = ffpa::sm90::kKeys>
void launchRowSplitInstance(const ffpa::emulation::Config& config, const ffpa::sm90::ForwardParams& params) {
  // The layout the host computed must be the one for the instance's tiles.
  if (params.tileKeys != kTileKeys) {
    throw std::logic_error("a layout of " + std::to_string(params.tileKeys) + "-key tiles for an instance of " +
                           std::to_string(kTileKeys));
  }
  ffpa::emulation::launch(
      config,
      [](const ffpa::sm90::ForwardParams& p) {
        ffpa::kernels::sm90::RowSplitForwardKernel<Tag, kHeadDimV, kTileKeys>::run(p);
      },
      params);
}

template <class Tag>
void launchRowSplit(int headDimV, int tileKeys, const ffpa::emulation::Config& config,
                    const ffpa::sm90::ForwardParams& params) {
  constexpr int kWide = ffpa::sm90::kRowSplitWideKeys;
  if (tileKeys == kWide) {
    switch (headDimV) {
      case 64: return launchRowSplitInstance<Tag, 64, kWide>(config, params);
      case 128: return launchRowSplitInstance<Tag, 128, kWide>(config, params);
      default:
        throw std::invalid_argument("no sm90 row split instance of 128 keys for d_v " + std::to_string(headDimV));
    }
  }
  switch (headDimV) {
    case 64: return launchRowSplitInstance<Tag, 64>(config, params);
    case 128: return launchRowSplitInstance<Tag, 128>(config, params);
    case 192: return launchRowSplitInstance<Tag, 192>(config, params);
    case 256: return launchRowSplitInstance<Tag, 256>(config, params);
    default: throw std::invalid_argument("no sm90 row split instance for d_v " + std::to_string(headDimV));
  }
}

// split, overlap: -1 for the planner's default; rowSplit: -1 for the planner's default
// (rowSplitByDefault, K and V not shared), else 0 or 1; pingpong and tileKeys (the row split's): -1
// for the planner's defaults (1; rowSplitTileKeysByDefault), else 0 or 1 and 64 or 128.
ForwardOutcome runSm90(const AttentionCase& c, bool gridDnhb = false, const InputEdit& edit = {}, int split = -1,
                       int overlap = -1, int rowSplit = -1, int pingpong = -1, int tileKeys = -1) {
  ForwardTensors t = forwardTensors(c);
  if (edit) edit(t);
  // The case's slices as the library holds them, read by the emulated kernel from the host.
  const std::unique_ptr<ffpa::slices::SliceTable> table = sliceTableOf(c);
  if (table) t.problem.slices = table.get();
  bool merged = false;
  const ffpa::AttentionProblem problem = plannedProblem(c, t.problem, &merged);
  ForwardOutcome out;
  ffpa::TensorArgs tensors;
  tensors.q = t.q.data();
  tensors.k = t.k.data();
  tensors.v = t.v.data();
  tensors.out = t.o.data();
  tensors.lseOut = static_cast<float*>(t.lse.data());
  if (table) tensors.slices = table->hostView();
  int exp2Emulated = 0;
  int kvSharing = 1;
  for (const auto& [knob, value] : c.knobs) {
    if (knob == FFPA_POLICY_EXP2_EMULATION) exp2Emulated = static_cast<int>(value);
    if (knob == FFPA_POLICY_HOPPER_KV_MULTICAST) kvSharing = ffpa::sm90::kvSharingFor(problem, value != 0);
  }
  const bool rows = rowSplit < 0 ? ffpa::sm90::rowSplitByDefault(problem) && kvSharing == 1 : rowSplit != 0;
  const std::string refusal = rows ? ffpa::sm90::rowSplitRefusal(problem) : ffpa::sm90::forwardRefusal(problem);
  if (!refusal.empty()) throw std::runtime_error("the sm90 forward refuses the problem: " + refusal);
  if (rows) overlap = 0;
  if (overlap < 0) overlap = ffpa::sm90::overlapApplies(problem, kvSharing) ? 1 : 0;
  pingpong = rows ? (pingpong < 0 ? 1 : pingpong) : 0;
  if (!rows) {
    tileKeys = ffpa::sm90::kKeys;
  } else if (tileKeys < 0) {
    tileKeys = ffpa::sm90::rowSplitTileKeysByDefault(problem);
  }
  // Split-KV as the planner chooses it (one CTA per SM), merged on the host after the launch.
  const int64_t ctas = ffpa::sm90::forwardGridBlocksX(problem, kvSharing, rows) * problem.batch * problem.headsQ;
  const ffpa::KeySplitPlan keySplit = ffpa::planKeySplits(policyOf(c), problem, deviceOf(c), {ctas, 1, tileKeys},
                                                          !gridDnhb && kvSharing == 1);
  std::vector<float> workspace(keySplit.bytes / sizeof(float));
  const ffpa::sm90::ForwardCall call =
      ffpa::sm90::describeForwardCall(problem, tensors, gridDnhb, exp2Emulated, kvSharing, overlap, rows, pingpong,
                                      tileKeys, keySplit, workspace.data());
  ffpa::sm90::ForwardParams params;
  static_cast<ffpa::sm90::ForwardArguments&>(params) = call.arguments;
  params.qMap = call.q;
  params.kMap = call.k;
  params.vMap = call.v;
  const int instance =
      rows ? ffpa::sm90::rowSplitHeadDimV(problem.headDimV) : ffpa::sm90::instanceHeadDimV(problem.headDimV);
  out.kernel = "sm90.forward d" + std::to_string(instance) + (kvSharing > 1 ? ".kv2" : "") + (rows ? ".row_split" : "");
  ffpa::emulation::Config config(
      {int(call.grid[0]), int(call.grid[1]), int(call.grid[2])}, ffpa::sm90::kThreads, params.sharedBytes,
      {{t.q.data(), t.q.size_bytes()},
       {t.k.data(), t.k.size_bytes()},
       {t.v.data(), t.v.size_bytes()},
       {t.o.data(), t.o.size_bytes()},
       {t.lse.data(), t.lse.size_bytes()},
       {workspace.data(), workspace.size() * sizeof(float)},
       {t.keyLengths.data(), t.keyLengths.size() * sizeof(int32_t)}});
  config.scheduleSeed = c.scheduleSeed;
  const auto merge = [&] {
    if (keySplit.splits > 1) mergeKeySplits(keySplit, problem, workspace.data(), t.o, t.lse, c.withLse);
  };
  const std::string splitNote = ffpa::describeKeySplits(keySplit) + (merged ? " query_heads_as_rows" : "");
  if (rows) {
    if (c.dtype == DType::bfloat16) {
      launchRowSplit<ffpa::kernels::Bf16Tag>(instance, tileKeys, config, params);
    } else {
      launchRowSplit<ffpa::kernels::HalfTag>(instance, tileKeys, config, params);
    }
    merge();
    out.config = "rows=64+64 pingpong=" + std::to_string(pingpong) + " keys=" + std::to_string(tileKeys) + splitNote;
    finishOutcome(c, t, out);
    return out;
  }
  const int columns0 = c.dtype == DType::bfloat16
                           ? launchFor<ffpa::kernels::Bf16Tag>(instance, config, params, call.kvSharing, split)
                           : launchFor<ffpa::kernels::HalfTag>(instance, config, params, call.kvSharing, split);
  merge();
  out.config = "columns0=" + std::to_string(columns0) + splitNote;
  finishOutcome(c, t, out);
  return out;
}

// Case `index` of a sweep over head dims `dim` (d_qk, d_v): heads, lengths, mask, layout and
// LSE vary with the index; keys from `kvLength` on, inputs from Random(start + index).
AttentionCase sweepCase(int index, const int (&dim)[2], DType dtype, int kvLength, uint64_t start) {
  AttentionCase c;
  c.dtype = dtype;
  c.shape = problem(1, 2, index % 2 ? 1 : 2, 70 + 13 * (index % 3), kvLength + 29 * (index % 2), dim[0], dim[1],
                    kMasks[index % 3]);
  c.layout = kLayouts[index % 3];
  c.withLse = index % 4 != 3;
  c.start = start + index;
  return c;
}

void runAndCheckSm90(const AttentionCase& c, bool gridDnhb = false, int split = -1, int overlap = -1,
                     int rowSplit = -1, int pingpong = -1, int tileKeys = -1) {
  try {
    checkForward(c, runSm90(c, gridDnhb, {}, split, overlap, rowSplit, pingpong, tileKeys));
  } catch (const std::exception& e) {
    FAIL_CHECK(c.toString() << "\n  " << std::string(e.what()));
  }
}

}  // namespace

TEST_SUITE_BEGIN("sm90 kernels");

TEST_CASE("sm90 forward: every instance, both dtypes, tails, masks, layouts, GQA") {
  // d_v 65..256 on the 128, 192 and 256 instances (d_v 80 and 176: a partial last block; d_qk 576
  // on the smallest, which only the split of the columns serves), each arrangement where both
  // serve: the row split (the default) and the split of the columns; then 257..512.
  const int dims[][2] = {{128, 128}, {64, 80}, {192, 192}, {256, 176}, {256, 256}, {576, 128}, {320, 320},
                         {384, 384}, {448, 448}, {512, 512}, {576, 512}, {272, 304}, {128, 464}};
  int index = 0;
  for (const auto& dim : dims) {
    for (DType dtype : {DType::float16, DType::bfloat16}) {
      const AttentionCase c = sweepCase(index, dim, dtype, 100, 900);
      runAndCheckSm90(c, index % 2 == 1);
      if (dim[1] <= 256 && dim[0] <= 256) runAndCheckSm90(c, index % 2 == 0, -1, -1, 0);
      ++index;
    }
  }
}

TEST_CASE("sm90 forward, rows split between the consumers: d_v up to 256, tails, masks, GQA, shuffled orders") {
  // 128 rows per CTA, 64 per consumer, each with all of O's columns; K and V in rings of two.
  // d_v up to 64 (16, 48: most of the block past d_v) on the 64 instance, which only this
  // arrangement has; d_qk != d_v both ways; both dtypes, layouts, LSE or none.
  // d_qk 448 and 512: one K buffer (S(j + 1) loads into the buffer S(j) read); 512 with d_v 64
  // is the largest d_qk shared memory holds. Up to d_v 128 KV tiles of 128 keys (the default
  // where they fit: two stacked boxes per block of K and V, S m64n128, 8 k16 steps of P V) and of
  // 64; at d_qk 320 / d_v 128 and 384 / 64 the wide tiles fit with one K buffer only.
  const int dims[][2] = {{64, 64},   {32, 48},   {16, 16},   {96, 64},  {128, 128}, {64, 192}, {256, 256},
                         {224, 240}, {320, 256}, {448, 64},  {512, 64}, {320, 128}, {384, 64}};
  int index = 0;
  for (const auto& dim : dims) {
    AttentionCase c = sweepCase(index, dim, index % 2 ? DType::bfloat16 : DType::float16, 190, 1500);
    c.scheduleSeed = index % 3 == 0 ? 0 : 40 + index;
    const bool wide = ffpa::sm90::rowSplitWideKeysServe(forwardTensors(c).problem);
    // Where both serve, the 64-key tiles too.
    for (const int keys : {ffpa::sm90::kRowSplitWideKeys, ffpa::sm90::kKeys}) {
      if (keys != ffpa::sm90::kKeys && !wide) continue;
      try {
        // The consumers take turns (the default) in two of every three cases.
        const int pingpong = (index + keys / 64) % 3 == 2 ? 0 : 1;
        const ForwardOutcome out = runSm90(c, index % 2 == 1, {}, -1, -1, 1, pingpong, keys);
        // (then " query_heads_as_rows" where the case's query heads merge)
        const std::string config = "rows=64+64 pingpong=" + std::to_string(pingpong) + " keys=" + std::to_string(keys);
        CHECK(out.config.rfind(config, 0) == 0);
        checkForward(c, out);
      } catch (const std::exception& e) {
        FAIL_CHECK(c.toString() << " keys " << keys << "\n  " << std::string(e.what()));
      }
    }
    ++index;
  }
  // Causal pairs whose first consumer sees a tile fewer than the second (the extra tile masked
  // for all of its rows, both alignments, Nq != Nkv), a CTA whose second consumer has no row
  // (Nq 50) or a few (Nq 200: the last CTA's rows 128..199), rows that see no key (bottom-right,
  // more queries than keys), many KV tiles (each ring buffer reused), in seeded orders in which a
  // consumer runs a tile ahead of the other.
  const struct {
    int64_t seqQ, seqKv;
    CausalMask mask;
  } shapes[] = {{200, 333, CausalMask::top_left}, {200, 333, CausalMask::bottom_right}, {50, 300, CausalMask::none},
                {300, 130, CausalMask::bottom_right}, {129, 129, CausalMask::top_left}};
  // At d 128 the default tiles are of 128 keys; the unseeded order runs 64-key tiles too.
  for (const auto& shape : shapes) {
    for (const uint64_t seed : {0u, 7u}) {
      AttentionCase c;
      c.shape = problem(1, 2, 1, shape.seqQ, shape.seqKv, 128, 128, shape.mask);
      c.dtype = seed ? DType::bfloat16 : DType::float16;
      c.layout = kLayouts[index % 3];
      c.scheduleSeed = seed;
      c.start = 1520 + index++;
      runAndCheckSm90(c);
      if (seed == 0) runAndCheckSm90(c, false, -1, -1, 1, 1, ffpa::sm90::kKeys);
    }
  }
  // exp2 emulated for some column groups: the consumers' other copy.
  AttentionCase emulated;
  emulated.shape = problem(1, 2, 2, 150, 200, 64, 64, CausalMask::bottom_right);
  emulated.dtype = DType::bfloat16;
  emulated.knobs = {{FFPA_POLICY_EXP2_EMULATION, 3}};
  emulated.start = 1550;
  runAndCheckSm90(emulated);
}

TEST_CASE("sm90 forward: the consumers' other split of the columns, one CTA and clusters of two") {
  // Where the two splits differ (384, 448 and 512 columns per CTA), the instance that is not the
  // default: one CTA skewed (consumer 1 with 256 or 320 columns: two wgmma per k16 step), a
  // cluster even; d_v 464 and 1008 leave a partial block to consumer 1, d_qk 576 and 64 differ
  // from d_v, and seeded schedules interleave the warpgroups (and the CTAs of a cluster).
  const int dims[][2] = {{384, 384}, {448, 448}, {512, 512}, {576, 464}, {768, 768}, {896, 896}, {1024, 1024},
                         {64, 1008}};
  int index = 0;
  for (const auto& dim : dims) {
    const int instance = ffpa::sm90::instanceHeadDimV(dim[1]);
    const int cluster = ffpa::sm90::clusterSizeFor(instance);
    const int other = 1 - ffpa::sm90::defaultForwardSplit(cluster);
    const AttentionCase c = sweepCase(index, dim, index % 2 ? DType::bfloat16 : DType::float16, 100, 1200);
    try {
      const ForwardOutcome out = runSm90(c, index % 2 == 1, {}, other);
      // The kernel that ran has the other split's columns (never the default's).
      const int columns0 = ffpa::sm90::forwardConsumer0Columns(instance / cluster, other);
      CHECK(columns0 != ffpa::sm90::forwardConsumer0Columns(instance / cluster, 1 - other));
      CHECK(out.config.rfind("columns0=" + std::to_string(columns0), 0) == 0);
      checkForward(c, out);
    } catch (const std::exception& e) {
      FAIL_CHECK(c.toString() << "\n  " << std::string(e.what()));
    }
    ++index;
  }
  AttentionCase c;
  c.shape = problem(1, 2, 1, 130, 333, 512, 512, CausalMask::bottom_right);
  c.dtype = DType::bfloat16;
  for (const uint64_t seed : {1u, 2u}) {
    c.scheduleSeed = seed;
    c.start = 1210 + seed;
    runAndCheckSm90(c, false, ffpa::sm90::kSkewedSplit);
  }
  c.shape = problem(1, 1, 1, 100, 333, 1024, 1024, CausalMask::top_left);
  c.scheduleSeed = 3;
  c.start = 1213;
  runAndCheckSm90(c, false, ffpa::sm90::kEvenSplit);
}

TEST_CASE("sm90 forward: consumers with and without the overlap, one CTA and clusters, each split, shuffled orders") {
  // Overlapped (the default, which the other cases run), consumer 1's P V of tile j waits until
  // consumer 0 completed S(j + 1); either way V goes in two parts reloaded as each consumer is
  // done with its own, and overlapped on one CTA the producer loads K(j + 1), V(j)'s second part
  // and V(j + 1)'s first in the order of their releases. Tails, masks (a causal last tile masked for
  // some rows), d_qk != d_v, both splits; seeded schedules run the warpgroups in random orders,
  // where a producer that did not wait for a release, or a consumer that waited on the other
  // part of V, overwrites or reads a tile in flight.
  // Clusters too (d_v 640: two K buffers; 1024 / 656: rank 1 with a partial last block).
  const int dims[][2] = {{128, 128}, {96, 208}, {320, 320}, {384, 384}, {448, 448}, {512, 512}, {576, 512},
                         {64, 272}, {640, 640}, {1024, 656}};
  int index = 0;
  for (const auto& dim : dims) {
    for (const int split : {ffpa::sm90::kEvenSplit, ffpa::sm90::kSkewedSplit}) {
      AttentionCase c = sweepCase(index, dim, index % 2 ? DType::bfloat16 : DType::float16, 300, 1300);
      c.scheduleSeed = index % 3 == 0 ? 0 : 20 + index;
      const int instance = ffpa::sm90::instanceHeadDimV(dim[1]);
      const int ctaColumns = instance / ffpa::sm90::clusterSizeFor(instance);
      const int chosenSplit = ffpa::sm90::forwardSplitsDiffer(ctaColumns) ? split : -1;
      for (const int overlap : {0, 1}) runAndCheckSm90(c, index % 2 == 1, chosenSplit, overlap, 0);
      ++index;
    }
  }
}

TEST_CASE("sm90 forward: a NaN in one query row reaches that row's O and LSE, and no other row") {
  // One CTA (d 512) and a cluster of two (d 768, each CTA holding half of the NaN's row).
  for (const int dim : {512, 768}) {
    AttentionCase c;
    c.dtype = dim == 512 ? DType::bfloat16 : DType::float16;
    c.shape = problem(1, 2, 1, 70, 100, dim, dim, CausalMask::none);
    c.start = 900 + dim;
    try {
      checkNanRow(c, runSm90(c, false, nanInQueryRow(1, 37)), 1, 37);
    } catch (const std::exception& e) {
      FAIL_CHECK(c.toString() << "\n  " << std::string(e.what()));
    }
  }
}

TEST_CASE("sm90 forward: clusters of two CTAs for d_v 513..1024, each half of the head dims") {
  // Rank 1 of d_qk 64 or 48 holds no Q/K block (its partial S is 0); d_v 528 leaves rank 1 a partial
  // block and an empty one; 1024 / 1024 is the largest shared-memory layout.
  const int dims[][2] = {{1024, 1024}, {640, 640}, {768, 768}, {896, 896}, {576, 528}, {64, 1008}, {1024, 656},
                         {48, 640}};
  int index = 0;
  for (const auto& dim : dims) {
    runAndCheckSm90(sweepCase(index, dim, index % 2 ? DType::bfloat16 : DType::float16, 90, 1000), index % 2 == 1);
    ++index;
  }
}

TEST_CASE("sm90 forward: the two CTAs of a cluster interleaved in shuffled orders") {
  // The partial scores cross between the CTAs on the Exchange full / empty mbarriers only. Under
  // these seeded schedules st.async lands at once and one CTA runs far ahead of the other for
  // long streaks: a sender that does not wait for Exchange empty overwrites a partial not read
  // yet (the cases above, unseeded, catch a receiver that does not wait for Exchange full).
  AttentionCase c;
  c.shape = problem(1, 1, 1, 100, 333, 768, 1024, CausalMask::bottom_right);
  c.dtype = DType::bfloat16;
  c.start = 1010;
  for (const uint64_t seed : {1u, 2u}) {
    c.scheduleSeed = seed;
    runAndCheckSm90(c);
  }
  // d 640 and 768: two K buffers, K loaded a tile ahead (six KV tiles: each buffer reused after
  // its S completed; a producer that did not wait would copy over a K that S still reads).
  c.shape = problem(1, 1, 1, 70, 333, 640, 640, CausalMask::none);
  c.scheduleSeed = 3;
  runAndCheckSm90(c);
  c.shape = problem(1, 1, 1, 70, 333, 768, 768, CausalMask::top_left);
  c.scheduleSeed = 4;
  runAndCheckSm90(c);
}

TEST_CASE("sm90 forward: many KV tiles, rows that see no key, one query row") {
  AttentionCase c;
  c.shape = problem(2, 2, 1, 150, 333, 512, 512, CausalMask::none);
  c.start = 950;
  runAndCheckSm90(c);
  c.shape = problem(1, 1, 1, 200, 70, 384, 384, CausalMask::bottom_right);  // rows 0..129 see no key
  c.dtype = DType::bfloat16;
  c.start = 951;
  runAndCheckSm90(c);
  c.shape = problem(1, 3, 3, 1, 257, 320, 320, CausalMask::top_left);
  c.start = 952;
  runAndCheckSm90(c);
}

TEST_CASE("sm90 forward: query heads as rows, decode and short queries of GQA and MQA") {
  // Decode (one query row) of GQA on the row split (d 128) and of MQA on one CTA (d 512) and on
  // clusters (MLA's 576/512), short queries of MQA in [B, N, H, D] without an LSE, and GQA in
  // [B, N, H, D], which cannot merge.
  const MergeCase cases[] = {
      {2, 8, 2, 1, 300, 128, 128, CausalMask::none, LayoutKind::bhnd, true, true},
      {1, 16, 1, 1, 200, 512, 512, CausalMask::bottom_right, LayoutKind::bnhd, true, true},
      {1, 16, 1, 1, 130, 576, 512, CausalMask::none, LayoutKind::bhnd, true, true},
      {1, 8, 1, 3, 150, 256, 256, CausalMask::none, LayoutKind::bnhd, false, true},
      {1, 6, 2, 5, 150, 320, 320, CausalMask::none, LayoutKind::bnhd, true, false},
  };
  uint64_t start = 960;
  for (const MergeCase& m : cases) {
    runMergeCase(m, start++, true, [](const AttentionCase& c) { return runSm90(c); });
  }
}

TEST_CASE("sm90 forward: split-KV runs on the row split, one CTA and clusters, merged on the host") {
  // Decode of MQA merged into one row tile, split as the planner chooses (the row split, 128-key
  // tiles); runs asked for over a causal mask on one CTA (d 512) and on clusters (d 640), a tail
  // run, no LSE; and a split asked for where K and V are shared (none).
  struct SplitCase {
    ffpa_tools::AttentionProblem shape;
    Knobs knobs;
    bool withLse;
    bool splits;
  };
  const SplitCase cases[] = {
      {problem(1, 16, 1, 1, 1500, 128, 128, CausalMask::none), {}, true, true},
      {problem(1, 2, 2, 70, 600, 512, 512, CausalMask::bottom_right), {{FFPA_POLICY_KEY_SPLITS, 3}}, false, true},
      {problem(1, 1, 1, 200, 460, 640, 640, CausalMask::top_left), {{FFPA_POLICY_KEY_SPLITS, 2}}, true, true},
      {problem(1, 2, 2, 150, 600, 256, 256, CausalMask::none),
       {{FFPA_POLICY_KEY_SPLITS, 3}, {FFPA_POLICY_HOPPER_KV_MULTICAST, 1}}, true, false},
  };
  uint64_t start = 970;
  for (const SplitCase& s : cases) {
    AttentionCase c;
    c.shape = s.shape;
    c.knobs = s.knobs;
    c.withLse = s.withLse;
    c.dtype = start % 2 ? DType::bfloat16 : DType::float16;
    c.start = start++;
    const bool shared = !s.knobs.empty() && s.knobs.back().first == FFPA_POLICY_HOPPER_KV_MULTICAST;
    runNaming(c, "key_splits=", s.splits,
              [shared](const AttentionCase& one) { return runSm90(one, false, {}, -1, -1, shared ? 0 : -1); });
  }
}

TEST_CASE("sm90 forward: warpgroups interleaved in shuffled orders give the same results") {
  // The producer and the two consumers hand tiles over through mbarriers only: any order in
  // which the emulator resumes waiting threads is one the GPU may take.
  AttentionCase c;
  c.shape = problem(1, 2, 1, 130, 333, 576, 512, CausalMask::bottom_right);
  c.dtype = DType::bfloat16;
  c.start = 960;
  for (const uint64_t seed : {1u, 2u, 3u}) {
    c.scheduleSeed = seed;
    runAndCheckSm90(c);
  }
  c.shape = problem(1, 1, 1, 64, 500, 320, 320, CausalMask::none);
  c.dtype = DType::float16;
  c.start = 961;
  c.scheduleSeed = 7;
  runAndCheckSm90(c, true);
}

TEST_CASE("sm90 forward: exp2 emulated for 1 to 8 of every 8 column groups computes the same attention") {
  // checkForward's bounds are those of the special-function unit's exp2: the polynomial's 8.6e-5
  // relative error must stay within them. Rows that see no key (bottom-right, Nq > Nkv) still
  // give O = 0 and LSE = -inf.
  int index = 0;
  for (const int emulated : {1, 4, 8}) {
    for (DType dtype : {DType::float16, DType::bfloat16}) {
      AttentionCase c;
      c.dtype = dtype;
      c.shape = problem(1, 2, 1, 150, 100 + 67 * index, index % 2 ? 576 : 320, index % 2 ? 512 : 320,
                        kMasks[index % 3]);
      c.knobs = {{FFPA_POLICY_EXP2_EMULATION, emulated}};
      c.start = 970 + index;
      runAndCheckSm90(c);
      ++index;
    }
  }
}

TEST_CASE("sm90 forward: scores that grow along the keys move the rows' reference maxima, some rows of a warp only") {
  // Key i scaled by 1 + i / 6: a tile's row maximum keeps passing the row's reference by more than
  // the rescale threshold (2^8), so O and the row sums are rescaled many times; query rows scaled
  // by 1, 0.05 or 0 in turn: within a warp some rows move their reference and others never do (a
  // row of zeros sees equal scores), so a consumer that rescales all rows or none, or skips the
  // rescale a row needs, fails. One CTA, K and V shared by two, and a cluster of two.
  const auto growing = [](ForwardTensors& t) {
    const int64_t* k = t.k.layout().dims;
    for (int64_t b = 0; b < k[0]; ++b)
      for (int64_t h = 0; h < k[1]; ++h)
        for (int64_t n = 0; n < k[2]; ++n)
          for (int64_t d = 0; d < k[3]; ++d) t.k.set(b, h, n, d, t.k.get(b, h, n, d) * (1.0 + n / 6.0));
    const int64_t* q = t.q.layout().dims;
    const double rowScale[3] = {1.0, 0.05, 0.0};
    for (int64_t b = 0; b < q[0]; ++b)
      for (int64_t h = 0; h < q[1]; ++h)
        for (int64_t n = 0; n < q[2]; ++n)
          for (int64_t d = 0; d < q[3]; ++d) t.q.set(b, h, n, d, t.q.get(b, h, n, d) * rowScale[n % 3]);
  };
  const int dims[][2] = {{512, 512}, {320, 320}, {768, 768}};
  int index = 0;
  for (const auto& dim : dims) {
    AttentionCase c;
    c.dtype = index % 2 ? DType::bfloat16 : DType::float16;
    c.shape = problem(1, 2, 1, 130, 333, dim[0], dim[1], index == 1 ? CausalMask::bottom_right : CausalMask::none);
    if (index == 1) c.knobs = {{FFPA_POLICY_HOPPER_KV_MULTICAST, 1}};
    c.start = 1090 + index;
    try {
      checkForward(c, runSm90(c, false, growing));
    } catch (const std::exception& e) {
      FAIL_CHECK(c.toString() << "\n  " << std::string(e.what()));
    }
    ++index;
  }
}

TEST_CASE("sm90 forward: CTAs of two row tiles share K and V through TMA multicast") {
  // Each CTA loads half of every K and V tile into both; the pair walks the KV tiles both row
  // tiles see (top-left causal: the earlier CTA's rows see the extra tile as masked; 150 and 83
  // rows: an odd number of row tiles, the last CTA past the rows), and a buffer is reloaded only
  // once both CTAs released it. Every instance, both dtypes, GQA, layouts, tails.
  const int dims[][2] = {{128, 128}, {256, 192}, {320, 320}, {384, 384}, {448, 448}, {512, 512}, {576, 512},
                         {272, 304}};
  const int rows[] = {150, 83, 200};
  int index = 0;
  for (const auto& dim : dims) {
    for (DType dtype : {DType::float16, DType::bfloat16}) {
      AttentionCase c;
      c.dtype = dtype;
      c.shape = problem(1, 2, index % 2 ? 1 : 2, rows[index % 3], 100 + 67 * (index % 4), dim[0], dim[1],
                        kMasks[index % 3]);
      c.layout = kLayouts[index % 3];
      c.withLse = index % 4 != 3;
      c.knobs = {{FFPA_POLICY_HOPPER_KV_MULTICAST, 1}};
      c.start = 1100 + index;
      runAndCheckSm90(c, index % 2 == 1);
      ++index;
    }
  }
  // Rows that see no key (bottom-right, more queries than keys), and seeded schedules in which
  // one CTA runs far ahead of the other: a producer that does not wait for the other CTA's
  // release overwrites a tile that CTA still reads.
  AttentionCase c;
  c.shape = problem(1, 2, 1, 200, 70, 512, 512, CausalMask::bottom_right);
  c.dtype = DType::bfloat16;
  c.knobs = {{FFPA_POLICY_HOPPER_KV_MULTICAST, 1}};
  c.start = 1120;
  runAndCheckSm90(c);
  c.shape = problem(1, 1, 1, 150, 333, 384, 384, CausalMask::top_left);
  for (const uint64_t seed : {1u, 2u, 3u}) {
    c.scheduleSeed = seed;
    c.start = 1120 + seed;
    runAndCheckSm90(c);
  }
  // d_qk of one 64-column block: rank 1 loads no K box (rank 0 multicasts all of K), and d_qk 16
  // leaves most of that block to TMA's zero fill.
  for (const int dqk : {64, 16}) {
    c.shape = problem(1, 2, 1, 140, 200, dqk, 320, CausalMask::bottom_right);
    c.dtype = dqk == 64 ? DType::float16 : DType::bfloat16;
    for (const uint64_t seed : {0u, 5u}) {
      c.scheduleSeed = seed;
      c.start = 1130 + dqk + seed;
      runAndCheckSm90(c);
    }
  }
}

TEST_CASE("sm90 forward: per-batch key lengths, NaN past each entry's keys, every arrangement that reads them") {
  // FFPA_ATTENTION_KEY_LENGTHS on the split of the columns (d_v from 65) and on the row split
  // (d_v up to 256, KV tiles of 64 keys and of 128 where they fit): entries of no key, one, a
  // partial last tile (of 128 keys: rows past the count in one stacked box or two) and all keys;
  // counts past Nkv and below 0 (clamped); bottom-right diagonals at each entry's last key (rows
  // of a short entry that see no key) and top-left ones; one CTA with and without K and V shared,
  // clusters of two, GQA decode merged and split, shuffled schedules. K and V are NaN past every
  // count: a consumer that leaves its rows of V past the count in place (the row split: either
  // consumer's share), or a mask that misses a key, puts NaN in O.
  struct LengthCase {
    ffpa_tools::AttentionProblem shape;
    std::vector<int64_t> lengths;
    Knobs knobs;
    bool splits;
    uint64_t scheduleSeed;
  };
  const LengthCase cases[] = {
      {problem(4, 2, 1, 37, 300, 128, 128, CausalMask::none), {0, 1, 130, 300}, {}, false, 0},
      {problem(3, 2, 2, 70, 200, 320, 320, CausalMask::bottom_right), {200, 65, 20}, {}, false, 0},
      {problem(2, 2, 1, 150, 260, 256, 192, CausalMask::top_left), {-5, 999}, {{FFPA_POLICY_HOPPER_KV_MULTICAST, 1}},
       false, 0},
      {problem(2, 1, 1, 200, 333, 512, 512, CausalMask::bottom_right), {97, 333},
       {{FFPA_POLICY_HOPPER_KV_MULTICAST, 1}}, false, 3},
      {problem(2, 2, 2, 70, 300, 640, 640, CausalMask::bottom_right), {131, 300}, {{FFPA_POLICY_KEY_SPLITS, 2}}, true,
       0},
      {problem(2, 16, 1, 1, 900, 576, 512, CausalMask::none), {900, 450}, {{FFPA_POLICY_KEY_SPLITS, 3}}, true, 0},
      {problem(2, 8, 2, 1, 700, 128, 128, CausalMask::none), {1, 641}, {}, true, 5},
      {problem(3, 2, 2, 200, 333, 64, 48, CausalMask::bottom_right), {333, 97, 20}, {}, false, 6},
      {problem(2, 2, 1, 150, 260, 192, 256, CausalMask::bottom_right), {200, 64}, {}, false, 0},
  };
  uint64_t start = 1400;
  for (const LengthCase& l : cases) {
    AttentionCase c;
    c.shape = l.shape;
    c.shape.key_lengths = l.lengths;
    c.knobs = l.knobs;
    c.layout = kLayouts[start % 3];
    c.withLse = start % 4 != 3;
    c.dtype = start % 2 ? DType::bfloat16 : DType::float16;
    c.scheduleSeed = l.scheduleSeed;
    c.start = start++;
    const bool shared = !l.knobs.empty() && l.knobs.front().first == FFPA_POLICY_HOPPER_KV_MULTICAST;
    if (l.shape.dim_v > 64) {
      runNaming(c, "key_splits=", l.splits, [shared](const AttentionCase& one) {
        ForwardOutcome out = runSm90(one, false, nanPastKeyLengths(one.shape), -1, -1, 0);
        CHECK_MESSAGE(out.kernel.find(".row_split") == std::string::npos, out.kernel);
        CHECK_MESSAGE((out.kernel.find(".kv2") != std::string::npos) == shared, out.kernel);
        return out;
      });
    }
    if (shared || l.shape.dim_v > ffpa::sm90::kRowSplitMaxHeadDimV) continue;
    const bool wide = ffpa::sm90::rowSplitWideKeysServe(forwardTensors(c).problem);
    for (const int keys : {ffpa::sm90::kRowSplitWideKeys, ffpa::sm90::kKeys}) {
      if (keys != ffpa::sm90::kKeys && !wide) continue;
      runNaming(c, "keys=" + std::to_string(keys), true, [keys](const AttentionCase& one) {
        return runSm90(one, false, nanPastKeyLengths(one.shape), -1, -1, 1, -1, keys);
      });
    }
  }
}

TEST_CASE("sm90 forward with attention slices: packed batches, shared prefixes, windows, uncovered rows and keys") {
  // The cases of the mma.sync kernels' slice tests that the Hopper forward serves (d_v > 64):
  // row tiles shorter than 64 at segment ends, key walks from keys that are no multiple of 64,
  // keys past the slices' extent and between them, one slice kind after another.
  int run = 0;
  for (const AttentionCase& c : sliceCases()) {
    if (c.shape.dim_v < ffpa::sm90::kMinForwardHeadDimV) continue;
    runAndCheckSm90(c);
    ++run;
  }
  CHECK(run == 5);

  AttentionCase packed;
  packed.shape = problem(1, 2, 1, 300, 300, 384, 384, CausalMask::none);
  packed.shape.slices = documentsWithPrefix();
  packed.dtype = DType::bfloat16;
  packed.start = 1020;
  packed.scheduleSeed = 3;  // warpgroups interleaved
  runAndCheckSm90(packed, true);
  AttentionCase clustered;  // clusters of two
  clustered.shape = problem(2, 1, 1, 210, 200, 640, 640, CausalMask::none);
  clustered.shape.slices = bandsAndDiagonal();
  clustered.dtype = DType::float16;
  clustered.start = 1021;
  runAndCheckSm90(clustered);
  clustered.scheduleSeed = 4;
  clustered.start = 1022;
  runAndCheckSm90(clustered);
  AttentionCase tall;
  tall.shape = problem(1, 2, 1, 200, 120, 512, 512, CausalMask::none);
  tall.shape.slices = tallSlices();
  tall.dtype = DType::bfloat16;
  tall.start = 1023;
  runAndCheckSm90(tall);
}

TEST_SUITE_END();
