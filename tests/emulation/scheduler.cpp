// Runs the blocks of a launch: each cluster's threads (one block's, without clusters) as fibers on
// one CPU thread, switching only where a thread waits; several CPU threads take clusters in turn.
#include "emulation/block.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
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
      // wgmma still in flight when the thread exits: its accumulators are never read, and its
      // reads of shared memory may outlive the block.
      for (const auto& group : thread.committedWgmma) {
        if (!group.empty()) fail("the thread exits with a wgmma that no wgmmaWait retired", group.front().site);
      }
      if (!thread.openWgmma.empty()) {
        fail("the thread exits with a wgmma never committed", thread.openWgmma.front().site);
      }
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
    } else if (thread->waiting == Waiting::Cluster) {
      state = "wait at the cluster barrier (" + describe(thread->site) + "), which has " +
              std::to_string(block.cluster->arrived) + " of the cluster's threads";
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

// Which thread runs next. Default schedule: the front of the first block (from `turn` on) with
// ready threads. Seeded: a thread drawn from the ready ones; in a cluster, from one favoured
// block while it has ready threads, for streaks of up to 4096 picks, so that one block runs far
// ahead of the others as it may on the GPU (a receiver slow to read what another block sends).
// Within the block, one lagging warp is drawn for streaks of up to 4096 picks, whose threads run
// only while no other thread is ready: a warp the GPU stalls while the others run far ahead, as
// a warp that reads shared memory another warp overwrites without waiting for it. (Drawn
// uniformly, the threads of a warp rarely fall far enough behind: such a race showed in one
// schedule in ten.)
struct Picker {
  uint64_t seed;
  uint64_t draws;
  std::size_t turn = 0;
  std::size_t favoured = 0;
  uint64_t streak = 0;  // picks left in the favoured block's streak
  int laggard = -1;     // the lagging warp (-1: none)
  uint64_t lag = 0;     // picks left in its streak
};

// A ready thread of `block` drawn uniformly, passing over the threads of warp `laggard` while
// others are ready: its position in block.ready.
std::size_t drawReady(const Block& block, Picker& picker) {
  const auto& ready = block.ready;
  std::size_t others = 0;
  for (const int thread : ready) others += thread / kWarpSize != picker.laggard;
  if (others == 0 || others == ready.size()) return nextDraw(picker.draws) % ready.size();
  std::size_t pick = nextDraw(picker.draws) % others;
  for (std::size_t i = 0;; ++i) {
    if (ready[i] / kWarpSize == picker.laggard) continue;
    if (pick-- == 0) return i;
  }
}

// The seed of a seeded schedule: Config::scheduleSeed, moved by FFPA_EMULATION_SCHEDULES when
// set (a number: every seeded case then runs other schedules, to search for races beyond the
// ones the tests pin down). 0 stays 0, the unseeded order.
uint64_t scheduleSeedOf(uint64_t configured) {
  static const uint64_t shift = [] {
    const char* text = std::getenv("FFPA_EMULATION_SCHEDULES");
    return text == nullptr ? uint64_t{0} : std::strtoull(text, nullptr, 10);
  }();
  if (configured == 0 || shift == 0) return configured;
  uint64_t state = configured ^ (shift << 32);
  return nextDraw(state) | 1u;
}

bool pickThread(Cluster& cluster, Picker& picker) {
  auto& blocks = cluster.blocks;
  std::size_t readyCount = 0;
  for (const auto& block : blocks) readyCount += block->ready.size();
  if (readyCount == 0) return false;
  if (picker.seed == 0) {
    while (blocks[picker.turn % blocks.size()]->ready.empty()) ++picker.turn;
    tBlock = blocks[picker.turn++ % blocks.size()].get();
  } else {
    if (blocks.size() > 1) {
      if (picker.streak == 0) {
        picker.favoured = nextDraw(picker.draws) % blocks.size();
        picker.streak = 1 + nextDraw(picker.draws) % 4096;
      }
      --picker.streak;
    }
    if (picker.lag == 0) {
      // Half of the streaks lag no warp.
      const int warps = (blocks[0]->config.blockThreads + kWarpSize - 1) / kWarpSize;
      const uint64_t draw = nextDraw(picker.draws) % (2 * static_cast<uint64_t>(warps));
      picker.laggard = draw < static_cast<uint64_t>(warps) ? static_cast<int>(draw) : -1;
      picker.lag = 1 + nextDraw(picker.draws) % 4096;
    }
    --picker.lag;
    Block* chosen = blocks[picker.favoured].get();
    std::size_t pick = 0;
    if (!chosen->ready.empty()) {
      pick = drawReady(*chosen, picker);
    } else {
      pick = nextDraw(picker.draws) % readyCount;
      for (const auto& block : blocks) {
        if (pick < block->ready.size()) {
          chosen = block.get();
          break;
        }
        pick -= block->ready.size();
      }
    }
    std::swap(chosen->ready.front(), chosen->ready[pick]);
    tBlock = chosen;
  }
  tThread = tBlock->threads[tBlock->ready.front()].get();
  tBlock->ready.pop_front();
  return true;
}

// Runs cluster `index` (its blocks' x indices index * clusterX + rank) to its end.
void runCluster(Cluster& cluster, Dim3 index) {
  auto& blocks = cluster.blocks;
  const int size = static_cast<int>(blocks.size());
  for (int rank = 0; rank < size; ++rank) blocks[rank]->reset({index.x * size + rank, index.y, index.z});
  cluster.arrived = 0;
  cluster.waiting.clear();
  const Dim3 first = blocks[0]->index;
  Picker picker;
  picker.seed = scheduleSeedOf(blocks[0]->config.scheduleSeed);
  picker.draws = picker.seed ^ (uint64_t(first.x) << 42 ^ uint64_t(first.y) << 21 ^ uint64_t(first.z));
  for (;;) {
    while (pickThread(cluster, picker)) tThread->fiber.resume();
    tBlock = nullptr;
    tThread = nullptr;
    bool running = false;
    std::string error;  // the first block's that failed, or a deadlock of the cluster
    for (const auto& block : blocks) {
      for (const auto& thread : block->threads) running = running || !thread->exited;
      if (error.empty() && block->aborted) error = block->error;
    }
    // Nothing can run, yet threads wait: a deadlock, or threads waiting for a block of the
    // cluster that failed. Resumed now, with every block marked failed, the waiting threads unwind.
    if (error.empty() && running) {
      for (const auto& block : blocks) {
        bool stuck = false;
        for (const auto& thread : block->threads) stuck = stuck || !thread->exited;
        if (stuck) error += (error.empty() ? "" : "; ") + describeDeadlock(*block);
      }
    }
    for (const auto& block : blocks) {
      if (!block->aborted && !error.empty()) {
        block->aborted = true;
        block->error = error;
      }
      block->ready.clear();
      for (const auto& thread : block->threads) {
        if (!thread->exited) block->ready.push_back(thread->index);
      }
    }
    if (!running) {
      // Arrivals that no phase completed: a barrier.arrive with nobody left to wait for it (the
      // turns of the threads that meet there do not add up).
      for (const auto& block : blocks) {
        for (int id = 0; id < kBarriers && !block->aborted; ++id) {
          if (block->barriers[id].arrivals > 0) {
            block->aborted = true;
            block->error = blockName(*block) + ": barrier " + std::to_string(id) + " left with " +
                           std::to_string(block->barriers[id].arrivals) +
                           " arrivals (rolesArrive) of a phase that never completed";
          }
        }
      }
      break;
    }
  }
}

// Cluster `linear` of the grid, in units of clusters along x.
Dim3 clusterOf(const Config& config, long linear) {
  const long x = config.grid.x / config.clusterX, y = config.grid.y;
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
  if (config.clusterX < 1 || config.clusterX > 8 || config.grid.x % config.clusterX != 0) {
    throw std::invalid_argument("emulator: clusters of " + std::to_string(config.clusterX) +
                                " blocks: 1 to 8 blocks, dividing grid.x = " + std::to_string(config.grid.x));
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
    barrier.site = {"", 0};
    barrier.aligned = false;
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
  const long clusters = long{config.grid.x} / config.clusterX * config.grid.y * config.grid.z;
  const long workers = std::min<long>(clusters, std::max(1u, std::thread::hardware_concurrency()));
  std::atomic<long> next{0};
  std::mutex mutex;  // guards the two below
  long failedCluster = clusters;
  std::string failure;
  std::exception_ptr crash;  // the emulator's own failure (out of memory...)

  auto work = [&] {
    try {
      Cluster cluster;
      for (int rank = 0; rank < config.clusterX; ++rank) {
        cluster.blocks.push_back(std::make_unique<Block>(config, body));
        cluster.blocks.back()->cluster = &cluster;
        cluster.blocks.back()->rank = rank;
      }
      for (long i = next++; i < clusters; i = next++) {
        runCluster(cluster, clusterOf(config, i));
        const Block& failed = *cluster.blocks[0];  // every block of a failed cluster has the error
        if (failed.aborted) {
          const std::lock_guard<std::mutex> lock(mutex);
          if (i < failedCluster) {
            failedCluster = i;
            failure = failed.error;
          }
          next = clusters;  // starts no further cluster
        }
      }
    } catch (...) {
      const std::lock_guard<std::mutex> lock(mutex);
      crash = std::current_exception();
      next = clusters;
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
int clusterRank() { return emulation::currentBlock().rank; }
int blockIndexY() { return emulation::currentBlock().index.y; }
int blockIndexZ() { return emulation::currentBlock().index.z; }

}  // namespace emulated
}  // namespace ffpa::kernels
