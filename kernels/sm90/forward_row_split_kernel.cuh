// The sm90 forward for d_v up to 256 without attention slices, with the rows split between the
// consumers rather than O's columns (FlashAttention-3's arrangement): a CTA computes 128 query
// rows of one (batch, head), consumer w the rows [64 w, 64 w + 64) of them, each with its own S,
// softmax, P and all of O's columns (at most 256: 128 fp32 registers per thread), over KV tiles
// of kTileKeys keys (64, or 128 up to d_v 128: kRowSplitWideKeys in forward_params.h). P never
// leaves the consumer's registers: the S accumulators, rounded to 16 bits and packed in pairs, are
// the A operand of P V (wgmmaRS). Per KV tile j, with slot = j % 2 (rings of two K and two V buffers,
// one K buffer where shared memory holds only one; the empty barriers count both consumers'
// releases):
//   producer:   [K empty slot] K(j) -> K full slot        [V empty slot] V(j) -> V full slot
//   consumer w: [K full] S_w(j + 1) = Q_w K^T issued; [V full] O_w += P_w(j) V issued
//               S_w(j + 1) done -> K empty; its online softmax under P V(j) on the tensor cores
//               P V(j) done -> V empty; P_w(j + 1) packed into the registers P_w(j) held; O_w
//               rescaled
// (S(0) and P(0) before the first tile). Against the split of the columns (forward_kernel.cuh),
// where consumer 0 alone computes S and the softmax while consumer 1 waits for P, every K and V
// tile feeds 128 rows instead of 64 (half the L2 traffic per FLOP), and neither consumer waits
// for the other: while one runs its softmax, the other's products have the tensor cores, and
// each consumer's own softmax runs under its P V. Without P in shared memory there is no store,
// no proxy fence and no warpgroup barrier per tile, and 32 KiB of shared memory less. Under a
// causal mask both walk the KV tiles some row of the 128 sees; a tile past a consumer's rows is
// masked for all of them (P = 0), as with K and V shared between row tiles. With per-batch key
// lengths (FFPA_ATTENTION_KEY_LENGTHS) they walk the tiles of the batch entry's keys, and zero
// together the V rows past its count in the tile that holds its last key (clearValuesPastKeys).
#pragma once

#include "common/element.cuh"
#include "common/platform.cuh"
#include "common/ptx.cuh"
#include "sm90/forward_params.h"
#include "sm90/forward_rows.cuh"
#include "sm90/ptx.cuh"
#include "sm90/warpgroup_tiles.cuh"

namespace ffpa::kernels::sm90 {

using ffpa::sm90::ForwardParams;
using namespace ffpa::sm90;  // the shape constants and Barrier

template <class Tag, int kHeadDimV, int kTileKeys = kKeys>
struct RowSplitForwardKernel {
  static_assert(kHeadDimV % kBlockColumns == 0 && kHeadDimV >= kBlockColumns && kHeadDimV <= kRowSplitMaxHeadDimV,
                "d_v: 64..256 in whole 64-column blocks, all of O's columns in each consumer");
  static_assert(kTileKeys == kKeys || (kTileKeys == kRowSplitWideKeys && rowSplitHasWideKeys(kHeadDimV)),
                "KV tiles of 64 keys, or of 128 where O leaves the registers for S and P (d_v <= 128)");
  using Rows = ForwardRows<Tag>;
  static constexpr int kScoreRegisters = kTileKeys / 2;  // S of a tile: [64, kTileKeys] fp32
  static constexpr int kKeyBoxes = kTileKeys / kKeys;     // TMA boxes of 64 rows per K and V block

  struct Shared {
    uint32_t q, k, v;  // Q: the two row tiles
    uint32_t barriers;
    FFPA_DEVICE uint32_t barrier(int which) const { return barriers + 8u * which; }
  };

  static FFPA_DEVICE Shared locateShared(const ForwardParams& p) {
    const uint32_t address = alignedShared().address;
    return {address + p.qOffset, address + p.kOffset, address + p.vOffset, address + p.barrierOffset};
  }

  // Rows [128 t + 64 w, + 64) for consumer w (w = 0 for the producer: the first row of the CTA),
  // where CTA x takes the 128-row tile t = x, or under a causal mask the tiles last to first
  // (rowTileInOrder), and the KV tiles some row of the CTA's 128 sees (of its batch entry's keys).
  static FFPA_DEVICE RowTile locate(const ForwardParams& p, int consumer) {
    const int ctaFirstRow = ffpa::kernels::sm80::rowTileInOrder(p, blockIndexX(), kRowSplitRows) * kRowSplitRows;
    RowTile at = locateRowTileAt<1>(p, ctaFirstRow + consumer * kRows);
    const int end = keyEndOf(p, at.batch);
    at.tiles = ffpa::kernels::sm80::visibleKeyTiles(p.seqQ, end, kTileKeys, ctaFirstRow, kRowSplitRows, p.causal,
                                                    ffpa::kernels::sm80::causalOffsetOf(p, end));
    at.tiles = ffpa::kernels::sm80::splitKeyTiles(p.split, at, at.tiles);  // split-KV: the CTA's run
    return at;
  }

  // --- producer ---------------------------------------------------------------------------------

  // Q of both row tiles once (an arrival announcing its bytes per row tile), then K and V of every
  // KV tile into their rings, each buffer once both consumers released its previous tile.
  static FFPA_DEVICE void produce(const ForwardParams& p, const Shared& s, const RowTile& at) {
    for (int rows = 0; rows < kRowSplitRows / kRows; ++rows) {
      loadBlocks(&p.qMap, s.q + rows * at.qk.count * kBlockBytes, at.qk, at.firstRow + rows * kRows, at.head,
                 at.batch, s.barrier(kQFull));
    }
    const BufferRing keyRing{p.kBuffers};
    const BufferRing valueRing{2};  // forwardRowSplitLayout
#pragma unroll 1
    for (int tile = 0; tile < at.tiles; ++tile) {
      const int key = (at.firstTile + tile) * kTileKeys;
      const int kSlot = keyRing.slot(tile);
      if (tile >= p.kBuffers) mbarrierWait(s.barrier(kKEmpty0 + kSlot), (keyRing.use(tile) - 1) & 1);
      loadBlocks<kKeyBoxes>(&p.kMap, s.k + kSlot * p.kBufferBytes, at.qk, key, at.kvHead, at.batch,
                            s.barrier(kKFull0 + kSlot));
      const int vSlot = valueRing.slot(tile);
      if (tile >= valueRing.count) mbarrierWait(s.barrier(kVEmpty0 + vSlot), (valueRing.use(tile) - 1) & 1);
      loadBlocks<kKeyBoxes>(&p.vMap, s.v + vSlot * p.vBufferBytes, at.v, key, at.kvHead, at.batch,
                            s.barrier(kVFull0 + vSlot));
    }
  }

  // --- consumers ---------------------------------------------------------------------------------

  // Where KV tile `tile` (V in slot `vSlot`, landed) holds rows past the batch entry's keys
  // (firstRowPastKeys), the consumers zero them in V, each a share of the chunks, and meet at
  // named barrier kClearedRowsBarrierId (256 threads; barrier.sync, as each role reaches it from
  // its own inlined copy): each reads every V block. Both walk the same
  // tiles and come here before their turn, where nothing of theirs is in flight, so both arrive
  // (consumer 0's turn at tile j waits only for consumer 1's products of tile j - 1). K's rows
  // past the count reach S only, which the mask replaces.
  static FFPA_DEVICE void clearValuesPastKeys(const ForwardParams& p, const Shared& s, const RowTile& at, int tile,
                                              int vSlot, int consumer) {
    const int firstRow = firstRowPastKeys(p, at.batch, (at.firstTile + tile) * kTileKeys, kTileKeys);
    if (firstRow == kTileKeys) return;
    zeroTileRows<kKeyBoxes>(s.v + vSlot * p.vBufferBytes, at.v.count, firstRow, consumer * 128 + threadIndex() % 128,
                            256);
    rolesBarrier(kClearedRowsBarrierId, 256);  // each consumer from its own copy of this code
  }

  // Consumer `consumer` (0 or 1): its 64 rows, start to end. kMayEmulate: whether exp2 may be
  // emulated at all (p.exp2Emulated > 0), a separate copy so that the default path carries no
  // test of p.exp2Emulated per exponential.
  template <bool kMayEmulate>
  static FFPA_DEVICE void consume(const ForwardParams& p, const Shared& s, int consumer) {
    const RowTile at = locate(p, consumer);
    const Lane me = lane();
    float o[kHeadDimV / 2];
    for (float& value : o) value = 0.0f;
    typename Rows::Softmax softmax;
    float score[kScoreRegisters];  // S of a tile, then its P
    // P of the tile whose P V is issued next, 16-bit: the A operand of wgmmaRS.
    uint32_t probabilities[kScoreRegisters / 2];
    const BufferRing keyRing{p.kBuffers};
    const BufferRing valueRing{2};  // forwardRowSplitLayout
    const uint32_t q = s.q + consumer * at.qk.count * kBlockBytes;
    // The softmax of tile `tile` (no slices: keys from (firstTile + tile) * kTileKeys), whose S is
    // in `score`: P in `score`, O's row scales in `factor`.
    const auto softmaxOf = [&](int tile, float (&factor)[2]) {
      softmax.template tile<kMayEmulate>(p, KeyTile{(at.firstTile + tile) * kTileKeys, -1}, at.firstRow,
                                         keyEndOf(p, at.batch), score, me, factor);
    };
    if (at.tiles > 0) {
      mbarrierWait(s.barrier(kQFull), 0);
      mbarrierWait(s.barrier(kKFull0), 0);
      scoreProduct<Tag>(score, q, s.k, at.qk.count);
      mbarrierArrive(s.barrier(kKEmpty0));
      float factor[2];  // O is still zero: nothing to rescale
      softmaxOf(0, factor);
      packTile16<Tag>(probabilities, score);
    }
    // p.pingpong: the consumers take turns issuing their products, consumer 0 first: consumer 0
    // issues tile j's once consumer 1 has issued tile j - 1's, consumer 1 tile j's once consumer
    // 0 has issued them (a wait at its own turn barrier, which the other's arrival after its
    // issue completes; no arrival is left over after the last tile). The tensor cores then run
    // one consumer's products while the other runs its softmax, instead of both softmaxes at
    // once on the same schedulers while the tensor cores idle.
    const bool turns = p.pingpong != 0;
    const int myTurn = kRowSplitTurnBarrierId + consumer, otherTurn = kRowSplitTurnBarrierId + 1 - consumer;
    // Tile j: S(j + 1) and O += P(j) V(j) issued together; the softmax of j + 1 under P V(j) on
    // the tensor cores (the tensor cores run one while the warpgroup computes the other), its P
    // packed once P V(j) no longer reads the registers of P(j). After the last tile the group of
    // S is an empty one: the wgmma sequence stays the same on every iteration, which ptxas needs
    // to keep the two groups in flight together.
    for (int tile = 0; tile < at.tiles; ++tile) {
      const bool next = tile + 1 < at.tiles;
      const int kSlot = keyRing.slot(tile + 1);
      if (next) mbarrierWait(s.barrier(kKFull0 + kSlot), keyRing.use(tile + 1) & 1);
      const int vSlot = valueRing.slot(tile);
      mbarrierWait(s.barrier(kVFull0 + vSlot), valueRing.use(tile) & 1);
      clearValuesPastKeys(p, s, at, tile, vSlot, consumer);
      if (turns && (consumer == 1 || tile > 0)) rolesBarrier(myTurn, 256);
      issueScoreProduct<Tag, true>(score, q, s.k + kSlot * p.kBufferBytes, next ? at.qk.count : 0);
      issueKeyProductFromRegisters<kHeadDimV, Tag>(o, probabilities, s.v + vSlot * p.vBufferBytes);
      if (turns && (consumer == 0 || next)) rolesArrive(otherTurn, 256);
      wgmmaWait<1>();  // groups complete in order: S(j + 1) is done, P V(j) may run on
      wgmmaFenceOperands(score);
      float factor[2] = {1.0f, 1.0f};
      if (next) {
        mbarrierArrive(s.barrier(kKEmpty0 + kSlot));
        softmaxOf(tile + 1, factor);
      }
      wgmmaFenceOperands(score);  // the softmax stays above the wait, under P V(j)
      wgmmaWait<0>();
      wgmmaFenceOperands(o);
      wgmmaFenceOperands(probabilities);  // P V(j) has read them: P(j + 1) may replace them
      wgmmaFenceOperands(score);
      mbarrierArrive(s.barrier(kVEmpty0 + vSlot));
      if (next) {
        packTile16<Tag>(probabilities, score);
        Rows::template rescale<kHeadDimV>(o, factor);
      }
    }
    float inverse[2];
    softmax.finish(p, at, true, me, inverse);
    Rows::template storeOutput<kHeadDimV>(p, at, o, inverse, 0);
  }

  static FFPA_DEVICE void run(const ForwardParams& p) {
    const Shared s = locateShared(p);
    // Arrivals per phase of each mbarrier (Barrier order); those this kernel does not use get 1.
    int arrivals[kBarrierCount];
    for (int& count : arrivals) count = 1;
    arrivals[kQFull] = kRowSplitRows / kRows;  // a row tile each
    arrivals[kKEmpty0] = arrivals[kKEmpty1] = 256;  // both consumers
    arrivals[kVEmpty0] = arrivals[kVEmpty1] = 256;
    initBarriers<1>(s.barrier(0), arrivals);
    const auto consumer = [&](int w) {
      if (p.exp2Emulated > 0) {
        consume<true>(p, s, w);
      } else {
        consume<false>(p, s, w);
      }
    };
    runRoles<kForwardRegisters[0], kForwardRegisters[1]>(
        locate(p, 0).tiles > 0, [&] { produce(p, s, locate(p, 0)); }, [&] { consumer(0); }, [&] { consumer(1); });
  }
};

// The kernel entry; grid (ceil(seqQ / 128), B * H) or (.., H, B); 384 threads; sharedBytes.
template <class Tag, int kHeadDimV, int kTileKeys = kKeys>
FFPA_KERNEL void FFPA_LAUNCH_BOUNDS(kThreads, 1) rowSplitForwardKernel(const FFPA_GRID_CONSTANT ForwardParams p) {
  RowSplitForwardKernel<Tag, kHeadDimV, kTileKeys>::run(p);
}

}  // namespace ffpa::kernels::sm90
