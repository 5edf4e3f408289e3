// bar.sync: namedBarrier(id, threads) and blockBarrier() (barrier 0 for the whole block), both
// aligned; barrier.sync: rolesBarrier(id, threads), the unaligned form; barrier.arrive:
// rolesArrive(id, threads), an arrival that does not wait.
#include "emulation/block.h"

#include <algorithm>
#include <cstring>

namespace ffpa::emulation {
namespace {

bool sameSite(Site a, Site b) { return a.line == b.line && std::strcmp(a.file, b.file) == 0; }

void arrive(int id, int threads, bool aligned, bool waits, Site site) {
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
  if (barrier.expected == 0) {
    barrier.expected = threads;
    barrier.site = site;
    barrier.aligned = aligned;
  }
  if (barrier.expected != threads) {
    fail("barrier " + std::to_string(id) + " for " + std::to_string(threads) + " threads, while " +
             std::to_string(barrier.waiting.size() + barrier.arrivals) + " threads arrived at it for " +
             std::to_string(barrier.expected),
         site);
  }
  // The aligned form (bar.sync) promises that every thread of a phase executes the same
  // instruction: warps of different roles that meet from different code need barrier.sync
  // (compute-sanitizer's synccheck reports "Divergent thread(s) in block" otherwise). Within one
  // source line the emulator cannot tell two inlined copies apart; the GPU can.
  if ((aligned || barrier.aligned) && !sameSite(site, barrier.site)) {
    fail("barrier " + std::to_string(id) + " reached at " + describe(site) + " and at " +
             describe(barrier.site) +
             " in one phase: bar.sync needs every thread at one instruction (rolesBarrier, "
             "barrier.sync, for warps that meet from different code)",
         site);
  }
  const uint32_t bit = 1u << (thread % kWarpSize);
  if (barrier.laneMasks[thread / kWarpSize] & bit) {
    // Only an arrival that does not wait can come back within one phase.
    fail("barrier " + std::to_string(id) + " reached twice by this thread in one phase (an arrival without a wait "
             "runs ahead of the threads that wait there)",
         site);
  }
  barrier.laneMasks[thread / kWarpSize] |= bit;
  if (static_cast<int>(barrier.waiting.size()) + barrier.arrivals + 1 < threads) {
    if (!waits) {
      ++barrier.arrivals;
      return;
    }
    barrier.waiting.push_back(thread);
    currentThread().barrier = id;
    wait(Waiting::Barrier, site);
    return;
  }
  // bar.sync counts whole warps (it is .aligned): a warp that arrives with only some of its lanes
  // is a divergence bug even when the thread count adds up. Our kernels hold barrier.sync to the
  // same rule (whole warps), stricter than the PTX.
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
  barrier.arrivals = 0;
  barrier.waiting.clear();
  std::fill(barrier.laneMasks.begin(), barrier.laneMasks.end(), 0u);
  for (int other : waiting) release(block, other);
}

}  // namespace
}  // namespace ffpa::emulation

namespace ffpa::kernels {
inline namespace emulated {

namespace {

void arriveCounted(const char* what, int id, int threads, bool aligned, emulation::Site site, bool waits = true) {
  if (threads % emulation::kWarpSize != 0) {
    emulation::fail(std::string(what) + " for " + std::to_string(threads) + " threads, not a multiple of 32", site);
  }
  emulation::arrive(id, threads, aligned, waits, site);
}

}  // namespace

void namedBarrier(int id, int threads, emulation::Site site) {
  arriveCounted("namedBarrier", id, threads, true, site);
}

void rolesBarrier(int id, int threads, emulation::Site site) {
  arriveCounted("rolesBarrier", id, threads, false, site);
}

void rolesArrive(int id, int threads, emulation::Site site) {
  arriveCounted("rolesArrive", id, threads, false, site, false);
}

void blockBarrier(emulation::Site site) {
  emulation::arrive(0, emulation::currentBlock().config.blockThreads, true, true, site);
}

}  // namespace emulated
}  // namespace ffpa::kernels
