// Attention slices: an arbitrary list, from the arrays of ffpaSetAttentionSlices or the offsets of
// ffpaSetAttentionSlicesFromOffsets (small signed coordinates: negative, empty, reversed and
// overlapping ranges, unknown masks), checked and built into a slice table the way the C API
// does; then, for an accepted list, the slices of every step of every rank of a context-parallel
// ring over it (1 to 8 ranks, both shardings, local lengths that hold the list).
// Properties: every refusal is a well-formed ffpa::Error; an accepted table gives no row a key
// twice and counts its visible pairs exactly (brute force); every step's slices make a valid
// table whose call lies inside the rank's rows and the held block's keys, and the steps of all
// ranks together hold exactly the list's visible pairs.
#include "core/slice_table.h"
#include "cp/ring_schedule.h"
#include "cp/ring_slices.h"
#include "support/byte_reader.h"
#include "support/fuzz_checks.h"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

using ffpa_fuzz::ByteReader;
using ffpa_fuzz::completesOrThrowsFfpaError;
using ffpa_fuzz::expect;
using ffpa::slices::SliceRange;
using ffpa::slices::SliceTable;

namespace {

constexpr int kMaxCount = 16;

std::vector<SliceRange> takeList(ByteReader& in) {
  const bool fromOffsets = in.takeBool();
  const int32_t count = static_cast<int32_t>(in.takeIndex(kMaxCount + 1));  // 0: refused
  std::vector<SliceRange> list;
  if (fromOffsets) {
    std::vector<int32_t> queries, keys;
    const bool ownKeys = in.takeBool();
    for (int32_t i = 0; i <= count; ++i) {
      queries.push_back(in.take<int8_t>());
      keys.push_back(in.take<int8_t>());
    }
    const int32_t mask = in.take<int8_t>();
    completesOrThrowsFfpaError("slicesFromOffsets", [&] {
      list = ffpa::slices::slicesFromOffsets(count, queries.data(), ownKeys ? keys.data() : nullptr, mask);
    });
  } else {
    std::vector<int32_t> queries, keys, masks;
    const bool withMasks = in.takeBool();
    for (int32_t i = 0; i < count; ++i) {
      queries.push_back(in.take<int8_t>());
      queries.push_back(in.take<int8_t>());
      keys.push_back(in.take<int8_t>());
      keys.push_back(in.take<int8_t>());
      masks.push_back(in.take<int8_t>());
    }
    completesOrThrowsFfpaError("slicesFromRanges", [&] {
      list = ffpa::slices::slicesFromRanges(count, queries.data(), keys.data(), withMasks ? masks.data() : nullptr);
    });
  }
  return list;
}

// Brute force: every (row, key) pair a slice gives, each at most once, their number.
void checkTable(const SliceTable& table) {
  int64_t pairs = 0;
  for (int64_t row = 0; row < table.queryExtent(); ++row) {
    for (int64_t key = 0; key < table.keyExtent(); ++key) {
      int times = 0;
      for (const SliceRange& s : table.slices()) {
        if (row < s.q0 || row >= s.q1) continue;
        const ffpa::slices::KeySpan span = ffpa::slices::keySpan(s, row);
        times += key >= span.begin && key < span.end ? 1 : 0;
      }
      expect(times <= 1, "an accepted slice list gives row " + std::to_string(row) + " key " +
                             std::to_string(key) + " " + std::to_string(times) + " times");
      pairs += times;
    }
  }
  expect(pairs == table.visiblePairs(), "the table counts " + std::to_string(table.visiblePairs()) +
                                            " visible pairs, brute force " + std::to_string(pairs));
}

// The ring's cut of `table` over P ranks of local lengths that hold it.
void checkRing(ByteReader& in, const SliceTable& table) {
  using namespace ffpa::cp;
  const int32_t ranks = 1 + static_cast<int32_t>(in.takeIndex(8));
  const Sharding sharding = in.takeBool() ? Sharding::Zigzag : Sharding::Contiguous;
  const auto localLength = [&](int64_t extent) {
    int64_t n = (extent + ranks - 1) / ranks + static_cast<int64_t>(in.takeIndex(4));
    if (sharding == Sharding::Zigzag && n % 2 != 0) ++n;
    return std::max<int64_t>(n, 2);
  };
  const int64_t nq = localLength(table.queryExtent());
  const int64_t nk = localLength(table.keyExtent());
  int64_t pairs = 0;
  for (int32_t rank = 0; rank < ranks; ++rank) {
    const RingShape shape{ranks, rank, sharding, false, nq, nk};
    for (const Step& step : ringSchedule(shape)) {
      StepSlices cut = stepSlices(table.slices(), shape, step.source);
      if (cut.slices.empty()) continue;
      expect(cut.queries.begin >= 0 && cut.queries.end <= nq && cut.keys.begin >= 0 && cut.keys.end <= nk,
             "a step's call lies outside the local rows or the held keys");
      std::unique_ptr<SliceTable> stepTable;
      const bool valid = completesOrThrowsFfpaError("SliceTable (a ring step)", [&] {
        stepTable = std::make_unique<SliceTable>(std::move(cut.slices));
      });
      expect(valid, "the slices of a ring step are refused");
      expect(stepTable->queryExtent() <= cut.queries.size() && stepTable->keyExtent() <= cut.keys.size(),
             "a step's slices reach past its call");
      pairs += stepTable->visiblePairs();
    }
  }
  expect(pairs == table.visiblePairs(), "the ring's steps hold " + std::to_string(pairs) +
                                            " visible pairs, the list " + std::to_string(table.visiblePairs()));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ByteReader in(data, size);
  std::vector<SliceRange> list = takeList(in);
  if (list.empty()) return 0;
  std::unique_ptr<SliceTable> table;
  completesOrThrowsFfpaError("SliceTable", [&] { table = std::make_unique<SliceTable>(list); });
  if (table == nullptr) return 0;
  checkTable(*table);
  checkRing(in, *table);
  return 0;
}
