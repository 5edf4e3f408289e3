// Carves one caller-provided workspace into aligned slices.
#pragma once

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
  // Reserves `bytes` and returns the slice's offset from the workspace start.
  size_t add(size_t bytes) {
    const size_t offset = total_;
    total_ = alignUp(total_ + bytes);
    return offset;
  }
  size_t total() const { return total_; }

 private:
  size_t total_ = 0;
};

template <class T>
T* slice(void* workspace, size_t offset) {
  return reinterpret_cast<T*>(static_cast<unsigned char*>(workspace) + offset);
}

}  // namespace ffpa
