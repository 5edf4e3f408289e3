// Tensor descriptors through the C API: arbitrary types, ranks, extents and strides (NULL
// included). Each accepted layout is read back and checked against what was set, and its element
// offsets are enumerated (when it has at most 4096 elements) to confirm that no two elements
// overlap and that ffpa::copiesShareAnElement, the exact test the execute calls use to tell
// interleaved outputs from overlapping ones, agrees with a brute-force intersection.
#include "core/descriptors.h"
#include "support/byte_reader.h"
#include "support/fuzz_checks.h"
#include "support/strided_layouts.h"

#include <ffpa/ffpa.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <vector>

using ffpa_fuzz::ByteReader;
using ffpa_fuzz::expect;
using ffpa_fuzz::expectApiResult;

namespace {

// Arrays handed to the C API are exactly as long as the rank says (up to this many), on the heap,
// so that AddressSanitizer sees any read or write past what the caller provided.
constexpr int32_t kMaxArrayLength = 8;
constexpr int64_t kMaxBruteForceElements = 4096;

// What the descriptor must hold: the last successful set, or nothing yet.
struct ExpectedDescriptor {
  bool isSet = false;
  ffpaDataType_t dtype = FFPA_DATA_TYPE_FLOAT16;
  int32_t nbDims = 0;
  std::array<int64_t, FFPA_MAX_TENSOR_DIMS> dims{};
  std::array<int64_t, FFPA_MAX_TENSOR_DIMS> strides{};
};

int64_t takeExtent(ByteReader& in) {
  switch (in.takeIndex(4)) {
    case 0: return 1 + in.takeIndex(8);  // small shapes, so the brute force applies
    case 1: return 1 + in.takeIndex(64);
    case 2:
      return in.pick({int64_t{0}, int64_t{-1}, int64_t{1} << 31, (int64_t{1} << 31) - 1,
                      (int64_t{1} << 31) - 2, std::numeric_limits<int64_t>::min(),
                      std::numeric_limits<int64_t>::max(), int64_t{65536}});
    default: return in.take<int64_t>();
  }
}

// Strides: raw values, or the packed strides of a permutation of the dimensions with padding,
// which gives the valid non-row-major layouts (BNHD, slices of fused buffers) most of the time.
std::vector<int64_t> takeStrides(ByteReader& in, const std::vector<int64_t>& dims) {
  return in.takeBool() ? ffpa_fuzz::takeRawStrides(in, dims.size()) : ffpa_fuzz::takePermutedStrides(in, dims);
}

std::string listText(const std::vector<int64_t>& values) {
  std::string text = "[";
  for (size_t i = 0; i < values.size(); ++i) text += (i ? ", " : "") + std::to_string(values[i]);
  return text + "]";
}

// Every element offset of a layout with at most kMaxBruteForceElements elements, sorted; empty
// for a larger one.
std::vector<int64_t> elementOffsets(const ffpa::TensorLayout& layout) {
  int64_t count = 1;
  for (int32_t i = 0; i < layout.nbDims; ++i) {
    if (layout.dims[i] > kMaxBruteForceElements / count) return {};
    count *= layout.dims[i];
  }
  std::vector<int64_t> offsets;
  offsets.reserve(static_cast<size_t>(count));
  std::array<int64_t, FFPA_MAX_TENSOR_DIMS> index{};
  for (int64_t n = 0; n < count; ++n) {
    int64_t offset = 0;
    for (int32_t i = 0; i < layout.nbDims; ++i) offset += index[i] * layout.strides[i];
    offsets.push_back(offset);
    for (int32_t i = layout.nbDims - 1; i >= 0 && ++index[i] == layout.dims[i]; --i) index[i] = 0;
  }
  std::sort(offsets.begin(), offsets.end());
  return offsets;
}

bool shiftedCopiesMeetByBruteForce(const std::vector<int64_t>& offsets, int64_t shift) {
  for (const int64_t offset : offsets) {
    const __int128 shifted = __int128{offset} + shift;
    if (shifted < std::numeric_limits<int64_t>::min() || shifted > std::numeric_limits<int64_t>::max()) continue;
    if (std::binary_search(offsets.begin(), offsets.end(), static_cast<int64_t>(shifted))) return true;
  }
  return false;
}

int64_t takeShift(ByteReader& in, const std::vector<int64_t>& offsets) {
  switch (in.takeIndex(3)) {
    case 0: return static_cast<int64_t>(in.take<int8_t>());
    case 1: {  // near the distance between two elements: where the exact test has work to do
      const int64_t a = offsets[in.take<uint16_t>() % offsets.size()];
      const int64_t b = offsets[in.take<uint16_t>() % offsets.size()];
      return a - b + in.take<int8_t>() % 3;
    }
    default: return in.take<int64_t>();
  }
}

void checkAcceptedLayout(ByteReader& in, ffpaDataType_t dtype, const std::vector<int64_t>& dims,
                         const int64_t* strides) {
  ffpa::TensorLayout layout;
  const bool built = ffpa_fuzz::completesOrThrowsFfpaError("makeTensorLayout", [&] {
    layout = ffpa::makeTensorLayout(dtype, static_cast<int32_t>(dims.size()), dims.data(), strides);
  });
  expect(built, "makeTensorLayout refused a layout ffpaSetTensorDescriptor accepted");
  expect(layout.spanBytes() > 0 && layout.spanBytes() <= (int64_t{1} << 62),
         "accepted layout spans " + std::to_string(layout.spanBytes()) + " bytes");

  const std::vector<int64_t> offsets = elementOffsets(layout);
  if (offsets.empty()) return;
  const std::string what = "dims " + listText(dims) + " strides " +
                           listText({layout.strides.begin(), layout.strides.begin() + layout.nbDims});
  expect(std::adjacent_find(offsets.begin(), offsets.end()) == offsets.end(),
         "accepted layout " + what + " has two elements at one offset");
  expect(offsets.front() == 0 && offsets.back() + 1 == layout.spanElements(),
         "spanElements() of " + what + " is not one past the last element");
  expect(ffpa::copiesShareAnElement(layout, 0), "copiesShareAnElement(" + what + ", 0) is false");

  for (size_t round = in.takeIndex(5); round > 0; --round) {
    const int64_t shift = takeShift(in, offsets);
    const bool exact = ffpa::copiesShareAnElement(layout, shift);
    expect(exact == shiftedCopiesMeetByBruteForce(offsets, shift),
           "copiesShareAnElement(" + what + ", " + std::to_string(shift) + ") is " +
               (exact ? "true" : "false") + "; enumerating the elements says otherwise");
  }
}

// The descriptor as ffpaGetTensorDescriptor reports it must be the expected one.
void checkReadBack(ffpaTensorDescriptor_t desc, const ExpectedDescriptor& expected) {
  ffpaDataType_t dtype{};
  int32_t nbDims = -1;
  std::array<int64_t, FFPA_MAX_TENSOR_DIMS> dims{}, strides{};
  const ffpaStatus_t status =
      ffpaGetTensorDescriptor(desc, &dtype, FFPA_MAX_TENSOR_DIMS, &nbDims, dims.data(), strides.data());
  expectApiResult(status, "ffpaGetTensorDescriptor");
  if (!expected.isSet) {
    expect(status == FFPA_STATUS_BAD_PARAM_NOT_FINALIZED,
           "ffpaGetTensorDescriptor of a descriptor never set returned " + ffpa_fuzz::statusText(status));
    return;
  }
  expect(status == FFPA_STATUS_SUCCESS, "ffpaGetTensorDescriptor of a set descriptor failed");
  expect(dtype == expected.dtype && nbDims == expected.nbDims, "the descriptor's type or rank changed");
  for (int32_t i = 0; i < nbDims; ++i) {
    expect(dims[i] == expected.dims[i] && strides[i] == expected.strides[i],
           "dimension " + std::to_string(i) + " reads back as " + std::to_string(dims[i]) + " / " +
               std::to_string(strides[i]) + ", not as set (" + std::to_string(expected.dims[i]) + " / " +
               std::to_string(expected.strides[i]) + ")");
  }
}

void setDescriptor(ByteReader& in, ffpaTensorDescriptor_t desc, ExpectedDescriptor& expected) {
  const auto dtype = in.takeBool() ? static_cast<ffpaDataType_t>(in.takeIndex(3)) : in.takeEnum<ffpaDataType_t>();
  const int32_t nbDims = in.takeBool() ? 3 + static_cast<int32_t>(in.takeIndex(2)) : in.take<int8_t>();
  const size_t length = static_cast<size_t>(std::clamp(nbDims, 0, kMaxArrayLength));
  std::vector<int64_t> dims(length);
  for (int64_t& d : dims) d = takeExtent(in);
  const bool nullDims = in.takeIndex(16) == 0;
  const bool nullStrides = in.takeBool();
  std::vector<int64_t> strides = takeStrides(in, dims);
  // Copies of exactly `length` elements: vector::data() of an empty vector may be NULL, which is
  // the NULL-pointer case, so give zero-length arrays a real (zero-sized) allocation instead.
  std::unique_ptr<int64_t[]> dimsArray(new int64_t[length]);
  std::unique_ptr<int64_t[]> stridesArray(new int64_t[length]);
  std::copy(dims.begin(), dims.end(), dimsArray.get());
  std::copy(strides.begin(), strides.end(), stridesArray.get());

  const ffpaStatus_t status = ffpaSetTensorDescriptor(desc, dtype, nbDims, nullDims ? nullptr : dimsArray.get(),
                                                      nullStrides ? nullptr : stridesArray.get());
  expectApiResult(status, "ffpaSetTensorDescriptor");
  if (status != FFPA_STATUS_SUCCESS) {
    checkReadBack(desc, expected);  // "On failure the descriptor is left unchanged."
    return;
  }
  expect(!nullDims && (nbDims == 3 || nbDims == 4) && dtype >= FFPA_DATA_TYPE_FLOAT16 &&
             dtype <= FFPA_DATA_TYPE_FLOAT32,
         "ffpaSetTensorDescriptor accepted type " + std::to_string(dtype) + ", rank " +
             std::to_string(nbDims) + (nullDims ? " and NULL dims" : ""));
  expected.isSet = true;
  expected.dtype = dtype;
  expected.nbDims = nbDims;
  int64_t packed = 1;  // an accepted packed tensor spans less than 2^62 elements: no overflow
  for (int32_t i = nbDims - 1; i >= 0; --i) {
    expect(dims[i] >= 1 && dims[i] <= (int64_t{1} << 31) - 1, "accepted extent " + std::to_string(dims[i]));
    expected.dims[i] = dims[i];
    expected.strides[i] = nullStrides ? packed : strides[i];
    if (i > 0) packed *= dims[i];
  }
  checkReadBack(desc, expected);
  checkAcceptedLayout(in, dtype, dims, nullStrides ? nullptr : strides.data());
}

// Partial reads: `requested` entries at most, into arrays of exactly that size; nothing else
// may be written.
void getDescriptor(ByteReader& in, ffpaTensorDescriptor_t desc, const ExpectedDescriptor& expected) {
  const int32_t requested = in.takeBool() ? static_cast<int32_t>(in.takeIndex(7)) - 1 : in.take<int32_t>();
  const size_t capacity = static_cast<size_t>(std::clamp(requested, 0, kMaxArrayLength));
  constexpr int64_t kUntouched = 0x5a5a5a5a5a5a5a5a;
  std::unique_ptr<int64_t[]> dims(new int64_t[capacity]);
  std::unique_ptr<int64_t[]> strides(new int64_t[capacity]);
  std::fill(dims.get(), dims.get() + capacity, kUntouched);
  std::fill(strides.get(), strides.get() + capacity, kUntouched);
  const uint8_t nullMask = in.take<uint8_t>();
  ffpaDataType_t dtype{};
  int32_t nbDims = -1;

  const ffpaStatus_t status = ffpaGetTensorDescriptor(
      desc, (nullMask & 1) ? nullptr : &dtype, requested, (nullMask & 2) ? nullptr : &nbDims,
      (nullMask & 4) ? nullptr : dims.get(), (nullMask & 8) ? nullptr : strides.get());
  expectApiResult(status, "ffpaGetTensorDescriptor");
  const bool shouldSucceed = expected.isSet && requested >= 0;
  expect((status == FFPA_STATUS_SUCCESS) == shouldSucceed,
         "ffpaGetTensorDescriptor(requested " + std::to_string(requested) + ") returned " +
             ffpa_fuzz::statusText(status));
  if (!shouldSucceed) return;
  const size_t written = std::min<size_t>(capacity, static_cast<size_t>(expected.nbDims));
  for (size_t i = 0; i < capacity; ++i) {
    const bool inside = i < written;
    if (!(nullMask & 4)) {
      expect(dims[i] == (inside ? expected.dims[i] : kUntouched), "dims[" + std::to_string(i) + "] read wrongly");
    }
    if (!(nullMask & 8)) {
      expect(strides[i] == (inside ? expected.strides[i] : kUntouched),
             "strides[" + std::to_string(i) + "] read wrongly");
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ByteReader in(data, size);
  ffpaTensorDescriptor_t desc = nullptr;
  expectApiResult(ffpaCreateTensorDescriptor(&desc), "ffpaCreateTensorDescriptor");
  expect(desc != nullptr, "ffpaCreateTensorDescriptor gave NULL");
  ExpectedDescriptor expected;
  checkReadBack(desc, expected);

  for (int step = 0; step < 16 && !in.empty(); ++step) {
    switch (in.takeIndex(3)) {
      case 0: setDescriptor(in, desc, expected); break;
      case 1: getDescriptor(in, desc, expected); break;
      default: {
        const int64_t dims[4] = {1, 1, 1, 1};
        ffpa_fuzz::expectNullPointerRefused(
            ffpaSetTensorDescriptor(nullptr, FFPA_DATA_TYPE_FLOAT16, 4, dims, nullptr), "ffpaSetTensorDescriptor");
        ffpa_fuzz::expectNullPointerRefused(
            ffpaGetTensorDescriptor(nullptr, nullptr, 0, nullptr, nullptr, nullptr), "ffpaGetTensorDescriptor");
        break;
      }
    }
  }
  expectApiResult(ffpaDestroyTensorDescriptor(desc), "ffpaDestroyTensorDescriptor");
  return 0;
}
