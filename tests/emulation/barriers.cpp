// bar.sync: namedBarrier(id, threads) and blockBarrier() (barrier 0 for the whole block).
#include "emulation/block.h"

#include <algorithm>

namespace ffpa::emulation {
namespace {

void arrive(int id, int threads, Site site) {
  Block& block = currentBlock();
  const int thread = currentThread().index;
  const int blockThreads = block.config.blockThreads;
  if (id < 0 || id >= kBarriers) {
    fail("barrier id " + std::to_string(id) + " is not in 0..15", site);
  }
  if (threads < 1 || threads > blockThreads) {
    fail("barrier " + std::to_string(id) + " for " + std::to_string(threads) +
             " threads in a block of " + std::to_string(blockThreads),
         site);
  }
  Barrier& barrier = block.barriers[id];
  if (barrier.expected == 0) barrier.expected = threads;
  if (barrier.expected != threads) {
    fail("barrier " + std::to_string(id) + " for " + std::to_string(threads) + " threads, while " +
             std::to_string(barrier.waiting.size()) + " threads wait at it for " +
             std::to_string(barrier.expected),
         site);
  }
  barrier.laneMasks[thread / kWarpSize] |= 1u << (thread % kWarpSize);
  if (static_cast<int>(barrier.waiting.size()) + 1 < threads) {
    barrier.waiting.push_back(thread);
    currentThread().barrier = id;
    wait(Waiting::Barrier, site);
    return;
  }
  // bar.sync counts whole warps (it is .aligned): a warp that arrives with only some of its lanes
  // is a divergence bug even when the thread count adds up.
  for (std::size_t warp = 0; warp < block.warps.size(); ++warp) {
    const int lanes = block.warps[warp].lanes;
    const uint32_t whole = lanes == kWarpSize ? ~0u : (1u << lanes) - 1u;
    const uint32_t arrived = barrier.laneMasks[warp];
    if (arrived != 0 && arrived != whole) {
      std::vector<int> missing;
      for (int lane = 0; lane < lanes; ++lane) {
        if (!(arrived >> lane & 1u)) missing.push_back(lane);
      }
      fail("barrier " + std::to_string(id) + " completed without lanes " + describeSet(missing) +
               " of warp " + std::to_string(warp) +
               ", whose other lanes arrived (bar.sync needs whole warps)",
           site);
    }
  }
  std::vector<int> waiting = std::move(barrier.waiting);
  std::sort(waiting.begin(), waiting.end());
  barrier.expected = 0;
  barrier.waiting.clear();
  std::fill(barrier.laneMasks.begin(), barrier.laneMasks.end(), 0u);
  for (int other : waiting) release(block, other);
}

}  // namespace
}  // namespace ffpa::emulation

namespace ffpa::kernels {
inline namespace emulated {

void namedBarrier(int id, int threads, emulation::Site site) {
  if (threads % emulation::kWarpSize != 0) {
    emulation::fail(
        "namedBarrier for " + std::to_string(threads) + " threads, not a multiple of 32", site);
  }
  emulation::arrive(id, threads, site);
}

void blockBarrier(emulation::Site site) {
  emulation::arrive(0, emulation::currentBlock().config.blockThreads, site);
}

}  // namespace emulated
}  // namespace ffpa::kernels
