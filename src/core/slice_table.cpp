#include "core/slice_table.h"

#include "core/cuda_check.h"
#include "core/device.h"
#include "core/error.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <type_traits>
#include <utility>

namespace ffpa::slices {
namespace {

static_assert(kMaskFull == FFPA_SLICE_MASK_FULL && kMaskCausal == FFPA_SLICE_MASK_CAUSAL &&
                  kMaskInverseCausal == FFPA_SLICE_MASK_INVERSE_CAUSAL &&
                  kMaskBicausal == FFPA_SLICE_MASK_BICAUSAL,
              "common/slice_mask.h follows ffpaSliceMask_t");

const char* maskName(int32_t mask) {
  switch (mask) {
    case FFPA_SLICE_MASK_FULL: return "full";
    case FFPA_SLICE_MASK_CAUSAL: return "causal";
    case FFPA_SLICE_MASK_INVERSE_CAUSAL: return "inverse-causal";
    case FFPA_SLICE_MASK_BICAUSAL: return "bi-causal";
    default: return "?";
  }
}

std::string sliceText(const std::vector<SliceRange>& list, size_t i) {
  const SliceRange& s = list[i];
  return cat("slice ", i, " (queries [", s.q0, ", ", s.q1, "), keys [", s.k0, ", ", s.k1, "), ",
             maskName(s.mask), ")");
}

void requireMask(int32_t mask, const char* argument, int64_t index) {
  require(mask >= FFPA_SLICE_MASK_FULL && mask <= FFPA_SLICE_MASK_BICAUSAL,
          FFPA_STATUS_BAD_PARAM_OUT_OF_BOUND, argument, index >= 0 ? cat("[", index, "]") : "",
          " is ", mask, "; allowed: FFPA_SLICE_MASK_FULL (0), FFPA_SLICE_MASK_CAUSAL (1), "
          "FFPA_SLICE_MASK_INVERSE_CAUSAL (2), FFPA_SLICE_MASK_BICAUSAL (3)");
}

void requireCount(int32_t count, const char* argument) {
  require(count >= 1 && count <= FFPA_MAX_SLICES, FFPA_STATUS_BAD_PARAM_OUT_OF_BOUND, argument,
          " is ", count, "; allowed: 1 to FFPA_MAX_SLICES (", FFPA_MAX_SLICES, ")");
}

size_t alignedBytes(size_t bytes) { return (bytes + 255) / 256 * 256; }

}  // namespace

std::vector<SliceRange> slicesFromRanges(int32_t count, const int32_t* queryRanges,
                                         const int32_t* keyRanges, const int32_t* masks) {
  requireCount(count, "count");
  requireNotNull(queryRanges, "queryRanges");
  requireNotNull(keyRanges, "keyRanges");
  std::vector<SliceRange> list(static_cast<size_t>(count));
  for (int32_t i = 0; i < count; ++i) {
    SliceRange& s = list[i];
    s = {queryRanges[2 * i], queryRanges[2 * i + 1], keyRanges[2 * i], keyRanges[2 * i + 1],
         masks ? masks[i] : FFPA_SLICE_MASK_FULL};
    require(s.q0 >= 0 && s.q0 < s.q1, FFPA_STATUS_BAD_PARAM_OUT_OF_BOUND, "queryRanges[", i,
            "] is [", s.q0, ", ", s.q1, "); allowed: [q0, q1) with 0 <= q0 < q1");
    require(s.k0 >= 0 && s.k0 < s.k1, FFPA_STATUS_BAD_PARAM_OUT_OF_BOUND, "keyRanges[", i,
            "] is [", s.k0, ", ", s.k1, "); allowed: [k0, k1) with 0 <= k0 < k1");
    requireMask(s.mask, "masks", i);
  }
  return list;
}

std::vector<SliceRange> slicesFromOffsets(int32_t sequences, const int32_t* queryOffsets,
                                          const int32_t* keyOffsets, int32_t mask) {
  requireCount(sequences, "sequences");
  requireNotNull(queryOffsets, "queryOffsets");
  requireMask(mask, "mask", -1);
  const int32_t* keys = keyOffsets ? keyOffsets : queryOffsets;
  for (const auto& [offsets, name] : {std::pair{queryOffsets, "queryOffsets"}, std::pair{keys, "keyOffsets"}}) {
    require(offsets[0] == 0, FFPA_STATUS_BAD_PARAM_OUT_OF_BOUND, name, "[0] is ", offsets[0],
            "; the offsets of a packed batch start at 0");
    for (int32_t s = 0; s < sequences; ++s) {
      require(offsets[s + 1] >= offsets[s], FFPA_STATUS_BAD_PARAM_OUT_OF_BOUND, name, "[", s + 1,
              "] is ", offsets[s + 1], ", less than ", name, "[", s, "] = ", offsets[s],
              "; offsets must not decrease");
    }
  }
  std::vector<SliceRange> list;
  for (int32_t s = 0; s < sequences; ++s) {
    if (queryOffsets[s + 1] > queryOffsets[s] && keys[s + 1] > keys[s]) {
      list.push_back({queryOffsets[s], queryOffsets[s + 1], keys[s], keys[s + 1], mask});
    }
  }
  require(!list.empty(), FFPA_STATUS_BAD_PARAM_OUT_OF_BOUND, "every one of the ", sequences,
          " sequences has no queries or no keys; at least one must have both");
  return list;
}

SliceTable::SliceTable(std::vector<SliceRange> list) : slices_(std::move(list)) {
  require(!slices_.empty(), FFPA_STATUS_INTERNAL_ERROR, "an empty slice list");
  for (const SliceRange& s : slices_) {
    queryExtent_ = std::max<int64_t>(queryExtent_, s.q1);
    keyExtent_ = std::max<int64_t>(keyExtent_, s.k1);
  }
  queries_ = buildAxis([](const SliceRange& s) { return std::pair{s.q0, s.q1}; },
                       [](const SliceRange& x, const SliceRange& y) { return x.k0 < y.k0; });
  checkNoKeyTwice();
  countVisiblePairs();
  keys_ = buildAxis([](const SliceRange& s) { return std::pair{s.k0, s.k1}; },
                    [](const SliceRange& x, const SliceRange& y) { return x.q0 < y.q0; });
}

SliceTable::~SliceTable() {
  if (device_ != nullptr && cudaFree(device_) != cudaSuccess) cudaGetLastError();
}

template <class Range, class Before>
SliceTable::Axis SliceTable::buildAxis(Range range, Before before) const {
  Axis axis;
  std::vector<int32_t>& starts = axis.segmentStarts;
  starts.push_back(0);  // indices before the first slice: a segment no slice covers
  for (const SliceRange& s : slices_) {
    starts.push_back(range(s).first);
    starts.push_back(range(s).second);
  }
  std::sort(starts.begin(), starts.end());
  starts.erase(std::unique(starts.begin(), starts.end()), starts.end());
  const size_t segments = starts.size() - 1;
  const auto segmentAt = [&](int32_t index) {
    return static_cast<size_t>(std::lower_bound(starts.begin(), starts.end(), index) - starts.begin());
  };
  // Counting pass, then the fill of a compressed-rows table: slice i covers segments
  // [segmentAt(begin), segmentAt(end)).
  std::vector<int64_t> counts(segments + 1, 0);
  for (const SliceRange& s : slices_) {
    for (size_t g = segmentAt(range(s).first); g < segmentAt(range(s).second); ++g) ++counts[g + 1];
  }
  for (size_t g = 0; g < segments; ++g) counts[g + 1] += counts[g];
  require(counts[segments] <= INT32_MAX, FFPA_STATUS_NOT_SUPPORTED_SHAPE, "the slices overlap in ",
          counts[segments], " (slice, segment) pairs; at most ", INT32_MAX, " are supported");
  axis.coverOffsets.assign(counts.begin(), counts.end());
  axis.cover.resize(static_cast<size_t>(counts[segments]));
  std::vector<int32_t> next(axis.coverOffsets.begin(), axis.coverOffsets.end() - 1);
  for (size_t i = 0; i < slices_.size(); ++i) {
    for (size_t g = segmentAt(range(slices_[i]).first); g < segmentAt(range(slices_[i]).second); ++g) {
      axis.cover[next[g]++] = static_cast<int32_t>(i);
    }
  }
  for (size_t g = 0; g < segments; ++g) {
    std::sort(axis.cover.begin() + axis.coverOffsets[g], axis.cover.begin() + axis.coverOffsets[g + 1],
              [&](int32_t a, int32_t b) { return before(slices_[a], slices_[b]) || (!before(slices_[b], slices_[a]) && a < b); });
  }
  for (int i = 0; i < kTileSizes; ++i) {
    const int32_t size = 16 << i;
    for (size_t g = 0; g < segments; ++g) {
      const int32_t segment = axis.coverOffsets[g] == axis.coverOffsets[g + 1] ? -1 : static_cast<int32_t>(g);
      for (int32_t begin = starts[g]; begin < starts[g + 1]; begin += size) {
        axis.tiles[i].push_back({begin, std::min(begin + size, starts[g + 1]), segment});
      }
    }
  }
  return axis;
}

// Two slices of a segment can give a row the same key only when their key ranges overlap; the
// cover is sorted by k0, so each slice is compared with the following ones that start before it
// ends, row by row.
void SliceTable::checkNoKeyTwice() const {
  const Axis& rows = queries_;
  for (int32_t g = 0; g < rows.segments(); ++g) {
    for (int32_t a = rows.coverOffsets[g]; a < rows.coverOffsets[g + 1]; ++a) {
      const SliceRange& first = slices_[rows.cover[a]];
      for (int32_t b = a + 1; b < rows.coverOffsets[g + 1] && slices_[rows.cover[b]].k0 < first.k1; ++b) {
        const SliceRange& second = slices_[rows.cover[b]];
        for (int64_t row = rows.segmentStarts[g]; row < rows.segmentStarts[g + 1]; ++row) {
          const KeySpan x = keySpan(first, row);
          const KeySpan y = keySpan(second, row);
          const int64_t begin = std::max(x.begin, y.begin);
          if (begin < std::min(x.end, y.end)) {
            const auto [i, j] = std::minmax(rows.cover[a], rows.cover[b]);
            fail(FFPA_STATUS_BAD_PARAM,
                 cat(sliceText(slices_, i), " and ", sliceText(slices_, j), " both give query row ",
                     row, " key ", begin, "; a key may reach a row through one slice only (it would "
                     "count twice in the softmax)"));
          }
        }
      }
    }
  }
}

void SliceTable::countVisiblePairs() {
  for (const SliceRange& s : slices_) {
    for (int64_t row = s.q0; row < s.q1; ++row) {
      const KeySpan span = keySpan(s, row);
      visiblePairs_ += span.end - span.begin;
    }
  }
}

AxisView SliceTable::Axis::view() const {
  AxisView view{segmentStarts.data(), coverOffsets.data(), cover.data(), segments()};
  for (int i = 0; i < kTileSizes; ++i) {
    view.tiles[i] = tiles[i].data();
    view.tileCounts[i] = static_cast<int32_t>(tiles[i].size());
  }
  return view;
}

SliceView SliceTable::hostView() const { return {slices_.data(), queries_.view(), keys_.view()}; }

void SliceTable::upload(int32_t ordinal) {
  require(device_ == nullptr, FFPA_STATUS_INTERNAL_ERROR, "slice table uploaded twice");
  // Every array of the host view at a 256-byte boundary of one allocation; once it exists, the
  // device view's pointers are moved onto the copies.
  SliceView view = hostView();
  struct Part {
    const void* data;
    size_t bytes;
    std::function<void(const unsigned char*)> rebind;
    size_t offset = 0;
  };
  std::vector<Part> parts;
  const auto add = [&parts](auto*& field, int64_t count) {
    using Pointer = std::remove_reference_t<decltype(field)>;
    parts.push_back({field, static_cast<size_t>(count) * sizeof(*field),
                     [&field](const unsigned char* copy) { field = reinterpret_cast<Pointer>(copy); }});
  };
  add(view.slices, static_cast<int64_t>(slices_.size()));
  for (auto [axis, host] : {std::pair{&view.queries, &queries_}, std::pair{&view.keys, &keys_}}) {
    add(axis->segmentStarts, axis->segments + 1);
    add(axis->coverOffsets, axis->segments + 1);
    add(axis->cover, static_cast<int64_t>(host->cover.size()));
    for (int i = 0; i < kTileSizes; ++i) add(axis->tiles[i], axis->tileCounts[i]);
  }
  size_t total = 0;
  for (Part& part : parts) {
    part.offset = total;
    total += alignedBytes(std::max<size_t>(part.bytes, 1));
  }
  std::vector<unsigned char> image(total, 0);
  for (const Part& part : parts) {
    if (part.bytes > 0) std::memcpy(image.data() + part.offset, part.data, part.bytes);
  }

  ScopedDevice onDevice(ordinal);
  void* device = nullptr;
  checkCuda(cudaMalloc(&device, image.size()), "cudaMalloc (attention slices)");
  try {
    checkCuda(cudaMemcpy(device, image.data(), image.size(), cudaMemcpyHostToDevice),
              "cudaMemcpy (attention slices)");
  } catch (...) {
    cudaFree(device);
    throw;
  }
  for (const Part& part : parts) part.rebind(static_cast<const unsigned char*>(device) + part.offset);
  device_ = device;
  deviceOrdinal_ = ordinal;
  deviceView_ = view;
}

std::shared_ptr<const void> SliceTable::derived(const DerivedKey& key,
                                                const std::function<std::shared_ptr<const void>()>& make) const {
  std::lock_guard<std::mutex> lock(derivedMutex_);
  for (const auto& [k, value] : derived_) {
    if (k == key) return value;
  }
  derived_.emplace_back(key, make());
  return derived_.back().second;
}

SliceView SliceTable::deviceView(int32_t ordinal, const char* argument) const {
  require(device_ != nullptr, FFPA_STATUS_BAD_PARAM, argument,
          " carries slices made with a handle that has no device (ffpaCreateForDevice); create "
          "them with a handle of the device that runs the call");
  require(deviceOrdinal_ == ordinal, FFPA_STATUS_BAD_PARAM, argument,
          " carries slices copied to device ", deviceOrdinal_, "; this handle runs on device ", ordinal);
  return deviceView_;
}

SlicedAxis slicedAxis(const AxisView& axis, int length, int64_t size, int64_t extent) {
  const int table = tileTableIndex(length);
  require(table >= 0, FFPA_STATUS_INTERNAL_ERROR, "no slice tile table for tiles of ", length);
  const int32_t count = axis.tileCounts[table];
  return {axis.tiles[table], count, static_cast<uint32_t>(count + (size - extent + length - 1) / length)};
}

}  // namespace ffpa::slices
