// Turns a fuzzer's input into the values of the calls a target makes. Reading past the end yields
// zeros instead of failing, so every input decodes to some sequence of calls and the fuzzer's
// mutations of any byte always change a value that is used.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

namespace ffpa_fuzz {

class ByteReader {
 public:
  ByteReader(const uint8_t* data, size_t size) : data_(data), size_(size) {}

  bool empty() const { return position_ >= size_; }

  // The next sizeof(T) bytes as a T (little-endian, zero-padded at the end of the input).
  template <class T>
  T take() {
    static_assert(std::is_trivially_copyable_v<T>, "take() copies raw bytes");
    unsigned char raw[sizeof(T)] = {};
    const size_t count = std::min(sizeof(T), size_ - std::min(position_, size_));
    if (count > 0) std::memcpy(raw, data_ + position_, count);
    position_ += count;
    T value;
    std::memcpy(&value, raw, sizeof value);
    return value;
  }

  bool takeBool() { return (take<uint8_t>() & 1) != 0; }

  // A number from 0 to count - 1 (count >= 1), from one byte: choices stay cheap to mutate.
  size_t takeIndex(size_t count) { return take<uint8_t>() % count; }

  template <class T, size_t N>
  T pick(const T (&choices)[N]) {
    return choices[takeIndex(N)];
  }

  // Any value of one of ffpa.h's enumerations, known or not. They have no negative enumerators
  // and end at 0x7fffffff, so C++ gives them the range [0, 2^31): a negative value, which a C
  // caller may pass, cannot exist in C++ code (the library's included) without undefined
  // behaviour, which UndefinedBehaviorSanitizer would report against this code.
  template <class Enum>
  Enum takeEnum() {
    return static_cast<Enum>(take<uint32_t>() & 0x7fffffffu);
  }

  // Up to `count` raw bytes; fewer when the input ends first.
  std::vector<uint8_t> takeBytes(size_t count) {
    const size_t available = std::min(count, size_ - std::min(position_, size_));
    std::vector<uint8_t> bytes(data_ + position_, data_ + position_ + available);
    position_ += available;
    return bytes;
  }

  // A string prefixed by its length (one byte, at most `maxLength`), without NUL bytes.
  std::string takeText(size_t maxLength) {
    const size_t length = std::min<size_t>(take<uint8_t>(), maxLength);
    std::string text;
    for (const uint8_t byte : takeBytes(length)) {
      if (byte != 0) text.push_back(static_cast<char>(byte));
    }
    return text;
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t position_ = 0;
};

}  // namespace ffpa_fuzz
