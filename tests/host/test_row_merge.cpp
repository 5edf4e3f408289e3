// The merge arithmetic the kernel runs (src/merge/row_merge.h), held to float64 on the host:
// splitting a row's keys any way and merging the parts gives attention over all the keys.
#include "merge/merge_call.h"
#include "merge/row_merge.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

namespace {

using ffpa::merge::RowTotals;

constexpr double kInf = std::numeric_limits<double>::infinity();

struct Part {
  float lse = -INFINITY;
  std::vector<float> o;
};

// Attention of one query row over the keys `keys` (scores s, values v rows of width d), in
// float64, rounded to float as a kernel would store it. No keys: LSE -inf and O left NaN (a part
// without keys must not be read).
Part attend(const std::vector<double>& s, const std::vector<std::vector<double>>& v,
            const std::vector<size_t>& keys, size_t d) {
  Part part;
  part.o.assign(d, std::numeric_limits<float>::quiet_NaN());
  if (keys.empty()) return part;
  double m = -kInf;
  for (size_t j : keys) m = std::max(m, s[j]);
  double sum = 0.0;
  std::vector<double> acc(d, 0.0);
  for (size_t j : keys) {
    const double p = std::exp(s[j] - m);
    sum += p;
    for (size_t c = 0; c < d; ++c) acc[c] += p * v[j][c];
  }
  part.lse = static_cast<float>(m + std::log(sum));
  for (size_t c = 0; c < d; ++c) part.o[c] = static_cast<float>(acc[c] / sum);
  return part;
}

// The kernel's loop for one row, on the host: weights from the shared arithmetic, parts without
// keys skipped, fp32 sums.
Part merge(const std::vector<Part>& parts, size_t d) {
  const int count = static_cast<int>(parts.size());
  const RowTotals totals = ffpa::merge::rowTotals(count, [&](int i) { return parts[i].lse; });
  Part merged;
  merged.lse = ffpa::merge::mergedLse(totals);
  merged.o.assign(d, 0.0f);
  for (const Part& part : parts) {
    if (part.lse == -INFINITY) continue;
    const float weight = ffpa::merge::partWeight(part.lse, totals);
    for (size_t c = 0; c < d; ++c) merged.o[c] += weight * part.o[c];
  }
  return merged;
}

}  // namespace

TEST_CASE("merge arithmetic: any split of the keys merges into attention over all of them") {
  std::mt19937_64 rng(20261124);
  constexpr size_t kDim = 8;
  for (int trial = 0; trial < 400; ++trial) {
    const size_t keys = 1 + rng() % 300;
    const int count = 1 + static_cast<int>(rng() % ffpa::kMaxMergePartials);
    // Scores of a wide range (peaked and flat softmaxes, parts far apart in LSE).
    const double spread = trial % 4 == 0 ? 80.0 : 8.0;
    std::uniform_real_distribution<double> score(-spread, spread), value(-1.0, 1.0);
    std::vector<double> s(keys);
    std::vector<std::vector<double>> v(keys, std::vector<double>(kDim));
    for (size_t j = 0; j < keys; ++j) {
      s[j] = score(rng);
      for (double& x : v[j]) x = value(rng);
    }
    // Each key to a random part (parts may get no key); contiguous chunks every other trial.
    std::vector<std::vector<size_t>> owned(count);
    for (size_t j = 0; j < keys; ++j) {
      const size_t part = trial % 2 ? rng() % count : j * count / keys;
      owned[part].push_back(j);
    }
    std::vector<Part> parts;
    for (const auto& k : owned) parts.push_back(attend(s, v, k, kDim));
    std::vector<size_t> all(keys);
    for (size_t j = 0; j < keys; ++j) all[j] = j;
    const Part whole = attend(s, v, all, kDim);
    const Part merged = merge(parts, kDim);

    CAPTURE(trial);
    CAPTURE(count);
    CHECK(std::abs(merged.lse - whole.lse) <= 2e-6 * (1.0 + std::abs(whole.lse)));
    for (size_t c = 0; c < kDim; ++c) {
      REQUIRE(std::isfinite(merged.o[c]));
      CHECK(std::abs(merged.o[c] - whole.o[c]) <= 1e-6 * count + 1e-6);
    }
  }
}

TEST_CASE("merge arithmetic: parts without keys, NaN and infinity") {
  const auto totals = [](std::vector<float> lse) {
    return ffpa::merge::rowTotals(static_cast<int>(lse.size()), [&](int i) { return lse[i]; });
  };
  SUBCASE("one part is copied exactly") {
    const RowTotals t = totals({-3.25f});
    CHECK(ffpa::merge::mergedLse(t) == -3.25f);
    CHECK(ffpa::merge::partWeight(-3.25f, t) == 1.0f);
  }
  SUBCASE("a row no part sees: LSE -inf, every weight exactly 0") {
    const RowTotals t = totals({-INFINITY, -INFINITY, -INFINITY});
    CHECK(ffpa::merge::mergedLse(t) == -INFINITY);
    CHECK(ffpa::merge::partWeight(-INFINITY, t) == 0.0f);
  }
  SUBCASE("a part without keys weighs exactly 0 beside others") {
    const RowTotals t = totals({1.0f, -INFINITY, 1.0f});
    CHECK(ffpa::merge::partWeight(-INFINITY, t) == 0.0f);
    CHECK(ffpa::merge::partWeight(1.0f, t) == 0.5f);
    CHECK(ffpa::merge::mergedLse(t) == doctest::Approx(1.0 + std::log(2.0)).epsilon(1e-7));
  }
  SUBCASE("a part far below the others underflows to weight 0, never NaN") {
    const RowTotals t = totals({80.0f, -80.0f});
    CHECK(ffpa::merge::partWeight(-80.0f, t) == 0.0f);
    CHECK(ffpa::merge::partWeight(80.0f, t) == 1.0f);
    CHECK(ffpa::merge::mergedLse(t) == 80.0f);
  }
  SUBCASE("NaN anywhere makes the row NaN, whatever its place") {
    for (const std::vector<float>& lse : {std::vector<float>{NAN, 1.0f, 2.0f}, {1.0f, NAN, 2.0f},
                                          {1.0f, 2.0f, NAN}, {-INFINITY, NAN}}) {
      const RowTotals t = totals(lse);
      CHECK(std::isnan(ffpa::merge::mergedLse(t)));
      CHECK(std::isnan(ffpa::merge::partWeight(NAN, t)));
      CHECK(std::isnan(ffpa::merge::partWeight(lse.back() == 2.0f ? 2.0f : NAN, t)));
    }
  }
  SUBCASE("+infinity is not a log-sum-exp: the row is NaN") {
    const RowTotals t = totals({INFINITY, 0.0f});
    CHECK(std::isnan(ffpa::merge::mergedLse(t)));
    CHECK(std::isnan(ffpa::merge::partWeight(INFINITY, t)));
  }
}

TEST_CASE("merge arithmetic: a sink is one more part without a value") {
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> logit(-30.0, 30.0);
  for (int trial = 0; trial < 200; ++trial) {
    const float lse = trial % 10 == 0 ? -INFINITY : static_cast<float>(logit(rng));  // a row without keys
    const float sink = static_cast<float>(logit(rng));
    const float parts[2] = {lse, sink};
    const RowTotals t = ffpa::merge::rowTotals(2, [&](int i) { return parts[i]; });
    // LSE' = log(exp(LSE) + exp(s)) and O' = exp(LSE - LSE') O, in float64.
    const double expected = lse == -INFINITY ? sink : std::max<double>(lse, sink) +
                                                          std::log1p(std::exp(-std::abs(double(lse) - sink)));
    CAPTURE(trial);
    CHECK(std::abs(ffpa::merge::mergedLse(t) - expected) <= 1e-6 * (1.0 + std::abs(expected)));
    const double scale = lse == -INFINITY ? 0.0 : std::exp(double(lse) - expected);
    CHECK(std::abs(ffpa::merge::partWeight(lse, t) - scale) <= 1e-6);
  }
}

TEST_CASE("merge: 4-element accesses only where D, every row stride and every pointer allow") {
  ffpa::MergeProblem p;
  p.count = 2;
  p.partialType = FFPA_DATA_TYPE_BFLOAT16;
  p.outType = FFPA_DATA_TYPE_FLOAT32;
  p.batch = 2, p.heads = 4, p.seq = 100, p.headDim = 512;
  p.partialO = {4 * 100 * 512, 100 * 512, 512, 1};
  p.o = p.partialO;
  ffpa::MergeTensors t;
  t.partialO = {reinterpret_cast<const void*>(0x10000), reinterpret_cast<const void*>(0x20008)};
  t.o = reinterpret_cast<void*>(0x30010);
  CHECK(ffpa::mergeVectorizes(p, t));

  ffpa::MergeProblem oddDim = p;
  oddDim.headDim = 510;
  CHECK_FALSE(ffpa::mergeVectorizes(oddDim, t));
  ffpa::MergeProblem oddStride = p;
  oddStride.o[2] = 514;  // padded rows of 514 elements
  CHECK_FALSE(ffpa::mergeVectorizes(oddStride, t));
  ffpa::MergeTensors oddPartial = t;
  oddPartial.partialO[1] = reinterpret_cast<const void*>(0x20004);  // 2 bf16 off an 8-byte boundary
  CHECK_FALSE(ffpa::mergeVectorizes(p, oddPartial));
  ffpa::MergeTensors oddOut = t;
  oddOut.o = reinterpret_cast<void*>(0x30008);  // fp32 output: 16-byte accesses
  CHECK_FALSE(ffpa::mergeVectorizes(p, oddOut));
  ffpa::MergeTensors ignoredSlot = t;
  ignoredSlot.partialO[2] = reinterpret_cast<const void*>(0x2);  // beyond count: never read
  CHECK(ffpa::mergeVectorizes(p, ignoredSlot));
}
