#include "backward_runner.h"

#include "common/error_metrics.h"
#include "common/random.h"
#include "emulated_kernels.h"
#include "sm80/backward_resolve.h"
#include "sm80/backward_variant.h"
#include "core/slice_table.h"

#include <doctest/doctest.h>

#include <cstring>
#include <memory>
#include <stdexcept>

namespace emulation_test {
namespace {

using ffpa_tools::DType;
using ffpa_tools::HostTensor;

ffpa::emulation::Buffer bufferOf(const HostTensor& tensor) { return {tensor.data(), tensor.size_bytes()}; }

// Rows of dimension 2 of `tensor` (row `row` of batch entry `b`) for which `selected(b, row)`
// holds that are not all zero.
template <class Selected>
int64_t nonzeroRows(const HostTensor& tensor, Selected selected) {
  const auto& l = tensor.layout();
  int64_t count = 0;
  for (int64_t b = 0; b < l.dims[0]; ++b) {
    for (int64_t h = 0; h < l.dims[1]; ++h) {
      for (int64_t row = 0; row < l.dims[2]; ++row) {
        if (!selected(b, row)) continue;
        bool nonzero = false;
        for (int64_t column = 0; column < l.dims[3]; ++column) nonzero = nonzero || tensor.get(b, h, row, column) != 0.0;
        count += nonzero;
      }
    }
  }
  return count;
}

}  // namespace

BackwardOutcome runBackward(const AttentionCase& c, GradientRun queryGradient, GradientRun keyGradient) {
  const ffpa_tools::AttentionProblem& s = c.shape;
  HostTensor q = queryTensor(c, s.dim_qk), k = keyTensor(c, s.dim_qk), v = keyTensor(c, s.dim_v);
  HostTensor dO = queryTensor(c, s.dim_v), o = queryTensor(c, s.dim_v), lse = lseTensor(c);
  ffpa_tools::Random random(c.start);
  q.fill_uniform(random, -2.0, 2.0);
  k.fill_uniform(random, -2.0, 2.0);
  v.fill_uniform(random, -1.0, 1.0);
  dO.fill_uniform(random, -1.0, 1.0);
  // FFPA_ATTENTION_KEY_LENGTHS: NaN past each count (float64 attention reads none of it), and the
  // counts in a buffer of their own, as on the device.
  nanPastKeyCounts(s, k, v);
  std::vector<int32_t> keyLengths(s.key_lengths.begin(), s.key_lengths.end());
  const ffpa::emulation::Buffer counts(keyLengths.data(), keyLengths.size() * sizeof(int32_t));

  // O and LSE as a forward returns them: float64 attention rounded to the output types.
  ffpa::AttentionProblem problem = libraryProblem(c, ffpa::Direction::Backward);
  if (!keyLengths.empty()) problem.keyLengths = keyLengths.data();
  // The case's slices as the library holds them, read by the emulated kernels from the host.
  const std::unique_ptr<ffpa::slices::SliceTable> table = sliceTableOf(c);
  if (table) problem.slices = table.get();
  ffpa_tools::AttentionProblem exact = s;
  exact.scale = problem.scale;
  const std::vector<double> qs = q.to_dense(), ks = k.to_dense(), vs = v.to_dense(), dOs = dO.to_dense();
  std::vector<double> exactO, exactLse;
  ffpa_tools::attention_forward(exact, qs, ks, vs, &exactO, &exactLse);
  o.poison();
  lse.poison();
  o.from_dense(exactO);
  lse.from_dense(exactLse);

  BackwardOutcome out;
  out.dq = queryTensor(c, s.dim_qk);
  out.dk = keyTensor(c, s.dim_qk);
  out.dv = keyTensor(c, s.dim_v);
  out.dq.poison();
  out.dk.poison();
  out.dv.poison();

  problem.q = stridesOf(q);
  problem.k = stridesOf(k);
  problem.v = stridesOf(v);
  problem.o = stridesOf(o);
  problem.lse = stridesOf(lse);
  problem.dO = stridesOf(dO);
  problem.dq = stridesOf(out.dq);
  problem.dk = stridesOf(out.dk);
  problem.dv = stridesOf(out.dv);
  const ffpa::Policy policy = policyOf(c);
  const ffpa::DeviceInfo device = deviceOf(c);
  const ffpa::PlanRequest request{problem, policy, device, nullptr,
                                  c.launchConfig.empty() ? nullptr : &c.launchConfig};
  const ffpa::sm80::BackwardResolution resolution = ffpa::sm80::resolveBackward(request);
  if (!resolution.launch) {
    throw std::runtime_error("the planner refused the problem: " + resolution.refusal.reason);
  }
  const ffpa::sm80::BackwardLaunch& launch = *resolution.launch;
  out.kernel = ffpa::sm80::backwardInstanceName(*launch.instance);
  out.config = ffpa::sm80::describeBackwardConfig(launch);
  const EmulatedBackwardInstance* twin = emulatedTwin(*launch.instance);
  if (twin == nullptr) throw std::runtime_error("no emulated instance of " + out.kernel);

  // The workspace, poisoned: a statistic read before it is written is NaN.
  std::vector<float> rowStats(launch.workspaceBytes / sizeof(float));
  std::memset(rowStats.data(), 0xFF, launch.workspaceBytes);
  ffpa::TensorArgs tensors;
  tensors.q = q.data();
  tensors.k = k.data();
  tensors.v = v.data();
  tensors.o = o.data();
  tensors.dO = dO.data();
  tensors.lse = static_cast<const float*>(lse.data());
  tensors.dq = out.dq.data();
  tensors.dk = out.dk.data();
  tensors.dv = out.dv.data();
  if (table) tensors.slices = table->hostView();
  const ffpa::sm80::BackwardParams params =
      ffpa::sm80::backwardCallParams(launch, problem, tensors, rowStats.data());
  const ffpa::sm80::BackwardGrids grids = ffpa::sm80::backwardCallGrids(launch, problem, params);
  const ffpa::emulation::Buffer stats(rowStats.data(), launch.workspaceBytes);
  const std::vector<uint8_t> inputs[] = {bytesOf(q), bytesOf(k), bytesOf(v), bytesOf(o), bytesOf(dO), bytesOf(lse)};

  // Each kernel is given only the buffers it may read by cp.async or write.
  auto dims = [](const uint32_t (&grid)[3]) {
    return ffpa::emulation::Dim3{static_cast<int>(grid[0]), static_cast<int>(grid[1]), static_cast<int>(grid[2])};
  };
  using ffpa::emulation::scheduled;
  twin->rowStats(scheduled({{static_cast<int>(launch.rowStatsGrid), 1, 1}, 32 * ffpa::sm80::kRowStatsWarps, 0, {stats}},
                           c.scheduleSeed),
                 params);
  if (queryGradient != nullptr) {
    out.kernel = queryGradient(problem, tensors, rowStats.data(),
                               {bufferOf(q), bufferOf(k), bufferOf(v), bufferOf(dO), bufferOf(out.dq), stats},
                               c.scheduleSeed) +
                 " with " + out.kernel;
  } else {
    twin->queryGradient(scheduled({dims(grids.query), launch.queryShape.threads(), params.queryLayout.sharedBytes,
                                   {bufferOf(q), bufferOf(k), bufferOf(v), bufferOf(dO), bufferOf(out.dq), counts}},
                                  c.scheduleSeed),
                        params);
  }
  if (keyGradient != nullptr) {
    out.kernel = keyGradient(problem, tensors, rowStats.data(),
                             {bufferOf(q), bufferOf(k), bufferOf(v), bufferOf(dO), bufferOf(out.dk), bufferOf(out.dv),
                              stats},
                             c.scheduleSeed) +
                 " with " + out.kernel;
  } else {
    twin->keyGradient(scheduled({dims(grids.key), launch.keyShape.threads(), params.keyLayout.sharedBytes,
                                 {bufferOf(q), bufferOf(k), bufferOf(v), bufferOf(dO), bufferOf(out.dk), bufferOf(out.dv),
                                  counts}},
                                c.scheduleSeed),
                      params);
  }
  const std::vector<uint8_t> after[] = {bytesOf(q), bytesOf(k), bytesOf(v), bytesOf(o), bytesOf(dO), bytesOf(lse)};
  for (int i = 0; i < 6; ++i) {
    if (inputs[i] != after[i]) throw std::runtime_error(out.kernel + " wrote into its inputs");
  }

  ffpa_tools::attention_backward(exact, qs, ks, vs, dOs, nullptr, &out.exact[0], &out.exact[1], &out.exact[2]);
  const std::vector<double> givenO = o.to_dense();
  ffpa_tools::attention_backward(exact, qs, ks, vs, dOs, &givenO, &out.fromGivenO[0], &out.fromGivenO[1],
                                 &out.fromGivenO[2]);
  return out;
}

void checkBackward(const AttentionCase& c, const BackwardOutcome& outcome) {
  const std::string context = c.toString() + "\n  " + outcome.kernel + " " + outcome.config;
  const std::string names[] = {"dQ", "dK", "dV"};
  const HostTensor* actual[] = {&outcome.dq, &outcome.dk, &outcome.dv};
  for (int i = 0; i < 3; ++i) {
    const double baseline = ffpa_tools::rounding_error(outcome.exact[i], c.dtype).rel_l2 +
                            ffpa_tools::compare(outcome.fromGivenO[i], outcome.exact[i]).rel_l2;
    const double allowed = ffpa_tools::allowed_relative_error(c.dtype, ffpa_tools::Pass::backward, baseline);
    const ffpa_tools::ErrorStats error = ffpa_tools::compare(actual[i]->to_dense(), outcome.exact[i]);
    CHECK_MESSAGE(error.rel_l2 <= allowed, context << "\n  " << names[i] << ": " << error.to_string()
                                                   << "; allowed rel L2 " << allowed);
    CHECK_MESSAGE(actual[i]->gaps_untouched(), context << "\n  " << names[i] << ": layout gaps were written");
  }
  const ffpa_tools::AttentionProblem& s = c.shape;
  const auto unseen = [&](int64_t b, int64_t key) { return s.seen_by_no_query(key, b); };
  CHECK_MESSAGE(nonzeroRows(outcome.dq, [&](int64_t b, int64_t row) { return s.sees_no_key(row, b); }) == 0,
                context << "\n  dQ of a query that sees no key must be exactly 0");
  CHECK_MESSAGE(nonzeroRows(outcome.dk, unseen) == 0, context << "\n  dK of a key no query sees must be exactly 0");
  CHECK_MESSAGE(nonzeroRows(outcome.dv, unseen) == 0, context << "\n  dV of a key no query sees must be exactly 0");
}

void runAndCheckBackward(const AttentionCase& c, GradientRun queryGradient, GradientRun keyGradient) {
  try {
    checkBackward(c, runBackward(c, queryGradient, keyGradient));
  } catch (const std::exception& e) {
    FAIL_CHECK(c.toString() << "\n  " << std::string(e.what()));
  }
}

}  // namespace emulation_test
