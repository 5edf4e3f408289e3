// What the sm90 kernels' consumer warpgroups do with 64-row wgmma accumulators: the two products
// every kernel is built from, the 16-bit tile one writes for the other, and the exchange of a
// partial [64, 64] tile between the two CTAs of a cluster. Shared by the forward
// (forward_kernel.cuh) and the backward's gradient kernels (query_gradient_kernel.cuh,
// key_gradient_kernel.cuh).
//
// A [64, 64] fp32 tile over the 128 threads of a warpgroup is 32 registers per thread, in the
// accumulator layout of sm90/ptx.cuh: thread (warp w, group g, quad q) holds rows 16w + g and
// 16w + g + 8, columns 8j + 2q .. +1 of each 8-column group j.
#pragma once

#include "common/element.cuh"
#include "common/platform.cuh"
#include "common/ptx.cuh"
#include "sm80/cta_geometry.cuh"
#include "sm90/forward_params.h"
#include "sm90/ptx.cuh"

#include <cstdint>

namespace ffpa::kernels::sm90 {

using namespace ffpa::sm90;  // the shape constants

constexpr int kTileRegisters = kKeys / 2;  // a [64, 64] fp32 tile per thread
static_assert(kTileRegisters % 4 == 0, "partial tiles travel in 16-byte stores");

// --- A CTA's place and its shared memory ----------------------------------------------------------

// The query rows of one (batch, head) a CTA (or a cluster of kCluster CTAs) works on, the KV
// tiles they see, and the 64-column blocks of d_qk and d_v this CTA holds.
// The rows are those of the mma.sync kernels' query-major CTAs (sm80::CtaRows: [firstRow, rowEnd)
// and, with slices, their query segment), so that sm80::keyTileOf walks their KV tiles.
struct RowTile : ffpa::kernels::sm80::CtaRows {
  int64_t batch;
  int64_t head;
  int64_t kvHead;
  int tiles;         // KV tiles the rows see (0 when the mask hides every key)
  int rank;          // in the cluster
  BlockShare qk, v;  // the 64-column blocks of d_qk and d_v the CTA holds
};

// The keys of the rows' batch entry: its count of FFPA_ATTENTION_KEY_LENGTHS clamped to [0,
// seqKv], or seqKv without counts (sm80::keysOfBatch; every sm90 kernel reads them). Worked out
// where it is used, not kept in RowTile: the consumers hold O or the gradients at the register
// limit across the KV loop.
template <class Params>
FFPA_DEVICE int keyEndOf(const Params& p, int64_t batch) {
  return ffpa::kernels::sm80::keysOfBatch(p, batch);
}

// `p`: a kernel's parameters (the sizes, mask and grid layout every sm90 kernel has). Rows
// [firstRow, firstRow + 64) of the CTA's (batch, head), and the KV tiles they see under the
// causal mask (of the keys of their batch entry, keyEndOf).
template <int kCluster, class Params>
FFPA_DEVICE RowTile locateRowTileAt(const Params& p, int firstRow) {
  const ffpa::kernels::sm80::GridPosition grid = ffpa::kernels::sm80::gridPosition(p.gridDnhb, p.headsQ);
  RowTile at;
  at.rank = kCluster == 1 ? 0 : clusterRank();
  at.firstRow = firstRow;
  at.rowEnd = p.seqQ;
  at.segment = -1;
  at.qk = blockShare(columnBlocks(p.headDimQk), kCluster, at.rank);
  at.v = blockShare(columnBlocks(p.headDimV), kCluster, at.rank);
  at.batch = grid.batch;
  at.head = grid.head;
  at.kvHead = grid.head / p.groupSize;
  const int keyEnd = keyEndOf(p, at.batch);
  at.tiles = ffpa::kernels::sm80::visibleKeyTiles(p.seqQ, keyEnd, kKeys, at.firstRow, kRows, p.causal,
                                                  ffpa::kernels::sm80::causalOffsetOf(p, keyEnd));
  return at;
}

// Rows [64 t, 64 t + 64) of cluster x, where t = x, or under a causal mask the tiles last to
// first (sm80::rowTileInOrder: the longest first).
template <int kCluster, class Params>
FFPA_DEVICE RowTile locateRowTile(const Params& p) {
  return locateRowTileAt<kCluster>(p, ffpa::kernels::sm80::rowTileInOrder(p, blockIndexX() / kCluster, kRows) * kRows);
}

// The same with attention slices (SlicedTiles of the queries): the row tile of cluster x and the
// KV tiles of its walk.
template <int kCluster, class Params>
FFPA_DEVICE RowTile locateRowTile(const Params& p, const SlicedTiles& sliced) {
  RowTile at = locateRowTile<kCluster>(p);
  if (sliced.slices.slices == nullptr) return at;
  const slices::AxisTile rows = slices::ctaTile(sliced.slices.queries, sliced.tiles, sliced.tileCount,
                                                blockIndexX() / kCluster, kRows, p.seqQ);
  at.firstRow = rows.begin;
  at.rowEnd = rows.end;
  at.segment = rows.segment;
  at.tiles = slices::walkTiles(sliced.slices, true, rows.segment, rows.begin, rows.end - 1, kKeys);
  return at;
}

// With K and V shared by the CTAs of two adjacent row tiles (forward_params.h): rows [64 x, 64 x +
// 64) of CTA x (in this order whatever the mask: the grid has whole pairs, one maybe past the
// rows), all of the head dims' blocks, and the KV tiles that the rows of both CTAs of its cluster
// see, so that the pair walks them together.
template <class Params>
FFPA_DEVICE RowTile locateKvSharingRowTile(const Params& p) {
  RowTile at = locateRowTileAt<1>(p, blockIndexX() * kRows);
  at.rank = clusterRank();
  const int pairFirstRow = (blockIndexX() & ~(kKvSharingCtas - 1)) * kRows;
  const int keyEnd = keyEndOf(p, at.batch);  // the same in both CTAs: one (batch, head)
  at.tiles = ffpa::kernels::sm80::visibleKeyTiles(p.seqQ, keyEnd, kKeys, pairFirstRow, kKvSharingCtas * kRows,
                                                  p.causal, ffpa::kernels::sm80::causalOffsetOf(p, keyEnd));
  return at;
}

// KV tile `tile` of the rows `at`: keys [firstKey, firstKey + 64), seen through slice `slice`
// (-1: no slices; the tiles then follow each other from key 0). SlicedTiles holds the `slices`
// the mma.sync kernels' helper reads from their parameters.
using ffpa::kernels::sm80::KeyTile;

FFPA_DEVICE KeyTile keyTileOf(const SlicedTiles& sliced, const RowTile& at, int tile) {
  return ffpa::kernels::sm80::keyTileOf(sliced, at, kKeys, tile);
}

// The keys [begin, end) query row `row` sees in KV tile `t` (empty when end <= begin): those of
// the tile's slice, else [0, keyEnd) cut by the causal mask, where keyEnd is seqKv or the count
// of the row's batch entry (keyEndOf). Keys index from 0 and below 2^31.
struct VisibleKeys {
  int begin, end;
  FFPA_DEVICE bool holds(int key) const { return key >= begin && key < end; }
};

template <class Params>
FFPA_DEVICE VisibleKeys visibleKeys(const Params& p, const SlicedTiles& sliced, const KeyTile& t, int row,
                                    int keyEnd) {
  if (t.slice >= 0) {
    const slices::KeySpan span = slices::keySpan(sliced.slices.slices[t.slice], row);
    return {static_cast<int>(span.begin), static_cast<int>(span.end)};
  }
  int64_t end = keyEnd;
  const int64_t offset = ffpa::kernels::sm80::causalOffsetOf(p, keyEnd);
  if (p.causal && row + offset + 1 < end) end = row + offset + 1;  // may be <= 0
  return {0, static_cast<int>(end < 0 ? 0 : end)};
}

// The first 1024-byte aligned byte of dynamic shared memory (the 128-byte swizzle repeats every
// 1024 bytes, and TMA boxes and wgmma descriptors assume that alignment): as a pointer and as a
// shared address. The layouts request 1024 bytes more than they use for it.
struct AlignedShared {
  unsigned char* base;
  uint32_t address;
};

FFPA_DEVICE AlignedShared alignedShared() {
  unsigned char* raw = sharedMemory();
  const uint32_t rawAddress = sharedAddress(raw);
  const uint32_t pad = (1024u - rawAddress % 1024u) % 1024u;
  return {raw + pad, rawAddress + pad};
}

// Thread 0 initialises the mbarriers from `first` on (8 bytes each) with `arrivals[i]` arrivals;
// then every thread of the CTA, or of the cluster, waits: a CTA reaches the other's barriers only
// once both initialised theirs.
template <int kCluster, int kCount>
FFPA_DEVICE void initBarriers(uint32_t first, const int (&arrivals)[kCount]) {
  if (threadIndex() == 0) {
    for (int i = 0; i < kCount; ++i) mbarrierInit(first + 8u * i, arrivals[i]);
    fenceBarrierInit();
  }
  if constexpr (kCluster > 1) {
    clusterSync();
  } else {
    blockBarrier();
  }
}

// --- Warpgroup roles -------------------------------------------------------------------------------

// Registers per thread after setmaxnreg, (producer, each consumer): few for the producer, which
// only issues TMA loads, many for the consumers, which hold the fp32 accumulators. The forward's
// consumers hold up to 128 fp32 of O besides S and P and take 240. The gradient kernels' hold
// at most 128 gradient values besides a tile, and give 8 to the producer, whose loops over one
// or two buffers of the streamed operand spill at 24.
constexpr int kForwardRegisters[2] = {24, 240};
constexpr int kGradientRegisters[2] = {32, 232};
static_assert(kForwardRegisters[0] + 2 * kForwardRegisters[1] <= 168 * 3, "setmaxnreg: 168 x 384 allocated");
static_assert(kGradientRegisters[0] + 2 * kGradientRegisters[1] <= 168 * 3, "setmaxnreg: 168 x 384 allocated");

// Runs warpgroup 0 as the producer (thread 0 calls `produce` when `produces`), warpgroup 1 as
// consumer 0 and warpgroup 2 as consumer 1, each after its setmaxnreg to kProducerRegisters or
// kConsumerRegisters: one branch per role, so that ptxas honours the register budgets (no
// C7508). The launch allocates 168 registers per thread (FFPA_LAUNCH_BOUNDS(384, 1)); the
// consumers' increase waits until the producer's decrease has freed enough of them.
template <int kProducerRegisters, int kConsumerRegisters, class Produce, class Consume0, class Consume1>
FFPA_DEVICE void runRoles(bool produces, Produce produce, Consume0 consume0, Consume1 consume1) {
  const int warpgroup = threadIndex() / 128;
  if (warpgroup == 0) {
    decreaseRegisters<kProducerRegisters>();
    if (threadIndex() == 0 && produces) produce();
  } else if (warpgroup == 1) {
    increaseRegisters<kConsumerRegisters>();
    consume0();
  } else {
    increaseRegisters<kConsumerRegisters>();
    consume1();
  }
}

// --- The producer ---------------------------------------------------------------------------------

// One or two buffers of an operand that the tiles (or steps) use in turn: tile i uses buffer
// slot(i) for the use(i)-th time, so its full barrier completes phase use(i) & 1, and the
// producer waits for phase (use(i) - 1) & 1 of its empty barrier before loading it (i >= count).
struct BufferRing {
  int count;  // 1 or 2
  FFPA_DEVICE int slot(int i) const { return i & (count - 1); }
  FFPA_DEVICE int use(int i) const { return i >> (count - 1); }
};

// Step i of a producer that streams two operands: one through a ring of kBuffers buffers (full
// and empty mbarriers per buffer, the empty ones 8 bytes apart from `ringEmpty0`), the other
// through one buffer (`singleEmpty`). It waits for each buffer to be released, then calls
// loadRinged(slot) or loadSingle() to issue the loads. One ring buffer: the single operand first,
// as the consumers release it earlier in a step; two: the ringed one first, its buffer free
// since step i - 2, so that it loads a whole step ahead. kBuffers is a compile-time count: the
// producer has few registers (kGradientRegisters).
template <int kBuffers, class LoadSingle, class LoadRinged>
FFPA_DEVICE void produceStep(int i, uint32_t singleEmpty, uint32_t ringEmpty0, LoadSingle loadSingle,
                             LoadRinged loadRinged) {
  static_assert(kBuffers == 1 || kBuffers == 2, "one or two ring buffers");
  const BufferRing ring{kBuffers};
  const auto single = [&] {
    if (i > 0) mbarrierWait(singleEmpty, (i - 1) & 1);
    loadSingle();
  };
  if constexpr (kBuffers == 1) single();
  const int slot = ring.slot(i);
  if (i >= kBuffers) mbarrierWait(ringEmpty0 + 8u * slot, (ring.use(i) - 1) & 1);
  loadRinged(slot);
  if constexpr (kBuffers == 2) single();
}

// The producer: loads the 64 x 64 boxes `blocks` of `map` (over [batch][head][row][d]) at row
// `row` into consecutive blocks from `shared`, completing on `barrier` (one arrival announcing
// all their bytes; boxes past the tensor's d, or its rows, read as zeros). kRowBoxes > 1: the
// blocks hold 64 kRowBoxes rows each, kRowBoxes boxes stacked (rows `row` + 64 i at kBlockBytes
// i), a tile of as many keys as one wgmma B operand (the row split's wide KV tiles).
template <int kRowBoxes = 1>
FFPA_DEVICE void loadBlocks(const TensorMap* map, uint32_t shared, BlockShare blocks, int row, int64_t head,
                            int64_t batch, uint32_t barrier) {
  mbarrierArriveExpectTx(barrier, blocks.count * kRowBoxes * kBlockBytes);
  for (int b = 0; b < blocks.count; ++b) {
    #pragma unroll
    for (int box = 0; box < kRowBoxes; ++box) {
      tmaLoad4d(shared + (b * kRowBoxes + box) * kBlockBytes, map, (blocks.first + b) * kBlockColumns,
                row + box * kKeys, int(head), int(batch), barrier);
    }
  }
}

// The producer of rank `rank` of a pair of CTAs sharing K and V: announces all the bytes of the
// boxes `blocks` on its own `barrier` (the other CTA's half lands there too) and loads the boxes
// of its parity, multicast to both CTAs.
FFPA_DEVICE void loadSharedBlocks(const TensorMap* map, uint32_t shared, BlockShare blocks, int row, int64_t head,
                                  int64_t batch, uint32_t barrier, int rank) {
  static_assert(kKvSharingCtas == 2, "a multicast mask of two CTAs");
  mbarrierArriveExpectTx(barrier, blocks.count * kBlockBytes);
  for (int b = rank; b < blocks.count; b += kKvSharingCtas) {
    tmaLoad4dMulticast(shared + b * kBlockBytes, map, (blocks.first + b) * kBlockColumns, row, int(head), int(batch),
                       barrier, 0x3);
  }
}

// Four floats moved as one 16-byte access.
struct alignas(16) Four {
  float v[4];
};

// Thread `rank` of `threads` zeroes its share of rows [firstRow, 64 kRowBoxes) of `count` column
// blocks from `blocks`, each of kRowBoxes 64 x 64 boxes stacked (loadBlocks<kRowBoxes>: its rows
// follow each other, 128 bytes apart), 128-byte swizzled (the swizzle moves 16-byte chunks within
// a row, so a row's 128 bytes stay in place), and fences its stores for wgmma (the async proxy).
// A barrier of those threads must follow before a product reads the zeros.
template <int kRowBoxes = 1>
FFPA_DEVICE void zeroTileRows(uint32_t blocks, int count, int firstRow, int rank, int threads) {
  unsigned char* bytes = sharedMemory() + (blocks - sharedAddress(sharedMemory()));
  const int chunks = (kRowBoxes * kKeys - firstRow) * 8;  // 16-byte chunks per column block
  for (int i = rank; i < count * chunks; i += threads) {
    const int block = i / chunks;
    *reinterpret_cast<Four*>(bytes + block * kRowBoxes * kBlockBytes + firstRow * 128 + (i - block * chunks) * 16) =
        Four{};
  }
  fenceProxyAsync();
}

// The 128 threads of a warpgroup zero rows [firstRow, 64) of `count` consecutive 64 x 64 blocks
// from `blocks` (zeroTileRows) and meet at named barrier `barrierId`: the warpgroup's products
// may then read the zeros.
FFPA_DEVICE void zeroBlockRows(uint32_t blocks, int count, int firstRow, int barrierId) {
  zeroTileRows(blocks, count, firstRow, threadIndex() % 128, 128);
  namedBarrier(barrierId, 128);
}

// The first row past the keys of batch entry `batch` (keyEndOf) in the KV tile of keys
// [firstKey, firstKey + tileKeys) that TMA filled from the tensor's rows (a count below seqKv;
// past seqKv it fills zeros), or tileKeys where the tile holds none (always without counts): the
// rows a consumer zeroes (zeroTileRows) before its K or V reaches a product, since a mask
// replaces a score but P = 0 or dS = 0 times a NaN row is still NaN.
template <class Params>
FFPA_DEVICE int firstRowPastKeys(const Params& p, int64_t batch, int firstKey, int tileKeys = kKeys) {
  const int keyEnd = keyEndOf(p, batch);
  if (keyEnd >= p.seqKv || keyEnd >= firstKey + tileKeys) return tileKeys;
  return keyEnd > firstKey ? keyEnd - firstKey : 0;
}

struct Lane {
  int warp;   // of the warpgroup: rows 16 * warp .. +15
  int group;  // lane / 4
  int quad;   // lane % 4
  FFPA_DEVICE int row(int half) const { return 16 * warp + group + 8 * half; }
  // The tile column of register 4 * j + 2 * half + e.
  FFPA_DEVICE int column(int j, int e) const { return 8 * j + 2 * quad + e; }
};

FFPA_DEVICE Lane lane() {
  const int t = threadIndex() % 128;
  return {t / 32, t % 32 / 4, t % 4};
}

// --- Masks ------------------------------------------------------------------------------------------

// Whether every row of the warp sees every column of the tile of `columns` columns (64 unless
// the row split's wide KV tiles) from `first`, given the spans [begin, end) of visible columns of
// the thread's two rows (keys of query rows, or queries of key rows): one answer for the warp, so
// that it skips the mask of a tile its rows see whole (every tile but the diagonal ones of a
// causal mask, a last one past the end, a slice's edges) on a branch that does not diverge.
template <class Span>
FFPA_DEVICE bool warpSeesWholeTile(const Span (&span)[2], int first, int columns = kKeys) {
  bool whole = true;
  #pragma unroll
  for (int half = 0; half < 2; ++half) whole = whole && span[half].begin <= first && span[half].end >= first + columns;
  return warpAll(whole);
}

// The gradient kernels' probabilities of the thread's tile registers: t = exp2(t * scaleLog2 -
// lse2(half, j, e)), 0 where the row's span does not hold the column. kMask: test each column;
// without it, every column of the tile is visible.
template <bool kMask, class Span, class Lse2>
FFPA_DEVICE void tileProbabilitiesOf(float (&t)[kTileRegisters], const Span (&span)[2], int first, float scaleLog2,
                                     const Lane& me, Lse2 lse2) {
  #pragma unroll
  for (int half = 0; half < 2; ++half) {
    #pragma unroll
    for (int j = 0; j < kKeys / 8; ++j) {
      #pragma unroll
      for (int e = 0; e < 2; ++e) {
        float& value = t[4 * j + 2 * half + e];
        const float p = exp2Approx(value * scaleLog2 - lse2(half, j, e));
        value = !kMask || span[half].holds(first + me.column(j, e)) ? p : 0.0f;
      }
    }
  }
}

// The same, testing the columns only where a row of the warp does not see the whole tile.
template <class Span, class Lse2>
FFPA_DEVICE void tileProbabilities(float (&t)[kTileRegisters], const Span (&span)[2], int first, float scaleLog2,
                                   const Lane& me, Lse2 lse2) {
  if (warpSeesWholeTile(span, first)) {
    tileProbabilitiesOf<false>(t, span, first, scaleLog2, me, lse2);
  } else {
    tileProbabilitiesOf<true>(t, span, first, scaleLog2, me, lse2);
  }
}

// S[64, N] = A[64, k] B[N, k]^T over `blocks` 64-column blocks (k = 64 * blocks), both operands
// K-major blocks (Q and K, or dO and V): A's kBlockBytes apart, B's N rows of 128 bytes apart
// (N = 64, the tile of every kernel, or the row split's wide KV tiles of 128 keys; N = 2 R for an
// S of R registers per thread). The columns of the last block past the head dim read as zeros
// (TMA fills them), so whole blocks are multiplied. Zero when blocks is 0 (a CTA of a cluster
// holding no block of the head dim).
// One wgmma.fence per block, in the loop, and the four k16 steps of a block unrolled: a runtime
// loop of single steps makes ptxas inject a warpgroup.arrive before every wgmma (C7519).
// Split in two where other work should run while the tensor cores compute S: issueScoreProduct
// commits the wgmma group (an empty one when blocks is 0); finishScoreProduct, once a wgmmaWait
// has seen that group complete, makes `s` the product. kZeroFirst: `s` is zeroed before the
// group and every wgmma accumulates, so that nothing writes `s` while the group may be in
// flight (ptxas serializes wgmma otherwise when other groups are in flight with it, C7515);
// finishScoreProduct then has nothing to zero.
template <class Tag, bool kZeroFirst = false, int R>
FFPA_DEVICE void issueScoreProduct(float (&s)[R], uint32_t a, uint32_t b, int blocks) {
  constexpr int kN = 2 * R;
  static_assert(kN % kKeys == 0 && kN <= 256, "B: whole 64-row boxes, one wgmma wide");
  if constexpr (kZeroFirst) {
    for (float& value : s) value = 0.0f;
  }
  wgmmaFenceOperands(s);
  for (int block = 0; block < blocks; ++block) {
    wgmmaFence();
    #pragma unroll
    for (int step = 0; step < kBlockColumns / 16; ++step) {
      const uint32_t column = step * 32;  // k16 step: 32 bytes into the rows
      wgmmaSS<kN, false>(s, matrixDescriptor(a + block * kBlockBytes + column, 16, 1024),
                         matrixDescriptor(b + block * (kN * 128) + column, 16, 1024),
                         kZeroFirst || block > 0 || step > 0, Tag());
    }
  }
  wgmmaCommit();
}

template <int R>
FFPA_DEVICE void finishScoreProduct(float (&s)[R], int blocks) {
  wgmmaFenceOperands(s);
  if (blocks == 0) {
    for (float& value : s) value = 0.0f;
  }
}

template <class Tag, int R>
FFPA_DEVICE void scoreProduct(float (&s)[R], uint32_t a, uint32_t b, int blocks) {
  issueScoreProduct<Tag>(s, a, b, blocks);
  wgmmaWait<0>();
  finishScoreProduct(s, blocks);
}

// D[64, N] += A[64, 64 keys] B[64 keys, N]: A one K-major block (P or dS, written by
// storeTile16), B N-major 64-column blocks kBlockBytes apart (V for O += P V, K for dQ += dS K).
// issueKeyProduct commits the wgmma group; once a wgmmaWait has seen it complete, a
// wgmmaFenceOperands(d) keeps later uses of d after it.
// `count` (0 or 1): 0 commits an empty group, for a loop whose first iteration has no product to
// issue yet: ptxas keeps a group in flight across other work only where the wgmma sequence is the
// same on every iteration (C7515 otherwise), as issueScoreProduct's empty groups do.
// N may exceed wgmma's 256: each k16 step then issues one wgmma of N = 256 (blocks 0..3) and one
// of the rest (from block 4 on), into the first 128 accumulators and those after.
template <int N, class Tag>
FFPA_DEVICE void issueKeyProduct(float (&d)[N / 2], uint32_t a, uint32_t b, int count = 1) {
  static_assert(N % kBlockColumns == 0 && N <= 512, "whole 64-column blocks, at most two wgmma wide");
  constexpr int kFirst = N < 256 ? N : 256;  // columns of the first wgmma
  wgmmaFenceOperands(d);  // the caller's rescaling of d stays before the fence
  for (int product = 0; product < count; ++product) {
    wgmmaFence();
    #pragma unroll
    for (int step = 0; step < kKeys / 16; ++step) {
      // A: step s 32 bytes into its rows. B: 16 keys = 2048 bytes per step.
      const uint64_t descA = matrixDescriptor(a + 32 * step, 16, 1024);
      wgmmaSS<kFirst, true>(*reinterpret_cast<float(*)[kFirst / 2]>(&d[0]), descA,
                            matrixDescriptor(b + 2048 * step, kBlockBytes, 1024), true, Tag());
      if constexpr (N > kFirst) {
        constexpr int kSecond = N - kFirst;
        wgmmaSS<kSecond, true>(*reinterpret_cast<float(*)[kSecond / 2]>(&d[kFirst / 2]), descA,
                               matrixDescriptor(b + (kFirst / kBlockColumns) * kBlockBytes + 2048 * step,
                                                kBlockBytes, 1024),
                               true, Tag());
      }
    }
  }
  wgmmaCommit();
}

// The warpgroup's tile `t` (64 rows x 4 R keys: R = 16 for a tile of 64 keys, 32 for 128),
// rounded to 16 bits, as the A operand of wgmmaRS: the accumulator layout packed pairwise, k16
// step s in a[4 s .. 4 s + 3] (sm90/ptx.cuh).
template <class Tag, int R>
FFPA_DEVICE void packTile16(uint32_t (&a)[R], const float (&t)[2 * R]) {
  #pragma unroll
  for (int i = 0; i < R; ++i) a[i] = packPair(t[2 * i], t[2 * i + 1], Tag());
}

// issueKeyProduct with A from the registers `a` (packTile16; P for O += P V) instead of shared
// memory, N up to 256, over the R / 4 k16 steps of a tile of 4 R keys (64, or the row split's wide
// 128): B's 64-column blocks hold 4 R rows each (forwardRowSplitLayout). The wgmma reads `a`
// until a wgmmaWait has seen the group complete: nothing may write `a` before then
// (wgmmaFenceOperands(a) after that wait keeps the next packTile16 below it).
template <int N, class Tag, int R>
FFPA_DEVICE void issueKeyProductFromRegisters(float (&d)[N / 2], uint32_t (&a)[R], uint32_t b) {
  static_assert(N % kBlockColumns == 0 && N <= 256, "whole 64-column blocks, one wgmma wide");
  constexpr int kTileKeys = 4 * R;
  static_assert(kTileKeys % kKeys == 0, "B: whole 64-row boxes");
  wgmmaFenceOperands(d);  // the caller's rescaling of d stays before the fence
  wgmmaFenceOperands(a);  // and its packing of a
  wgmmaFence();           // ordinary writes of d and a before the wgmma reads them
  #pragma unroll
  for (int step = 0; step < kTileKeys / 16; ++step) {
    // B: 16 keys = 2048 bytes per step; its 64-column blocks kTileKeys rows of 128 bytes apart.
    wgmmaRS<N, true>(d, *reinterpret_cast<const uint32_t(*)[4]>(&a[4 * step]),
                     matrixDescriptor(b + 2048 * step, kTileKeys * 128, 1024), true, Tag());
  }
  wgmmaCommit();
}

template <int N, class Tag>
FFPA_DEVICE void accumulateKeyProduct(float (&d)[N / 2], uint32_t a, uint32_t b) {
  issueKeyProduct<N, Tag>(d, a, b);
  wgmmaWait<0>();
  wgmmaFenceOperands(d);
}

// Writes the warpgroup's tile `t`, rounded to 16 bits, into the 64 x 64 block at shared address
// `block` with the 128-byte swizzle (row r's 16-byte unit u at unit u ^ (r % 8)), as TMA would;
// then orders the stores before wgmma reads (the async proxy). A barrier must follow.
template <class Tag>
FFPA_DEVICE void storeTile16(uint32_t block, const float (&t)[kTileRegisters], const Lane& me) {
  unsigned char* bytes = sharedMemory() + (block - sharedAddress(sharedMemory()));
  #pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int row = me.row(half);
    #pragma unroll
    for (int j = 0; j < kKeys / 8; ++j) {
      const uint32_t offset = row * 128 + ((j ^ (row % 8)) * 16) + 4 * me.quad;
      const float* pair = &t[4 * j + 2 * half];
      *reinterpret_cast<uint32_t*>(bytes + offset) = packPair(pair[0], pair[1], Tag());
    }
  }
  fenceProxyAsync();
}

// A tile handed to the other consumer warpgroup through shared memory in fp32, [i][thread]
// float4: thread t of one warpgroup holds the same elements as thread t of the other (the
// accumulator layout depends on the thread's index in its warpgroup only).
FFPA_DEVICE void storeTileShared(Four* buffer, const float (&t)[kTileRegisters]) {
  const int thread = threadIndex() % 128;
  #pragma unroll
  for (int i = 0; i < kTileRegisters / 4; ++i) {
    buffer[i * 128 + thread] = {{t[4 * i], t[4 * i + 1], t[4 * i + 2], t[4 * i + 3]}};
  }
}

// t *= the tile the other consumer left in `buffer` (storeTileShared), elementwise.
FFPA_DEVICE void multiplyByTileShared(float (&t)[kTileRegisters], const Four* buffer) {
  const int thread = threadIndex() % 128;
  #pragma unroll
  for (int i = 0; i < kTileRegisters / 4; ++i) {
    const Four d = buffer[i * 128 + thread];
    #pragma unroll
    for (int e = 0; e < 4; ++e) t[4 * i + e] *= d.v[e];
  }
}

// Writes the warpgroup's accumulator `acc` of N columns, times `scale` and rounded to 16 bits,
// to rows `firstRow`.. of `out` (`rowStride` elements apart), columns from `firstColumn` on:
// rows from `rowEnd` and columns from `columnEnd` on are not written.
template <int N, class Tag, class Element>
FFPA_DEVICE void storeAccumulator(const float (&acc)[N / 2], Element* out, int64_t rowStride, int firstRow, int rowEnd,
                                  int firstColumn, int columnEnd, float scale) {
  const Lane me = lane();
  #pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int row = firstRow + me.row(half);
    if (row >= rowEnd) continue;
    #pragma unroll
    for (int j = 0; j < N / 8; ++j) {
      const int column = firstColumn + me.column(j, 0);
      if (column >= columnEnd) continue;
      const float* pair = &acc[4 * j + 2 * half];
      storeGlobal32(out + int64_t(row) * rowStride + column, packPair(pair[0] * scale, pair[1] * scale, Tag()));
    }
  }
}

// Where a partial tile crosses between two CTAs of a cluster: this CTA's receive buffer
// (kExchangeBytes, [i][thread] float4, so that a warp's stores and loads cover 512 contiguous
// bytes) and its two mbarriers: `full` (the partner's partial has arrived; one expect_tx) and
// `empty` (the partner has read what this one sent; 128 remote arrivals).
struct Exchange {
  uint32_t buffer;
  const float* received;  // the buffer, as a generic pointer
  uint32_t full;
  uint32_t empty;
};

// The exchanges of one product, one per stage of the cluster's sum (exchangeStages).
struct ExchangeStages {
  Exchange stage[kMaxExchangeStages];
};

// The exchange whose buffer is `offset` bytes into the aligned shared memory.
FFPA_DEVICE Exchange exchangeAt(const AlignedShared& shared, uint32_t offset, uint32_t full, uint32_t empty) {
  return {shared.address + offset, reinterpret_cast<const float*>(shared.base + offset), full, empty};
}

// Sets the arrivals per phase of the exchange mbarriers from `first` to the end of `arrivals`
// (locateExchangePair's order: full, empty, full, empty, ...): one expect_tx for each full, the
// partner CTA's consumer warpgroup for each empty.
template <int kCount>
FFPA_DEVICE void setExchangeArrivals(int (&arrivals)[kCount], int first) {
  for (int i = first; i < kCount; ++i) arrivals[i] = (i - first) % 2 ? 128 : 1;
}

// The exchanges of the two partial tiles a gradient kernel sums over its cluster of kCluster CTAs
// (S and dP, or their transposes): at stage s the buffers 2 s and 2 s + 1 times kExchangeBytes
// from `offset`, and the four mbarriers (full and empty of each) 32 s bytes from `firstBarrier`.
template <int kCluster>
FFPA_DEVICE void locateExchangePair(const AlignedShared& shared, uint32_t offset, uint32_t firstBarrier,
                                    ExchangeStages& scores, ExchangeStages& gradients) {
  #pragma unroll
  for (int stage = 0; stage < exchangeStages(kCluster); ++stage) {
    const uint32_t buffer = offset + 2 * stage * kExchangeBytes;
    const uint32_t barrier = firstBarrier + 32u * stage;
    scores.stage[stage] = exchangeAt(shared, buffer, barrier, barrier + 8);
    gradients.stage[stage] = exchangeAt(shared, buffer + kExchangeBytes, barrier + 16, barrier + 24);
  }
}

// Sends this CTA's partial tile of `tile` (`part`) to the CTA of rank `partner`, once that CTA has
// read the previous one.
FFPA_DEVICE void sendPartial(const Exchange& x, const float (&part)[kTileRegisters], int partner, int tile) {
  const int t = threadIndex() % 128;
  if (t == 0) mbarrierArriveExpectTx(x.full, kExchangeBytes);
  if (tile > 0) mbarrierWait(x.empty, (tile - 1) & 1);
  const uint32_t buffer = mapShared(x.buffer, partner);
  const uint32_t full = mapShared(x.full, partner);
  #pragma unroll
  for (int i = 0; i < kTileRegisters / 4; ++i) {
    const float four[4] = {part[4 * i], part[4 * i + 1], part[4 * i + 2], part[4 * i + 3]};
    storeAsyncCluster(buffer + (i * 128 + t) * 16, four, full);
  }
}

// Waits until the partial tile of `tile` the partner sent has landed in this CTA's shared memory
// (the phase completes once every byte of st.async has): the round trip, which a wgmma issued
// before may overlap; addPartial then adds it.
FFPA_DEVICE void awaitPartial(const Exchange& x, int tile) { mbarrierWait(x.full, tile & 1); }

// Adds the partial tile of `tile` the CTA of rank `partner` sent (sendPartial), which has landed
// (awaitPartial), to `part`; both CTAs then hold the same sum (fp32 addition commutes).
FFPA_DEVICE void addPartial(const Exchange& x, float (&part)[kTileRegisters], int partner, int tile, int tiles) {
  const int t = threadIndex() % 128;
  #pragma unroll
  for (int i = 0; i < kTileRegisters / 4; ++i) {
    // 4-byte loads: 16-byte ones hold more registers at once, which the dK/dV kernel of a
    // cluster of four cannot spare (it spilled).
    const float* received = x.received + 4 * (i * 128 + t);
    #pragma unroll
    for (int e = 0; e < 4; ++e) part[4 * i + e] += received[e];
  }
  // The partner may send the next tile's partial; after the last tile it may have exited.
  if (tile + 1 < tiles) mbarrierArriveCluster(mapShared(x.empty, partner));
}

FFPA_DEVICE void receivePartial(const Exchange& x, float (&part)[kTileRegisters], int partner, int tile, int tiles) {
  awaitPartial(x, tile);
  addPartial(x, part, partner, tile, tiles);
}

// Both halves at once: `part` becomes the sum of this CTA's and the partner's partial tiles.
FFPA_DEVICE void exchangePartial(const Exchange& x, float (&part)[kTileRegisters], int partner, int tile,
                                 int tiles) {
  sendPartial(x, part, partner, tile);
  receivePartial(x, part, partner, tile, tiles);
}

// Cluster of kCluster CTAs (2 or 4): replaces this CTA's partial tile `part` by the sum of the
// cluster's, by recursive doubling: at stage s the CTA swaps its running sum with rank ^ 2^s.
// Every CTA ends with the same bits: at each stage two partners add the same two values.
template <int kCluster>
FFPA_DEVICE void reducePartials(const ExchangeStages& x, float (&part)[kTileRegisters], int rank, int tile,
                                int tiles) {
  reducePartials<kCluster>(x, part, rank, tile, tiles, [] {});
}

// The same, calling during() while the first stage's round trip is under way (after the send, once
// the partner's partial has landed, before it is added): the completion of a wgmma issued before,
// which may run meanwhile. ptxas serializes wgmma whose in-flight stage sees other instructions
// define accumulator registers of a wgmma (C7515), as the additions into `part` (S's) would.
template <int kCluster, class During>
FFPA_DEVICE void reducePartials(const ExchangeStages& x, float (&part)[kTileRegisters], int rank, int tile,
                                int tiles, During&& during) {
  static_assert(kCluster == 2 || kCluster == 4, "clusters of two or four CTAs");
  sendPartial(x.stage[0], part, rank ^ 1, tile);
  awaitPartial(x.stage[0], tile);
  during();
  addPartial(x.stage[0], part, rank ^ 1, tile, tiles);
  #pragma unroll
  for (int stage = 1; stage < exchangeStages(kCluster); ++stage) {
    exchangePartial(x.stage[stage], part, rank ^ (1 << stage), tile, tiles);
  }
}

}  // namespace ffpa::kernels::sm90
