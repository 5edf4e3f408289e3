// The emulator's state of one running block, shared by the files that implement the interface.
// All of a block's threads run on one CPU thread, so none of this needs locking.
#pragma once

#include "emulation/fiber.h"
#include "emulation/launch.h"

#include <array>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace ffpa::sm90 {
struct TensorMapSpec;
}

namespace ffpa::emulation {

constexpr int kWarpSize = 32;
constexpr int kBarriers = 16;

// One cp.async: 16 bytes into shared memory, from `source` or zeros.
struct Copy {
  uint32_t offset;  // into dynamic shared memory
  const void* source;
  bool valid;
};

// One wgmma.mma_async, as issued by one thread; run (for that thread's accumulators) when a
// wgmmaWait retires its group.
struct Wgmma {
  float* d;
  int n;
  bool transposeB;
  uint64_t descA, descB;  // descA unused where A comes from registers
  bool accumulate;
  bool bf16;
  Site site;
  // A from registers (wgmmaRS; null for A from shared memory): the thread's own four, which must
  // still hold what they held at the issue when the group retires (the GPU may read them until
  // then); and the fragments of the four lanes of its quad as they were at the issue, lane q's
  // at quadA[4 q ..].
  const uint32_t* registers = nullptr;
  uint32_t quadA[16] = {};
};

// One TMA box copy, performed when a thread waits on its mbarrier.
struct TensorCopy {
  uint32_t offset;  // of the destination in dynamic shared memory
  const ffpa::sm90::TensorMapSpec* map;
  int coordinates[4];
  uint32_t bytes;
};

// 16 bytes stored into a block's shared memory by another block of its cluster (st.async), which
// land when the phase of the mbarrier they complete bytes on completes (default schedule).
struct RemoteStore {
  uint32_t offset;  // into dynamic shared memory
  unsigned char bytes[16];
};

// An mbarrier: arrivals and transaction bytes of the phase in progress, and completed phases.
// Transaction bytes may go below zero while arrivals are pending (a cluster peer's st.async can
// complete before the expect_tx of its phase), never once they are all in.
struct MBarrier {
  int expected = 0;  // arrivals per phase
  int pending = 0;   // arrivals the phase still needs
  int64_t bytes = 0;  // transaction bytes announced by expect_tx and not yet delivered
  int64_t phases = 0;  // completed phases
  std::vector<TensorCopy> copies;  // issued, not yet performed
  std::vector<RemoteStore> stores;  // of the phase in progress
  std::vector<int> waiting;  // threads waiting for a phase
};

// What a waiting thread waits for, for deadlock reports.
enum class Waiting { Nothing, Collective, Barrier, MBarrier, Cluster };

struct ThreadState {
  int index = 0;
  Fiber fiber;
  bool exited = false;
  Waiting waiting = Waiting::Nothing;
  int barrier = 0;  // the barrier id while waiting at one
  Site site{};      // of the operation the thread waits at
  std::vector<Copy> openGroup;
  std::deque<std::vector<Copy>> committedGroups;  // oldest first
  uint32_t mbarrier = 0;  // the shared address of the mbarrier while waiting at one
  int parity = 0;         // and the phase parity waited for
  std::map<uint32_t, int64_t> observedPhases;  // per mbarrier: completed phases this thread saw
  std::vector<Wgmma> openWgmma;
  std::deque<std::vector<Wgmma>> committedWgmma;  // oldest first
  // A wgmmaFence since the thread's last wgmmaWait (or its start): a wgmma reads registers that
  // ordinary instructions may have written since (accumulators, A), which needs one between.
  bool wgmmaFenced = false;
};

// The warp collectives, which every lane of a warp must reach together.
enum class Collective {
  LoadMatrixX4,
  LoadMatrixX2,
  LoadMatrixX4Trans,
  MmaF32Half,
  MmaF32Bf16,
  MmaF16,
  ShuffleXor,
  VoteAll,
  VoteAny,
  WgmmaRegisters
};
const char* collectiveName(Collective collective);

// A lane's operands of a collective and, once the warp has them all, its results.
struct LaneSlot {
  Collective collective;
  Site site;
  uint32_t in[10];
  uint32_t out[16];
};

struct Warp {
  int lanes = kWarpSize;  // fewer in a block whose size is no multiple of 32
  int arrived = 0;
  std::array<LaneSlot, kWarpSize> slots;
};

struct Barrier {
  int expected = 0;                 // thread count of the phase in progress; 0 when no thread waits
  std::vector<int> waiting;         // threads that arrived in this phase to wait, the last one excepted
  int arrivals = 0;                 // threads that arrived in this phase without waiting (barrier.arrive)
  std::vector<uint32_t> laneMasks;  // per warp: the lanes that arrived in this phase
  // The first arrival of the phase in progress: its call site, and whether it was aligned
  // (bar.sync, namedBarrier) rather than barrier.sync (rolesBarrier).
  Site site{"", 0};
  bool aligned = false;
};

struct Cluster;

// One block of a launch at a time: a CPU thread that runs blocks reuses it (and its fibers).
struct Block {
  Block(const Config& config, const std::function<void()>& body);

  // Resets everything for a fresh run of block `index`: poisoned shared memory, no copies in
  // flight, every thread ready.
  void reset(Dim3 index);

  const Config& config;
  const std::function<void()>& body;
  Dim3 index;
  std::unique_ptr<unsigned char[]> shared;
  std::vector<uint16_t> copiesInFlight;  // per 16-byte unit of shared memory
  std::vector<std::unique_ptr<ThreadState>> threads;
  std::vector<Warp> warps;
  std::array<Barrier, kBarriers> barriers;
  std::map<uint32_t, MBarrier> mbarriers;  // by shared address
  // Per 16-byte unit: the mbarrier and the phase (1-based) whose TMA copy wrote it last; a thread
  // may read it only after seeing that phase complete. {0, 0} when no TMA wrote it.
  std::vector<std::pair<uint32_t, int64_t>> tmaWriters;
  std::deque<int> ready;  // threads to run, in order
  bool aborted = false;
  std::string error;  // the first bug found, where it was found
  Cluster* cluster = nullptr;
  int rank = 0;  // in the cluster
};

// The blocks of one cluster (one block when Config::clusterX is 1), run together, and the cluster
// barrier's state.
struct Cluster {
  std::vector<std::unique_ptr<Block>> blocks;  // by rank
  int arrived = 0;                             // at the cluster barrier, in its phase in progress
  std::vector<std::pair<Block*, int>> waiting;  // there: block and thread
};

// The shared address window of the blocks of a cluster (mapShared): rank r's dynamic shared
// memory starts at kClusterBase + r * kClusterRankStride. Distinct from the block's own window, so
// that an ordinary access to a mapped address is reported.
inline constexpr uint32_t kClusterBase = 1u << 26;
inline constexpr uint32_t kClusterRankStride = 1u << 20;

// Thrown inside a thread's fiber to unwind it once its block has failed; never leaves the fiber.
struct Abort {};

// The block and thread that the calling fiber emulates; std::logic_error outside a kernel.
Block& currentBlock();
ThreadState& currentThread();

// Record the first bug of the block, prefixed with the block, the calling thread (or the warp, for
// what a collective found in all its lanes) and `site`, and unwind the calling thread.
[[noreturn]] void fail(const std::string& message, Site site);
[[noreturn]] void failWarp(const std::string& message, Site site);

// Suspends the calling thread until another releases it (see release()); throws Abort when the
// block fails meanwhile.
void wait(Waiting what, Site site);
// The block of rank `rank` in the calling block's cluster and the byte offset into its dynamic
// shared memory of the cluster address `address` (16 bytes there must be valid); fails otherwise.
std::pair<Block*, uint32_t> clusterTarget(uint32_t address, uint32_t bytes, const char* what, Site site);

// Fails (naming `what`) when every thread of `target`, a block of the calling block's cluster, has
// exited: on the GPU its shared memory and mbarriers are gone.
void checkNotExited(const Block& target, const char* what, Site site);

// The warp collective of a wgmmaRS: every lane publishes its four A registers; returns the 16 of
// the calling lane's quad (lane q of the quad at 4 q), those a wgmma reads for its rows.
const uint32_t* gatherQuadRegisters(const uint32_t (&a)[4], Site site);

// Makes a waiting thread runnable again, after the threads already queued.
void release(Block& block, int thread);
// Under a seeded schedule (Config::scheduleSeed), lets the scheduler run other threads before
// the calling one goes on: where hardware would let other warps run between two operations of
// this thread (after an mbarrier arrival, before a wgmma reads shared memory). Nothing otherwise.
void yieldPoint(Site site);

// Checks that [pointer, pointer + bytes) lies in one registered buffer and is `bytes`-aligned.
void checkGlobal(const Block& block, const void* pointer, std::size_t bytes, const char* what, Site site);

// Writes a group's copies into shared memory.
void retire(Block& block, const std::vector<Copy>& group);

// Why the 16 bytes at shared address `address` may not be accessed, as in "<address> is not
// 16-byte aligned"; empty when they may.
std::string sharedUnitProblem(const Block& block, uint32_t address);

// "file:line"; index sets such as "0-15, 20" (indices in increasing order); hexadecimal numbers.
std::string describe(Site site);
std::string describeSet(const std::vector<int>& indices);
std::string hex(uint64_t value);

}  // namespace ffpa::emulation
