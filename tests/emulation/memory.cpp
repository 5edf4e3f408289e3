// Shared memory, cp.async and global stores, with their bounds checks.
//
// cp.async is deferred: a copy only joins its thread's open group; copyAsyncWait retires whole
// committed groups, oldest first, and only then are the bytes written. A kernel that reads too
// early reads the poison or the previous tile, as it might on the GPU (and an ldmatrix of bytes
// that a copy in flight targets is reported outright: see warp.cpp).
#include "emulation/block.h"

#include <cstring>

namespace ffpa::emulation {

void checkGlobal(const Block& block, const void* pointer, std::size_t bytes, const char* what,
                 Site site) {
  const auto address = reinterpret_cast<uintptr_t>(pointer);
  if (address % bytes != 0) {
    fail(std::string(what) + " " + hex(address) + " is not " + std::to_string(bytes) +
             "-byte aligned",
         site);
  }
  for (const Buffer& buffer : block.config.buffers) {
    const auto begin = reinterpret_cast<uintptr_t>(buffer.data);
    if (address >= begin && address - begin + bytes <= buffer.bytes) return;
  }
  fail(std::string(what) + " [" + hex(address) + ", +" + std::to_string(bytes) +
           ") is outside every registered buffer",
       site);
}

std::string sharedUnitProblem(const Block& block, uint32_t address) {
  if (address % 16 != 0) return "is not 16-byte aligned";
  if (address < kSharedBase || uint64_t{address} - kSharedBase + 16 > block.config.sharedBytes) {
    return "is outside dynamic shared memory [" + hex(kSharedBase) + ", " +
           hex(kSharedBase + block.config.sharedBytes) + ")";
  }
  return {};
}

void retireCopyGroups(int pending) {
  Block& block = currentBlock();
  ThreadState& thread = currentThread();
  while (thread.committedGroups.size() > static_cast<std::size_t>(pending)) {
    retire(block, thread.committedGroups.front());
    thread.committedGroups.pop_front();
  }
}

void retire(Block& block, const std::vector<Copy>& group) {
  for (const Copy& copy : group) {
    unsigned char* destination = block.shared.get() + copy.offset;
    if (copy.valid) {
      std::memcpy(destination, copy.source, 16);
    } else {
      std::memset(destination, 0, 16);
    }
    --block.copiesInFlight[copy.offset / 16];
  }
}

}  // namespace ffpa::emulation

namespace ffpa::kernels {
inline namespace emulated {

using emulation::Block;
using emulation::ThreadState;

unsigned char* sharedMemory() { return emulation::currentBlock().shared.get(); }

uint32_t sharedAddress(const void* pointer, emulation::Site site) {
  const Block& block = emulation::currentBlock();
  const auto* byte = static_cast<const unsigned char*>(pointer);
  const unsigned char* base = block.shared.get();
  if (byte < base || byte > base + block.config.sharedBytes) {
    emulation::fail("sharedAddress of " + emulation::hex(reinterpret_cast<uintptr_t>(pointer)) +
                        ", which is not in the block's dynamic shared memory",
                    site);
  }
  return emulation::kSharedBase + static_cast<uint32_t>(byte - base);
}

void copyAsync16(uint32_t shared, const void* global, bool valid, emulation::Site site) {
  Block& block = emulation::currentBlock();
  ThreadState& thread = emulation::currentThread();
  const std::string problem = emulation::sharedUnitProblem(block, shared);
  if (!problem.empty()) {
    emulation::fail("cp.async destination " + emulation::hex(shared) + " " + problem, site);
  }
  const uint32_t offset = shared - emulation::kSharedBase;
  if (valid) emulation::checkGlobal(block, global, 16, "cp.async source", site);
  if (block.copiesInFlight[offset / 16] != 0) {
    emulation::fail("cp.async to shared address " + emulation::hex(shared) +
                        ", which an earlier cp.async still in flight writes too",
                    site);
  }
  ++block.copiesInFlight[offset / 16];
  thread.openGroup.push_back({offset, global, valid});
}

void copyAsyncCommit() {
  ThreadState& thread = emulation::currentThread();
  thread.committedGroups.push_back(std::move(thread.openGroup));
  thread.openGroup.clear();
}

void storeGlobal32(void* global, uint32_t value, emulation::Site site) {
  emulation::checkGlobal(emulation::currentBlock(), global, 4, "storeGlobal32 address", site);
  std::memcpy(global, &value, 4);
}

void storeGlobalF32(float* global, float value, emulation::Site site) {
  emulation::checkGlobal(emulation::currentBlock(), global, 4, "storeGlobalF32 address", site);
  std::memcpy(global, &value, 4);
}

}  // namespace emulated
}  // namespace ffpa::kernels
