// What a consumer warpgroup of the sm90 forward kernels does with the 64 query rows it scores:
// the online softmax of a tile of scores (in the log2 domain), the rescaling of its columns of O,
// and the rows' outputs, O and LSE. The kernel that splits O's columns between its consumers
// (forward_kernel.cuh) and the one that splits the rows (forward_row_split_kernel.cuh) share it.
#pragma once

#include "common/element.cuh"
#include "common/platform.cuh"
#include "common/ptx.cuh"
#include "sm90/forward_params.h"
#include "sm90/ptx.cuh"
#include "sm90/warpgroup_tiles.cuh"

namespace ffpa::kernels::sm90 {

using ffpa::sm90::ForwardParams;

// A thread holds two rows of the warpgroup's 64 (Lane::row), 32 scores of each per 64-key tile (64
// per 128-key tile of the row split: the functions on a tile take its R = keys / 2 registers).
template <class Tag>
struct ForwardRows {
  using Element = typename Tag::Element;
  static constexpr float kNegativeInfinity = -__builtin_huge_valf();

  // How far (log2 units) a tile's row maximum may exceed the row's reference maximum before the
  // reference moves and O is rescaled (FlashAttention-4's conditional rescaling): P values stay
  // below 2^8, within fp16 and bf16 alike, and O is rescaled a few times per row, not per tile.
  static constexpr float kRescaleThreshold = 8.0f;

  // O *= the row scales, where a row of the warp moved its reference maximum (factor != 1; after
  // the first tiles rarely): one decision for the warp, and N / 2 multiplications fewer on most
  // tiles.
  template <int N>
  static FFPA_DEVICE void rescale(float (&o)[N / 2], const float (&factor)[2]) {
    if (!warpAny(factor[0] != 1.0f || factor[1] != 1.0f)) return;
    #pragma unroll
    for (int i = 0; i < N / 2; ++i) o[i] *= factor[i / 2 % 2];
  }

  // Writes O (divided by the row sums, whose inverses are given) for the columns from the CTA's
  // column `ctaColumn` on, of the rows from `at.firstRow` (below `at.rowEnd`).
  template <int N>
  static FFPA_DEVICE void storeOutput(const ForwardParams& p, const RowTile& at, const float (&o)[N / 2],
                                      const float (&inverse)[2], int ctaColumn) {
    const int column = at.v.first * kBlockColumns + ctaColumn;
    const Lane me = lane();
    const int64_t head = at.batch * p.oStrides[0] + at.head * p.oStrides[1];
    // With split-KV, the fp32 partial O of the CTA's split.
    float* partial = p.split.splits > 1 ? static_cast<float*>(p.o) + blockIndexZ() * p.split.partialOStride + head
                                        : nullptr;
    Element* out = static_cast<Element*>(p.o) + head;
    #pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int row = at.firstRow + me.row(half);
      if (row >= at.rowEnd) continue;  // past the tensor, or another CTA's rows (slices)
      #pragma unroll
      for (int j = 0; j < N / 8; ++j) {
        const int col = column + 8 * j + 2 * me.quad;
        if (col >= p.headDimV) continue;
        const float* pair = &o[4 * j + 2 * half];
        const int64_t offset = row * p.oStrides[2] + col;
        if (partial != nullptr) {
          storeGlobalF32(partial + offset, pair[0] * inverse[half]);
          storeGlobalF32(partial + offset + 1, pair[1] * inverse[half]);
        } else {
          storeGlobal32(out + offset, packPair(pair[0] * inverse[half], pair[1] * inverse[half], Tag()));
        }
      }
    }
  }

  // Takes the maxima of the thread's two rows of raw scores of a tile (the scale, > 0, keeps their
  // order: it is applied to the maxima and, in one FMA, to each exponent, one instruction per
  // score fewer on the scoring consumer's path); kMask: scores of keys outside a row's `visible`
  // keys become -inf first.
  template <bool kMask, int R>
  static FFPA_DEVICE void maskAndMax(float (&score)[R], float (&tileMax)[2], const VisibleKeys (&visible)[2],
                                     int firstKey, const Lane& me) {
    #pragma unroll
    for (int half = 0; half < 2; ++half) {
      tileMax[half] = kNegativeInfinity;
      #pragma unroll
      for (int j = 0; j < R / 4; ++j) {
        #pragma unroll
        for (int e = 0; e < 2; ++e) {
          float& value = score[4 * j + 2 * half + e];
          if (kMask && !visible[half].holds(firstKey + me.column(j, e))) value = kNegativeInfinity;
          tileMax[half] = fmaxf(tileMax[half], value);
        }
      }
    }
  }

  // The online softmax of the thread's two rows: their reference maxima (log2 units) and the
  // thread's part of their sums, both relative to the reference.
  struct Softmax {
    float max[2] = {kNegativeInfinity, kNegativeInfinity};
    float sum[2] = {0.0f, 0.0f};

    // Turns the raw scores of KV tile `keys` of the rows from `firstRow` on into P (relative to
    // the rows' reference maxima) and gives the factor by which O must be rescaled (exactly 1
    // where a row's reference stays). `keyEnd`: the keys of the rows' batch entry (keyEndOf). The
    // warp masks only where one of its rows may not see every key of the tile (its diagonal tiles
    // under a causal mask, a last tile past keyEnd, slices): one branch for its 16 rows. The mask
    // replaces a score, so that a NaN score of a key past keyEnd (whatever K holds there) never
    // reaches P. kMayEmulate: whether exp2 may be emulated at all (p.exp2Emulated > 0).
    template <bool kMayEmulate, int R>
    FFPA_DEVICE void tile(const ForwardParams& p, const KeyTile& keys, int firstRow, int keyEnd, float (&score)[R],
                          const Lane& me, float (&factor)[2]) {
      VisibleKeys visible[2];
      #pragma unroll
      for (int half = 0; half < 2; ++half) {
        visible[half] = visibleKeys(p, p.sliced, keys, firstRow + me.row(half), keyEnd);
      }
      const int firstKey = keys.firstKey;
      float tileMax[2];
      if (warpSeesWholeTile(visible, firstKey, 2 * R)) {
        maskAndMax<false>(score, tileMax, visible, firstKey, me);
      } else {
        maskAndMax<true>(score, tileMax, visible, firstKey, me);
      }
      #pragma unroll
      for (int half = 0; half < 2; ++half) {
        #pragma unroll
        for (int mask = 1; mask <= 2; mask <<= 1) tileMax[half] = fmaxf(tileMax[half], shuffleXor(tileMax[half], mask));
        tileMax[half] *= p.scaleLog2;  // log2 units from here on, as max
        // The row's reference maximum moves only when the tile's exceeds it by more than
        // kRescaleThreshold (from -inf, at the first visible key): scores are exponentiated
        // against the reference, so an exponential is at most 2^kRescaleThreshold, and O and the
        // row sum, both relative to the same reference, need rescaling only when it moves.
        const bool moves = tileMax[half] > max[half] + kRescaleThreshold;
        const float newMax = moves ? tileMax[half] : max[half];
        // A row that has seen no visible key keeps max -inf: exponentiate against 0 so that its
        // scores give exp2(-inf) = 0, never -inf - -inf = NaN.
        const float base = newMax == kNegativeInfinity ? 0.0f : newMax;
        // Exactly 1 where the reference stays, at most 2^-8 (0 from -inf) where it moves: rescale
        // tells the two apart by it.
        factor[half] = moves ? exp2Approx(max[half] - base) : 1.0f;
        max[half] = newMax;
        // Two partial sums: half the chain of dependent additions.
        float tileSum[2] = {0.0f, 0.0f};
        #pragma unroll
        for (int j = 0; j < R / 4; ++j) {
          #pragma unroll
          for (int e = 0; e < 2; ++e) {
            float& value = score[4 * j + 2 * half + e];
            // Column group j of 8 (of each 8 in a wide tile): emulated when j % 8 < exp2Emulated (a
            // warp-uniform branch).
            const float exponent = fmaf(value, p.scaleLog2, -base);
            if (kMayEmulate && j % 8 < p.exp2Emulated) {
              value = exp2Polynomial(exponent);
            } else {
              value = exp2Approx(exponent);
            }
            tileSum[e] += value;
          }
        }
        sum[half] = sum[half] * factor[half] + (tileSum[0] + tileSum[1]);
      }
    }

    // After the last tile: the rows' sums over the 4 lanes of a row, their inverses (0 for a row
    // that saw no key: O = 0), and, where `storesLse`, LSE = ln(sum) + max ln 2 of the rows of
    // `at` below its rowEnd (-inf for a row that saw no key). A NaN sum (a NaN score) is not 0:
    // it reaches O and LSE.
    FFPA_DEVICE void finish(const ForwardParams& p, const RowTile& at, bool storesLse, const Lane& me,
                            float (&inverse)[2]) {
      #pragma unroll
      for (int half = 0; half < 2; ++half) {
        #pragma unroll
        for (int mask = 1; mask <= 2; mask <<= 1) sum[half] += shuffleXor(sum[half], mask);
        inverse[half] = sum[half] == 0.0f ? 0.0f : 1.0f / sum[half];
        const int row = at.firstRow + me.row(half);
        if (p.lse && storesLse && me.quad == 0 && row < at.rowEnd) {
          constexpr float kLn2 = 0.693147180559945309f;
          const float lse = sum[half] == 0.0f ? kNegativeInfinity : (max[half] + log2Approx(sum[half])) * kLn2;
          // With split-KV, the partial LSE of the CTA's split.
          const int64_t split = p.split.splits > 1 ? blockIndexZ() * p.split.partialLseStride : 0;
          storeGlobalF32(p.lse + split + at.batch * p.lseStrides[0] + at.head * p.lseStrides[1] +
                             int64_t(row) * p.lseStrides[2],
                         lse);
        }
      }
    }
  };
};

}  // namespace ffpa::kernels::sm90
