#include "forward_runner.h"

#include "case_matrix.h"
#include "common/error_metrics.h"
#include "common/half_precision.h"
#include "common/random.h"
#include "core/kernel_registry.h"
#include "core/query_rows.h"
#include "core/slice_table.h"
#include "merge/row_merge.h"
#include "emulated_kernels.h"
#include "sm80/forward_resolve.h"
#include "sm80/forward_variant.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <utility>

namespace emulation_test {
namespace {

using ffpa_tools::DType;
using ffpa_tools::HostTensor;

// The bounds, derived in tests/device/forward_kernels_test.cpp: with fp32 accumulators O within
// max(2 x what rounding the exact O costs, u) in relative L2 and 4u per element; with fp16
// accumulators 2e-2 in relative L2; LSE within max(1e-4, 1e-4 |LSE|), or 6e-2 absolute when the
// scores are accumulated in fp16.
constexpr double kHalfAccumulatorRelL2 = 2e-2;
constexpr double kLseRelative = 1e-4;
constexpr double kHalfScoreLseAbsolute = 6e-2;

}  // namespace

ForwardTensors forwardTensors(const AttentionCase& c) {
  const ffpa_tools::AttentionProblem& s = c.shape;
  ForwardTensors t{queryTensor(c, s.dim_qk), keyTensor(c, s.dim_qk), keyTensor(c, s.dim_v),
                   queryTensor(c, s.dim_v), lseTensor(c), libraryProblem(c, ffpa::Direction::Forward), {}};
  ffpa_tools::Random random(c.start);
  t.q.fill_uniform(random, -2.0, 2.0);  // Q and K in [-2, 2): a peaked softmax, as on the GPU
  t.k.fill_uniform(random, -2.0, 2.0);
  t.v.fill_uniform(random, -1.0, 1.0);
  t.o.poison();
  t.lse.poison();
  t.problem.q = stridesOf(t.q);
  t.problem.k = stridesOf(t.k);
  t.problem.v = stridesOf(t.v);
  t.problem.o = stridesOf(t.o);
  t.problem.lse = stridesOf(t.lse);
  t.keyLengths.assign(s.key_lengths.begin(), s.key_lengths.end());
  if (!t.keyLengths.empty()) t.problem.keyLengths = t.keyLengths.data();
  return t;
}

void finishOutcome(const AttentionCase& c, ForwardTensors& t, ForwardOutcome& out) {
  ffpa_tools::AttentionProblem exact = c.shape;
  exact.scale = t.problem.scale;
  ffpa_tools::attention_forward(exact, t.q.to_dense(), t.k.to_dense(), t.v.to_dense(), &out.expectedO,
                                &out.expectedLse);
  out.o = std::move(t.o);
  out.lse = std::move(t.lse);
}

void mergeKeySplits(const ffpa::KeySplitPlan& split, const ffpa::AttentionProblem& planned, void* workspace,
                    HostTensor& o, HostTensor& lse, bool withLse) {
  // The merge the library enqueues, its rows computed by the kernel's own arithmetic.
  const ffpa::KeySplitMerge call =
      ffpa::keySplitMerge(split, planned, workspace, o.data(), withLse ? static_cast<float*>(lse.data()) : nullptr);
  const ffpa::MergeProblem& m = call.problem;
  REQUIRE(m.partialType == FFPA_DATA_TYPE_FLOAT32);
  REQUIRE(m.hasLse == (withLse && planned.hasLse));
  const auto at = [](const ffpa::Strides& s, int64_t b, int64_t h, int64_t n) {
    return b * s[0] + h * s[1] + n * s[2];
  };
  for (int64_t b = 0; b < m.batch; ++b) {
    for (int64_t h = 0; h < m.heads; ++h) {
      for (int64_t n = 0; n < m.seq; ++n) {
        const auto lseAt = [&](int i) { return call.tensors.partialLse[i][at(m.partialLse, b, h, n)]; };
        const ffpa::merge::RowTotals totals = ffpa::merge::rowTotals(m.count, lseAt);
        for (int64_t d = 0; d < m.headDim; ++d) {
          float value = 0.0f;
          for (int i = 0; i < m.count; ++i) {
            const float weight = ffpa::merge::partWeight(lseAt(i), totals);
            if (weight == 0.0f) continue;  // a part without keys: its O is not read
            value += weight * static_cast<const float*>(call.tensors.partialO[i])[at(m.partialO, b, h, n) + d];
          }
          uint16_t* out = static_cast<uint16_t*>(call.tensors.o) + at(m.o, b, h, n) + d;
          *out = m.outType == FFPA_DATA_TYPE_BFLOAT16 ? ffpa_tools::float_to_bfloat16_bits(value)
                                                      : ffpa_tools::float_to_half_bits(value);
        }
        if (m.hasLse) call.tensors.lse[at(m.lse, b, h, n)] = ffpa::merge::mergedLse(totals);
      }
    }
  }
}

ffpa::AttentionProblem plannedProblem(const AttentionCase& c, const ffpa::AttentionProblem& problem, bool* merged) {
  const std::optional<ffpa::QueryHeadsAsRows> rows =
      policyOf(c).flag(FFPA_POLICY_QUERY_HEADS_AS_ROWS) ? ffpa::queryHeadsAsRows(problem) : std::nullopt;
  if (merged) *merged = rows.has_value();
  return rows ? rows->problem : problem;
}

ForwardOutcome runForward(const AttentionCase& c, const InputEdit& edit) {
  ForwardTensors t = forwardTensors(c);
  if (edit) edit(t);
  HostTensor &q = t.q, &k = t.k, &v = t.v;
  // The case's slices as the library holds them, read by the emulated kernel from the host.
  const std::unique_ptr<ffpa::slices::SliceTable> table = sliceTableOf(c);
  if (table) t.problem.slices = table.get();
  bool merged = false;
  const ffpa::AttentionProblem problem = plannedProblem(c, t.problem, &merged);
  ForwardOutcome out;
  const ffpa::Policy policy = policyOf(c);
  const ffpa::DeviceInfo device = deviceOf(c);
  const ffpa::PlanRequest request{problem, policy, device, nullptr,
                                  c.launchConfig.empty() ? nullptr : &c.launchConfig};
  const ffpa::sm80::ForwardResolution resolution = ffpa::sm80::resolveForward(request);
  if (!resolution.launch) {
    throw std::runtime_error("the planner refused the problem: " + resolution.refusal.reason);
  }
  const ffpa::sm80::ForwardLaunch& launch = *resolution.launch;
  out.kernel = ffpa::sm80::instanceName(*launch.instance);
  out.config = ffpa::sm80::describeForwardConfig(launch) + (merged ? " query_heads_as_rows" : "");
  const EmulatedForwardInstance* twin = emulatedTwin(*launch.instance);
  if (twin == nullptr) throw std::runtime_error("no emulated instance of " + out.kernel);

  ffpa::TensorArgs tensors;
  tensors.q = q.data();
  tensors.k = k.data();
  tensors.v = v.data();
  tensors.out = t.o.data();
  tensors.lseOut = static_cast<float*>(t.lse.data());
  if (table) tensors.slices = table->hostView();
  // Split-KV: the partial results in a workspace of the plan's size, merged on the host below.
  std::vector<float> workspace(launch.split.bytes / sizeof(float));
  const ffpa::sm80::ForwardParams params = ffpa::sm80::forwardCallParams(launch, problem, tensors, workspace.data());
  uint32_t grid[3];
  ffpa::sm80::forwardCallGrid(launch, problem, params, grid);
  ffpa::emulation::Config config(
      {static_cast<int>(grid[0]), static_cast<int>(grid[1]), static_cast<int>(grid[2])},
      launch.shape.threads(), params.sharedBytes,
      {{q.data(), q.size_bytes()},
       {k.data(), k.size_bytes()},
       {v.data(), v.size_bytes()},
       {t.o.data(), t.o.size_bytes()},
       {t.lse.data(), t.lse.size_bytes()},
       {workspace.data(), workspace.size() * sizeof(float)},
       {t.keyLengths.data(), t.keyLengths.size() * sizeof(int32_t)}});
  config.scheduleSeed = c.scheduleSeed;
  const std::vector<uint8_t> inputs[] = {bytesOf(q), bytesOf(k), bytesOf(v)};
  twin->run(config, params);
  if (launch.split.splits > 1) mergeKeySplits(launch.split, problem, workspace.data(), t.o, t.lse, c.withLse);
  if (inputs[0] != bytesOf(q) || inputs[1] != bytesOf(k) || inputs[2] != bytesOf(v)) {
    throw std::runtime_error(out.kernel + " wrote into its inputs");
  }

  finishOutcome(c, t, out);
  return out;
}

void runMergeCase(const MergeCase& m, uint64_t start, bool knobOn,
                  const std::function<ForwardOutcome(const AttentionCase&)>& run) {
  AttentionCase c;
  c.shape = problem(m.batch, m.headsQ, m.headsKv, m.seqQ, m.seqKv, m.dimQk, m.dimV, m.mask);
  c.layout = m.layout;
  c.withLse = m.withLse;
  c.dtype = start % 2 ? DType::bfloat16 : DType::float16;
  c.start = start;
  if (!knobOn) c.knobs = {{FFPA_POLICY_QUERY_HEADS_AS_ROWS, 0}};
  runNaming(c, "query_heads_as_rows", knobOn && m.merges, run);
}

void runNaming(const AttentionCase& c, const std::string& part, bool named,
               const std::function<ForwardOutcome(const AttentionCase&)>& run) {
  try {
    const ForwardOutcome outcome = run(c);
    CHECK_MESSAGE((outcome.config.find(part) != std::string::npos) == named, c.toString() << "\n  " << outcome.config);
    checkForward(c, outcome);
  } catch (const std::exception& e) {
    FAIL_CHECK(c.toString() << "\n  " << std::string(e.what()));
  }
}

InputEdit nanInQueryRow(int64_t head, int64_t row) {
  return [=](ForwardTensors& t) {
    t.q.set(0, head, row, t.q.layout().dims[3] / 2, std::numeric_limits<double>::quiet_NaN());
    for (int64_t d = 0; d < t.o.layout().dims[3]; ++d) t.o.set(0, head, row, d, 7.0);
    t.lse.set(0, head, row, 0, 7.0);
  };
}

InputEdit nanPastKeyLengths(const ffpa_tools::AttentionProblem& shape) {
  return [shape](ForwardTensors& t) { nanPastKeyCounts(shape, t.k, t.v); };
}

void checkNanRow(const AttentionCase& c, const ForwardOutcome& outcome, int64_t head, int64_t row) {
  const std::string context = c.toString() + "\n  " + outcome.kernel;
  const int64_t* dims = outcome.o.layout().dims;
  int64_t wrong = 0;
  for (int64_t b = 0; b < dims[0]; ++b) {
    for (int64_t h = 0; h < dims[1]; ++h) {
      for (int64_t n = 0; n < dims[2]; ++n) {
        const bool poisoned = b == 0 && h == head && n == row;
        for (int64_t d = 0; d < dims[3]; ++d) {
          if (std::isnan(outcome.o.get(b, h, n, d)) != poisoned) ++wrong;
        }
        if (c.withLse && std::isnan(outcome.lse.get(b, h, n)) != poisoned) {
          FAIL_CHECK(context << "\n  LSE of (b=" << b << ", h=" << h << ", row=" << n << ") is "
                             << outcome.lse.get(b, h, n) << std::string(poisoned ? ", not NaN" : ""));
        }
      }
    }
  }
  CHECK_MESSAGE(wrong == 0, context << "\n  " << wrong << " elements of O are NaN outside row " << row
                                    << " of head " << head << ", or finite inside it");
}

void checkForward(const AttentionCase& c, const ForwardOutcome& outcome) {
  const std::string context = c.toString() + "\n  " + outcome.kernel + " " + outcome.config;
  const ffpaAccumulator_t accumulator = accumulatorOf(c);
  const double u = ffpa_tools::unit_roundoff(c.dtype);

  const std::vector<double> o = outcome.o.to_dense();
  const ffpa_tools::ErrorStats error = ffpa_tools::compare(o, outcome.expectedO);
  if (accumulator == FFPA_ACCUMULATOR_F32) {
    const double rounding = ffpa_tools::rounding_error(outcome.expectedO, c.dtype).rel_l2;
    const double allowed = std::max(2.0 * rounding, u);
    CHECK_MESSAGE(error.rel_l2 <= allowed, context << "\n  O: " << error.to_string()
                                                   << "; allowed rel L2 " << allowed);
    CHECK_MESSAGE(error.max_abs <= 4.0 * u, context << "\n  O: " << error.to_string()
                                                    << "; allowed max abs " << 4.0 * u);
  } else {
    CHECK_MESSAGE(error.rel_l2 <= kHalfAccumulatorRelL2,
                  context << "\n  O: " << error.to_string() << "; allowed rel L2 "
                          << kHalfAccumulatorRelL2);
  }

  // Rows that see no key: O exactly 0 (and LSE -inf).
  const ffpa_tools::AttentionProblem& s = c.shape;
  int64_t emptyRowsWrong = 0;
  for (int64_t b = 0; b < s.batch; ++b) {
    for (int64_t h = 0; h < s.heads_q; ++h) {
      for (int64_t row = 0; row < s.seq_q; ++row) {
        if (!s.sees_no_key(row, b)) continue;
        bool wrong = c.withLse && outcome.lse.get(b, h, row) != -std::numeric_limits<double>::infinity();
        for (int64_t column = 0; column < s.dim_v; ++column) {
          wrong = wrong || outcome.o.get(b, h, row, column) != 0.0;
        }
        emptyRowsWrong += wrong;
      }
    }
  }
  CHECK_MESSAGE(emptyRowsWrong == 0,
                context << "\n  " << emptyRowsWrong << " rows that see no key are not O = 0, LSE = -inf");

  if (c.withLse) {
    const bool halfScores = accumulator == FFPA_ACCUMULATOR_QK_F16 || accumulator == FFPA_ACCUMULATOR_F16;
    const std::vector<double> lse = outcome.lse.to_dense();
    int64_t wrong = 0;
    double worst = 0.0;
    for (size_t i = 0; i < lse.size(); ++i) {
      const double expected = outcome.expectedLse[i];
      if (std::isinf(expected)) continue;  // checked above
      const double allowed = halfScores ? kHalfScoreLseAbsolute
                                        : std::max(kLseRelative, kLseRelative * std::fabs(expected));
      const double difference = std::fabs(lse[i] - expected);
      if (!(difference <= allowed)) ++wrong;  // NaN is wrong
      worst = std::max(worst, std::isnan(difference) ? INFINITY : difference);
    }
    CHECK_MESSAGE(wrong == 0, context << "\n  LSE: " << wrong << " of " << lse.size()
                                      << " values off; worst difference " << worst);
  } else {
    CHECK_MESSAGE(allPoison(outcome.lse),
                  context << "\n  the LSE buffer was written though no LSE was asked for");
  }
  CHECK_MESSAGE(outcome.o.gaps_untouched(), context << "\n  O: the gaps of its layout were written");
  CHECK_MESSAGE(outcome.lse.gaps_untouched(), context << "\n  LSE: the gaps of its layout were written");
}

void runAndCheckForward(const AttentionCase& c) {
  try {
    checkForward(c, runForward(c));
  } catch (const std::exception& e) {
    FAIL_CHECK(c.toString() << "\n  " << std::string(e.what()));
  }
}

}  // namespace emulation_test
