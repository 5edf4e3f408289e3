// Thread-block clusters on the emulator: blocks of a cluster run together, reach each other's
// shared memory through mapped addresses, complete each other's mbarriers, meet at the cluster
// barrier; and the bugs of that protocol are reported.
#include "common/platform.cuh"
#include "common/ptx.cuh"
#include "emulation/launch.h"
#include "sm90/ptx.cuh"

#include <doctest/doctest.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

using namespace ffpa::kernels;
using doctest::Contains;
using ffpa::emulation::clustered;
using ffpa::emulation::Config;
using ffpa::emulation::KernelError;
using ffpa::emulation::launch;
using ffpa::emulation::scheduled;

namespace {

// Shared memory of the ping-pong: the received values (32 threads x 16 bytes), then two
// mbarriers: Full (the values arrived) and Empty (the other block has read what this one sent).
constexpr uint32_t kFull = 512, kEmpty = 520, kBytes = 528;

// `rounds` rounds: every thread of a 32-thread block sends 4 floats that name its block, thread
// and round to the other block of a cluster of two, and checks what it receives. Records per
// thread the values that were not the expected ones.
void pingPong(int rounds, bool waitEmpty, uint32_t* wrong) {
  const int t = threadIndex(), rank = clusterRank(), other = 1 - rank;
  const uint32_t base = sharedAddress(sharedMemory());
  if (t == 0) {
    mbarrierInit(base + kFull, 1);
    mbarrierInit(base + kEmpty, 32);
    fenceBarrierInit();
  }
  clusterSync();
  uint32_t mismatches = 0;
  const float* received = reinterpret_cast<const float*>(sharedMemory()) + 4 * t;
  for (int round = 0; round < rounds; ++round) {
    if (t == 0) mbarrierArriveExpectTx(base + kFull, 32 * 16);
    if (waitEmpty && round > 0) mbarrierWait(base + kEmpty, (round - 1) & 1);
    const float values[4] = {float(rank), float(t), float(round), 1.0f};
    storeAsyncCluster(mapShared(base + 16 * t, other), values, mapShared(base + kFull, other));
    mbarrierWait(base + kFull, round & 1);
    const float expected[4] = {float(other), float(t), float(round), 1.0f};
    for (int e = 0; e < 4; ++e) mismatches += received[e] != expected[e];
    if (round + 1 < rounds) mbarrierArriveCluster(mapShared(base + kEmpty, other));
  }
  storeGlobal32(&wrong[32 * (blockIndexX() + 4 * blockIndexY()) + t], mismatches);  // grids of x <= 4
}

// Initialises an mbarrier of one arrival at byte 32 of shared memory, then meets the cluster;
// returns the block's shared base address.
uint32_t barrierAt32() {
  const uint32_t base = sharedAddress(sharedMemory());
  if (threadIndex() == 0) mbarrierInit(base + 32, 1);
  clusterSync();
  return base;
}

uint32_t total(const std::vector<uint32_t>& values) {
  uint32_t sum = 0;
  for (const uint32_t v : values) sum += v;
  return sum;
}

}  // namespace

TEST_CASE("clusters: ranks, and partial data exchanged through st.async and mbarriers") {
  std::vector<uint32_t> wrong(32 * 8, 99);
  const Config config = clustered({{4, 2}, 32, kBytes, {wrong}}, 2);
  launch(config, [&] { pingPong(20, true, wrong.data()); });
  CHECK(total(wrong) == 0);
  for (const uint64_t seed : {1u, 2u, 3u}) {
    wrong.assign(wrong.size(), 99);
    launch(scheduled(config, seed), [&] { pingPong(20, true, wrong.data()); });
    CHECK(total(wrong) == 0);
  }
  std::vector<uint32_t> ranks(8, 99);
  launch(clustered({{8}, 1, 16, {ranks}}, 2), [&] { storeGlobal32(&ranks[blockIndexX()], clusterRank()); });
  CHECK(ranks == std::vector<uint32_t>{0, 1, 0, 1, 0, 1, 0, 1});
}

TEST_CASE("clusters: a sender that does not wait for the receiver to be done overwrites its data") {
  // Landing at once under a seeded schedule, with one block favoured for long streaks, the next
  // round's values overwrite those the slower block has not read yet.
  // Or, when a whole round arrives early, the receiver's mbarrier phases no longer add up (a
  // deadlock). Either way the bug shows.
  std::vector<uint32_t> wrong(32 * 2, 99);
  int found = 0;
  for (const uint64_t seed : {1u, 2u, 3u, 4u}) {
    wrong.assign(wrong.size(), 0);
    try {
      launch(scheduled(clustered({{2}, 32, kBytes, {wrong}}, 2), seed), [&] { pingPong(40, false, wrong.data()); });
      found += total(wrong) > 0;
    } catch (const KernelError& e) {
      CHECK_MESSAGE(std::string(e.what()).find("deadlock") != std::string::npos, e.what());
      ++found;
    }
  }
  CHECK(found == 4);
}

TEST_CASE("clusters: mapped addresses, cluster sizes and deadlocks are checked") {
  const auto badRank = [] { mapShared(sharedAddress(sharedMemory()), 2); };
  CHECK_THROWS_WITH_AS(launch(clustered({{2}, 32, 64}, 2), badRank), Contains("mapShared to rank 2 in a cluster of 2"),
                       KernelError);
  // A mapped address used where the block's own shared address is expected, and the reverse.
  const auto ownAsMapped = [] {
    const float values[4] = {};
    const uint32_t base = barrierAt32();
    storeAsyncCluster(base, values, base + 32);
  };
  CHECK_THROWS_WITH_AS(launch(clustered({{2}, 32, 64}, 2), ownAsMapped), Contains("is no cluster address"),
                       KernelError);
  // An st.async into one block completing bytes on another's mbarrier.
  const auto crossed = [] {
    const float values[4] = {};
    const uint32_t base = barrierAt32();
    storeAsyncCluster(mapShared(base, 1), values, mapShared(base + 32, 0));
  };
  CHECK_THROWS_WITH_AS(launch(clustered({{2}, 32, 64}, 2), crossed), Contains("both must be in the same block"),
                       KernelError);
  // Rank 0 waits for data rank 1 never sends: the deadlock names the blocks of the cluster.
  const auto neverSent = [] {
    const uint32_t base = barrierAt32();
    if (clusterRank() == 0) mbarrierWait(base + 32, 0);
  };
  CHECK_THROWS_WITH_AS(launch(clustered({{2}, 32, 64}, 2), neverSent), Contains("deadlock"), KernelError);
  // A block that fails stops its cluster: the other's threads at the cluster barrier unwind.
  const auto oneFails = [] {
    if (clusterRank() == 1) mapShared(0, 0);
    clusterSync();
  };
  CHECK_THROWS_WITH_AS(launch(clustered({{4}, 32, 64}, 2), oneFails), Contains("block (1,0,0)"), KernelError);
  // Rank 1 leaves once it has arrived on rank 0's barrier, before rank 0 arrives on its own: on
  // the GPU that arrival reaches shared memory that is gone (a cluster barrier before exit
  // prevents it).
  const auto leavesEarly = [] {
    const uint32_t base = sharedAddress(sharedMemory());
    if (threadIndex() == 0) {
      mbarrierInit(base + 32, 32);
      fenceBarrierInit();
    }
    clusterSync();
    if (clusterRank() == 1) {
      mbarrierArriveCluster(mapShared(base + 32, 0));
      return;
    }
    mbarrierWait(base + 32, 0);
    mbarrierArriveCluster(mapShared(base + 32, 1));
  };
  CHECK_THROWS_WITH_AS(launch(clustered({{2}, 32, 64}, 2), leavesEarly),
                       Contains("reaches block rank 1, whose threads have all exited"), KernelError);
  CHECK_THROWS_AS(launch(clustered({{3}, 32, 64}, 2), [] {}), std::invalid_argument);
  CHECK_THROWS_AS(launch(clustered({{16}, 32, 64}, 16), [] {}), std::invalid_argument);
}
