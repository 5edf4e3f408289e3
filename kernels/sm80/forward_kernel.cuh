// The FFPA forward kernel for sm_80 and newer (mma.sync m16n8k16, ldmatrix, cp.async).
//
// One CTA computes O and LSE for Br = 16 * kRowTiles * kRowWarps query rows of one (batch, head).
// For each KV tile of Bc keys it runs a sequence of pipeline steps (see forward_params.h):
//
//   Q K^T steps:  S[Br, Bc] += Q[Br, 16 * w] K[Bc, 16 * w]^T   (w = qkPanelsPerStep panels)
//   softmax:      online, in fp32, on the S registers; row maxima shared by the column warps
//   P V steps:    O[Br, 16 * w per warp] += P[Br, Bc] V[Bc, 16 * w per warp]
//
// Shared memory holds only the panels of the steps in flight (independent of d), plus Q when it
// is persisted; tiles are stored as 16-column panels (panels.cuh), and the steps flow through the
// rings of step_pipeline.cuh.
//
// With attention slices (common/slice_mask.h) a CTA's rows are one row tile of a segment, and
// its KV tiles run over the key hull of each slice covering the segment in turn, masked by the
// slice's rule.
//
// Fragment layouts: see common/ptx.cuh (lane = 4 * group + quad).
#pragma once

#include "common/element.cuh"
#include "common/platform.cuh"
#include "common/ptx.cuh"
#include "common/slice_mask.h"
#include "sm80/cta_geometry.cuh"
#include "sm80/forward_params.h"
#include "sm80/panels.cuh"
#include "sm80/step_pipeline.cuh"

#include <type_traits>

namespace ffpa::kernels::sm80 {

using ffpa::sm80::ForwardParams;
using ffpa::sm80::ForwardShape;

// kWideKeys: KV tiles of 64 keys instead of 32 on the two-row-tile shape (forward_params.h).
template <class Tag, int kHeadDimV, bool kQkF16, bool kPvF16, bool kPipeKv, bool kQInRegisters,
          bool kVInRegisters, bool kWideKeys = false>
struct ForwardKernel {
  using Element = typename Tag::Element;
  static constexpr ForwardShape kShape = ffpa::sm80::forwardShape(kHeadDimV, kQInRegisters, kWideKeys);
  static constexpr int kRowWarps = kShape.rowWarps;
  static constexpr int kRowTiles = kShape.rowTiles;  // m16 tiles of a warp's rows
  static constexpr int kColWarps = kShape.colWarps;
  static constexpr int kThreads = kShape.threads();
  static constexpr int kRows = kShape.rows();   // Br
  static constexpr int kKeys = kShape.keys();   // Bc
  static constexpr int kKeyTiles = kShape.keysPerWarp / 8;    // n8 tiles of S per warp
  static constexpr int kKeySteps = kKeys / 16;                // k16 steps of P V
  static constexpr int kOutPanels = kShape.warpColumns / 16;  // 16-column panels of O per warp
  static constexpr int kOutTiles = kOutPanels * 2;            // n8 tiles of O per warp
  // Q fragments in registers cover d_qk <= 128 (8 panels x 4 registers).
  static constexpr int kQRegisterPanels = kQInRegisters ? 8 : 1;
  // The most panels of a Q K^T step, and of a P V step per column warp (forward_params.h).
  static constexpr int kMaxScoreStepPanels = ffpa::sm80::maxScoreStepPanels(kShape);
  static constexpr int kMaxValueStepPanels = ffpa::sm80::maxValueStepPanels(kShape);
  static constexpr float kNegativeInfinity = -__builtin_huge_valf();
  static constexpr bool kReadsKeyLengths = ffpa::sm80::readsKeyLengths(kWideKeys);

  static_assert(kHeadDimV % 16 == 0 && kHeadDimV <= 1024, "d_v: a multiple of 16 up to 1024");
  static_assert(1024 / 16 + kShape.warpColumns / 16 <= kMaxStepsPerTile, "Q K^T and P V steps of a tile");
  static_assert(kShape.keysPerWarp % 8 == 0 && kKeys % 16 == 0, "MMA tiles need Bc % 16 == 0");
  static_assert(kKeyTiles == 1 || kKeyTiles % 2 == 0, "keys are loaded 16 at a time");
  static_assert(kShape.warpColumns % 16 == 0 && kShape.warpColumns <= 256, "O: <= 128 registers");
  static_assert(kThreads <= 512, "at most 16 warps");
  static_assert((kColWarps & (kColWarps - 1)) == 0, "column warps: a power of two (V panels interleave)");
  static_assert(!(kQkF16 || kPvF16) || sizeof(Tag) == sizeof(HalfTag), "fp16 accumulation needs fp16");
  static_assert(!kQInRegisters || kColWarps == 1, "Q fragments in registers: small d only");
  static_assert(!kVInRegisters || kColWarps == 1, "V fragments in registers: small d only");
  static_assert(kRowTiles == 1 || (kColWarps == 1 && !kQInRegisters),
                "two row tiles per warp: one warp owns all columns, Q fragments come from shared memory");
  static_assert(!kWideKeys || ffpa::sm80::hasWideKeyTiles(kHeadDimV, kQInRegisters),
                "64-key tiles: the two-row-tile shape of d_v <= 128");

  // Where the CTA works: its rows (CtaRows), its (batch, head), the warp's role. Tensor
  // addresses are worked out where they are used (a few multiply-adds per pipeline step or per
  // store) rather than kept: at the register limit, values held across the whole KV loop are
  // what ptxas spills first.
  struct Coordinates : CtaRows {
    int warpRow;      // first row of the warp's row group (kRowTiles m16 tiles), relative to the CTA
    int rowGroup;
    int colWarp;
    int group;        // lane / 4
    int quad;         // lane % 4
    int batch;
    int head;
    int kvHead;
  };

  static FFPA_DEVICE Coordinates locate(const ForwardParams& p) {
    Coordinates c;
    const WarpRole role = warpRole(kColWarps);
    c.rowGroup = role.rowGroup;
    c.colWarp = role.colWarp;
    c.group = role.group;
    c.quad = role.quad;
    static_cast<CtaRows&>(c) = ctaRows(p, kRows);
    c.warpRow = c.rowGroup * 16 * kRowTiles;
    const auto [batch, head] = gridPosition(p.gridDnhb, p.headsQ);
    c.batch = batch;
    c.head = head;
    c.kvHead = head / p.groupSize;
    return c;
  }

  // The keys of the CTA's batch entry: seqKv, or its count of the key lengths (keysOfBatch).
  static FFPA_DEVICE int keysOf(const ForwardParams& p, const Coordinates& c) {
    if constexpr (kReadsKeyLengths) return keysOfBatch(p, c.batch);
    return p.seqKv;
  }

  // The CTA's first query row; its K and V rows from key `firstKey` on.
  static FFPA_DEVICE const Element* queryRows(const ForwardParams& p, const Coordinates& c) {
    return static_cast<const Element*>(p.q) + c.batch * p.qStrides[0] + c.head * p.qStrides[1] +
           int64_t(c.firstRow) * p.qStrides[2];
  }
  static FFPA_DEVICE const Element* keyRows(const ForwardParams& p, const Coordinates& c, int firstKey) {
    return static_cast<const Element*>(p.k) + c.batch * p.kStrides[0] + c.kvHead * p.kStrides[1] +
           int64_t(firstKey) * p.kStrides[2];
  }
  static FFPA_DEVICE const Element* valueRows(const ForwardParams& p, const Coordinates& c, int firstKey) {
    return static_cast<const Element*>(p.v) + c.batch * p.vStrides[0] + c.kvHead * p.vStrides[1] +
           int64_t(firstKey) * p.vStrides[2];
  }

  // Where the CTA's (batch, head) of O and the LSE (null without one) start: the call's O, or
  // with split-KV the fp32 partial O of the CTA's split (`partial`, then `o` is null).
  struct Outputs {
    Element* o;
    float* partial;
    float* lse;
  };

  static FFPA_DEVICE Outputs outputsOf(const ForwardParams& p, const Coordinates& c) {
    const int64_t head = c.batch * p.oStrides[0] + c.head * p.oStrides[1];
    float* lse = p.lse ? p.lse + c.batch * p.lseStrides[0] + c.head * p.lseStrides[1] : nullptr;
    if (p.split.splits > 1) {
      const int split = blockIndexZ();
      return {nullptr, static_cast<float*>(p.o) + split * p.split.partialOStride + head,
              lse + split * p.split.partialLseStride};
    }
    return {static_cast<Element*>(p.o) + head, nullptr, lse};
  }

  // KV tile `tile` of the CTA (with slices: of each slice of its segment in turn).
  static FFPA_DEVICE KeyTile keyTile(const ForwardParams& p, const Coordinates& c, int tile) {
    return keyTileOf(p, c, kKeys, tile);
  }

  // The panels of step `inTile` of KV tile `tile` (the Q K^T steps, then the P V steps).
  static FFPA_DEVICE void issueStep(const ForwardParams& p, const Coordinates& c, int tile, int inTile,
                                    uint32_t base) {
    const int qkPanels = p.headDimQk / 16;
    const int firstKey = keyTile(p, c, tile).firstKey;
    if (inTile < p.qkSteps) {
      // d_qk is a multiple of 16: every panel of a step lies inside the rows.
      const int firstColumn = inTile * p.qkPanelsPerStep * 16;
      const int panels = min2(p.qkPanelsPerStep, qkPanels - firstColumn / 16);
      if (!p.persistQ) {
        copyStepPanels<kRows, kThreads, kMaxScoreStepPanels>(base, p.qRowBytes, panels, queryRows(p, c),
                                                              p.qStrides[2], p.seqQ - c.firstRow, firstColumn);
      }
      copyStepPanels<kKeys, kThreads, kMaxScoreStepPanels>(base + p.qkSlotKOffset, p.kRowBytes, panels,
                                                            keyRows(p, c, firstKey), p.kStrides[2],
                                                            keysOf(p, c) - firstKey, firstColumn);
    } else {
      // Column warp w owns O panels w, w + kColWarps, ...: its panels k of the step are the
      // step's panels k * kColWarps + w, and the step's panels are V's consecutive panels from
      // its first warp panel's (no run-time division finds them); a step past the warps' last
      // panel holds fewer.
      const int firstPanel = (inTile - p.qkSteps) * p.vPanelsPerStep;  // of each column warp
      copyStepPanels<kKeys, kThreads, kMaxValueStepPanels * kColWarps, true>(
          base, p.vRowBytes, min2(p.vPanelsPerStep, p.vPanels - firstPanel) * kColWarps, valueRows(p, c, firstKey),
          p.vStrides[2], keysOf(p, c) - firstKey, firstPanel * kColWarps * 16, p.headDimV);
    }
  }

  static FFPA_DEVICE int min2(int a, int b) { return a < b ? a : b; }

  // Score accumulators: fp32, or fp16 pairs (c[0]: row g, c[1]: row g + 8).
  struct Scores {
    float f[kKeyTiles][4];
    uint32_t h[kQkF16 ? kKeyTiles : 1][2];

    FFPA_DEVICE void clear() {
      for (int n = 0; n < kKeyTiles; ++n) {
        for (int e = 0; e < 4; ++e) f[n][e] = 0.0f;
        if constexpr (kQkF16) h[n][0] = h[n][1] = 0u;
      }
    }
    FFPA_DEVICE void mma(int n, const uint32_t (&a)[4], const uint32_t (&b)[2]) {
      if constexpr (kQkF16) {
        mmaF16(h[n], a, b, h[n]);
      } else {
        mmaF32(f[n], a, b, f[n], Tag{});
      }
    }
    // Makes f hold the scores whatever the accumulator.
    FFPA_DEVICE void toFloat() {
      if constexpr (kQkF16) {
        for (int n = 0; n < kKeyTiles; ++n) {
          const float2 top = unpackPair(h[n][0], HalfTag{});
          const float2 bottom = unpackPair(h[n][1], HalfTag{});
          f[n][0] = top.x;
          f[n][1] = top.y;
          f[n][2] = bottom.x;
          f[n][3] = bottom.y;
        }
      }
    }
  };

  // Q K^T of one panel for the warp's keys: S += Q[16 rows, panel] K[keys, panel]^T for each row
  // tile m (Q fragments a[m]), K read at the lane's address `kLane` in the panel (laneOffsetRowsB
  // of the warp's first key): each K fragment feeds the MMAs of every row tile.
  static FFPA_DEVICE void scorePanel(Scores (&s)[kRowTiles], const uint32_t (&a)[kRowTiles][4], uint32_t kLane,
                                     int kRowBytes) {
    forEachRowsB<kKeyTiles, kPipeKv>(kLane, kRowBytes, [&](int n, const uint32_t(&b)[2]) {
#pragma unroll
      for (int m = 0; m < kRowTiles; ++m) s[m].mma(n, a[m], b);
    });
  }

  // Output accumulators: fp32 (o[n][0..1] row g, [2..3] row g + 8) or fp16 pairs.
  struct Output {
    float f[kPvF16 ? 1 : kOutTiles][4];
    uint32_t h[kPvF16 ? kOutTiles : 1][2];

    FFPA_DEVICE void clear() {
      for (int n = 0; n < kOutTiles; ++n) {
        if constexpr (kPvF16) {
          h[n][0] = h[n][1] = 0u;
        } else {
          for (int e = 0; e < 4; ++e) f[n][e] = 0.0f;
        }
      }
    }
    FFPA_DEVICE void rescale(float top, float bottom) {
      for (int n = 0; n < kOutTiles; ++n) {
        if constexpr (kPvF16) {
          h[n][0] = scalePair(h[n][0], top);
          h[n][1] = scalePair(h[n][1], bottom);
        } else {
          f[n][0] *= top;
          f[n][1] *= top;
          f[n][2] *= bottom;
          f[n][3] *= bottom;
        }
      }
    }
    FFPA_DEVICE void mma(int n, const uint32_t (&a)[4], const uint32_t (&b)[2]) {
      if constexpr (kPvF16) {
        mmaF16(h[n], a, b, h[n]);
      } else {
        mmaF32(f[n], a, b, f[n], Tag{});
      }
    }
    // (row g pair, row g + 8 pair) of tile n in fp32.
    FFPA_DEVICE void get(int n, float (&out)[4]) const {
      if constexpr (kPvF16) {
        const float2 top = unpackPair(h[n][0], HalfTag{});
        const float2 bottom = unpackPair(h[n][1], HalfTag{});
        out[0] = top.x;
        out[1] = top.y;
        out[2] = bottom.x;
        out[3] = bottom.y;
      } else {
        for (int e = 0; e < 4; ++e) out[e] = f[n][e];
      }
    }
  };

  // O += P V for output panels `panel` and, with kPair, panel + 1 of the warp, for each row tile
  // m (P fragments pFrag[m]), from the V panel at `vLane` (the lane's address in it) and the next
  // one `panelStride` further (forEachColumnsB: V fragments all first with kVInRegisters, one k16
  // step ahead with kPipeKv).
  template <bool kPair>
  static FFPA_DEVICE void valuePanels(Output (&o)[kRowTiles], const uint32_t (&pFrag)[kRowTiles][kKeySteps][4],
                                      uint32_t vLane, uint32_t panelStride, int vRowBytes, int panel) {
    // The second panel's accumulators (a panel past the warp's last is never handed over).
    const int second = kPair && panel + 1 < kOutPanels ? panel + 1 : panel;
    forEachColumnsB<kKeySteps, kPair, kVInRegisters, kPipeKv>(
        vLane, panelStride, vRowBytes, [&](int q, int j, const uint32_t(&b)[4]) {
          const int n = 2 * (q == 0 ? panel : second);
#pragma unroll
          for (int m = 0; m < kRowTiles; ++m) {
            o[m].mma(n, pFrag[m][j], {b[0], b[1]});
            o[m].mma(n + 1, pFrag[m][j], {b[2], b[3]});
          }
        });
  }

  // Running softmax statistics of the thread's two rows (g and g + 8), in the log2 domain.
  struct RowStats {
    float max[2] = {kNegativeInfinity, kNegativeInfinity};
    float sum[2] = {0.0f, 0.0f};  // over the thread's own keys; reduced at the end
  };

  static FFPA_DEVICE float* statsBuffer(const ForwardParams& p) {
    return reinterpret_cast<float*>(sharedMemory() + p.statsOffset);
  }

  // Takes the maxima of the thread's two rows of raw scores of a tile (the scale, > 0, keeps
  // their order: it is applied to the maxima and, in one FMA, to each exponent); kMask: scores of
  // keys `mask` hides become -inf first.
  template <bool kMask>
  static FFPA_DEVICE void maskAndMax(Scores& s, float (&tileMax)[2], const RowKeyMask& mask, int firstKey, int quad) {
    tileMax[0] = tileMax[1] = kNegativeInfinity;
#pragma unroll
    for (int n = 0; n < kKeyTiles; ++n) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        if (kMask && mask.hides(e >> 1, firstKey + 8 * n + 2 * quad + (e & 1))) s.f[n][e] = kNegativeInfinity;
        tileMax[e >> 1] = fmaxf(tileMax[e >> 1], s.f[n][e]);
      }
    }
  }

  // Masks, exponentiates and packs the scores of row tile `rowTile` of the warp for KV tile
  // `keys` into P; rescales O.
  static FFPA_DEVICE void softmax(const ForwardParams& p, const Coordinates& c, int tile, const KeyTile& keys,
                                  int rowTile, Scores& s, RowStats& stats, Output& o,
                                  uint32_t (&pFrag)[kKeySteps][4]) {
    s.toFloat();
    const int firstKey = keys.firstKey + c.colWarp * kShape.keysPerWarp;
    const RowKeyMask mask = rowKeyMask(p, keys.slice, c, keys.firstKey, kKeys,
                                       c.firstRow + c.warpRow + 16 * rowTile + c.group, keysOf(p, c));
    float tileMax[2];
    // The CTA's rows all see every key of most tiles (mask.masked is false there): no test per
    // score on those.
    if (mask.masked) {
      maskAndMax<true>(s, tileMax, mask, firstKey, c.quad);
    } else {
      maskAndMax<false>(s, tileMax, mask, firstKey, c.quad);
    }
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      for (int mask = 1; mask <= 2; mask *= 2) {
        const float other = shuffleXor(tileMax[half], mask);
        tileMax[half] = other > tileMax[half] ? other : tileMax[half];
      }
    }
    if constexpr (kColWarps > 1) {
      // Row maxima of the column warps: buffer (tile % 2) x rowGroup x colWarp x 16 rows. Two
      // buffers, because a warp may write tile t + 1's while another still reads tile t's.
      float* buffer = statsBuffer(p) + ((tile % 2) * kRowWarps + c.rowGroup) * kColWarps * 16;
      if (c.quad == 0) {
        buffer[c.colWarp * 16 + c.group] = tileMax[0];
        buffer[c.colWarp * 16 + c.group + 8] = tileMax[1];
      }
      namedBarrier(1 + c.rowGroup, 32 * kColWarps);
#pragma unroll
      for (int w = 0; w < kColWarps; ++w) {
        const float top = buffer[w * 16 + c.group], bottom = buffer[w * 16 + c.group + 8];
        tileMax[0] = top > tileMax[0] ? top : tileMax[0];
        tileMax[1] = bottom > tileMax[1] ? bottom : tileMax[1];
      }
    }
    float alpha[2], base[2];
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      // Maxima in log2 units from here on, as stats.max.
      const float newMax = fmaxf(tileMax[half] * p.scaleLog2, stats.max[half]);
      // A row that has seen no visible key yet keeps max -inf; exponentiate against 0 so that
      // its masked scores give exp2(-inf) = 0 and never -inf - -inf = NaN.
      base[half] = newMax == kNegativeInfinity ? 0.0f : newMax;
      // A maximum that did not move leaves O and the sum as they are (alpha exactly 1).
      alpha[half] = newMax == stats.max[half] ? 1.0f : exp2Approx(stats.max[half] - base[half]);
      stats.max[half] = newMax;
      stats.sum[half] *= alpha[half];
    }
#pragma unroll
    for (int n = 0; n < kKeyTiles; ++n) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        s.f[n][e] = exp2Approx(fmaf(s.f[n][e], p.scaleLog2, -base[e >> 1]));
        stats.sum[e >> 1] += s.f[n][e];
      }
    }
    // O is rescaled only when a row of the warp moved its maximum (on most tiles after the first
    // few, none did): one decision for the warp, no divergence.
    if (warpAny(alpha[0] != 1.0f || alpha[1] != 1.0f)) o.rescale(alpha[0], alpha[1]);
    using PackTag = std::conditional_t<kPvF16, HalfTag, Tag>;
    if constexpr (kColWarps == 1) {
      packAccumulatorAsA(pFrag, s.f, PackTag{});
    } else {
      // P of the row group: 16 rows x Bc keys as kKeySteps swizzled panels, buffer tile % 2.
      const uint32_t pTile = p.pOffset + ((tile % 2) * kRowWarps + c.rowGroup) * 16 * kKeys * 2;
      storeAccumulatorRows(pTile, c.colWarp * kShape.keysPerWarp, s.f, PackTag{});
      namedBarrier(1 + c.rowGroup, 32 * kColWarps);
      const uint32_t pShared = sharedAddress(sharedMemory()) + pTile;
#pragma unroll
      for (int j = 0; j < kKeySteps; ++j) loadRowsA(pFrag[j], pShared, 16, 32, 0, j);
    }
  }

  // Divides O by the row sums and stores O (and LSE) of row tile `rowTile` of the warp, its
  // columns.
  static FFPA_DEVICE void finish(const ForwardParams& p, const Coordinates& c, int rowTile, RowStats& stats,
                                 const Output& o) {
    float sum[2];
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      sum[half] = stats.sum[half];
      sum[half] += shuffleXor(sum[half], 1);
      sum[half] += shuffleXor(sum[half], 2);
    }
    if constexpr (kColWarps > 1) {
      float* buffer = statsBuffer(p) + (2 * kRowWarps + c.rowGroup) * kColWarps * 16;
      if (c.quad == 0) {
        buffer[c.colWarp * 16 + c.group] = sum[0];
        buffer[c.colWarp * 16 + c.group + 8] = sum[1];
      }
      namedBarrier(1 + c.rowGroup, 32 * kColWarps);
      sum[0] = sum[1] = 0.0f;
#pragma unroll
      for (int w = 0; w < kColWarps; ++w) {
        sum[0] += buffer[w * 16 + c.group];
        sum[1] += buffer[w * 16 + c.group + 8];
      }
    }
    constexpr float kLn2 = 0.693147180559945309f;
    const Outputs outputs = outputsOf(p, c);
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int row = c.firstRow + c.warpRow + 16 * rowTile + c.group + 8 * half;
      if (row >= c.rowEnd) continue;
      // A row that saw no key (causal, bottom-right, more queries than keys): O = 0, LSE = -inf.
      // A NaN sum (a NaN score: max stayed -inf, exp2(NaN) = NaN) is not 0: it reaches O and LSE.
      const float scale = sum[half] == 0.0f ? 0.0f : 1.0f / sum[half];
      const int64_t rowOffset = int64_t(row) * p.oStrides[2];
#pragma unroll
      for (int n = 0; n < kOutTiles; ++n) {
        const int column = interleavedColumn<kColWarps>(c.colWarp, n, c.quad);
        float values[4];
        o.get(n, values);
        if (column >= p.headDimV) continue;
        const float first = values[2 * half] * scale, second = values[2 * half + 1] * scale;
        if (outputs.partial != nullptr) {
          storeGlobalF32(outputs.partial + rowOffset + column, first);
          storeGlobalF32(outputs.partial + rowOffset + column + 1, second);
        } else {
          storeGlobal32(outputs.o + rowOffset + column, packPair(first, second, Tag{}));
        }
      }
      if (outputs.lse && c.colWarp == 0 && c.quad == 0) {
        const float lse = sum[half] == 0.0f ? kNegativeInfinity
                                            : (stats.max[half] + log2Approx(sum[half])) * kLn2;
        storeGlobalF32(outputs.lse + int64_t(row) * p.lseStrides[2], lse);
      }
    }
  }

  // The number of KV tiles the CTA's rows see (0 when the mask hides every key).
  static FFPA_DEVICE int visibleTiles(const ForwardParams& p, const Coordinates& c) {
    return visibleKeyTilesOf(p, c, kKeys, kRows, keysOf(p, c));
  }

  static FFPA_DEVICE void run(const ForwardParams& p) {
    Coordinates c = locate(p);
    const uint32_t shared = sharedAddress(sharedMemory());
    const int qkPanels = p.headDimQk / 16;
    // With split-KV, the tiles of the CTA's run (c.firstTile on).
    const int tiles = splitKeyTiles(p.split, c, visibleTiles(p, c));
    auto pipe = makeStepPipeline(p.rings, shared, p.qkSteps, p.vSteps, tiles,
                                 [&](int tile, int inTile, uint32_t slot) { issueStep(p, c, tile, inTile, slot); });

    RowStats stats[kRowTiles];
    Output o[kRowTiles];
#pragma unroll
    for (int m = 0; m < kRowTiles; ++m) o[m].clear();
    [[maybe_unused]] uint32_t qFrag[kQRegisterPanels][kRowTiles][4];
    if (tiles > 0) {
      if (p.persistQ) {
        // The persisted Q tile: the first commit group, before every step.
        copyTile<kRows, kThreads>(shared + p.qPersistOffset, p.qRowBytes, qkPanels, queryRows(p, c),
                                  p.qStrides[2], p.seqQ - c.firstRow);
        copyAsyncCommit();
      }
      pipe.start();
      if constexpr (kQInRegisters) {
        // Wait for the persisted Q tile alone, then keep the warp's fragments of all of d_qk in
        // registers.
        copyAsyncWaitPending(pipe.inFlight());
        blockBarrier();
#pragma unroll
        for (int panel = 0; panel < kQRegisterPanels; ++panel) {
          if (panel < qkPanels) {
            loadRowsA(qFrag[panel][0], shared + p.qPersistOffset, kRows, p.qRowBytes, c.warpRow, panel);
          }
        }
      }
    }

    for (int tile = 0; tile < tiles; ++tile) {
      Scores s[kRowTiles];
#pragma unroll
      for (int m = 0; m < kRowTiles; ++m) s[m].clear();
      const uint32_t kLane = p.qkSlotKOffset + laneOffsetRowsB<kKeyTiles>(p.kRowBytes, c.colWarp * kShape.keysPerWarp);
      if constexpr (kQInRegisters) {
        // K panels of a step: one stride of kKeys rows apart.
        forEachStepPanel<kQRegisterPanels>(
            pipe, qkPanels, p.qkPanelsPerStep, uint32_t(kKeys * p.kRowBytes),
            [&](uint32_t kPanel, int panel) { scorePanel(s, qFrag[panel], kPanel + kLane, p.kRowBytes); });
      } else {
        // The Q and K panels of a step lie one panel stride apart; the persisted Q tile's panel
        // of the step's first panel replaces the slot's Q. A warp's second row tile lies 16 rows
        // (16 row lengths) after its first.
        const uint32_t qPanelBytes = uint32_t(kRows * p.qRowBytes), kPanelBytes = uint32_t(kKeys * p.kRowBytes);
        const uint32_t qLane = laneOffsetA(p.qRowBytes, c.warpRow);
        for (int firstPanel = 0; firstPanel < qkPanels; firstPanel += p.qkPanelsPerStep) {
          const uint32_t slot = pipe.acquire();
          const int panels = min2(p.qkPanelsPerStep, qkPanels - firstPanel);
          const uint32_t qAddress = (p.persistQ ? shared + p.qPersistOffset + firstPanel * qPanelBytes : slot) + qLane;
          forEachScorePanel(qAddress, qPanelBytes, slot + kLane, kPanelBytes, panels, [&](uint32_t q, uint32_t k) {
            uint32_t a[kRowTiles][4];
#pragma unroll
            for (int m = 0; m < kRowTiles; ++m) loadMatrixX4(a[m], q + uint32_t(m * 16 * p.qRowBytes));
            scorePanel(s, a, k, p.kRowBytes);
          });
        }
      }

      uint32_t pFrag[kRowTiles][kKeySteps][4];
      const KeyTile keys = keyTile(p, c, tile);
#pragma unroll
      for (int m = 0; m < kRowTiles; ++m) softmax(p, c, tile, keys, m, s[m], stats[m], o[m], pFrag[m]);

      // The V panels of a step, one per column warp per output panel, are interleaved: the
      // warp's panel for output panel `panel` is kColWarps panels of kKeys rows after the last.
      const uint32_t vPanelStride = uint32_t(kColWarps * kKeys * p.vRowBytes);
      // The lane's address in the warp's V panel of column warp colWarp's interleaved ones.
      const uint32_t vLane = uint32_t(c.colWarp * kKeys * p.vRowBytes) + laneOffsetA(p.vRowBytes, 0);
      forEachStepPanelPair<kOutPanels>(pipe, p.vPanels, p.vPanelsPerStep, vPanelStride,
                                       [&](uint32_t vPanel, int panel, auto pair) {
                                         valuePanels<decltype(pair)::value>(o, pFrag, vPanel + vLane, vPanelStride,
                                                                            p.vRowBytes, panel);
                                       });
    }
    // Where the CTA works, worked out again rather than kept across the KV loop: at 255 registers
    // (64-key tiles of two row tiles) ptxas spilled the coordinates there for the stores.
    const Coordinates done = locate(p);
#pragma unroll
    for (int m = 0; m < kRowTiles; ++m) finish(p, done, m, stats[m], o[m]);
  }
};

// The kernel entry point of an instance.
template <class Tag, int kHeadDimV, bool kQkF16, bool kPvF16, bool kPipeKv, bool kQInRegisters,
          bool kVInRegisters, bool kWideKeys = false>
FFPA_KERNEL void FFPA_LAUNCH_BOUNDS(ffpa::sm80::forwardShape(kHeadDimV, kQInRegisters, kWideKeys).threads(),
                                    ffpa::sm80::forwardShape(kHeadDimV, kQInRegisters, kWideKeys).threads() <= 128 ? 2 : 1)
    forwardKernel(const FFPA_GRID_CONSTANT ForwardParams params) {
  ForwardKernel<Tag, kHeadDimV, kQkF16, kPvF16, kPipeKv, kQInRegisters, kVInRegisters, kWideKeys>::run(params);
}

}  // namespace ffpa::kernels::sm80
