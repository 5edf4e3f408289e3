// Every class of kernel bug the emulator detects is reported as a KernelError that says what,
// where (block, thread or warp, kernel line) and, for a deadlock, what each thread waits for.
#include "common/platform.cuh"
#include "common/ptx.cuh"
#include "emulation/launch.h"

#include <doctest/doctest.h>

#include <stdexcept>
#include <vector>

using namespace ffpa::kernels;
using doctest::Contains;
using ffpa::emulation::Config;
using ffpa::emulation::KernelError;
using ffpa::emulation::launch;

namespace {

void shuffleOnce() { shuffleXor(1.0f, 1); }

uint32_t sharedBase() { return sharedAddress(sharedMemory()); }

void loadRow(uint32_t address) {
  uint32_t r[4];
  loadMatrixX4(r, address);
}

}  // namespace

TEST_CASE("warp collectives need all 32 lanes, at the same operation and call site") {
  CHECK_THROWS_WITH_AS(launch({{}, 48}, shuffleOnce), Contains("warp has only 16 threads"),
                       KernelError);
  // Lanes that diverge to two call sites of the same instruction (written outside the CHECK
  // macro, which would give both calls the line of its expansion).
  auto diverged = [] {
    if (threadIndex() < 16) {
      shuffleXor(1.0f, 1);
    } else {
      shuffleXor(2.0f, 1);
    }
  };
  CHECK_THROWS_WITH_AS(launch({{}, 32}, diverged), Contains("lanes 0-15 shuffleXor at"),
                       KernelError);
  CHECK_THROWS_WITH_AS(launch({{}, 32, 64},
                              [] {
                                uint32_t r[2];
                                if (threadIndex() % 2) {
                                  loadMatrixX2(r, sharedBase());
                                } else {
                                  shuffleXor(1.0f, 1);
                                }
                              }),
                       Contains("lanes 1, 3, 5"), KernelError);
  // Lanes that leave the kernel while the others wait.
  CHECK_THROWS_WITH_AS(launch({{}, 32},
                              [] {
                                if (threadIndex() >= 8) shuffleOnce();
                              }),
                       Contains("threads 0-7 exited; threads 8-31 wait at shuffleXor"),
                       KernelError);
}

TEST_CASE("ldmatrix rows must be 16-byte aligned and inside dynamic shared memory") {
  CHECK_THROWS_WITH_AS(
      launch({{}, 32, 512},
             [] { loadRow(sharedBase() + 16 * threadIndex() + (threadIndex() == 5) * 8); }),
      Contains("lane 5's row address 0x100058 is not 16-byte aligned"), KernelError);
  CHECK_THROWS_WITH_AS(
      launch({{}, 32, 512}, [] { loadRow(sharedBase() + 16 * threadIndex() + 16); }),
      Contains("lane 31's row address 0x100200 is outside dynamic shared memory"), KernelError);
  // A byte offset where a shared address belongs.
  CHECK_THROWS_WITH_AS(launch({{}, 32, 512}, [] { loadRow(16 * threadIndex()); }),
                       Contains("lane 0's row address 0x0 is outside"), KernelError);
  // x2 ignores the upper lanes' addresses, which must still be valid.
  CHECK_THROWS_WITH_AS(launch({{}, 32, 512},
                              [] {
                                uint32_t r[2];
                                loadMatrixX2(r, threadIndex() < 16 ? sharedBase() : 0u);
                              }),
                       Contains("lane 16's row address"), KernelError);
}

TEST_CASE("cp.async destinations and sources are checked when issued") {
  std::vector<uint32_t> source(64);
  // One thread copies 16 bytes from source + offset to a shared address.
  auto copy = [&](uint32_t unitAddress, int offset) {
    launch(
        {{}, 1, 512, {source}},
        [](uint32_t address, const uint32_t* from) { copyAsync16(address, from, true); },
        unitAddress, source.data() + offset);
  };
  const uint32_t base = ffpa::emulation::kSharedBase;
  CHECK_THROWS_WITH_AS(copy(base + 512, 0),
                       Contains("cp.async destination 0x100200 is outside dynamic shared memory"),
                       KernelError);
  CHECK_THROWS_WITH_AS(copy(base + 4, 0),
                       Contains("cp.async destination 0x100004 is not 16-byte aligned"),
                       KernelError);
  CHECK_THROWS_WITH_AS(copy(base, 1), Contains("cp.async source"), KernelError);
  CHECK_THROWS_WITH_AS(copy(base, 64), Contains("is outside every registered buffer"), KernelError);
  CHECK_NOTHROW(copy(base + 496, 60));
  auto sharedAddressOfLocal = [] {
    const uint32_t local[4] = {};
    sharedAddress(local);
  };
  CHECK_THROWS_WITH_AS(launch({{}, 32, 512}, sharedAddressOfLocal),
                       Contains("which is not in the block's dynamic shared memory"), KernelError);
}

TEST_CASE("reading shared memory that a cp.async in flight writes is reported") {
  std::vector<uint32_t> source(4 * 32);
  const Config config{{}, 32, 512, {source}};
  auto missingWait = [](const uint32_t* s) {
    const int t = threadIndex();
    copyAsync16(sharedBase() + 16 * t, s + 4 * t, true);
    copyAsyncCommit();
    loadRow(sharedBase() + 16 * t);
  };
  CHECK_THROWS_WITH_AS(
      launch(config, missingWait, source.data()),
      Contains("lane 0's row 0x100000 is still being written by a cp.async in flight"),
      KernelError);
  // Waiting for the older of two groups is not enough for the newer one.
  auto waitTooShort = [](const uint32_t* s) {
    const int t = threadIndex();
    copyAsync16(sharedBase() + 16 * t, s + 4 * t, true);
    copyAsyncCommit();
    copyAsync16(sharedBase() + 16 * (t + 32), s, true);
    copyAsyncCommit();
    copyAsyncWait<1>();
    loadRow(sharedBase() + 16 * (t + 32));
  };
  CHECK_THROWS_WITH_AS(launch({{}, 32, 1024, {source}}, waitTooShort, source.data()),
                       Contains("still being written by a cp.async in flight"), KernelError);
  // A refill of a slot whose previous copy has not landed.
  auto doubleCopy = [](const uint32_t* s) {
    copyAsync16(sharedBase() + 16 * threadIndex(), s, true);
    copyAsyncCommit();
    copyAsync16(sharedBase() + 16 * threadIndex(), s, true);
  };
  CHECK_THROWS_WITH_AS(launch(config, doubleCopy, source.data()),
                       Contains("which an earlier cp.async still in flight writes too"),
                       KernelError);
}

TEST_CASE("global stores must be aligned and inside the registered buffers") {
  std::vector<float> out(32);
  float* data = out.data();
  CHECK_THROWS_WITH_AS(
      launch(
          {{}, 32, 0, {out}}, [](float* o) { storeGlobalF32(o + threadIndex() + 1, 1.0f); }, data),
      Contains("thread 31 (warp 0, lane 31)"), KernelError);
  CHECK_THROWS_WITH_AS(
      launch(
          {{}, 32, 0, {out}}, [](float* o) { storeGlobal32(reinterpret_cast<char*>(o) + 2, 1u); },
          data),
      Contains("storeGlobal32 address"), KernelError);
  CHECK_THROWS_WITH_AS(launch(
                           {{}, 32}, [](float* o) { storeGlobalF32(o, 1.0f); }, data),
                       Contains("is outside every registered buffer"), KernelError);
}

namespace {

// Two warps that reach barrier 4 from different code, as two roles would. Functions rather than
// lambdas in the checks: a macro gives all its tokens one line, and so one call site.
void alignedFromTwoRoles() {
  if (threadIndex() < 32) {
    namedBarrier(4, 64);
  } else {
    namedBarrier(4, 64);
  }
}

void alignedAndUnalignedMixed() {
  if (threadIndex() < 32) {
    rolesBarrier(4, 64);
  } else {
    namedBarrier(4, 64);
  }
}

}  // namespace

TEST_CASE("barriers: invalid uses and deadlocks") {
  CHECK_THROWS_WITH_AS(launch({{}, 64}, [] { namedBarrier(16, 64); }),
                       Contains("barrier id 16 is not in 0..15"), KernelError);
  CHECK_THROWS_WITH_AS(launch({{}, 64}, [] { namedBarrier(1, 48); }),
                       Contains("not a multiple of 32"), KernelError);
  CHECK_THROWS_WITH_AS(launch({{}, 64}, [] { namedBarrier(1, 96); }),
                       Contains("96 threads in a block of 64"), KernelError);
  CHECK_THROWS_WITH_AS(launch({{}, 64}, [] { namedBarrier(1, threadIndex() < 32 ? 64 : 32); }),
                       Contains("while 32 threads arrived at it for 64"), KernelError);
  // Only warp 0 reaches a barrier for two warps.
  CHECK_THROWS_WITH_AS(launch({{}, 64},
                              [] {
                                if (threadIndex() < 32) namedBarrier(3, 64);
                              }),
                       Contains("threads 0-31 wait at barrier 3"), KernelError);
  CHECK_THROWS_WITH_AS(launch({{}, 64},
                              [] {
                                if (threadIndex() < 32) namedBarrier(3, 64);
                              }),
                       Contains("which has 32 of its 64 threads; threads 32-63 exited"),
                       KernelError);
  // A block barrier that some threads skip.
  CHECK_THROWS_WITH_AS(launch({{}, 96},
                              [] {
                                if (threadIndex() != 40) blockBarrier();
                              }),
                       Contains("deadlock"), KernelError);
  // Half of warp 1 and half of warp 2 add up to the count, but bar.sync counts whole warps.
  CHECK_THROWS_WITH_AS(launch({{}, 96},
                              [] {
                                const int t = threadIndex();
                                if (t < 32 || (t >= 48 && t < 80)) namedBarrier(2, 64);
                              }),
                       Contains("without lanes 0-15 of warp 1"), KernelError);
  // Warps of two roles meeting at bar.sync from different code: the aligned form forbids it
  // (synccheck's "Divergent thread(s) in block"); barrier.sync, the unaligned form, allows it.
  CHECK_THROWS_WITH_AS(launch({{}, 64}, alignedFromTwoRoles),
                       Contains("bar.sync needs every thread at one instruction"), KernelError);
  CHECK_THROWS_WITH_AS(launch({{}, 64}, alignedAndUnalignedMixed),
                       Contains("bar.sync needs every thread at one instruction"), KernelError);
}

TEST_CASE("the failing block is named, exceptions surface, and misuse outside kernels is refused") {
  std::vector<float> out(1);
  CHECK_THROWS_WITH_AS(launch(
                           {{4, 3}, 32, 0, {out}},
                           [](float* o) {
                             if (blockIndexX() == 2 && blockIndexY() == 1 && threadIndex() == 0) {
                               storeGlobalF32(o + 1, 0.0f);
                             }
                           },
                           out.data()),
                       Contains("block (2,1,0), thread 0"), KernelError);
  CHECK_THROWS_WITH_AS(launch({{}, 32}, [] { throw std::runtime_error("kernel says no"); }),
                       Contains("the kernel threw: kernel says no"), KernelError);
  CHECK_THROWS_AS(threadIndex(), std::logic_error);
  CHECK_THROWS_AS(launch({{}, 2048}, [] {}), std::invalid_argument);
}
