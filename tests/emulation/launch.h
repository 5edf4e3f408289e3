// Launching a kernel on the CPU warp emulator:
//
//   ffpa::emulation::launch({grid, blockThreads, sharedBytes, {inputs, outputs}}, kernel, args...);
//
// runs kernel(args...) once for every thread of every block of the grid. The threads of a block are
// fibers on one CPU thread, switched only where a thread must wait (a warp collective or a
// barrier); a thread runs until it waits, in thread-index order (or in a seeded random order, see
// Config::scheduleSeed), which makes a run deterministic and makes a missing barrier show up as a
// thread reading data its producer has not written yet.
// Blocks run concurrently on several CPU threads. As on the GPU, kernels take their parameters by
// value, global memory as pointers, which must lie in the buffers that the Config registers.
//
// A bug in the kernel (see KernelError) stops its block, the launch finishes the blocks that are
// running, and launch() throws KernelError naming the block, the thread and the kernel line.
#pragma once

#include "emulation/runtime.h"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <stdexcept>
#include <utility>
#include <vector>

namespace ffpa::emulation {

struct Dim3 {
  int x = 1, y = 1, z = 1;
};

// Global memory the kernel may read by cp.async or write by storeGlobal32/storeGlobalF32.
struct Buffer {
  Buffer(const void* data, std::size_t bytes) : data(data), bytes(bytes) {}
  template <class T>  // implicit, so that a Config lists its vectors as they are
  Buffer(const std::vector<T>& values) : data(values.data()), bytes(values.size() * sizeof(T)) {}

  const void* data;
  std::size_t bytes;
};

struct Config {
  Config(Dim3 grid, int blockThreads, std::size_t sharedBytes = 0, std::vector<Buffer> buffers = {})
      : grid(grid),
        blockThreads(blockThreads),
        sharedBytes(sharedBytes),
        buffers(std::move(buffers)) {}

  Dim3 grid;
  int blockThreads;             // 1 .. 1024
  std::size_t sharedBytes;      // dynamic shared memory of each block
  std::vector<Buffer> buffers;  // every other global address is out of bounds
  // 0: waiting threads resume in the order they became ready (thread-index order at the start).
  // Otherwise the next thread to run is drawn from the ready ones with this seed (and the block
  // index), one warp at a time lagging behind the others for long streaks: other legal
  // interleavings, still reproducible, for kernels whose warps hand data to each other through
  // barriers a fixed order might satisfy by luck. FFPA_EMULATION_SCHEDULES=N (N > 0) replaces
  // every seed by another drawn from it and N: the same cases under other schedules.
  uint64_t scheduleSeed = 0;
  // Blocks per thread-block cluster along x (a divisor of grid.x, at most 8): the blocks of a
  // cluster run together, their threads interleaved on one CPU thread, and may reach each other's
  // shared memory and mbarriers (clusterRank, mapShared, storeAsyncCluster, clusterSync).
  int clusterX = 1;
};

// `config` with `seed` as its scheduleSeed.
inline Config scheduled(Config config, uint64_t seed) {
  config.scheduleSeed = seed;
  return config;
}

// `config` with clusters of `blocks` along x.
inline Config clustered(Config config, int blocks) {
  config.clusterX = blocks;
  return config;
}

// A kernel bug found by the emulator:
//   - a warp collective (ldmatrix, mma, shuffle, wgmma from registers) by a partial warp, or by
//     lanes at different operations or call sites;
//   - a shared address outside the block's dynamic shared memory, or not 16-byte aligned, for
//     ldmatrix rows and cp.async destinations; sharedAddress() of a pointer outside it;
//   - a cp.async source (when valid) or a global store outside the registered buffers, or
//     misaligned;
//   - an ldmatrix of shared bytes that a cp.async still in flight will write (a missing wait or
//     barrier), or a cp.async to bytes that another one in flight already targets;
//   - a barrier used with an invalid id or thread count, reached by part of a warp, or that can
//     never complete; a deadlock is reported with what every thread waits for (in every block of
//     the cluster);
//   - a cluster address that names no block of the cluster or lies outside its shared memory;
//   - a wgmma whose A registers change before the wgmmaWait that retires it;
//   - an exception thrown by the kernel.
class KernelError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

namespace detail {
// Runs `body` as the kernel of every thread; throws KernelError for the first failed block, and
// std::invalid_argument for an impossible configuration.
void run(const Config& config, const std::function<void()>& body);
}  // namespace detail

// Arguments reach every thread as const lvalues, as kernel parameters do.
template <class Kernel, class... Args>
void launch(const Config& config, Kernel kernel, const Args&... args) {
  detail::run(config, [&] { kernel(args...); });
}

}  // namespace ffpa::emulation
