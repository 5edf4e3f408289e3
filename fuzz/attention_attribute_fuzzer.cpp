// Attention attributes through the C API: arbitrary attribute numbers, sizes and value bytes
// (NULL included) for ffpaSetAttentionAttribute and ffpaGetAttentionAttribute, checked against a
// model of the descriptor written from the header's documentation.
#include "support/byte_reader.h"
#include "support/fuzz_checks.h"

#include <ffpa/ffpa.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <memory>
#include <string>

using ffpa_fuzz::ByteReader;
using ffpa_fuzz::expect;
using ffpa_fuzz::expectApiResult;

namespace {

// Value buffers are heap arrays of exactly the size passed, so AddressSanitizer catches a read or
// write beyond it. Larger sizes get this many bytes: the library must refuse them unread.
constexpr size_t kMaxValueBytes = 64;

// What the descriptor holds according to the documentation: defaults, then every accepted set.
struct ExpectedSettings {
  float scale = 0.0f;  // reading it before it was set gives 0
  int32_t causal = FFPA_CAUSAL_NONE;
  uint8_t keyLengths[sizeof(const int32_t*)] = {};  // the pointer's bytes; NULL by default
};

// The size of an attribute's type, 0 for a number that names none.
size_t attributeSize(ffpaAttentionAttribute_t attr) {
  switch (attr) {
    case FFPA_ATTENTION_SOFTMAX_SCALE:
    case FFPA_ATTENTION_CAUSAL_MODE: return 4;
    case FFPA_ATTENTION_KEY_LENGTHS: return sizeof(const int32_t*);
    default: return 0;
  }
}

ffpaAttentionAttribute_t takeAttribute(ByteReader& in) {
  switch (in.takeIndex(4)) {
    case 0:
    case 1: return static_cast<ffpaAttentionAttribute_t>(in.takeIndex(3));
    case 2: return static_cast<ffpaAttentionAttribute_t>(in.pick({2, 3, 100, 101, 0x7fffffff}));
    default: return in.takeEnum<ffpaAttentionAttribute_t>();
  }
}

size_t takeSize(ByteReader& in) {
  switch (in.takeIndex(4)) {
    case 0: return 4;
    case 1: return sizeof(const int32_t*);
    case 2: return in.takeIndex(9);
    default: return in.take<size_t>();
  }
}

// Four value bytes: the interesting floats and integers, or raw bytes.
uint32_t takeValueBits(ByteReader& in) {
  switch (in.takeIndex(3)) {
    case 0: {
      const float value = in.pick({0.0f, -0.0f, 1.0f, 0.125f, -1.0f, std::numeric_limits<float>::infinity(),
                                   -std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN(),
                                   std::numeric_limits<float>::denorm_min(), std::numeric_limits<float>::max()});
      uint32_t bits;
      std::memcpy(&bits, &value, sizeof bits);
      return bits;
    }
    case 1: return static_cast<uint32_t>(in.pick({0, 1, 2, 3, -1, std::numeric_limits<int32_t>::min()}));
    default: return in.take<uint32_t>();
  }
}

std::unique_ptr<uint8_t[]> valueBuffer(size_t size, uint32_t bits) {
  const size_t length = std::min(size, kMaxValueBytes);
  std::unique_ptr<uint8_t[]> buffer(new uint8_t[length]);
  for (size_t i = 0; i < length; ++i) buffer[i] = static_cast<uint8_t>(bits >> (8 * (i % 4)));
  return buffer;
}

bool oneOf(ffpaStatus_t status, std::initializer_list<ffpaStatus_t> allowed) {
  for (const ffpaStatus_t s : allowed) {
    if (s == status) return true;
  }
  return false;
}

// The call succeeded exactly when the documentation says it must, and a refusal carries one of
// the statuses both functions document for bad arguments.
void expectDocumentedOutcome(ffpaStatus_t status, bool valid, const std::string& call) {
  expect((status == FFPA_STATUS_SUCCESS) == valid, call + " returned " + ffpa_fuzz::statusText(status));
  if (valid) return;
  expect(oneOf(status, {FFPA_STATUS_BAD_PARAM_NULL_POINTER, FFPA_STATUS_BAD_PARAM_ATTRIBUTE_TYPE,
                        FFPA_STATUS_BAD_PARAM_OUT_OF_BOUND}),
         call + " failed with an undocumented status " + ffpa_fuzz::statusText(status));
}

void setAttribute(ByteReader& in, ffpaAttentionDescriptor_t desc, ExpectedSettings& expected) {
  const ffpaAttentionAttribute_t attr = takeAttribute(in);
  const size_t size = takeSize(in);
  const uint32_t bits = takeValueBits(in);
  const bool nullValue = in.takeIndex(16) == 0;
  const std::unique_ptr<uint8_t[]> value = valueBuffer(size, bits);

  const ffpaStatus_t status = ffpaSetAttentionAttribute(desc, attr, nullValue ? nullptr : value.get(), size);
  expectApiResult(status, "ffpaSetAttentionAttribute");

  float scale;
  std::memcpy(&scale, &bits, sizeof scale);
  const auto mode = static_cast<int32_t>(bits);
  // Any pointer is a valid count array to set (the counts are read on the device, by calls).
  const bool valid = !nullValue && size == attributeSize(attr) &&
                     ((attr == FFPA_ATTENTION_SOFTMAX_SCALE && std::isfinite(scale) && scale > 0.0f) ||
                      (attr == FFPA_ATTENTION_CAUSAL_MODE && mode >= FFPA_CAUSAL_NONE &&
                       mode <= FFPA_CAUSAL_BOTTOM_RIGHT) ||
                      attr == FFPA_ATTENTION_KEY_LENGTHS);
  const std::string call = "ffpaSetAttentionAttribute(attr " + std::to_string(attr) + ", size " +
                           std::to_string(size) + ", value bits " + std::to_string(bits) +
                           (nullValue ? ", NULL" : "") + ")";
  expectDocumentedOutcome(status, valid, call);
  if (!valid) return;
  if (attr == FFPA_ATTENTION_SOFTMAX_SCALE) expected.scale = scale;
  if (attr == FFPA_ATTENTION_CAUSAL_MODE) expected.causal = mode;
  if (attr == FFPA_ATTENTION_KEY_LENGTHS) std::memcpy(expected.keyLengths, value.get(), sizeof expected.keyLengths);
}

void getAttribute(ByteReader& in, ffpaAttentionDescriptor_t desc, const ExpectedSettings& expected) {
  const ffpaAttentionAttribute_t attr = takeAttribute(in);
  const size_t size = takeSize(in);
  const uint8_t nullMask = in.take<uint8_t>();
  const bool nullValue = (nullMask & 1) != 0 && (nullMask & 2) != 0;  // rarer than a NULL size
  std::unique_ptr<uint8_t[]> value = valueBuffer(size, 0xa5a5a5a5u);
  size_t sizeWritten = 12345;

  const ffpaStatus_t status = ffpaGetAttentionAttribute(desc, attr, nullValue ? nullptr : value.get(), size,
                                                        (nullMask & 4) ? nullptr : &sizeWritten);
  expectApiResult(status, "ffpaGetAttentionAttribute");
  const size_t typeSize = attributeSize(attr);
  const bool valid = typeSize > 0 && (size == 0 || (!nullValue && size == typeSize));
  const std::string call = "ffpaGetAttentionAttribute(attr " + std::to_string(attr) + ", size " +
                           std::to_string(size) + (nullValue ? ", NULL" : "") + ")";
  expectDocumentedOutcome(status, valid, call);
  if (!valid) return;
  if (!(nullMask & 4)) expect(sizeWritten == typeSize, call + " reported size " + std::to_string(sizeWritten));
  if (size == 0) return;  // a size query: the buffer has no bytes to receive a value
  const void* want = attr == FFPA_ATTENTION_SOFTMAX_SCALE ? static_cast<const void*>(&expected.scale)
                     : attr == FFPA_ATTENTION_CAUSAL_MODE ? static_cast<const void*>(&expected.causal)
                                                          : static_cast<const void*>(expected.keyLengths);
  expect(std::memcmp(value.get(), want, typeSize) == 0, call + " read back a value that was not set");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ByteReader in(data, size);
  ffpaAttentionDescriptor_t desc = nullptr;
  expectApiResult(ffpaCreateAttentionDescriptor(&desc), "ffpaCreateAttentionDescriptor");
  expect(desc != nullptr, "ffpaCreateAttentionDescriptor gave NULL");
  ExpectedSettings expected;

  for (int step = 0; step < 32 && !in.empty(); ++step) {
    switch (in.takeIndex(3)) {
      case 0: setAttribute(in, desc, expected); break;
      case 1: getAttribute(in, desc, expected); break;
      default: {
        const int32_t mode = FFPA_CAUSAL_NONE;
        ffpa_fuzz::expectNullPointerRefused(
            ffpaSetAttentionAttribute(nullptr, FFPA_ATTENTION_CAUSAL_MODE, &mode, sizeof mode), "ffpaSetAttentionAttribute");
        ffpa_fuzz::expectNullPointerRefused(
            ffpaGetAttentionAttribute(nullptr, FFPA_ATTENTION_CAUSAL_MODE, nullptr, 0, nullptr), "ffpaGetAttentionAttribute");
        break;
      }
    }
  }
  expectApiResult(ffpaDestroyAttentionDescriptor(desc), "ffpaDestroyAttentionDescriptor");
  return 0;
}
