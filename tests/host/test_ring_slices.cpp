// Attention slices over a context-parallel sequence, against brute force: clipping a slice to a
// rectangle keeps exactly its (row, key) pairs inside it, for every mask, slice and rectangle of a
// small grid; and the slices of each ring step, over rings of 1 to 5 ranks, both shardings and
// random slice lists of every mask, give each local query exactly the keys of the held block it
// sees under the global slices, each once, in valid lists whose call covers them.
#include "core/error.h"
#include "core/slice_table.h"
#include "cp/ring_schedule.h"
#include "cp/ring_slices.h"

#include <doctest/doctest.h>

#include <random>
#include <string>
#include <vector>

using namespace ffpa::cp;
using ffpa::slices::SliceRange;
using ffpa::slices::SliceTable;

namespace {

// The rule of common/slice_mask.h written out again: (i, j) relative to the slice's corner.
bool sees(const SliceRange& s, int64_t row, int64_t key) {
  if (row < s.q0 || row >= s.q1 || key < s.k0 || key >= s.k1) return false;
  const int64_t i = row - s.q0, j = key - s.k0, nq = s.q1 - s.q0, nk = s.k1 - s.k0;
  const bool causal = j <= i + nk - nq;
  const bool inverse = j >= i;
  switch (s.mask) {
    case FFPA_SLICE_MASK_CAUSAL: return causal;
    case FFPA_SLICE_MASK_INVERSE_CAUSAL: return inverse;
    case FFPA_SLICE_MASK_BICAUSAL: return causal && inverse;
    default: return true;
  }
}

int timesSeen(const std::vector<SliceRange>& list, int64_t row, int64_t key) {
  int n = 0;
  for (const SliceRange& s : list) n += sees(s, row, key) ? 1 : 0;
  return n;
}

std::vector<RowRange> rangesUpTo(int64_t extent) {
  std::vector<RowRange> all;
  for (int64_t b = 0; b < extent; ++b)
    for (int64_t e = b + 1; e <= extent; ++e) all.push_back({b, e});
  return all;
}

bool valid(const std::vector<SliceRange>& list) {
  try {
    SliceTable table(list);
    return true;
  } catch (const ffpa::Error&) {
    return false;
  }
}

// A random list the slice table accepts: random slices of every mask, each kept when the list
// stays valid (no key twice to a row).
std::vector<SliceRange> randomList(std::mt19937& rng, int64_t queries, int64_t keys, int tries) {
  std::uniform_int_distribution<int> mask(0, 3);
  const auto range = [&rng](int64_t extent) {
    std::uniform_int_distribution<int64_t> at(0, extent - 1);
    int64_t a = at(rng), b = at(rng);
    if (a > b) std::swap(a, b);
    return std::pair<int32_t, int32_t>{static_cast<int32_t>(a), static_cast<int32_t>(b + 1)};
  };
  std::vector<SliceRange> list;
  for (int t = 0; t < tries; ++t) {
    const auto [q0, q1] = range(queries);
    const auto [k0, k1] = range(keys);
    list.push_back({q0, q1, k0, k1, mask(rng)});
    if (!valid(list)) list.pop_back();
  }
  return list;
}

std::string text(const SliceRange& s) {
  return "[" + std::to_string(s.q0) + ", " + std::to_string(s.q1) + ") x [" + std::to_string(s.k0) + ", " +
         std::to_string(s.k1) + ") mask " + std::to_string(s.mask);
}

}  // namespace

TEST_CASE("ring slices: a clipped slice keeps exactly its pairs inside the rectangle") {
  constexpr int64_t kSlices = 6, kGrid = 7;
  const auto sliceRanges = rangesUpTo(kSlices);
  const auto rectangles = rangesUpTo(kGrid);
  int64_t clipped = 0;
  for (int32_t mask = 0; mask <= 3; ++mask)
    for (const RowRange& q : sliceRanges)
      for (const RowRange& k : sliceRanges) {
        const SliceRange s{static_cast<int32_t>(q.begin), static_cast<int32_t>(q.end),
                           static_cast<int32_t>(k.begin), static_cast<int32_t>(k.end), mask};
        for (const RowRange& rows : rectangles)
          for (const RowRange& keys : rectangles) {
            const std::vector<SliceRange> pieces = clipSlice(s, rows, keys);
            ++clipped;
            REQUIRE(pieces.size() <= 3);
            for (const SliceRange& p : pieces) {
              // Non-empty, inside the rectangle.
              REQUIRE_MESSAGE((p.q0 < p.q1 && p.k0 < p.k1), text(s), " piece ", text(p));
              REQUIRE_MESSAGE((p.q0 >= rows.begin && p.q1 <= rows.end && p.k0 >= keys.begin && p.k1 <= keys.end),
                              text(s), " piece ", text(p));
            }
            for (int64_t row = 0; row < kGrid; ++row)
              for (int64_t key = 0; key < kGrid; ++key) {
                const bool inside = row >= rows.begin && row < rows.end && key >= keys.begin && key < keys.end;
                const int expected = inside && sees(s, row, key) ? 1 : 0;
                if (timesSeen(pieces, row, key) != expected) {
                  FAIL("slice " << text(s) << " clipped to rows [" << rows.begin << ", " << rows.end << ") keys ["
                                << keys.begin << ", " << keys.end << "): row " << row << " key " << key << " seen "
                                << timesSeen(pieces, row, key) << " times, expected " << expected);
                }
              }
          }
      }
  CHECK(clipped == 4 * 21 * 21 * 28 * 28);
}

TEST_CASE("ring slices: each step gives every local query the held keys it sees, once") {
  std::mt19937 rng(11);
  int64_t steps = 0, emptySteps = 0;
  for (int32_t p = 1; p <= 5; ++p)
    for (Sharding sharding : {Sharding::Contiguous, Sharding::Zigzag})
      for (auto [nq, nk] : {std::pair<int64_t, int64_t>{4, 4}, {6, 6}, {4, 8}})
        for (int trial = 0; trial < 6; ++trial) {
          const int64_t totalQ = nq * p, totalK = nk * p;
          const std::vector<SliceRange> global = randomList(rng, totalQ, totalK, 3 + trial * 3);
          REQUIRE_FALSE(global.empty());
          CAPTURE(p);
          CAPTURE(shardingName(sharding));
          CAPTURE(nq);
          CAPTURE(trial);
          for (int32_t rank = 0; rank < p; ++rank) {
            const RingShape shape{p, rank, sharding, false, nq, nk};
            // How often each (global query, global key) pair is given over the rank's steps.
            std::vector<int> given(static_cast<size_t>(totalQ * totalK), 0);
            for (const Step& step : ringSchedule(shape)) {
              const StepSlices cut = stepSlices(global, shape, step.source);
              ++steps;
              if (cut.slices.empty()) {
                ++emptySteps;
                continue;
              }
              REQUIRE(valid(cut.slices));  // no key twice to a row: the table takes it
              CHECK(cut.queries.begin >= 0);
              CHECK(cut.queries.end <= nq);
              CHECK(cut.keys.begin >= 0);
              CHECK(cut.keys.end <= nk);
              for (const SliceRange& s : cut.slices) {
                CHECK(s.q1 <= cut.queries.size());
                CHECK(s.k1 <= cut.keys.size());
              }
              for (int64_t row = 0; row < nq; ++row)
                for (int64_t key = 0; key < nk; ++key) {
                  const int64_t gq = globalToken(sharding, p, rank, nq, row);
                  const int64_t gk = globalToken(sharding, p, step.source, nk, key);
                  const int times = timesSeen(cut.slices, row - cut.queries.begin, key - cut.keys.begin);
                  given[gq * totalK + gk] += times;
                  if (times != timesSeen(global, gq, gk)) {
                    FAIL_CHECK("rank " << rank << " step of rank " << step.source << ": query " << gq << " key "
                                       << gk << " seen " << times << " times, globally "
                                       << timesSeen(global, gq, gk));
                  }
                }
            }
            // Over the steps, each of the rank's queries sees every key the global list gives it.
            for (int64_t row = 0; row < nq; ++row) {
              const int64_t gq = globalToken(sharding, p, rank, nq, row);
              for (int64_t gk = 0; gk < totalK; ++gk) CHECK(given[gq * totalK + gk] == timesSeen(global, gq, gk));
            }
          }
        }
  CHECK(steps > 0);
  CHECK(emptySteps > 0);  // some steps see nothing: the ring skips them
  CHECK(emptySteps < steps);
}

TEST_CASE("ring slices: a packed batch of causal documents on a zigzag ring") {
  // Two documents, [0, 200) and [200, 512), causal; two ranks of 256 tokens in chunks of 128:
  // rank 0 holds chunks 0 and 3 ([0, 128), [384, 512)), rank 1 chunks 1 and 2.
  const std::vector<SliceRange> docs{{0, 200, 0, 200, FFPA_SLICE_MASK_CAUSAL},
                                     {200, 512, 200, 512, FFPA_SLICE_MASK_CAUSAL}};
  const RingShape rank0{2, 0, Sharding::Zigzag, false, 256, 256};
  // Its own step: each chunk against itself, causally.
  const StepSlices own = stepSlices(docs, rank0, 0);
  CHECK(own.queries == RowRange{0, 256});
  CHECK(own.keys == RowRange{0, 256});
  REQUIRE(own.slices.size() == 2);
  CHECK(text(own.slices[0]) == text({0, 128, 0, 128, FFPA_SLICE_MASK_CAUSAL}));
  CHECK(text(own.slices[1]) == text({128, 256, 128, 256, FFPA_SLICE_MASK_CAUSAL}));
  // Rank 1's block: chunk 0 sees nothing of it (document 0 ends at 200, row 127 sees keys < 128);
  // chunk 3 sees document 1's keys [200, 384) whole: local keys [72, 256).
  const StepSlices other = stepSlices(docs, rank0, 1);
  CHECK(other.queries == RowRange{128, 256});
  CHECK(other.keys == RowRange{72, 256});
  REQUIRE(other.slices.size() == 2);
  CHECK(text(other.slices[0]) == text({0, 128, 0, 56, FFPA_SLICE_MASK_FULL}));
  CHECK(text(other.slices[1]) == text({0, 128, 56, 184, FFPA_SLICE_MASK_FULL}));
}
