// The slice table against a brute-force reading of the mask rule (the formulas of the `slices`
// group of ffpa/ffpa.h, written out again here): which keys each row sees, that a key given twice
// is rejected exactly when it happens, the pair count, and the parsing of offsets and ranges.
#include "core/error.h"
#include "core/slice_table.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <memory>
#include <random>
#include <string>
#include <vector>

using ffpa::slices::SliceRange;
using ffpa::slices::SliceTable;

namespace {

bool ruleSees(const SliceRange& s, int64_t row, int64_t key) {
  if (row < s.q0 || row >= s.q1 || key < s.k0 || key >= s.k1) return false;
  const int64_t i = row - s.q0;
  const int64_t j = key - s.k0;
  const int64_t nq = s.q1 - s.q0;
  const int64_t nk = s.k1 - s.k0;
  const bool causal = j <= i + nk - nq;
  const bool inverse = j >= i;
  switch (s.mask) {
    case FFPA_SLICE_MASK_FULL: return true;
    case FFPA_SLICE_MASK_CAUSAL: return causal;
    case FFPA_SLICE_MASK_INVERSE_CAUSAL: return inverse;
    case FFPA_SLICE_MASK_BICAUSAL: return causal && inverse;
  }
  return false;
}

// How many of `list`'s slices give row `row` key `key`.
int timesSeen(const std::vector<SliceRange>& list, int64_t row, int64_t key) {
  int n = 0;
  for (const SliceRange& s : list) n += ruleSees(s, row, key) ? 1 : 0;
  return n;
}

std::vector<SliceRange> randomSlices(std::mt19937& rng, int count, int extent) {
  std::uniform_int_distribution<int> position(0, extent - 1);
  std::uniform_int_distribution<int> mask(0, 3);
  std::vector<SliceRange> list;
  for (int i = 0; i < count; ++i) {
    int q0 = position(rng), q1 = position(rng), k0 = position(rng), k1 = position(rng);
    if (q0 > q1) std::swap(q0, q1);
    if (k0 > k1) std::swap(k0, k1);
    list.push_back({q0, q1 + 1, k0, k1 + 1, mask(rng)});
  }
  return list;
}

ffpaStatus_t statusOf(const std::vector<SliceRange>& list, std::string* message = nullptr) {
  try {
    SliceTable table(list);
    return FFPA_STATUS_SUCCESS;
  } catch (const ffpa::Error& e) {
    if (message) *message = e.what();
    return e.status();
  }
}

// CHECKs that `call` throws ffpa::Error with a message holding `fragment` (and `status`, when
// not SUCCESS).
template <class Call>
void failsWith(Call&& call, const char* fragment, ffpaStatus_t status = FFPA_STATUS_SUCCESS) {
  try {
    call();
    FAIL("no error");
  } catch (const ffpa::Error& e) {
    CHECK(e.status() != FFPA_STATUS_SUCCESS);
    if (status != FFPA_STATUS_SUCCESS) CHECK(e.status() == status);
    CHECK_MESSAGE(std::string(e.what()).find(fragment) != std::string::npos, e.what());
  }
}

}  // namespace

TEST_CASE("slices: each mask gives one contiguous span per row, as the rule says") {
  std::mt19937 rng(7);
  for (const SliceRange& s : randomSlices(rng, 400, 40)) {
    for (int64_t row = s.q0; row < s.q1; ++row) {
      const ffpa::slices::KeySpan span = ffpa::slices::keySpan(s, row);
      for (int64_t key = 0; key < 42; ++key) {
        CHECK_MESSAGE(ruleSees(s, row, key) == (key >= span.begin && key < span.end), "mask ", s.mask,
                      " row ", row, " key ", key);
      }
    }
  }
  // The corners: causal ends at the bottom-right, inverse-causal starts at the top-left.
  const SliceRange causal{10, 14, 100, 110, FFPA_SLICE_MASK_CAUSAL};
  CHECK(ffpa::slices::keySpan(causal, 13).end == 110);
  CHECK(ffpa::slices::keySpan(causal, 10).end == 107);
  const SliceRange inverse{10, 14, 100, 110, FFPA_SLICE_MASK_INVERSE_CAUSAL};
  CHECK(ffpa::slices::keySpan(inverse, 10).begin == 100);
  CHECK(ffpa::slices::keySpan(inverse, 13).begin == 103);
}

TEST_CASE("slices: a list is accepted exactly when no row gets a key twice, and then sees the union") {
  constexpr int kExtent = 24;
  std::mt19937 rng(11);
  int accepted = 0, rejected = 0;
  for (int trial = 0; trial < 600; ++trial) {
    const int count = 1 + trial % 6;
    std::vector<SliceRange> list = randomSlices(rng, count, kExtent);
    // Bias towards acceptable lists: shift every other slice's keys away from the others.
    if (trial % 2 == 0) {
      for (int i = 0; i < count; ++i) {
        list[i].k0 += 30 * i;
        list[i].k1 += 30 * i;
      }
    }
    bool doubled = false;
    for (int64_t row = 0; row < kExtent && !doubled; ++row) {
      for (int64_t key = 0; key < kExtent + 30 * count && !doubled; ++key) doubled = timesSeen(list, row, key) > 1;
    }
    std::string message;
    const ffpaStatus_t status = statusOf(list, &message);
    if (doubled) {
      ++rejected;
      CHECK_MESSAGE(status == FFPA_STATUS_BAD_PARAM, message);
      CHECK(message.find("both give query row") != std::string::npos);
      continue;
    }
    ++accepted;
    REQUIRE_MESSAGE(status == FFPA_STATUS_SUCCESS, message);
    SliceTable table(list);
    const ffpa::slices::SliceView view = table.hostView();
    int64_t pairs = 0, queryExtent = 0, keyExtent = 0;
    for (const SliceRange& s : list) {
      queryExtent = std::max<int64_t>(queryExtent, s.q1);
      keyExtent = std::max<int64_t>(keyExtent, s.k1);
    }
    const int64_t keyEnd = kExtent + 30 * count;
    for (int64_t row = -1; row <= kExtent + 1; ++row) {
      const int32_t segment = ffpa::slices::segmentOf(view.queries, row);
      const ffpa::slices::KeySpan hull = ffpa::slices::keyHull(view, segment, row);
      for (int64_t key = 0; key < keyEnd; ++key) {
        const bool expected = timesSeen(list, row, key) == 1;
        pairs += expected ? 1 : 0;
        CHECK(ffpa::slices::sees(view, segment, row, key) == expected);
        if (expected) CHECK((key >= hull.begin && key < hull.end));
      }
    }
    // The key axis, as the dK/dV kernel walks it: the rows that see a key through the slices
    // covering its segment, each by its querySpan, are exactly the rows that see it.
    for (int64_t key = -1; key <= keyEnd; ++key) {
      const int32_t segment = ffpa::slices::segmentOf(view.keys, key);
      for (int64_t row = 0; row <= kExtent; ++row) {
        int seen = 0;
        for (int32_t c = segment < 0 ? 0 : view.keys.coverOffsets[segment];
             segment >= 0 && c < view.keys.coverOffsets[segment + 1]; ++c) {
          const ffpa::slices::KeySpan rows = ffpa::slices::querySpan(view.slices[view.keys.cover[c]], key);
          seen += row >= rows.begin && row < rows.end;
        }
        CHECK(seen == timesSeen(list, row, key));
      }
    }
    CHECK(table.visiblePairs() == pairs);
    CHECK(table.queryExtent() == queryExtent);
    CHECK(table.keyExtent() == keyExtent);
  }
  // Both outcomes were exercised, plenty of each.
  CHECK(accepted > 150);
  CHECK(rejected > 150);
}

// Every tile of `axis` in order: they cover [0, extent), each inside one segment, the segment
// -1 exactly where `covered(index)` is false.
template <class Covered>
void checkTiles(const ffpa::slices::AxisView& axis, int64_t extent, Covered covered) {
  for (int size = 0; size < ffpa::slices::kTileSizes; ++size) {
    const int length = 16 << size;
    CHECK(ffpa::slices::tileTableIndex(length) == size);
    int64_t next = 0;
    for (int32_t t = 0; t < axis.tileCounts[size]; ++t) {
      const ffpa::slices::AxisTile tile = axis.tiles[size][t];
      REQUIRE(tile.begin == next);
      CHECK(tile.end > tile.begin);
      CHECK(tile.end - tile.begin <= length);
      for (int64_t index = tile.begin; index < tile.end; ++index) {
        CHECK(covered(index) == (tile.segment >= 0));
        if (tile.segment >= 0) CHECK(ffpa::slices::segmentOf(axis, index) == tile.segment);
      }
      next = tile.end;
    }
    CHECK(next == extent);
  }
}

TEST_CASE("slices: the tiles of every size cover each axis in order, each inside one segment") {
  std::mt19937 rng(5);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<SliceRange> list = randomSlices(rng, 1 + trial % 4, 300);
    for (size_t i = 0; i < list.size(); ++i) {  // keys apart: always accepted
      list[i].k0 += static_cast<int32_t>(400 * i);
      list[i].k1 += static_cast<int32_t>(400 * i);
    }
    SliceTable table(list);
    const ffpa::slices::SliceView view = table.hostView();
    checkTiles(view.queries, table.queryExtent(), [&](int64_t row) {
      return std::any_of(list.begin(), list.end(), [&](const SliceRange& s) { return row >= s.q0 && row < s.q1; });
    });
    checkTiles(view.keys, table.keyExtent(), [&](int64_t key) {
      return std::any_of(list.begin(), list.end(), [&](const SliceRange& s) { return key >= s.k0 && key < s.k1; });
    });
  }
  CHECK(ffpa::slices::tileTableIndex(48) == -1);
}

TEST_CASE("slices: the hull of a tile of rows holds every key they see, the hull of a tile of keys every row") {
  std::mt19937 rng(11);
  for (int trial = 0; trial < 400; ++trial) {
    const SliceRange s = randomSlices(rng, 1, 120)[0];
    std::uniform_int_distribution<int32_t> rowAt(s.q0, s.q1 - 1), keyAt(s.k0, s.k1 - 1);
    const int32_t rowA = rowAt(rng), rowB = rowAt(rng), keyA = keyAt(rng), keyB = keyAt(rng);
    const int32_t firstRow = std::min(rowA, rowB), lastRow = std::max(rowA, rowB);
    const int32_t firstKey = std::min(keyA, keyB), lastKey = std::max(keyA, keyB);
    const ffpa::slices::KeySpan keys = ffpa::slices::keyHullOfRows(s, firstRow, lastRow);
    const ffpa::slices::KeySpan rows = ffpa::slices::queryHullOfKeys(s, firstKey, lastKey);
    for (int64_t row = s.q0; row < s.q1; ++row) {
      for (int64_t key = s.k0; key < s.k1; ++key) {
        const ffpa::slices::KeySpan span = ffpa::slices::keySpan(s, row);
        const ffpa::slices::KeySpan mirror = ffpa::slices::querySpan(s, key);
        const bool seen = key >= span.begin && key < span.end;
        REQUIRE(seen == (row >= mirror.begin && row < mirror.end));
        if (seen && row >= firstRow && row <= lastRow) CHECK((key >= keys.begin && key < keys.end));
        if (seen && key >= firstKey && key <= lastKey) CHECK((row >= rows.begin && row < rows.end));
      }
    }
  }
}

TEST_CASE("slices: the masks that tile a square without doubling are accepted") {
  // Causal below plus inverse-causal shifted one key right: each key of the square exactly once.
  const std::vector<SliceRange> square{{0, 8, 0, 8, FFPA_SLICE_MASK_CAUSAL},
                                       {0, 7, 1, 8, FFPA_SLICE_MASK_INVERSE_CAUSAL}};
  SliceTable table(square);
  CHECK(table.visiblePairs() == 64);
  // Overlapping by the diagonal is the classic mistake: rejected, naming both and a row.
  std::string message;
  CHECK(statusOf({{0, 8, 0, 8, FFPA_SLICE_MASK_CAUSAL}, {0, 8, 0, 8, FFPA_SLICE_MASK_INVERSE_CAUSAL}},
                 &message) == FFPA_STATUS_BAD_PARAM);
  CHECK(message.find("slice 0 (queries [0, 8), keys [0, 8), causal) and slice 1") != std::string::npos);
  CHECK(message.find("query row 0 key 0") != std::string::npos);
}

TEST_CASE("slices: ranges and masks from plain arrays are checked, naming the slice") {
  const int32_t q[] = {0, 4, 4, 8};
  const int32_t k[] = {0, 4, 4, 8};
  const int32_t masks[] = {0, 1};
  CHECK(ffpa::slices::slicesFromRanges(2, q, k, masks).size() == 2);
  CHECK(ffpa::slices::slicesFromRanges(2, q, k, nullptr)[1].mask == FFPA_SLICE_MASK_FULL);
  const auto fails = [](auto&& call, const char* fragment) { failsWith(call, fragment); };
  fails([&] { ffpa::slices::slicesFromRanges(0, q, k, masks); }, "count is 0; allowed: 1 to FFPA_MAX_SLICES");
  fails([&] { ffpa::slices::slicesFromRanges(FFPA_MAX_SLICES + 1, q, k, masks); }, "FFPA_MAX_SLICES");
  fails([&] { ffpa::slices::slicesFromRanges(2, nullptr, k, masks); }, "queryRanges");
  fails([&] { ffpa::slices::slicesFromRanges(2, q, nullptr, masks); }, "keyRanges");
  const int32_t emptyQ[] = {0, 4, 5, 5};
  fails([&] { ffpa::slices::slicesFromRanges(2, emptyQ, k, masks); }, "queryRanges[1] is [5, 5)");
  const int32_t negativeK[] = {-1, 4, 4, 8};
  fails([&] { ffpa::slices::slicesFromRanges(2, q, negativeK, masks); }, "keyRanges[0] is [-1, 4)");
  const int32_t badMask[] = {0, 4};
  fails([&] { ffpa::slices::slicesFromRanges(2, q, k, badMask); }, "masks[1] is 4; allowed: FFPA_SLICE_MASK_FULL (0)");
}

TEST_CASE("slices: offsets of a packed batch give one slice per sequence with queries and keys") {
  const int32_t queries[] = {0, 3, 3, 10};
  const int32_t keys[] = {0, 5, 6, 6};
  const auto list = ffpa::slices::slicesFromOffsets(3, queries, keys, FFPA_SLICE_MASK_CAUSAL);
  REQUIRE(list.size() == 1);  // sequence 1 has no queries, sequence 2 no keys
  CHECK(list[0].q1 == 3);
  CHECK(list[0].k1 == 5);
  CHECK(list[0].mask == FFPA_SLICE_MASK_CAUSAL);
  const auto self = ffpa::slices::slicesFromOffsets(3, queries, nullptr, FFPA_SLICE_MASK_FULL);
  REQUIRE(self.size() == 2);
  CHECK(self[1].k0 == 3);
  CHECK(self[1].k1 == 10);
  const auto fails = [](auto&& call, const char* fragment) {
    failsWith(call, fragment, FFPA_STATUS_BAD_PARAM_OUT_OF_BOUND);
  };
  const int32_t late[] = {1, 3};
  fails([&] { ffpa::slices::slicesFromOffsets(1, late, nullptr, 0); }, "queryOffsets[0] is 1");
  const int32_t decreasing[] = {0, 5, 4};
  fails([&] { ffpa::slices::slicesFromOffsets(2, queries, decreasing, 0); }, "keyOffsets[2] is 4, less than keyOffsets[1] = 5");
  const int32_t empty[] = {0, 0, 0};
  fails([&] { ffpa::slices::slicesFromOffsets(2, empty, nullptr, 0); }, "at least one must have both");
  fails([&] { ffpa::slices::slicesFromOffsets(1, queries, nullptr, 7); }, "mask is 7");
}

TEST_CASE("slice table: derived data is made once per key and kept with the table") {
  const SliceTable table({{0, 8, 0, 8, FFPA_SLICE_MASK_CAUSAL}});
  int made = 0;
  const auto make = [&made]() -> std::shared_ptr<const void> { return std::make_shared<int>(++made); };
  const SliceTable::DerivedKey first{1, 4, 0, 1, 8, 8}, second{1, 4, 1, 1, 8, 8};
  const auto a = table.derived(first, make);
  CHECK(table.derived(first, make) == a);  // the same object, not made again
  CHECK(made == 1);
  const auto b = table.derived(second, make);
  CHECK(b != a);
  CHECK(*std::static_pointer_cast<const int>(b) == 2);
  // A make that throws keeps nothing: the next use makes it.
  const SliceTable::DerivedKey third{1, 4, 2, 1, 8, 8};
  CHECK_THROWS_AS(table.derived(third, []() -> std::shared_ptr<const void> { throw ffpa::Error(FFPA_STATUS_BAD_PARAM, "no"); }),
                  ffpa::Error);
  CHECK(*std::static_pointer_cast<const int>(table.derived(third, make)) == 3);
}

