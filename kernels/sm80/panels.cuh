// Tiles in shared memory as 16-column panels, and the mma fragments read from them.
//
// A tile of `rows` rows x 16 * panels columns of 16-bit elements is stored panel after panel;
// row r of a panel is 32 bytes (two 16-byte units), either swizzled (unit u at u ^ ((r / 4) & 1),
// so that the 8 rows an ldmatrix reads hit distinct banks) or padded to 48 bytes. Panels keep
// shared memory per pipeline step independent of the head dim.
//
// Fragment layouts: see common/ptx.cuh (lane = 4 * group + quad).
#pragma once

#include "common/element.cuh"
#include "common/platform.cuh"
#include "common/ptx.cuh"

#include <cstdint>

namespace ffpa::kernels::sm80 {

// Byte offset of 16-byte unit `unit` of row `row` of panel `panel` in a tile of `rows` rows.
FFPA_DEVICE uint32_t panelOffset(int row, int panel, int unit, int rows, int rowBytes) {
  const int swizzle = rowBytes == 32 ? (row >> 2) & 1 : 0;
  return static_cast<uint32_t>((panel * rows + row) * rowBytes + ((unit ^ swizzle) << 4));
}

// cp.async.wait_group with a count known only at run time (at most 7 groups are ever pending).
FFPA_DEVICE void copyAsyncWaitPending(int pending) {
  switch (pending) {
    case 0: copyAsyncWait<0>(); break;
    case 1: copyAsyncWait<1>(); break;
    case 2: copyAsyncWait<2>(); break;
    case 3: copyAsyncWait<3>(); break;
    case 4: copyAsyncWait<4>(); break;
    case 5: copyAsyncWait<5>(); break;
    case 6: copyAsyncWait<6>(); break;
    default: copyAsyncWait<7>(); break;
  }
}

// Copies rows [0, kRows) x panels [0, panels) of a tile from global memory (row r at
// global + r * rowStride, panel p at column columnOf(p); a negative column skips the panel)
// into shared memory at `shared`, with kThreads threads. Rows at or past `validRows` and columns
// at or past `validColumns` are zero-filled.
//
// Consecutive thread pairs take consecutive rows of a panel: a warp writes 16 whole panel rows,
// 512 contiguous bytes of shared memory (no bank conflict; a row-major order would put the
// threads of a warp on the same banks of different panels), and reads 16 full 32-byte sectors.
// The CTA's thread pairs cover whole panels, so a thread keeps one row and 16-byte unit for every
// panel it copies, and that row's address and validity are worked out once.
template <int kRows, int kThreads, class Element, class ColumnOf>
FFPA_DEVICE void copyTile(uint32_t shared, int rowBytes, int panels, const Element* global, int64_t rowStride,
                          int validRows, int validColumns, ColumnOf columnOf) {
  static_assert(kRows > 0 && (kRows & (kRows - 1)) == 0, "rows: a power of two");
  static_assert(kThreads % 32 == 0 && (kThreads / 2) % kRows == 0, "thread pairs: whole panels per pass");
  constexpr int kPanelStride = kThreads / 2 / kRows;  // panels copied by the CTA per pass
  // Copies are issued inside the kernels' KV loops: what the thread works out here is worked
  // out at each issue, not hoisted to hold registers across the loop.
  const int thread = threadIndexAtUse();
  const int unit = thread & 1;
  const int row = (thread >> 1) & (kRows - 1);
  const bool rowValid = row < validRows;
  const Element* rowSource = global + (rowValid ? row * rowStride : 0) + unit * 8;
  const uint32_t rowShared = shared + panelOffset(row, 0, unit, kRows, rowBytes);
  const uint32_t panelBytes = static_cast<uint32_t>(kRows * rowBytes);
  for (int panel = (thread >> 1) / kRows; panel < panels; panel += kPanelStride) {
    const int column = columnOf(panel);
    if (column < 0) continue;
    const bool valid = rowValid && column < validColumns;
    copyAsync16(rowShared + panel * panelBytes, valid ? rowSource + column : global, valid);
  }
}

// A of m16n8k16: rows [row0, row0 + 16) x the 16 columns of panel `panel` (ldmatrix.x4).
FFPA_DEVICE void loadRowsA(uint32_t (&a)[4], uint32_t tile, int rows, int rowBytes, int row0, int panel) {
  const int lane = threadIndex() % 32;
  const int row = row0 + lane % 8 + 8 * ((lane / 8) % 2);
  loadMatrixX4(a, tile + panelOffset(row, panel, lane / 16, rows, rowBytes));
}

// B of m16n8k16 with n along the tile's rows (B = tile^T, as K in Q K^T): rows [row0, row0 + 16)
// as two n8 tiles ({b[0], b[1]} and {b[2], b[3]}), k along the panel's 16 columns.
FFPA_DEVICE void loadRowsB(uint32_t (&b)[4], uint32_t tile, int rows, int rowBytes, int row0, int panel) {
  const int lane = threadIndex() % 32;
  const int row = row0 + lane % 8 + 8 * (lane / 16);
  loadMatrixX4(b, tile + panelOffset(row, panel, (lane / 8) % 2, rows, rowBytes));
}

// As above for one n8 tile: rows [row0, row0 + 8).
FFPA_DEVICE void loadRowsB(uint32_t (&b)[2], uint32_t tile, int rows, int rowBytes, int row0, int panel) {
  const int lane = threadIndex() % 32;
  const int row = row0 + lane % 8;
  loadMatrixX2(b, tile + panelOffset(row, panel, (lane / 8) % 2, rows, rowBytes));
}

// B of m16n8k16 with k along the tile's rows (as V in P V): rows [row0, row0 + 16) x the 16
// columns of panel `panel`, as two n8 tiles ({b[0], b[1]}: columns 0-7, {b[2], b[3]}: 8-15).
FFPA_DEVICE void loadColumnsB(uint32_t (&b)[4], uint32_t tile, int rows, int rowBytes, int row0, int panel) {
  const int lane = threadIndex() % 32;
  const int row = row0 + lane % 8 + 8 * ((lane / 8) % 2);
  loadMatrixX4Trans(b, tile + panelOffset(row, panel, lane / 16, rows, rowBytes));
}

// Stores the thread's part of a 16 x (8 * tiles) accumulator, packed to 16 bits, into a swizzled
// 16-row tile at byte offset `tileOffset` of shared memory, columns from `column0` (a multiple of
// 8): row g and g + 8 of each n8 tile (the layout loadRowsA reads back as A fragments).
//
// n8 tile n is 8-column block k = column0 / 8 + n of the tile: unit k % 2 of panel k / 2, in
// shifts and masks (the thread's few base values stay its only live registers; signed divisions
// here once left a dozen hoisted offsets live across the forward's KV loop).
template <int kTiles, class PackTag>
FFPA_DEVICE void storeAccumulatorRows(uint32_t tileOffset, int column0, const float (&f)[kTiles][4],
                                      PackTag tag) {
  const uint32_t lane = static_cast<uint32_t>(threadIndex()) % 32;
  const uint32_t group = lane / 4, quad = lane % 4;
  const uint32_t swizzle = (group >> 2) & 1;  // of rows g and g + 8 alike (panelOffset)
  const uint32_t rowBase = tileOffset + group * 32 + quad * 4;
  const uint32_t block0 = static_cast<uint32_t>(column0) >> 3;
#pragma unroll
  for (int n = 0; n < kTiles; ++n) {
    const uint32_t block = block0 + n;
    const uint32_t offset = rowBase + ((block >> 1) << 9) + (((block & 1) ^ swizzle) << 4);
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      *reinterpret_cast<uint32_t*>(sharedMemory() + offset + half * 256) =
          packPair(f[n][2 * half], f[n][2 * half + 1], tag);
    }
  }
}

// The A fragments of k16 steps of a 16 x (16 * kSteps) accumulator held as kSteps * 2 n8 tiles:
// the accumulator layout of two n8 tiles is the A layout of one k16 step.
template <int kSteps, class PackTag>
FFPA_DEVICE void packAccumulatorAsA(uint32_t (&a)[kSteps][4], const float (&f)[2 * kSteps][4],
                                    PackTag tag) {
#pragma unroll
  for (int j = 0; j < kSteps; ++j) {
    a[j][0] = packPair(f[2 * j][0], f[2 * j][1], tag);
    a[j][1] = packPair(f[2 * j][2], f[2 * j][3], tag);
    a[j][2] = packPair(f[2 * j + 1][0], f[2 * j + 1][1], tag);
    a[j][3] = packPair(f[2 * j + 1][2], f[2 * j + 1][3], tag);
  }
}

}  // namespace ffpa::kernels::sm80
