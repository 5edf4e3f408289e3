// The Hopper interface of sm90/ptx.cuh on the emulator: mbarriers, TMA box copies with the
// 128-byte swizzle, and wgmma from shared-memory descriptors or, for A, from registers.
//
// The layouts are decoded from the descriptors as the PTX ISA defines them, independently of how
// the kernels build them: a 128-byte swizzled operand is addressed as
//   K-major:  start + (row / 8) * SBO + (row % 8) * 128 + k * 2
//   N-major:  start + (n / 64) * LBO + (n % 64) * 2 + (k / 8) * SBO + (k % 8) * 128
// and then swizzled on the address bits (16-byte unit bits 4-6 XOR row-in-group bits 7-9), the
// pattern a TMA copy with CU_TENSOR_MAP_SWIZZLE_128B writes.
#include "emulation/block.h"
#include "sm90/tensor_map.h"

#include <cstring>

namespace ffpa::emulation {
namespace {

uint32_t swizzle128(uint32_t address) { return address ^ (((address >> 7) & 7u) << 4); }

MBarrier& mbarrierAt(Block& block, uint32_t address, Site site) {
  const auto found = block.mbarriers.find(address);
  if (found == block.mbarriers.end()) {
    fail("mbarrier " + hex(address) + " is used before mbarrierInit", site);
  }
  return found->second;
}

MBarrier& mbarrierAt(uint32_t address, Site site) { return mbarrierAt(currentBlock(), address, site); }

void completePhase(Block& block, MBarrier& barrier) {
  for (const RemoteStore& store : barrier.stores) std::memcpy(block.shared.get() + store.offset, store.bytes, 16);
  barrier.stores.clear();
  ++barrier.phases;
  barrier.pending = barrier.expected;
  std::vector<int> waiting = std::move(barrier.waiting);
  barrier.waiting.clear();
  for (int thread : waiting) release(block, thread);
}

void checkPhase(Block& block, MBarrier& barrier, uint32_t address, Site site) {
  if (barrier.bytes < 0 && barrier.pending == 0) {
    fail("mbarrier " + hex(address) + " received " + std::to_string(-barrier.bytes) +
             " more transaction bytes than expect_tx announced",
         site);
  }
  if (barrier.pending == 0 && barrier.bytes == 0) completePhase(block, barrier);
}

// Reads the 16-bit element at shared address `address` as a float, for `thread`.
double sharedElement(const Block& block, const ThreadState& thread, uint32_t address, bool bf16, const char* operand,
                     Site site) {
  const uint32_t unit = address & ~15u;
  const std::string problem = sharedUnitProblem(block, unit);
  if (!problem.empty()) fail(std::string("wgmma operand ") + operand + " at " + hex(address) + " " + problem, site);
  const uint32_t offset = address - kSharedBase;
  if (block.copiesInFlight[offset / 16] != 0) {
    fail(std::string("wgmma reads operand ") + operand + " at " + hex(address) +
             ", which a copy still in flight writes (a missing mbarrier or cp.async wait)",
         site);
  }
  // Data a TMA copy wrote is visible to the threads that waited for its mbarrier phase only.
  const auto& [barrier, phase] = block.tmaWriters[offset / 16];
  if (barrier != 0) {
    const auto seen = thread.observedPhases.find(barrier);
    if (seen == thread.observedPhases.end() || seen->second < phase) {
      fail(std::string("wgmma reads operand ") + operand + " at " + hex(address) + ", written by TMA in phase " +
               std::to_string(phase) + " of mbarrier " + hex(barrier) +
               ", which this thread has not waited for (a missing mbarrierWait)",
           site);
    }
  }
  uint16_t bits;
  std::memcpy(&bits, block.shared.get() + offset, 2);
  using namespace ffpa::kernels;
  return bf16 ? unpackPair(bits, Bf16Tag{}).x : unpackPair(bits, HalfTag{}).x;
}

struct Descriptor {
  uint32_t start, leading, stride;
};

Descriptor decode(uint64_t descriptor, const char* operand, Site site) {
  if (descriptor >> 62 != 1) {
    fail(std::string("wgmma descriptor of ") + operand + " " + hex(descriptor) +
             ": the emulator knows the 128-byte swizzle only (layout type 1)",
         site);
  }
  if ((descriptor >> 49 & 7u) != 0) fail(std::string("wgmma descriptor of ") + operand + ": base offset not 0", site);
  // The descriptor keeps bits 4..17 of the shared address (the GPU's shared window is below 256
  // KiB); the emulator's window starts at kSharedBase, a multiple of 2^18.
  static_assert(kSharedBase % (1u << 18) == 0, "descriptor addresses are offsets in a 256 KiB window");
  return {kSharedBase | static_cast<uint32_t>(descriptor & 0x3fff) << 4, static_cast<uint32_t>(descriptor >> 16 & 0x3fff) << 4,
          static_cast<uint32_t>(descriptor >> 32 & 0x3fff) << 4};
}

uint32_t kMajorAddress(const Descriptor& d, int row, int k) {
  return swizzle128(d.start + (row / 8) * d.stride + (row % 8) * 128 + k * 2);
}

uint32_t nMajorAddress(const Descriptor& d, int k, int n) {
  return swizzle128(d.start + (n / 64) * d.leading + (n % 64) * 2 + (k / 8) * d.stride + (k % 8) * 128);
}

// Element [row of the thread's quad: `half` 0 or 1 for group, group + 8][k] of a wgmmaRS's A, from
// the quad's registers as gathered at the issue (the layout in sm90/ptx.cuh).
double registerElement(const Wgmma& op, int half, int k) {
  const int lane = (k % 8) / 2, word = half + (k >= 8 ? 2 : 0);
  using namespace ffpa::kernels;
  const uint32_t bits = op.quadA[4 * lane + word];
  const float2 pair = op.bf16 ? unpackPair(bits, Bf16Tag{}) : unpackPair(bits, HalfTag{});
  return k % 2 == 0 ? pair.x : pair.y;
}

void runWgmma(const Block& block, const ThreadState& thread, const Wgmma& op) {
  const int inGroup = thread.index % 128, warp = inGroup / 32, group = inGroup % 32 / 4, quad = inGroup % 4;
  const bool registersA = op.registers != nullptr;
  if (registersA && std::memcmp(op.registers, &op.quadA[4 * quad], 4 * sizeof(uint32_t)) != 0) {
    fail("the A registers of a wgmma changed before a wgmmaWait retired it (the GPU may read them until then)",
         op.site);
  }
  const Descriptor a = registersA ? Descriptor{} : decode(op.descA, "A", op.site);
  const Descriptor b = decode(op.descB, "B", op.site);
  for (int j = 0; j < op.n / 8; ++j) {
    for (int half = 0; half < 2; ++half) {
      for (int e = 0; e < 2; ++e) {
        const int row = 16 * warp + group + 8 * half, col = 8 * j + 2 * quad + e;
        float& out = op.d[4 * j + 2 * half + e];
        double sum = op.accumulate ? out : 0.0;
        for (int k = 0; k < 16; ++k) {
          const double x = registersA
                               ? registerElement(op, half, k)
                               : sharedElement(block, thread, kMajorAddress(a, row, k), op.bf16, "A", op.site);
          const uint32_t bAddress = op.transposeB ? nMajorAddress(b, k, col) : kMajorAddress(b, col, k);
          sum += x * sharedElement(block, thread, bAddress, op.bf16, "B", op.site);
        }
        out = static_cast<float>(sum);
      }
    }
  }
}

// Lands `copy` in shared memory as part of phase `phase` (1-based) of the mbarrier at `barrier`.
void performCopy(Block& block, const TensorCopy& copy, uint32_t barrier, int64_t phase) {
  const ffpa::sm90::TensorMapSpec& map = *copy.map;
  uint32_t linear = 0;  // byte offset in the box, row-major, before the swizzle
  for (uint32_t i3 = 0; i3 < map.box[3]; ++i3) {
    for (uint32_t i2 = 0; i2 < map.box[2]; ++i2) {
      for (uint32_t i1 = 0; i1 < map.box[1]; ++i1) {
        for (uint32_t i0 = 0; i0 < map.box[0]; ++i0, linear += map.elementBytes) {
          const int64_t at[4] = {int64_t{copy.coordinates[0]} + i0, int64_t{copy.coordinates[1]} + i1,
                                 int64_t{copy.coordinates[2]} + i2, int64_t{copy.coordinates[3]} + i3};
          bool inside = true;
          uint64_t source = 0;
          for (int d = 0; d < 4; ++d) {
            const uint64_t extent = d < map.rank ? map.dims[d] : 1;
            inside = inside && at[d] >= 0 && uint64_t(at[d]) < extent;
            if (inside) source += uint64_t(at[d]) * (d == 0 ? map.elementBytes : map.strideBytes[d]);
          }
          const uint32_t destination =
              swizzle128(kSharedBase + copy.offset + linear) - kSharedBase;
          unsigned char* out = block.shared.get() + destination;
          if (inside) {
            std::memcpy(out, static_cast<const unsigned char*>(map.base) + source, map.elementBytes);
          } else {
            std::memset(out, 0, map.elementBytes);
          }
        }
      }
    }
  }
  for (uint32_t unit = copy.offset / 16; unit < (copy.offset + copy.bytes) / 16; ++unit) {
    --block.copiesInFlight[unit];
    block.tmaWriters[unit] = {barrier, phase};
  }
}

void arriveOnce(Block& block, uint32_t barrier, Site site) {
  MBarrier& state = mbarrierAt(block, barrier, site);
  if (state.pending == 0) fail("mbarrier " + hex(barrier) + " gets more arrivals than its phase expects", site);
  --state.pending;
  checkPhase(block, state, barrier, site);
}

// What every wgmma issue needs: a wgmmaFence since the thread's last wait, and whole warpgroups.
void checkIssue(Site site) {
  if (!currentThread().wgmmaFenced) {
    fail("wgmma without a wgmmaFence since the thread's last wgmmaWait (the registers it reads may have been written "
         "by ordinary instructions since)",
         site);
  }
  const Block& block = currentBlock();
  if (block.config.blockThreads % 128 != 0) {
    fail("wgmma in a block of " + std::to_string(block.config.blockThreads) +
             " threads: warpgroups need whole groups of 4 warps",
         site);
  }
}

}  // namespace

void issueWgmma(float* d, int n, bool transposeB, uint64_t descA, uint64_t descB, bool accumulate, bool bf16,
                Site site) {
  checkIssue(site);
  currentThread().openWgmma.push_back({d, n, transposeB, descA, descB, accumulate, bf16, site});
}

void issueWgmmaRegisters(float* d, int n, bool transposeB, const uint32_t (&a)[4], uint64_t descB, bool accumulate,
                         bool bf16, Site site) {
  checkIssue(site);
  // The warp's lanes issue it together (.sync.aligned), each handing in its fragment.
  const uint32_t* quad = gatherQuadRegisters(a, site);
  Wgmma op{d, n, transposeB, 0, descB, accumulate, bf16, site};
  op.registers = a;
  std::memcpy(op.quadA, quad, sizeof op.quadA);
  currentThread().openWgmma.push_back(op);
}

void retireWgmmaGroups(int pending, Site site) {
  Block& block = currentBlock();
  ThreadState& thread = currentThread();
  if (!thread.openWgmma.empty()) fail("wgmmaWait with wgmma issued but not committed", site);
  thread.wgmmaFenced = false;
  if (thread.committedWgmma.size() > static_cast<std::size_t>(pending)) yieldPoint(site);
  while (thread.committedWgmma.size() > static_cast<std::size_t>(pending)) {
    for (const Wgmma& op : thread.committedWgmma.front()) runWgmma(block, thread, op);
    thread.committedWgmma.pop_front();
  }
}

}  // namespace ffpa::emulation

namespace ffpa::kernels {
inline namespace emulated {

using emulation::Block;
using emulation::MBarrier;

void mbarrierInit(uint32_t barrier, int arrivals, emulation::Site site) {
  Block& block = emulation::currentBlock();
  if (barrier % 8 != 0 || !emulation::sharedUnitProblem(block, barrier & ~15u).empty()) {
    emulation::fail("mbarrier " + emulation::hex(barrier) + " is not an 8-byte aligned shared address", site);
  }
  if (arrivals < 1) emulation::fail("mbarrierInit with " + std::to_string(arrivals) + " arrivals", site);
  MBarrier& state = block.mbarriers[barrier];
  state = MBarrier{};
  state.expected = state.pending = arrivals;
}

void fenceBarrierInit() {}
void fenceProxyAsync() {}
void wgmmaFence() { emulation::currentThread().wgmmaFenced = true; }

// No yield point after an arrival with expect_tx: its copies follow at once (see mbarrierWait).
void mbarrierArriveExpectTx(uint32_t barrier, uint32_t bytes, emulation::Site site) {
  MBarrier& state = emulation::mbarrierAt(barrier, site);
  state.bytes += bytes;
  emulation::arriveOnce(emulation::currentBlock(), barrier, site);
}

void mbarrierArrive(uint32_t barrier, emulation::Site site) {
  emulation::arriveOnce(emulation::currentBlock(), barrier, site);
  emulation::yieldPoint(site);
}

void mbarrierWait(uint32_t barrier, int parity, emulation::Site site) {
  Block& block = emulation::currentBlock();
  emulation::ThreadState& thread = emulation::currentThread();
  for (;;) {
    MBarrier& state = emulation::mbarrierAt(barrier, site);
    // The copies of the phase land now (all of them were issued: their issuer does not wait
    // between its expect_tx and its copies).
    std::vector<emulation::TensorCopy> copies = std::move(state.copies);
    state.copies.clear();
    for (const emulation::TensorCopy& copy : copies) {
      emulation::performCopy(block, copy, barrier, state.phases + 1);
      state.bytes -= copy.bytes;
    }
    if (!copies.empty()) emulation::checkPhase(block, state, barrier, site);
    // try_wait.parity(P) succeeds once the phase of parity P has completed: the current phase
    // (the number completed, mod 2) is then the other one.
    if ((state.phases & 1) != parity) {
      // The thread now sees the latest completed phase of this parity (and all before it).
      const int64_t seen = ((state.phases - 1) & 1) == parity ? state.phases : state.phases - 1;
      int64_t& observed = thread.observedPhases[barrier];
      if (seen > observed) observed = seen;
      return;
    }
    state.waiting.push_back(thread.index);
    thread.mbarrier = barrier;
    thread.parity = parity;
    emulation::wait(emulation::Waiting::MBarrier, site);
  }
}

namespace {

// Queues the box at (c0 .. c3) of `map` for `block`'s shared memory at `shared`, on its mbarrier at
// `barrier` (the issuing block's, or with multicast another block's of the cluster).
void queueTensorCopy(Block& block, uint32_t shared, const ffpa::sm90::TensorMapSpec* map, int c0, int c1, int c2,
                     int c3, uint32_t barrier, emulation::Site site) {
  MBarrier& state = emulation::mbarrierAt(block, barrier, site);
  if (map->rank < 1 || map->rank > ffpa::sm90::kTensorMapMaxRank || map->box[0] * map->elementBytes != 128) {
    emulation::fail("tmaLoad4d: the emulator copies boxes with 128-byte rows (128-byte swizzle) only", site);
  }
  uint32_t bytes = map->elementBytes;
  for (int d = 0; d < 4; ++d) bytes *= d < map->rank ? map->box[d] : 1;
  if (shared % 1024 != 0 || shared < emulation::kSharedBase ||
      uint64_t{shared} - emulation::kSharedBase + bytes > block.config.sharedBytes) {
    emulation::fail("TMA destination " + emulation::hex(shared) + " (+" + std::to_string(bytes) +
                        " bytes) is not 1024-byte aligned shared memory of the block",
                    site);
  }
  // The bytes a read of the tensor can touch lie in a registered buffer (the corners of the box
  // that are inside the tensor).
  uint64_t last = 0;
  for (int d = 0; d < map->rank; ++d) last += (map->dims[d] - 1) * (d == 0 ? map->elementBytes : map->strideBytes[d]);
  emulation::checkGlobal(block, map->base, map->elementBytes, "TMA tensor base", site);
  emulation::checkGlobal(block, static_cast<const unsigned char*>(map->base) + last, map->elementBytes,
                         "TMA tensor end", site);
  const uint32_t offset = shared - emulation::kSharedBase;
  for (uint32_t unit = offset / 16; unit < (offset + bytes) / 16; ++unit) {
    if (block.copiesInFlight[unit] != 0) {
      emulation::fail("TMA to shared address " + emulation::hex(emulation::kSharedBase + unit * 16) +
                          ", which a copy still in flight writes too",
                      site);
    }
    ++block.copiesInFlight[unit];
  }
  state.copies.push_back({offset, map, {c0, c1, c2, c3}, bytes});
  // On the GPU the bytes arrive on their own: threads already waiting for the phase look again
  // (and land the copies) once the issuer yields, which it does only after its last copy.
  std::vector<int> waiting = std::move(state.waiting);
  state.waiting.clear();
  for (int thread : waiting) emulation::release(block, thread);
}

}  // namespace

void tmaLoad4d(uint32_t shared, const ffpa::sm90::TensorMapSpec* map, int c0, int c1, int c2, int c3,
               uint32_t barrier, emulation::Site site) {
  queueTensorCopy(emulation::currentBlock(), shared, map, c0, c1, c2, c3, barrier, site);
}

void tmaLoad4dMulticast(uint32_t shared, const ffpa::sm90::TensorMapSpec* map, int c0, int c1, int c2, int c3,
                        uint32_t barrier, uint16_t ctaMask, emulation::Site site) {
  Block& block = emulation::currentBlock();
  const auto& blocks = block.cluster->blocks;
  if (ctaMask == 0 || (ctaMask >> blocks.size()) != 0) {
    emulation::fail("TMA multicast mask " + emulation::hex(ctaMask) + " names no block, or a rank beyond the cluster of " +
                        std::to_string(blocks.size()),
                    site);
  }
  for (std::size_t rank = 0; rank < blocks.size(); ++rank) {
    if (!(ctaMask >> rank & 1u)) continue;
    emulation::checkNotExited(*blocks[rank], "TMA multicast", site);
    queueTensorCopy(*blocks[rank], shared, map, c0, c1, c2, c3, barrier, site);
  }
}

// The mbarrier of a cluster address: its block and its address in that block's window.
std::pair<Block*, uint32_t> clusterBarrier(uint32_t barrier, emulation::Site site) {
  const auto [block, offset] = emulation::clusterTarget(barrier, 8, "mbarrier", site);
  return {block, emulation::kSharedBase + offset};
}

void storeAsyncCluster(uint32_t shared, const float (&values)[4], uint32_t barrier, emulation::Site site) {
  const auto [block, offset] = emulation::clusterTarget(shared, 16, "st.async destination", site);
  const auto [barrierBlock, barrierAddress] = clusterBarrier(barrier, site);
  if (block != barrierBlock) {
    emulation::fail("st.async to block rank " + std::to_string(block->rank) + " completes on an mbarrier of rank " +
                        std::to_string(barrierBlock->rank) + " (both must be in the same block)",
                    site);
  }
  MBarrier& state = emulation::mbarrierAt(*block, barrierAddress, site);
  // The bytes land at some time before the phase completes: at its completion under the default
  // schedule (a reader that does not wait for the phase sees the old bytes), at once under a
  // seeded one (a sender that does not wait until the receiver has read the previous bytes
  // overwrites them).
  if (block->config.scheduleSeed != 0) {
    std::memcpy(block->shared.get() + offset, values, 16);
  } else {
    emulation::RemoteStore store{offset, {}};
    std::memcpy(store.bytes, values, 16);
    state.stores.push_back(store);
  }
  state.bytes -= 16;
  emulation::checkPhase(*block, state, barrierAddress, site);
}

void mbarrierArriveCluster(uint32_t barrier, emulation::Site site) {
  const auto [block, address] = clusterBarrier(barrier, site);
  emulation::arriveOnce(*block, address, site);
  emulation::yieldPoint(site);
}

void wgmmaCommit() {
  emulation::ThreadState& thread = emulation::currentThread();
  thread.committedWgmma.push_back(std::move(thread.openWgmma));
  thread.openWgmma.clear();
}

}  // namespace emulated
}  // namespace ffpa::kernels
