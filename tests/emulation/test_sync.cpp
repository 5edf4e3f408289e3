// shuffleXor, warp votes, block and named barriers, thread and block indices.
#include "common/platform.cuh"
#include "common/ptx.cuh"
#include "emulation/launch.h"

#include <doctest/doctest.h>

#include <cstring>
#include <vector>

using namespace ffpa::kernels;
using ffpa::emulation::launch;

namespace {

// Lane l of warp w holds 100 w + l; for every mask, it records what it receives.
void shuffleAll(int masks, float* out) {
  const int t = threadIndex();
  for (int mask = 0; mask < masks; ++mask) {
    storeGlobalF32(&out[masks * t + mask],
                   shuffleXor(static_cast<float>(100 * (t / 32) + t % 32), mask));
  }
}

// Each warp votes on predicates that hold in every lane, in one lane, in none: records the votes.
void voteAll(uint32_t* out) {
  const int t = threadIndex(), lane = t % 32;
  const bool predicates[3] = {true, lane == 31 - t / 32, false};
  for (int i = 0; i < 3; ++i) {
    storeGlobal32(&out[6 * t + 2 * i], warpAll(predicates[i]));
    storeGlobal32(&out[6 * t + 2 * i + 1], warpAny(predicates[i]));
  }
}

// `rounds` times: every thread writes its slot, then (after a barrier) checks another thread's
// slot, then waits again before the slots are rewritten. Records the mismatches it saw.
void exchangeRounds(int rounds, uint32_t* mismatches) {
  const int t = threadIndex(), threads = 256;
  auto* slots = reinterpret_cast<int*>(sharedMemory());
  uint32_t wrong = 0;
  for (int round = 0; round < rounds; ++round) {
    slots[t] = 1000 * round + t;
    blockBarrier();
    const int other = (t + 7 * round + 1) % threads;
    wrong += slots[other] != 1000 * round + other;
    blockBarrier();
  }
  storeGlobal32(&mismatches[t], wrong);
}

// Warps 0-1 exchange data through barrier 1, warps 2-3 through barrier 2, each pair its own
// number of rounds: neither pair stops the other.
void pairedRounds(uint32_t* mismatches) {
  const int t = threadIndex(), pair = t / 64, inPair = t % 64;
  const int rounds = pair == 0 ? 40 : 70;
  int* slots = reinterpret_cast<int*>(sharedMemory()) + 64 * pair;
  uint32_t wrong = 0;
  for (int round = 0; round < rounds; ++round) {
    slots[inPair] = 1000 * round + t;
    namedBarrier(1 + pair, 64);
    const int other = (inPair + round + 1) % 64;
    wrong += slots[other] != 1000 * round + 64 * pair + other;
    namedBarrier(1 + pair, 64);
  }
  blockBarrier();
  storeGlobal32(&mismatches[t], wrong);
}

// Warps 0 and 1 meet at barrier.sync from different code, as two roles do: warp 1 reads what
// warp 0 wrote before the barrier, and the reverse.
void crossRoles(uint32_t* out) {
  const int t = threadIndex();
  uint32_t* slots = reinterpret_cast<uint32_t*>(sharedMemory());
  if (t < 32) {
    slots[t] = 100u + t;
    rolesBarrier(5, 64);
  } else {
    slots[t] = 200u + t;
    rolesBarrier(5, 64);
  }
  storeGlobal32(&out[t], slots[63 - t]);
}

// Warps 0 and 1 take turns appending to a log in shared memory, `turns` each, warp 0 first: a
// warp waits at its own barrier (2 + warp) for the other's turn and hands the next turn over with
// an arrival that does not wait (rolesArrive), as the row split's consumers do. `lastHandOff`:
// whether warp 1 also hands a turn over after its last (to nobody: left pending). Thread 0
// copies the log out.
void takeTurns(int turns, bool lastHandOff, uint32_t* log) {
  const int t = threadIndex(), warp = t / 32;
  uint32_t* shared = reinterpret_cast<uint32_t*>(sharedMemory());
  for (int turn = 0; turn < turns; ++turn) {
    if (warp == 1 || turn > 0) rolesBarrier(2 + warp, 64);
    if (t % 32 == 0) shared[2 * turn + warp] = 100u * warp + turn;
    if (warp == 0 || turn + 1 < turns || lastHandOff) rolesArrive(2 + (1 - warp), 64);
  }
  blockBarrier();
  if (t == 0) {
    for (int i = 0; i < 2 * turns; ++i) storeGlobal32(&log[i], shared[i]);
  }
}

void recordIndices(int threads, uint32_t* out) {
  const int block = blockIndexX() + 3 * (blockIndexY() + 2 * blockIndexZ());
  const uint32_t code = static_cast<uint32_t>(blockIndexX() | blockIndexY() << 4 |
                                              blockIndexZ() << 8 | threadIndex() << 12);
  storeGlobal32(&out[threads * block + threadIndex()], code);
}

}  // namespace

TEST_CASE("shuffleXor reads lane ^ mask; masks past the warp give the lane its own value") {
  const int masks = 40;
  std::vector<float> out(64 * masks);
  launch({{}, 64, 0, {out}}, shuffleAll, masks, out.data());
  for (int t = 0; t < 64; ++t) {
    for (int mask = 0; mask < masks; ++mask) {
      const int lane = t % 32, source = (lane ^ mask) < 32 ? lane ^ mask : lane;
      REQUIRE(out[masks * t + mask] == static_cast<float>(100 * (t / 32) + source));
    }
  }
}

TEST_CASE("warpAll and warpAny: one answer per warp, the same in every lane") {
  std::vector<uint32_t> out(64 * 6, 7u);
  launch({{}, 64, 0, {out}}, voteAll, out.data());
  for (int t = 0; t < 64; ++t) {
    CAPTURE(t);
    // every lane: all and any; one lane: any only; no lane: neither.
    const std::vector<uint32_t> expected = {1, 1, 0, 1, 0, 0};
    CHECK(std::vector<uint32_t>(out.begin() + 6 * t, out.begin() + 6 * t + 6) == expected);
  }
}

TEST_CASE("blockBarrier orders shared memory, round after round") {
  std::vector<uint32_t> mismatches(256, 1u);
  launch({{}, 256, 256 * 4, {mismatches}}, exchangeRounds, 200, mismatches.data());
  CHECK(mismatches == std::vector<uint32_t>(256, 0u));
}

TEST_CASE("named barriers synchronize their warps only") {
  std::vector<uint32_t> mismatches(128, 1u);
  launch({{}, 128, 128 * 4, {mismatches}}, pairedRounds, mismatches.data());
  CHECK(mismatches == std::vector<uint32_t>(128, 0u));
}

TEST_CASE("warps of different roles meet at barrier.sync from different code") {
  std::vector<uint32_t> out(64, 0u);
  launch({{}, 64, 64 * 4, {out}}, crossRoles, out.data());
  for (int t = 0; t < 64; ++t) CHECK(out[t] == (63 - t < 32 ? 100u : 200u) + uint32_t(63 - t));
}

TEST_CASE("warps take turns through barrier.arrive and barrier.sync; arrivals left pending are reported") {
  const int turns = 30;
  std::vector<uint32_t> log(2 * turns, 7u);
  for (const uint64_t seed : {0u, 1u, 2u}) {
    CAPTURE(seed);
    log.assign(log.size(), 7u);
    launch(ffpa::emulation::scheduled({{}, 64, 2 * turns * 4, {log}}, seed), takeTurns, turns, false, log.data());
    for (int i = 0; i < 2 * turns; ++i) CHECK(log[i] == 100u * (i % 2) + uint32_t(i / 2));
  }
  CHECK_THROWS_WITH_AS(launch({{}, 64, 2 * turns * 4, {log}}, takeTurns, turns, true, log.data()),
                       doctest::Contains("barrier 2 left with 32 arrivals"), ffpa::emulation::KernelError);
}

TEST_CASE("every thread of every block runs once, with its indices") {
  for (int threads : {1, 48, 512}) {
    CAPTURE(threads);
    std::vector<uint32_t> out(12 * threads, ~0u);
    launch({{3, 2, 2}, threads, 16, {out}}, recordIndices, threads, out.data());
    for (int z = 0; z < 2; ++z) {
      for (int y = 0; y < 2; ++y) {
        for (int x = 0; x < 3; ++x) {
          for (int t = 0; t < threads; ++t) {
            const uint32_t code = static_cast<uint32_t>(x | y << 4 | z << 8 | t << 12);
            REQUIRE(out[threads * (x + 3 * (y + 2 * z)) + t] == code);
          }
        }
      }
    }
  }
}
