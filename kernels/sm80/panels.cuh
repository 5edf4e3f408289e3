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

// Output columns split across kColWarps column warps go by 16-column panels, interleaved: panel
// k of column warp c is the output's panel k * kColWarps + c, so that an instance wider than the
// problem leaves each column warp the same few panels past the end to skip (ownedPanels,
// forward_params.h), and a step of k panels per warp is k * kColWarps consecutive panels of the
// operand.
//
// The output column of lane quad `quad` in n8 tile n (half n % 2 of panel n / 2) of column warp
// `colWarp`.
template <int kColWarps>
FFPA_DEVICE int interleavedColumn(int colWarp, int n, int quad) {
  return ((n >> 1) * kColWarps + colWarp) * 16 + 8 * (n & 1) + 2 * quad;
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

// Copies a whole tile once, before a kernel's loop (the persisted Q rows of the forward, the K, V,
// Q and dO rows of the gradient kernels): rows [0, kRows) x panels [0, panels) from global memory
// (row r at global + r * rowStride, panel p at column 16 p, every one of them inside the row) into
// shared memory at `shared`, with kThreads threads. Rows at or past `validRows` are zero-filled.
// The steps inside the loops copy with copyStepPanels, unrolled for their few panels; this loop
// stays rolled, for up to 64 panels.
//
// Consecutive thread pairs take consecutive rows of a panel: a warp writes 16 whole panel rows,
// 512 contiguous bytes of shared memory (no bank conflict; a row-major order would put the
// threads of a warp on the same banks of different panels), and reads 16 full 32-byte sectors.
// The CTA's thread pairs cover whole panels (or, for a tile of more rows than pairs, a panel in
// kRows / pairs row blocks), so a thread keeps one row (per block) and 16-byte unit for every
// panel it copies, and that row's address and validity are worked out once.
template <int kRows, int kThreads, class Element>
FFPA_DEVICE void copyTile(uint32_t shared, int rowBytes, int panels, const Element* global, int64_t rowStride,
                          int validRows) {
  constexpr int kPairs = kThreads / 2;
  constexpr int kBlockRows = kRows < kPairs ? kRows : kPairs;  // rows one pass of pairs covers
  static_assert(kRows > 0 && (kRows & (kRows - 1)) == 0, "rows: a power of two");
  static_assert(kThreads % 32 == 0 && (kPairs % kRows == 0 || kRows % kPairs == 0),
                "thread pairs: whole panels per pass, or whole row blocks of a panel");
  constexpr int kPanelStride = kPairs / kBlockRows;  // panels copied by the CTA per pass
  const int thread = threadIndexAtUse();
  const int unit = thread & 1;
  const int firstPanel = (thread >> 1) / kBlockRows;
  const uint32_t panelBytes = static_cast<uint32_t>(kRows * rowBytes);
#pragma unroll
  for (int block = 0; block < kRows / kBlockRows; ++block) {
    const int row = ((thread >> 1) & (kBlockRows - 1)) + block * kBlockRows;
    // A row past validRows zero-fills from the same columns of row 0, an address always mapped.
    const bool valid = row < validRows;
    const Element* source = global + (valid ? row * rowStride : 0) + firstPanel * 16 + unit * 8;
    // Source and destination run on by kPanelStride panels per copy: additions, not products.
    uint32_t destination = shared + panelOffset(row, firstPanel, unit, kRows, rowBytes);
    for (int panel = firstPanel; panel < panels;
         panel += kPanelStride, source += kPanelStride * 16, destination += kPanelStride * panelBytes) {
      copyAsync16(destination, source, valid);
    }
  }
}

// Copies the panels of one pipeline step, at most kMaxPanels: the `panels` 16-column panels from
// global column firstColumn on, of rows [0, kRows) (row r at global + r * rowStride), into panels
// 0, 1, ... of a tile of kRows rows at `shared`. Rows at or past validRows are zero-filled (from
// the same columns of row 0). Every column copied must lie before the end of the row: with
// kColumnTest, panels from column validColumns on (a multiple of 16) are not copied at all, and
// keep what their slot held. That serves V (and the other operands of output products), whose
// columns past d_v only reach output columns that are never stored (each output column of P V
// reads its own column of V), where the rows past seqKv must be zeros (P is 0 there, and 0 times
// a stale NaN is not).
//
// The threads share the work as copyTile's do, but a thread's loop over its panels is unrolled
// to kMaxPanels: every copy's global address is the thread's row address plus a constant (an
// immediate of the copy instruction) and its shared address the row's plus a multiple of the
// panel size, so that a copy costs a handful of instructions, and the steps of the forward issue
// several per thread on every KV tile.
template <int kRows, int kThreads, int kMaxPanels, bool kColumnTest = false, class Element>
FFPA_DEVICE void copyStepPanels(uint32_t shared, int rowBytes, int panels, const Element* global, int64_t rowStride,
                                int validRows, int firstColumn, int validColumns = 0) {
  constexpr int kPairs = kThreads / 2;
  constexpr int kBlockRows = kRows < kPairs ? kRows : kPairs;
  static_assert(kRows > 0 && (kRows & (kRows - 1)) == 0, "rows: a power of two");
  static_assert(kThreads % 32 == 0 && (kPairs % kRows == 0 || kRows % kPairs == 0),
                "thread pairs: whole panels per pass, or whole row blocks of a panel");
  constexpr int kPanelStride = kPairs / kBlockRows;
  constexpr int kCopies = (kMaxPanels + kPanelStride - 1) / kPanelStride;  // per row block
  const int thread = threadIndexAtUse();
  const int unit = thread & 1;
  const int firstPanel = (thread >> 1) / kBlockRows;
  const int left = panels - firstPanel;  // the thread copies panels firstPanel + k * kPanelStride < panels
  const int firstThreadColumn = firstColumn + firstPanel * 16;
  const int columnsLeft = validColumns - firstThreadColumn;  // kColumnTest: columns it may copy
  const uint32_t panelBytes = static_cast<uint32_t>(kRows * rowBytes);
#pragma unroll
  for (int block = 0; block < kRows / kBlockRows; ++block) {
    const int row = ((thread >> 1) & (kBlockRows - 1)) + block * kBlockRows;
    const bool rowValid = row < validRows;
    const Element* source = global + (rowValid ? row * rowStride : 0) + firstThreadColumn + unit * 8;
    const uint32_t destination = shared + panelOffset(row, firstPanel, unit, kRows, rowBytes);
#pragma unroll
    for (int k = 0; k < kCopies; ++k) {
      if (k * kPanelStride >= left) break;
      const int offset = k * kPanelStride * 16;  // columns from the thread's first
      if (kColumnTest && offset >= columnsLeft) break;
      copyAsync16(destination + static_cast<uint32_t>(k * kPanelStride) * panelBytes, source + offset, rowValid);
    }
  }
}

// The calling lane's row address in panel 0 of a tile for an ldmatrix.x4 of rows [row0, row0 +
// 16): as A (laneOffsetA; loadRowsA, and V's B of P V read transposed) and as B with n along the
// rows, two n8 tiles (laneOffsetB: {b[0], b[1]} rows row0..+7, {b[2], b[3]} the next 8, k along
// the panel's 16 columns). Panel p of a tile of `rows` rows lies p * rows * rowBytes further, and
// rows 16 further lie 16 * rowBytes further (the swizzle repeats every 8 rows): a loop over panels
// or row blocks adds a stride instead of working the lane's address out again.
FFPA_DEVICE uint32_t laneOffsetA(int rowBytes, int row0) {
  const int lane = threadIndex() % 32;
  return panelOffset(row0 + lane % 8 + 8 * ((lane / 8) % 2), 0, lane / 16, 16, rowBytes);
}
FFPA_DEVICE uint32_t laneOffsetB(int rowBytes, int row0) {
  const int lane = threadIndex() % 32;
  return panelOffset(row0 + lane % 8 + 8 * (lane / 16), 0, (lane / 8) % 2, 16, rowBytes);
}

// The lane's row address in panel 0 for the B fragments of kTiles n8 tiles of rows from row0
// (forEachRowsB): laneOffsetB, or for a single n8 tile that of an ldmatrix.x2 of rows row0..+7.
template <int kTiles>
FFPA_DEVICE uint32_t laneOffsetRowsB(int rowBytes, int row0) {
  if constexpr (kTiles == 1) {
    const int lane = threadIndex() % 32;
    return panelOffset(row0 + lane % 8, 0, (lane / 8) % 2, 16, rowBytes);
  } else {
    return laneOffsetB(rowBytes, row0);
  }
}

// The B fragments (n along the tile's rows, as K in Q K^T) of kTiles n8 tiles of one panel, from
// the lane's address `bLane` in it (laneOffsetRowsB): calls mma(n, b) for tile n with its two
// registers b. Rows load 16 at a time (ldmatrix.x4), or 8 for a single tile (.x2); with kPipe
// the next 16 rows load before the MMAs of the current ones (a register ping-pong).
template <int kTiles, bool kPipe, class Mma>
FFPA_DEVICE void forEachRowsB(uint32_t bLane, int rowBytes, Mma&& mma) {
  static_assert(kTiles == 1 || kTiles % 2 == 0, "rows are loaded 16 at a time");
  const uint32_t blockBytes = 16u * rowBytes;
  if constexpr (kTiles == 1) {
    uint32_t b[2];
    loadMatrixX2(b, bLane);
    mma(0, b);
  } else if constexpr (kPipe) {
    uint32_t b[2][4];
    loadMatrixX4(b[0], bLane);
#pragma unroll
    for (int n = 0; n < kTiles; n += 2) {
      if (n + 2 < kTiles) loadMatrixX4(b[(n / 2 + 1) % 2], bLane + (n / 2 + 1) * blockBytes);
      const uint32_t(&cur)[4] = b[(n / 2) % 2];
      mma(n, {cur[0], cur[1]});
      mma(n + 1, {cur[2], cur[3]});
    }
  } else {
#pragma unroll
    for (int n = 0; n < kTiles; n += 2) {
      uint32_t b[4];
      loadMatrixX4(b, bLane + (n / 2) * blockBytes);
      mma(n, {b[0], b[1]});
      mma(n + 1, {b[2], b[3]});
    }
  }
}

// Calls body(a, b) for panels [0, panels) of a step of a score product (S += A B^T, one panel at
// a time), with a and b the lane's addresses in the panel of A and of B, which run on by one
// panel stride each. Unrolled by 4, so that the fragments of several panels load ahead of their
// MMAs.
template <class Body>
FFPA_DEVICE void forEachScorePanel(uint32_t a, uint32_t aPanelBytes, uint32_t b, uint32_t bPanelBytes, int panels,
                                   Body&& body) {
#pragma unroll 4
  for (int panel = 0; panel < panels; ++panel, a += aPanelBytes, b += bPanelBytes) body(a, b);
}

// The B fragments with k along the tile's rows (as V in P V, ldmatrix.trans) of one 16-column
// panel or, with kPair, of two neighbouring ones `panelStride` apart, k16 step by k16 step from
// the lane's address `bLane` in the first (laneOffsetA), the steps outermost: calls mma(q, j, b)
// for panel q (0 or 1) and step j, b its four registers ({b[0], b[1]}: columns 0-7, {b[2], b[3]}:
// 8-15), so that the two panels' MMAs, which write different accumulators, follow each other
// without waiting for one another. The fragments load all before the first MMA (kAll), the next
// step's while the current one multiplies (kPipe), or each step's just before its MMAs.
template <int kSteps, bool kPair, bool kAll, bool kPipe, class Mma>
FFPA_DEVICE void forEachColumnsB(uint32_t bLane, uint32_t panelStride, int rowBytes, Mma&& mma) {
  constexpr int kPanels = kPair ? 2 : 1;
  constexpr int kHeld = kAll ? kSteps : kPipe ? 2 : 1;  // steps whose fragments are held at once
  const uint32_t stepBytes = 16u * rowBytes;
  uint32_t b[kHeld][kPanels][4];
  auto load = [&](int j) {
#pragma unroll
    for (int q = 0; q < kPanels; ++q) loadMatrixX4Trans(b[j % kHeld][q], bLane + q * panelStride + j * stepBytes);
  };
  if constexpr (kAll) {
#pragma unroll
    for (int j = 0; j < kSteps; ++j) load(j);
  } else if constexpr (kPipe) {
    load(0);
  }
#pragma unroll
  for (int j = 0; j < kSteps; ++j) {
    if constexpr (kPipe && !kAll) {
      if (j + 1 < kSteps) load(j + 1);
    } else if constexpr (!kAll) {
      load(j);
    }
#pragma unroll
    for (int q = 0; q < kPanels; ++q) mma(q, j, b[j % kHeld][q]);
  }
}

// A of m16n8k16: rows [row0, row0 + 16) x the 16 columns of panel `panel` (ldmatrix.x4).
FFPA_DEVICE void loadRowsA(uint32_t (&a)[4], uint32_t tile, int rows, int rowBytes, int row0, int panel) {
  loadMatrixX4(a, tile + uint32_t(panel * rows * rowBytes) + laneOffsetA(rowBytes, row0));
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
