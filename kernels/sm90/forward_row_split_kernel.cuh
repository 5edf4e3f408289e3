// The sm90 forward for d_v up to 256 without attention slices, with the rows split between the
// consumers rather than O's columns (FlashAttention-3's arrangement): a CTA computes 128 query
// rows of one (batch, head), consumer w the rows [64 w, 64 w + 64) of them, each with its own S,
// softmax, P and all of O's columns (at most 256: 128 fp32 registers per thread). Per KV tile j:
//   producer:   [K empty slot] K(j) -> K full slot        [V empty slot] V(j) -> V full slot
//   consumer w: [K full slot] S_w[64, 64] = Q_w K^T over d_qk -> K empty slot
//               online softmax; P_w to its own block; the warpgroup's barrier (all of P_w written)
//               rescale O_w; [V full slot] O_w[64, d_v] += P_w V -> V empty slot
// with slot = j % 2 (a ring of two K and two V buffers, where shared memory holds them; the
// empty barriers count both consumers' releases). Against the split of the columns
// (forward_kernel.cuh), where consumer 0 alone computes S and the softmax while consumer 1
// waits for P, every K and V tile feeds 128 rows instead of 64 (half the L2 traffic per FLOP),
// and neither consumer waits for the other: while one runs its softmax, the other's products
// have the tensor cores. Under a causal mask both walk the KV tiles some row of the 128 sees;
// a tile past a consumer's rows is masked for all of them (P = 0), as with K and V shared
// between row tiles.
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

template <class Tag, int kHeadDimV>
struct RowSplitForwardKernel {
  static_assert(kHeadDimV % kBlockColumns == 0 && kHeadDimV >= kBlockColumns && kHeadDimV <= kRowSplitMaxHeadDimV,
                "d_v: 64..256 in whole 64-column blocks, all of O's columns in each consumer");
  using Rows = ForwardRows<Tag>;

  struct Shared {
    uint32_t q, k, v, p;  // Q: the two row tiles; P: one block per consumer
    uint32_t barriers;
    FFPA_DEVICE uint32_t barrier(int which) const { return barriers + 8u * which; }
  };

  static FFPA_DEVICE Shared locateShared(const ForwardParams& p) {
    const uint32_t address = alignedShared().address;
    return {address + p.qOffset, address + p.kOffset, address + p.vOffset, address + p.pOffset,
            address + p.barrierOffset};
  }

  // Rows [128 x + 64 w, + 64) of CTA x for consumer w (w = 0 for the producer: the first row of
  // the CTA), and the KV tiles some row of the CTA's 128 sees.
  static FFPA_DEVICE RowTile locate(const ForwardParams& p, int consumer) {
    RowTile at = locateRowTile<1>(p);
    const int ctaFirstRow = blockIndexX() * kRowSplitRows;
    at.firstRow = ctaFirstRow + consumer * kRows;
    at.tiles = ffpa::kernels::sm80::visibleKeyTiles(p.seqQ, p.seqKv, kKeys, ctaFirstRow, kRowSplitRows, p.causal,
                                                    p.causalOffset);
    return at;
  }

  // --- producer ---------------------------------------------------------------------------------

  // Q of both row tiles once (one barrier announcing all their bytes), then K and V of every KV
  // tile into their rings, each buffer once both consumers released its previous tile.
  static FFPA_DEVICE void produce(const ForwardParams& p, const Shared& s, const RowTile& at) {
    const uint32_t qFull = s.barrier(kQFull);
    mbarrierArriveExpectTx(qFull, kRowSplitRows / kRows * at.qk.count * kBlockBytes);
    for (int rows = 0; rows < kRowSplitRows / kRows; ++rows) {
      for (int b = 0; b < at.qk.count; ++b) {
        tmaLoad4d(s.q + (rows * at.qk.count + b) * kBlockBytes, &p.qMap, b * kBlockColumns, at.firstRow + rows * kRows,
                  int(at.head), int(at.batch), qFull);
      }
    }
    const BufferRing keyRing{p.kBuffers};
    const BufferRing valueRing{2};  // forwardRowSplitLayout
#pragma unroll 1
    for (int tile = 0; tile < at.tiles; ++tile) {
      const int key = tile * kKeys;
      const int kSlot = keyRing.slot(tile);
      if (tile >= p.kBuffers) mbarrierWait(s.barrier(kKEmpty0 + kSlot), (keyRing.use(tile) - 1) & 1);
      loadBlocks(&p.kMap, s.k + kSlot * p.kBufferBytes, at.qk, key, at.kvHead, at.batch, s.barrier(kKFull0 + kSlot));
      const int vSlot = valueRing.slot(tile);
      if (tile >= valueRing.count) mbarrierWait(s.barrier(kVEmpty0 + vSlot), (valueRing.use(tile) - 1) & 1);
      loadBlocks(&p.vMap, s.v + vSlot * p.vBufferBytes, at.v, key, at.kvHead, at.batch, s.barrier(kVFull0 + vSlot));
    }
  }

  // --- consumers ---------------------------------------------------------------------------------

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
    float score[kTileRegisters];  // S of the tile, then P
    const BufferRing keyRing{p.kBuffers};
    const BufferRing valueRing{2};  // forwardRowSplitLayout
    const uint32_t q = s.q + consumer * at.qk.count * kBlockBytes;
    const uint32_t pBlock = s.p + consumer * kBlockBytes;
    if (at.tiles > 0) mbarrierWait(s.barrier(kQFull), 0);
    for (int tile = 0; tile < at.tiles; ++tile) {
      const int kSlot = keyRing.slot(tile);
      mbarrierWait(s.barrier(kKFull0 + kSlot), keyRing.use(tile) & 1);
      scoreProduct<Tag>(score, q, s.k + kSlot * p.kBufferBytes, at.qk.count);
      mbarrierArrive(s.barrier(kKEmpty0 + kSlot));

      const KeyTile keys{tile * kKeys, -1};
      VisibleKeys visible[2];
      #pragma unroll
      for (int half = 0; half < 2; ++half) visible[half] = visibleKeys(p, p.sliced, keys, at.firstRow + me.row(half));
      float factor[2];
      softmax.template tile<kMayEmulate>(p, score, visible, keys.firstKey, me, factor);

      // P to the consumer's block: its P V of the previous tile, the block's last reader, has
      // completed (below). Every thread's stores are fenced for the async proxy before the
      // warpgroup's barrier, after which its wgmma may read them.
      storeTile16<Tag>(pBlock, score, me);
      rolesBarrier(kRowSplitBarrierId + consumer, 128);

      Rows::template rescale<kHeadDimV>(o, factor);
      const int vSlot = valueRing.slot(tile);
      mbarrierWait(s.barrier(kVFull0 + vSlot), valueRing.use(tile) & 1);
      accumulateKeyProduct<kHeadDimV, Tag>(o, pBlock, s.v + vSlot * p.vBufferBytes);
      mbarrierArrive(s.barrier(kVEmpty0 + vSlot));
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
template <class Tag, int kHeadDimV>
FFPA_KERNEL void FFPA_LAUNCH_BOUNDS(kThreads, 1) rowSplitForwardKernel(const FFPA_GRID_CONSTANT ForwardParams p) {
  RowSplitForwardKernel<Tag, kHeadDimV>::run(p);
}

}  // namespace ffpa::kernels::sm90
