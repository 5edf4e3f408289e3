// The context-parallel ring schedule against brute force: over every rank of rings of 1 to 8 ranks,
// both shardings, with and without a causal mask, the blocks of the P steps give every local query
// each key it sees under the global mask exactly once and no other key; the shards partition the
// sequence; and a float64 run of the schedule (each step's blocks as attention over the keys held,
// merged by log-sum-exp with the merge kernel's row arithmetic) equals attention over the whole
// sequence.
#include "core/error.h"
#include "cp/ring_schedule.h"
#include "merge/row_merge.h"

#include <doctest/doctest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

using namespace ffpa::cp;

namespace {

bool blockSees(const Block& b, int64_t row, int64_t key) {
  if (row < b.queries.begin || row >= b.queries.end || key < b.keys.begin || key >= b.keys.end) return false;
  return !b.causal || key - b.keys.begin <= row - b.queries.begin + b.keys.size() - b.queries.size();
}

struct Case {
  int32_t ranks;
  Sharding sharding;
  bool causal;
  int64_t n;
};

std::vector<Case> cases() {
  std::vector<Case> all;
  for (int32_t p = 1; p <= 8; ++p)
    for (Sharding sharding : {Sharding::Contiguous, Sharding::Zigzag})
      for (bool causal : {false, true})
        for (int64_t n : {2, 4, 6}) all.push_back({p, sharding, causal, n});
  return all;
}

std::string name(const Case& c) {
  return std::string(shardingName(c.sharding)) + (c.causal ? " causal" : " full") +
         " P=" + std::to_string(c.ranks) + " n=" + std::to_string(c.n);
}

}  // namespace

TEST_CASE("ring schedule: every visible (query, key) pair exactly once, no other") {
  for (const Case& c : cases()) {
    CAPTURE(name(c));
    for (int32_t rank = 0; rank < c.ranks; ++rank) {
      const auto steps = ringSchedule({c.ranks, rank, c.sharding, c.causal, c.n, c.n});
      REQUIRE(steps.size() == static_cast<size_t>(c.ranks));
      const int64_t total = c.n * c.ranks;
      std::vector<int> times(static_cast<size_t>(c.n * total), 0);
      for (int32_t s = 0; s < c.ranks; ++s) {
        const Step& step = steps[s];
        CHECK(step.source == (rank - s + c.ranks) % c.ranks);
        for (size_t a = 0; a < step.blocks.size(); ++a) {
          const Block& b = step.blocks[a];
          CHECK(b.queries.size() > 0);
          CHECK(b.keys.size() > 0);
          CHECK(b.queries.end <= c.n);
          CHECK(b.keys.end <= c.n);
          if (b.causal) CHECK(b.keys.size() >= b.queries.size());  // no query row without keys
          for (size_t o = a + 1; o < step.blocks.size(); ++o) {
            const Block& other = step.blocks[o];
            CHECK((other.queries.begin >= b.queries.end || other.queries.end <= b.queries.begin));
          }
        }
        for (int64_t row = 0; row < c.n; ++row)
          for (int64_t key = 0; key < c.n; ++key)
            for (const Block& b : step.blocks)
              if (blockSees(b, row, key)) {
                ++times[row * total + globalToken(c.sharding, c.ranks, step.source, c.n, key)];
              }
      }
      if (!steps.empty()) {
        int64_t covered = 0;
        for (const Block& b : steps[0].blocks) covered += b.queries.size();
        CHECK(covered == c.n);  // the rank's own block: every row starts the running result
      }
      for (int64_t row = 0; row < c.n; ++row) {
        const int64_t q = globalToken(c.sharding, c.ranks, rank, c.n, row);
        for (int64_t k = 0; k < total; ++k) {
          const int expected = !c.causal || k <= q ? 1 : 0;
          if (times[row * total + k] != expected) {
            FAIL_CHECK("rank " << rank << " query " << q << " key " << k << " seen "
                               << times[row * total + k] << " times, expected " << expected);
          }
        }
      }
    }
  }
}

TEST_CASE("ring schedule: the shards partition the sequence") {
  for (const Case& c : cases()) {
    CAPTURE(name(c));
    std::vector<int> owner(static_cast<size_t>(c.n * c.ranks), 0);
    for (int32_t rank = 0; rank < c.ranks; ++rank) {
      const auto ranges = shardRanges(c.sharding, c.ranks, rank, c.n);
      CHECK(ranges.size() == (c.sharding == Sharding::Zigzag ? 2u : 1u));
      int64_t local = 0;
      for (const RowRange& r : ranges)
        for (int64_t t = r.begin; t < r.end; ++t, ++local) {
          CHECK(globalToken(c.sharding, c.ranks, rank, c.n, local) == t);
          ++owner[t];
        }
      CHECK(local == c.n);
    }
    for (int count : owner) CHECK(count == 1);
  }
}

TEST_CASE("ring schedule: zigzag gives every rank the same causal work") {
  for (int32_t p = 2; p <= 8; ++p) {
    CAPTURE(p);
    int64_t first = -1;
    for (int32_t rank = 0; rank < p; ++rank) {
      int64_t pairs = 0;
      for (const Step& step : ringSchedule({p, rank, Sharding::Zigzag, true, 8, 8}))
        for (const Block& b : step.blocks)
          for (int64_t row = b.queries.begin; row < b.queries.end; ++row)
            for (int64_t key = b.keys.begin; key < b.keys.end; ++key) pairs += blockSees(b, row, key);
      if (first < 0) first = pairs;
      CHECK(pairs == first);
    }
  }
}

TEST_CASE("ring schedule: shapes it refuses, with the reason") {
  const auto failsWith = [](const RingShape& shape, ffpaStatus_t status, const std::string& part) {
    try {
      ringSchedule(shape);
      FAIL_CHECK("accepted");
    } catch (const ffpa::Error& e) {
      CHECK(e.status() == status);
      CHECK_MESSAGE(std::string(e.what()).find(part) != std::string::npos, e.what());
    }
  };
  failsWith({4, 0, Sharding::Contiguous, true, 8, 16}, FFPA_STATUS_BAD_PARAM_SHAPE_MISMATCH,
            "as many local queries as keys (Nq = 8, Nkv = 16)");
  failsWith({4, 1, Sharding::Zigzag, false, 7, 8}, FFPA_STATUS_BAD_PARAM_SHAPE_MISMATCH, "must be even");
  failsWith({4, 4, Sharding::Contiguous, false, 8, 8}, FFPA_STATUS_BAD_PARAM_OUT_OF_BOUND, "rank 4 is outside 0 to 3");
  failsWith({0, 0, Sharding::Contiguous, false, 8, 8}, FFPA_STATUS_BAD_PARAM_OUT_OF_BOUND, "0 ranks");
  // Without a causal mask, Nq and Nkv may differ (cross-attention over a sharded memory).
  CHECK(ringSchedule({4, 2, Sharding::Contiguous, false, 8, 12}).size() == 4);
}

namespace {

// Attention of one query row over some keys, as (O, LSE): what one block of a step computes.
struct Partial {
  std::vector<double> o;
  double lse = -INFINITY;
};

Partial attend(const std::vector<double>& q, const std::vector<std::vector<double>>& keys,
               const std::vector<std::vector<double>>& values) {
  Partial p;
  p.o.assign(values.empty() ? q.size() : values[0].size(), 0.0);
  if (keys.empty()) return p;
  std::vector<double> s;
  double m = -INFINITY;
  for (const auto& k : keys) {
    double dot = 0.0;
    for (size_t x = 0; x < q.size(); ++x) dot += q[x] * k[x];
    s.push_back(dot);
    m = std::max(m, dot);
  }
  double sum = 0.0;
  for (double v : s) sum += std::exp(v - m);
  for (size_t j = 0; j < keys.size(); ++j)
    for (size_t x = 0; x < p.o.size(); ++x) p.o[x] += std::exp(s[j] - m) / sum * values[j][x];
  p.lse = m + std::log(sum);
  return p;
}

}  // namespace

TEST_CASE("ring schedule: a float64 run equals attention over the whole sequence") {
  std::mt19937 rng(7);
  std::normal_distribution<double> normal(0.0, 1.0);
  constexpr int64_t kDim = 4;
  for (const Case& c : cases()) {
    CAPTURE(name(c));
    const int64_t total = c.n * c.ranks;
    std::vector<std::vector<double>> q(total, std::vector<double>(kDim)), k = q, v = q;
    for (auto* t : {&q, &k, &v})
      for (auto& row : *t)
        for (double& x : row) x = normal(rng);
    for (int32_t rank = 0; rank < c.ranks; ++rank) {
      const auto steps = ringSchedule({c.ranks, rank, c.sharding, c.causal, c.n, c.n});
      for (int64_t row = 0; row < c.n; ++row) {
        const int64_t gq = globalToken(c.sharding, c.ranks, rank, c.n, row);
        // The running result, merged step by step with the kernel's row arithmetic (in float).
        std::vector<float> o(kDim, 0.0f);
        float lse = -INFINITY;
        for (const Step& step : steps) {
          for (const Block& b : step.blocks) {
            if (row < b.queries.begin || row >= b.queries.end) continue;
            std::vector<std::vector<double>> keys, values;
            for (int64_t key = b.keys.begin; key < b.keys.end; ++key) {
              if (!blockSees(b, row, key)) continue;
              const int64_t gk = globalToken(c.sharding, c.ranks, step.source, c.n, key);
              keys.push_back(k[gk]);
              values.push_back(v[gk]);
            }
            const Partial part = attend(q[gq], keys, values);
            const float lses[2] = {lse, static_cast<float>(part.lse)};
            const auto totals = ffpa::merge::rowTotals(2, [&](int i) { return lses[i]; });
            const float w0 = ffpa::merge::partWeight(lses[0], totals);
            const float w1 = ffpa::merge::partWeight(lses[1], totals);
            for (int64_t x = 0; x < kDim; ++x) o[x] = w0 * o[x] + w1 * static_cast<float>(part.o[x]);
            lse = ffpa::merge::mergedLse(totals);
          }
        }
        std::vector<std::vector<double>> keys, values;
        for (int64_t gk = 0; gk < total; ++gk) {
          if (c.causal && gk > gq) continue;
          keys.push_back(k[gk]);
          values.push_back(v[gk]);
        }
        const Partial whole = attend(q[gq], keys, values);
        CHECK(lse == doctest::Approx(whole.lse).epsilon(1e-5));
        for (int64_t x = 0; x < kDim; ++x) CHECK(o[x] == doctest::Approx(whole.o[x]).epsilon(1e-4));
      }
    }
  }
}
