// cp.async: deferred until a wait retires the group, oldest groups first; zero-fill; poison. And
// the sm80 kernels' step copies (copyStepPanels) built on it.
#include "common/platform.cuh"
#include "common/ptx.cuh"
#include "emulation/launch.h"
#include "sm80/panels.cuh"

#include <doctest/doctest.h>

#include <cstring>
#include <vector>

using namespace ffpa::kernels;
using ffpa::emulation::launch;

namespace {

constexpr uint32_t kPoison = 0xffffffffu;

uint32_t sharedWord(int unit) {
  uint32_t word;
  std::memcpy(&word, sharedMemory() + 16 * unit, 4);
  return word;
}

// Thread t copies 16 bytes of `source` into unit t and records the unit's first word before the
// commit, after it, and after the wait.
void issueCommitWait(const uint32_t* source, uint32_t* out) {
  const int t = threadIndex();
  copyAsync16(sharedAddress(sharedMemory() + 16 * t), source + 4 * t, true);
  storeGlobal32(&out[3 * t], sharedWord(t));
  copyAsyncCommit();
  storeGlobal32(&out[3 * t + 1], sharedWord(t));
  copyAsyncWait<0>();
  storeGlobal32(&out[3 * t + 2], sharedWord(t));
}

// One thread, units 0..3: three committed groups and one left open; after each wait, the first
// words of all four units.
void waitOrder(const uint32_t* source, uint32_t* out) {
  const uint32_t base = sharedAddress(sharedMemory());
  for (int unit = 0; unit < 4; ++unit) {
    copyAsync16(base + 16 * unit, source + 4 * unit, true);
    if (unit < 3) copyAsyncCommit();
  }
  int next = 0;
  auto record = [&] {
    for (int unit = 0; unit < 4; ++unit) storeGlobal32(&out[next++], sharedWord(unit));
  };
  copyAsyncWait<2>();
  record();
  copyAsyncWait<1>();
  record();
  copyAsyncWait<0>();
  record();
  copyAsyncCommit();
  copyAsyncWait<0>();
  record();
}

void zeroFill(uint32_t* out) {
  const int t = threadIndex();
  // The source is not read: no buffer needs to hold it.
  copyAsync16(sharedAddress(sharedMemory()) + 16 * t, nullptr, false);
  copyAsyncCommit();
  copyAsyncWait<0>();
  for (int word = 0; word < 4; ++word) {
    uint32_t value;
    std::memcpy(&value, sharedMemory() + 16 * t + 4 * word, 4);
    storeGlobal32(&out[4 * t + word], value);
  }
}

// Every thread first reads its word of shared memory, then overwrites it.
void readThenWrite(uint32_t* out) {
  const int t = threadIndex();
  uint32_t word;
  std::memcpy(&word, sharedMemory() + 4 * t, 4);
  const int block = blockIndexX();
  storeGlobal32(&out[64 * block + t], word);
  std::memcpy(sharedMemory() + 4 * t, &block, 4);
}

// Thread t copies unit t; after the wait and a barrier, it reads its neighbour's unit.
void neighbourAfterBarrier(const uint32_t* source, uint32_t* out) {
  const int t = threadIndex(), threads = 64;
  copyAsync16(sharedAddress(sharedMemory()) + 16 * t, source + 4 * t, true);
  copyAsyncCommit();
  copyAsyncWait<0>();
  blockBarrier();
  storeGlobal32(&out[t], sharedWord((t + 1) % threads));
}

// One step of copyStepPanels as the forward's V steps issue it: 16 rows, six consecutive panels
// (three for each of two column warps) from column 16 on, rows from 10 on zero-filled, columns
// from 96 on not copied; then thread 0 stores the whole tile. Element (r, c) of `source` is
// r * 1000 + c, rows 160 elements apart.
constexpr int kStepRows = 16, kStepPanels = 6, kSourceStride = 160;
constexpr int kStepTileBytes = kStepRows * kStepPanels * 48;  // room for padded rows

void copyValueStep(const uint16_t* source, int rowBytes, uint32_t* out) {
  const uint32_t tile = sharedAddress(sharedMemory());
  ffpa::kernels::sm80::copyStepPanels<kStepRows, 32, 8, true>(
      tile, rowBytes, kStepPanels, source, kSourceStride, /*validRows=*/10, /*firstColumn=*/16,
      /*validColumns=*/96);
  copyAsyncCommit();
  copyAsyncWait<0>();
  blockBarrier();
  if (threadIndex() == 0) {
    for (int word = 0; word < kStepTileBytes / 4; ++word) {
      uint32_t value;
      std::memcpy(&value, sharedMemory() + 4 * word, 4);
      storeGlobal32(&out[word], value);
    }
  }
}

std::vector<uint32_t> counting(std::size_t count) {
  std::vector<uint32_t> values(count);
  for (std::size_t i = 0; i < count; ++i) values[i] = static_cast<uint32_t>(1000 + i);
  return values;
}

}  // namespace

TEST_CASE("cp.async writes shared memory only when a wait retires its group") {
  const std::vector<uint32_t> source = counting(32 * 4);
  std::vector<uint32_t> out(32 * 3);
  launch({{}, 32, 32 * 16, {source, out}}, issueCommitWait, source.data(), out.data());
  for (int t = 0; t < 32; ++t) {
    CHECK(out[3 * t] == kPoison);
    CHECK(out[3 * t + 1] == kPoison);
    CHECK(out[3 * t + 2] == source[4 * t]);
  }
}

TEST_CASE("copyAsyncWait<N> retires the oldest committed groups, and never the open one") {
  const std::vector<uint32_t> source = counting(4 * 4);
  std::vector<uint32_t> out(4 * 4);
  launch({{}, 1, 4 * 16, {source, out}}, waitOrder, source.data(), out.data());
  const uint32_t s0 = source[0], s1 = source[4], s2 = source[8], s3 = source[12];
  const std::vector<uint32_t> expected = {s0, kPoison, kPoison, kPoison,  // wait<2>
                                          s0, s1,      kPoison, kPoison,  // wait<1>
                                          s0, s1,      s2,      kPoison,  // wait<0>: unit 3 is open
                                          s0, s1,      s2,      s3};      // commit, wait<0>
  CHECK(out == expected);
}

TEST_CASE("cp.async with valid = false zero-fills without reading the source") {
  std::vector<uint32_t> out(32 * 4, 7u);
  launch({{}, 32, 32 * 16, {out}}, zeroFill, out.data());
  CHECK(out == std::vector<uint32_t>(32 * 4, 0u));
}

TEST_CASE("copies reach the other threads after wait and barrier") {
  const std::vector<uint32_t> source = counting(64 * 4);
  std::vector<uint32_t> out(64);
  launch({{}, 64, 64 * 16, {source, out}}, neighbourAfterBarrier, source.data(), out.data());
  for (int t = 0; t < 64; ++t) CHECK(out[t] == source[4 * ((t + 1) % 64)]);
}

TEST_CASE("every block starts with shared memory poisoned (0xff bytes, NaN in fp16 and bf16)") {
  std::vector<uint32_t> out(8 * 64);
  launch({{8}, 64, 64 * 4, {out}}, readThenWrite, out.data());
  CHECK(out == std::vector<uint32_t>(8 * 64, kPoison));
}

TEST_CASE("a step's copies: consecutive panels, rows past the valid ones zero, columns past them untouched") {
  std::vector<uint16_t> source(20 * kSourceStride);
  for (int r = 0; r < 20; ++r) {
    for (int c = 0; c < kSourceStride; ++c) source[r * kSourceStride + c] = static_cast<uint16_t>(r * 1000 + c);
  }
  for (const int rowBytes : {32, 48}) {  // swizzled and padded panel rows
    CAPTURE(rowBytes);
    std::vector<uint32_t> out(kStepTileBytes / 4);
    launch({{}, 32, kStepTileBytes, {source, out}}, copyValueStep, source.data(), rowBytes, out.data());
    std::vector<uint16_t> tile(kStepTileBytes / 2);
    std::memcpy(tile.data(), out.data(), kStepTileBytes);
    // Panel k of the tile holds columns 16 + 16 k .. + 16.
    for (int k = 0; k < kStepPanels; ++k) {
      const int column0 = 16 + 16 * k;
      for (int row = 0; row < kStepRows; ++row) {
        for (int unit = 0; unit < 2; ++unit) {
          const uint32_t offset = ffpa::kernels::sm80::panelOffset(row, k, unit, kStepRows, rowBytes);
          for (int e = 0; e < 8; ++e) {
            const int column = column0 + 8 * unit + e;
            const uint16_t expected = column0 >= 96 ? uint16_t(0xffff)  // not copied: the poison
                                      : row >= 10   ? uint16_t(0)
                                                    : uint16_t(row * 1000 + column);
            CHECK_MESSAGE(tile[offset / 2 + e] == expected, "row " << row << ", column " << column);
          }
        }
      }
    }
  }
}
