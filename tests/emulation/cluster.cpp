// Thread-block clusters: the blocks of a cluster reach each other's shared memory through mapped
// addresses (mapa), and meet at the cluster barrier (barrier.cluster arrive + wait).
#include "emulation/block.h"

namespace ffpa::emulation {

std::pair<Block*, uint32_t> clusterTarget(uint32_t address, uint32_t bytes, const char* what, Site site) {
  Block& block = currentBlock();
  const Cluster& cluster = *block.cluster;
  const uint32_t relative = address - kClusterBase;
  const uint32_t rank = relative / kClusterRankStride, offset = relative % kClusterRankStride;
  if (address < kClusterBase || rank >= cluster.blocks.size()) {
    fail(std::string(what) + " " + hex(address) + " is no cluster address of a block of this cluster of " +
             std::to_string(cluster.blocks.size()) + " (mapShared gives them)",
         site);
  }
  if (offset % bytes != 0 || offset + bytes > block.config.sharedBytes) {
    fail(std::string(what) + " " + hex(address) + ": offset " + std::to_string(offset) + " of block rank " +
             std::to_string(rank) + " is not " + std::to_string(bytes) + "-byte aligned within its " +
             std::to_string(block.config.sharedBytes) + " bytes of shared memory",
         site);
  }
  Block& target = *cluster.blocks[rank];
  checkNotExited(target, what, site);
  return {&target, offset};
}

void checkNotExited(const Block& target, const char* what, Site site) {
  for (const auto& thread : target.threads) {
    if (!thread->exited) return;
  }
  fail(std::string(what) + " reaches block rank " + std::to_string(target.rank) +
           ", whose threads have all exited (a block must stay until no other block of its cluster "
           "can reach its shared memory: a cluster barrier before exit)",
       site);
}

}  // namespace ffpa::emulation

namespace ffpa::kernels {
inline namespace emulated {

uint32_t mapShared(uint32_t shared, int rank, emulation::Site site) {
  emulation::Block& block = emulation::currentBlock();
  const uint32_t offset = shared - emulation::kSharedBase;
  if (shared < emulation::kSharedBase || offset >= block.config.sharedBytes) {
    emulation::fail("mapShared of " + emulation::hex(shared) + ", which is not a shared address of the block", site);
  }
  if (rank < 0 || rank >= block.config.clusterX) {
    emulation::fail("mapShared to rank " + std::to_string(rank) + " in a cluster of " +
                        std::to_string(block.config.clusterX) + " blocks",
                    site);
  }
  return emulation::kClusterBase + uint32_t(rank) * emulation::kClusterRankStride + offset;
}

void clusterSync(emulation::Site site) {
  emulation::Block& block = emulation::currentBlock();
  emulation::Cluster& cluster = *block.cluster;
  const int threads = block.config.blockThreads * static_cast<int>(cluster.blocks.size());
  if (++cluster.arrived < threads) {
    cluster.waiting.emplace_back(&block, emulation::currentThread().index);
    emulation::wait(emulation::Waiting::Cluster, site);
    return;
  }
  cluster.arrived = 0;
  for (const auto& [other, thread] : cluster.waiting) emulation::release(*other, thread);
  cluster.waiting.clear();
}

}  // namespace emulated
}  // namespace ffpa::kernels
