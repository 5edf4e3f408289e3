// Carves one caller-provided workspace into aligned slices.
#pragma once

#include "core/error.h"

#include <cstddef>
#include <cstdint>

namespace ffpa {

// Every slice starts on this boundary: what cuBLASLt assumes for its operands and enough for
// any vector access of a kernel.
constexpr size_t kWorkspaceAlignment = 256;

constexpr size_t alignUp(size_t bytes, size_t alignment = kWorkspaceAlignment) {
  return (bytes + alignment - 1) / alignment * alignment;
}

class WorkspaceLayout {
 public:
  // Reserves `bytes` and returns the slice's offset from the workspace start. Sizes come from
  // checked arithmetic; a total past 2^62 is a bug upstream, refused rather than wrapped.
  size_t add(size_t bytes) {
    const size_t offset = total_;
    require(bytes <= kMaxTotal && total_ <= kMaxTotal - bytes, FFPA_STATUS_NOT_SUPPORTED_SHAPE,
            "the workspace of this problem would exceed 2^62 bytes");
    total_ = alignUp(total_ + bytes);
    return offset;
  }
  size_t total() const { return total_; }

 private:
  static constexpr size_t kMaxTotal = size_t{1} << 62;
  size_t total_ = 0;
};

template <class T>
T* slice(void* workspace, size_t offset) {
  return reinterpret_cast<T*>(static_cast<unsigned char*>(workspace) + offset);
}

}  // namespace ffpa
