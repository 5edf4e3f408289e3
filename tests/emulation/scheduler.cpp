// Runs the blocks of a launch: each block's threads as fibers on one CPU thread, switching only
// where a thread waits; several CPU threads take blocks in turn.
#include "emulation/block.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <exception>
#include <map>
#include <mutex>
#include <thread>

namespace ffpa::emulation {
namespace {

// The largest dynamic shared memory of a block on any supported GPU (sm_90: 227 KiB).
constexpr std::size_t kMaxSharedBytes = 227 * 1024;

// sharedMemory() is 16-byte aligned, as on the GPU.
static_assert(__STDCPP_DEFAULT_NEW_ALIGNMENT__ >= 16, "operator new[] must align to 16 bytes");

thread_local Block* tBlock = nullptr;
thread_local ThreadState* tThread = nullptr;

std::string blockName(const Block& block) {
  return "block (" + std::to_string(block.index.x) + "," + std::to_string(block.index.y) + "," +
         std::to_string(block.index.z) + ")";
}

[[noreturn]] void abortBlock(std::string message) {
  Block& block = currentBlock();
  if (!block.aborted) {
    block.aborted = true;
    block.error = std::move(message);
  }
  throw Abort{};
}

void recordThrow(Block& block, const ThreadState& thread, const std::string& what) {
  if (!block.aborted) {
    block.aborted = true;
    block.error = blockName(block) + ", thread " + std::to_string(thread.index) +
                  ": the kernel threw: " + what;
  }
}

// The fiber entry of every thread: the kernel, then the copies it never waited for.
void threadMain(void* argument) {
  auto& thread = *static_cast<ThreadState*>(argument);
  Block& block = *tBlock;
  try {
    if (!block.aborted) {
      block.body();
      for (const auto& group : thread.committedGroups) retire(block, group);
      retire(block, thread.openGroup);
    }
  } catch (const Abort&) {
  } catch (const std::exception& exception) {
    recordThrow(block, thread, exception.what());
  } catch (...) {
    recordThrow(block, thread, "an exception that is no std::exception");
  }
  thread.committedGroups.clear();
  thread.openGroup.clear();
  thread.openWgmma.clear();
  thread.committedWgmma.clear();
  thread.exited = true;
}

// For a deadlock: what each thread is stuck at, threads with the same state together.
std::string describeDeadlock(const Block& block) {
  std::map<std::string, std::vector<int>> states;
  std::vector<std::string> order;  // states by their first thread
  for (const auto& thread : block.threads) {
    std::string state;
    if (thread->exited) {
      state = "exited";
    } else if (thread->waiting == Waiting::Collective) {
      const Warp& warp = block.warps[thread->index / kWarpSize];
      state = std::string("wait at ") +
              collectiveName(warp.slots[thread->index % kWarpSize].collective) + " (" +
              describe(thread->site) + ") for the rest of warp " +
              std::to_string(thread->index / kWarpSize);
    } else if (thread->waiting == Waiting::MBarrier) {
      const auto found = block.mbarriers.find(thread->mbarrier);
      state = "wait at mbarrier " + hex(thread->mbarrier) + " for parity " + std::to_string(thread->parity) +
              " (" + describe(thread->site) + ")";
      if (found != block.mbarriers.end()) {
        const MBarrier& barrier = found->second;
        state += ", which completed " + std::to_string(barrier.phases) + " phases and needs " +
                 std::to_string(barrier.pending) + " more arrivals and " + std::to_string(barrier.bytes) +
                 " more bytes";
      }
    } else {
      const Barrier& barrier = block.barriers[thread->barrier];
      state = "wait at barrier " + std::to_string(thread->barrier) + " (" + describe(thread->site) +
              "), which has " + std::to_string(barrier.waiting.size()) + " of its " +
              std::to_string(barrier.expected) + " threads";
    }
    auto& members = states[state];
    if (members.empty()) order.push_back(state);
    members.push_back(thread->index);
  }
  std::string text = blockName(block) + ": deadlock: ";
  for (std::size_t i = 0; i < order.size(); ++i) {
    const auto& members = states[order[i]];
    text += (i ? "; " : "") + std::string(members.size() == 1 ? "thread " : "threads ") +
            describeSet(members) + " " + order[i];
  }
  return text;
}

// SplitMix64: the draws of a seeded schedule.
uint64_t nextDraw(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

void runBlock(Block& block, Dim3 index) {
  block.reset(index);
  tBlock = &block;
  const uint64_t seed = block.config.scheduleSeed;
  uint64_t draws = seed ^ (uint64_t(index.x) << 42 ^ uint64_t(index.y) << 21 ^ uint64_t(index.z));
  for (;;) {
    while (!block.ready.empty()) {
      if (seed != 0) std::swap(block.ready.front(), block.ready[nextDraw(draws) % block.ready.size()]);
      tThread = block.threads[block.ready.front()].get();
      block.ready.pop_front();
      tThread->fiber.resume();
    }
    tThread = nullptr;
    std::vector<int> stuck;
    for (const auto& thread : block.threads) {
      if (!thread->exited) stuck.push_back(thread->index);
    }
    if (stuck.empty()) break;
    // Nothing can run, yet threads wait: a deadlock (unless the block failed already). Resumed
    // now, the waiting threads unwind.
    if (!block.aborted) {
      block.aborted = true;
      block.error = describeDeadlock(block);
    }
    block.ready.assign(stuck.begin(), stuck.end());
  }
  tBlock = nullptr;
}

Dim3 blockOf(const Config& config, long linear) {
  const long x = config.grid.x, y = config.grid.y;
  return {static_cast<int>(linear % x), static_cast<int>(linear / x % y),
          static_cast<int>(linear / (x * y))};
}

void validate(const Config& config) {
  if (config.grid.x < 1 || config.grid.y < 1 || config.grid.z < 1) {
    throw std::invalid_argument("emulator: every grid dimension must be at least 1");
  }
  if (config.blockThreads < 1 || config.blockThreads > 1024) {
    throw std::invalid_argument("emulator: a block has 1 to 1024 threads, not " +
                                std::to_string(config.blockThreads));
  }
  if (config.sharedBytes > kMaxSharedBytes) {
    throw std::invalid_argument("emulator: " + std::to_string(config.sharedBytes) +
                                " bytes of shared memory exceed the 227 KiB of any GPU");
  }
}

}  // namespace

Block::Block(const Config& config, const std::function<void()>& body)
    : config(config),
      body(body),
      // Exactly sized, so that AddressSanitizer sees overflows.
      shared(new unsigned char[config.sharedBytes]),
      copiesInFlight((config.sharedBytes + 15) / 16),
      warps((config.blockThreads + kWarpSize - 1) / kWarpSize) {
  for (int i = 0; i < config.blockThreads; ++i) {
    threads.push_back(std::make_unique<ThreadState>());
    threads.back()->index = i;
  }
  warps.back().lanes = config.blockThreads - kWarpSize * (static_cast<int>(warps.size()) - 1);
  for (auto& barrier : barriers) barrier.laneMasks.assign(warps.size(), 0u);
  tmaWriters.resize((config.sharedBytes + 15) / 16);
}

void Block::reset(Dim3 blockIndex) {
  index = blockIndex;
  std::memset(shared.get(), 0xff, config.sharedBytes);
  std::fill(copiesInFlight.begin(), copiesInFlight.end(), uint16_t{0});
  for (auto& warp : warps) warp.arrived = 0;
  mbarriers.clear();
  std::fill(tmaWriters.begin(), tmaWriters.end(), std::make_pair(0u, int64_t{0}));
  for (auto& barrier : barriers) {
    barrier.expected = 0;
    barrier.waiting.clear();
    std::fill(barrier.laneMasks.begin(), barrier.laneMasks.end(), 0u);
  }
  ready.clear();
  for (auto& thread : threads) {
    thread->exited = false;
    thread->waiting = Waiting::Nothing;
    thread->observedPhases.clear();
    thread->fiber.start(&threadMain, thread.get());
    ready.push_back(thread->index);
  }
  aborted = false;
  error.clear();
}

Block& currentBlock() {
  if (!tBlock || !tThread) {
    throw std::logic_error("emulator: a kernel function was called outside a kernel");
  }
  return *tBlock;
}

ThreadState& currentThread() {
  currentBlock();
  return *tThread;
}

void fail(const std::string& message, Site site) {
  const int thread = currentThread().index;
  abortBlock(blockName(currentBlock()) + ", thread " + std::to_string(thread) + " (warp " +
             std::to_string(thread / kWarpSize) + ", lane " + std::to_string(thread % kWarpSize) +
             "), " + describe(site) + ": " + message);
}

void failWarp(const std::string& message, Site site) {
  abortBlock(blockName(currentBlock()) + ", warp " +
             std::to_string(currentThread().index / kWarpSize) + ", " + describe(site) + ": " +
             message);
}

void wait(Waiting what, Site site) {
  ThreadState& thread = currentThread();
  thread.waiting = what;
  thread.site = site;
  thread.fiber.suspend();
  thread.waiting = Waiting::Nothing;
  if (tBlock->aborted) throw Abort{};
}

void release(Block& block, int thread) { block.ready.push_back(thread); }

void yieldPoint(Site site) {
  Block& block = currentBlock();
  if (block.config.scheduleSeed == 0) return;
  release(block, currentThread().index);
  wait(Waiting::Nothing, site);
}

std::string describe(Site site) { return std::string(site.file) + ":" + std::to_string(site.line); }

std::string describeSet(const std::vector<int>& indices) {
  std::string text;
  for (std::size_t i = 0; i < indices.size();) {
    std::size_t j = i;
    while (j + 1 < indices.size() && indices[j + 1] == indices[j] + 1) ++j;
    text += (text.empty() ? "" : ", ") + std::to_string(indices[i]);
    if (j > i) text += "-" + std::to_string(indices[j]);
    i = j + 1;
  }
  return text;
}

std::string hex(uint64_t value) {
  char text[24];
  std::snprintf(text, sizeof text, "0x%llx", static_cast<unsigned long long>(value));
  return text;
}

namespace detail {

void run(const Config& config, const std::function<void()>& body) {
  validate(config);
  const long blocks = long{config.grid.x} * config.grid.y * config.grid.z;
  const long workers = std::min<long>(blocks, std::max(1u, std::thread::hardware_concurrency()));
  std::atomic<long> next{0};
  std::mutex mutex;  // guards the two below
  long failedBlock = blocks;
  std::string failure;
  std::exception_ptr crash;  // the emulator's own failure (out of memory...)

  auto work = [&] {
    try {
      Block block(config, body);
      for (long i = next++; i < blocks; i = next++) {
        runBlock(block, blockOf(config, i));
        if (block.aborted) {
          const std::lock_guard<std::mutex> lock(mutex);
          if (i < failedBlock) {
            failedBlock = i;
            failure = block.error;
          }
          next = blocks;  // starts no further block
        }
      }
    } catch (...) {
      const std::lock_guard<std::mutex> lock(mutex);
      crash = std::current_exception();
      next = blocks;
    }
  };
  std::vector<std::thread> helpers;
  for (long i = 1; i < workers; ++i) helpers.emplace_back(work);
  work();
  for (auto& helper : helpers) helper.join();
  if (crash) std::rethrow_exception(crash);
  if (!failure.empty()) throw KernelError(failure);
}

}  // namespace detail
}  // namespace ffpa::emulation

namespace ffpa::kernels {
inline namespace emulated {

int threadIndex() { return emulation::currentThread().index; }
int blockIndexX() { return emulation::currentBlock().index.x; }
int blockIndexY() { return emulation::currentBlock().index.y; }
int blockIndexZ() { return emulation::currentBlock().index.z; }

}  // namespace emulated
}  // namespace ffpa::kernels
