// What the host and the sm80 forward kernel agree on: the tile shape of an instance, the launch
// parameters, and the shared-memory layout. Plain C++ (no CUDA), so that the planner, the kernel
// and the CPU warp emulator compute the layout with the same code.
//
// The kernel splits a CTA's warps into kRowWarps row groups of 16 * rowTiles query rows and
// kColWarps column warps per group. Column warp c of a group
//   - computes S = Q K^T for its keysPerWarp keys of the KV tile (over the whole d_qk, 16 columns
//     at a time),
//   - shares its row maxima (and, for kColWarps > 1, its part of P) with the group through shared
//     memory,
//   - computes O = P V for all keys of the tile, for its 16-column panels of O: panels c,
//     c + colWarps, c + 2 colWarps, ... (interleaved, so that an instance wider than the problem's
//     d_v leaves each column warp the same few panels past d_v to skip),
// so a thread keeps warpColumns / 2 fp32 O values (at most 128) whatever d_v is.
#pragma once

#include "common/key_split.h"
#include "common/problem_sizes.h"
#include "common/slice_mask.h"
#include "sm80/step_rings.h"

#include <cstdint>

namespace ffpa::sm80 {

struct ForwardShape {
  int rowWarps;     // row groups of 16 * rowTiles query rows: Br = 16 * rowTiles * rowWarps
  int colWarps;     // warps sharing a row group, each with its own keys and output columns
  int keysPerWarp;  // keys of a KV tile each column warp scores: Bc = colWarps * keysPerWarp
  int warpColumns;  // output columns of each column warp: d_v <= colWarps * warpColumns
  int rowTiles = 1; // m16 row tiles of a warp (2: every K and V fragment serves two MMAs)

  constexpr int threads() const { return 32 * rowWarps * colWarps; }
  constexpr int rows() const { return 16 * rowTiles * rowWarps; }
  constexpr int keys() const { return colWarps * keysPerWarp; }
  constexpr int maxHeadDimV() const { return colWarps * warpColumns; }
};

constexpr int roundUp16(int value) { return (value + 15) / 16 * 16; }

// The shape of the instance compiled for value head dim `headDimV` (a multiple of 16, <= 1024).
// Up to d_v = 256 one warp owns all columns of its rows (FlashAttention-2's split-Q; P stays in
// registers, no exchange between warps):
//   - up to 128: 32 rows, two m16 tiles, on 4 warps (Br = 128), so that each K and V fragment
//     read from shared memory feeds two MMAs (half the shared-memory reads per MMA of 16-row
//     warps). KV tiles of 32 keys, or of 64 with wideKeys (FlashAttention-2's 128 x 64 tile of
//     sm_80 and sm_90 at d = 128: half the softmax reductions, barriers and pipeline steps per MMA,
//     for 255 registers and twice the shared memory per K and V step; hasWideKeyTiles). With Q's
//     fragments kept in registers (qInRegisters: d_qk / 4 registers per row tile) a warp has 16
//     rows and 64 keys.
//   - 129 to 256: 16 rows on 8 warps (Br = 128), KV tiles of 64 keys: O is 128 fp32 registers.
// Beyond d_v = 256 the columns are split so that a warp keeps at most 256 columns (128 fp32
// registers) of 16 rows with 256 threads per CTA, where a thread may use up to 255 registers. (16
// warps would cap threads at 128 registers, which O, P and the fragments of a 128-column warp
// exceed.)
constexpr ForwardShape forwardShape(int headDimV, bool qInRegisters = false, bool wideKeys = false) {
  if (headDimV <= 128) {
    if (qInRegisters) return {4, 1, 64, roundUp16(headDimV), 1};
    return {4, 1, wideKeys ? 64 : 32, roundUp16(headDimV), 2};
  }
  if (headDimV <= 256) return {8, 1, 64, roundUp16(headDimV)};
  if (headDimV <= 512) return {4, 2, 32, roundUp16((headDimV + 1) / 2)};
  return {2, 4, 16, roundUp16((headDimV + 3) / 4)};
}

// The 16-column panels of an output `width` columns wide that column warp 0 owns, the most of any
// of `colWarps` column warps, at most `warpPanels` (a warp's): column warp c owns panels c,
// c + colWarps, c + 2 colWarps, ... (O here; dQ, dK and dV in the gradient kernels).
constexpr int ownedPanels(int width, int colWarps, int warpPanels) {
  const int panels = ((width + 15) / 16 + colWarps - 1) / colWarps;
  return panels < warpPanels ? panels : warpPanels;
}

// Whether the shape of d_v `headDimV` comes with 32- and 64-key tiles (forwardShape's wideKeys):
// two row tiles per warp, d_v <= 128.
constexpr bool hasWideKeyTiles(int headDimV, bool qInRegisters = false) { return headDimV <= 128 && !qInRegisters; }

// Whether an instance reads per-batch key lengths (FFPA_ATTENTION_KEY_LENGTHS): every one but
// those of 64-key tiles, at 255 registers, where one more value would spill (the planner takes
// their 32-key twins for such problems).
constexpr bool readsKeyLengths(bool wideKeys) { return !wideKeys; }

// Whether whole K and V tiles per step (coarse tiling, FFPA_POLICY_PERSIST_KV_G2S) serve a problem
// of these head dims on an instance of this shape: d_qk and d_v up to 256 (seed 000's bound) on an
// instance of at most 256 columns (one column warp; a build without one serves such head dims
// with the fine-grained steps of a wider instance).
constexpr bool coarseTiling(const ForwardShape& shape, int64_t headDimQk, int64_t headDimV) {
  return headDimQk <= 256 && headDimV <= 256 && shape.maxHeadDimV() <= 256;
}

// The most panels a pipeline step holds (per column warp for V), which the kernel's copies are
// unrolled for: Q K^T steps of at most 128 columns and P V steps of at most 64 per column warp, or
// whole tiles with coarse tiling (d_qk and d_v <= 256, one column warp).
constexpr int maxScoreStepPanels(const ForwardShape& shape) { return shape.maxHeadDimV() <= 256 ? 16 : 8; }
constexpr int maxValueStepPanels(const ForwardShape& shape) {
  return shape.maxHeadDimV() <= 256 ? shape.warpColumns / 16 : 4;
}

// The Q K^T panels of a default step (forwardLayout): about 32 MMAs per warp between two block
// barriers. A step's issue (its copies, the wait and the barrier) costs about as many
// instructions as 16 MMAs with their ldmatrix, and a larger step also lets a copy's latency pass
// behind more MMAs. (The planner halves it where two stages of such steps do not fit the
// device's shared memory.)
constexpr int defaultScoreStepPanels(const ForwardShape& shape) {
  const int panelMmas = shape.rowTiles * shape.keysPerWarp / 8;  // m16n8k16 MMAs per warp per panel
  return 32 / panelMmas < 8 ? 32 / panelMmas : 8;
}

// Launch parameters, passed by value. Strides are in elements, in [batch, head, row] order (the
// head-dim stride is 1). Shared-memory offsets are bytes from the start of dynamic shared memory.
struct ForwardParams : ProblemSizes {
  const void* q;
  const void* k;
  const void* v;
  void* o;
  float* lse;  // may be null
  // Attention slices (slices.slices not null; then `causal` is 0): CTA x < rowTileCount works on
  // rowTiles[x], the CTAs after it on the rows from the slices' query extent on, which see no key;
  // the keys of a CTA are those of the slices covering its segment.
  slices::SliceView slices;
  const slices::AxisTile* rowTiles;
  int32_t rowTileCount;
  int64_t qStrides[3];
  int64_t kStrides[3];
  int64_t vStrides[3];
  int64_t oStrides[3];
  int64_t lseStrides[3];
  // Split-KV (common/key_split.h): with split.splits > 1, `o` and `lse` are the fp32 partial
  // results of split 0 in the workspace (oStrides and lseStrides theirs), those of split z
  // split.partialOStride and split.partialLseStride floats further.
  KeySplit split;

  // The cp.async pipeline (step_rings.h): every KV tile is a run of steps, first the Q K^T steps
  // (each brings qkPanelsPerStep 16-column panels of K, and of Q unless Q is persisted), then the
  // P V steps (each brings vPanelsPerStep panels of V per column warp).
  StepRings rings;
  int32_t qkPanelsPerStep;
  int32_t vPanelsPerStep;
  int32_t vPanels;  // the O panels per column warp P V computes: column warp 0's below d_v
  int32_t qkSteps;  // steps per KV tile of each kind (worked out here: a division in the kernel
  int32_t vSteps;   // costs some 20 instructions, and a step is issued a few times per tile)
  int32_t persistQ;        // the Q tile is loaded once into shared memory (d_qk <= 320)
  int32_t qRowBytes;       // 32: swizzled panel rows; 48: padded panel rows
  int32_t kRowBytes;
  int32_t vRowBytes;

  // The shared-memory layout (see forwardLayout()).
  uint32_t qPersistOffset;
  uint32_t qkSlotKOffset;  // where K starts inside a Q/K slot
  uint32_t pOffset;        // P of each row group, two buffers (kColWarps > 1)
  uint32_t statsOffset;    // row maxima (two buffers) and row sums exchanged by column warps
  uint32_t sharedBytes;
};

// The knobs that decide the pipeline and layout, after the planner resolved them.
struct PipelineChoice {
  int stages = 2;
  int qkPanelsPerStep = 0;  // 0: the default for the shape
  int vPanelsPerStep = 0;
  bool prefetch = true;
  bool shareSmem = false;
  bool persistQ = false;
  bool persistKv = false;   // whole K and V tiles per step (coarse tiling; d <= 256)
  bool swizzleQ = true;
  bool swizzleK = true;
  bool swizzleV = true;
  int tileKeys = 0;         // keys per KV tile where the shape comes with 32 and 64 (0: the default)
};

// Fills the pipeline and layout fields of `p` (headDimQk and headDimV must be set) and returns the
// dynamic shared memory it needs.
inline uint32_t forwardLayout(const ForwardShape& shape, const PipelineChoice& choice, ForwardParams& p) {
  const int qkPanels = p.headDimQk / 16;
  // P V computes the panels of O's columns below d_v only: column warp c owns O panels c, c +
  // colWarps, ... (column warp 0 the most of those below d_v), so an instance of a wider d_v
  // skips the same number of panels in every column warp (d_v 640 on the 1024 instance: 10 of
  // each warp's 16), whose columns are never stored.
  p.vPanels = ownedPanels(p.headDimV, shape.colWarps, shape.warpColumns / 16);
  if (choice.persistKv) {
    p.qkPanelsPerStep = qkPanels;
    p.vPanelsPerStep = p.vPanels;
  } else {
    p.qkPanelsPerStep = choice.qkPanelsPerStep > 0 ? choice.qkPanelsPerStep : defaultScoreStepPanels(shape);
    p.vPanelsPerStep = choice.vPanelsPerStep > 0 ? choice.vPanelsPerStep : 4;
    if (p.qkPanelsPerStep > qkPanels) p.qkPanelsPerStep = qkPanels;
    if (p.vPanelsPerStep > p.vPanels) p.vPanelsPerStep = p.vPanels;
  }
  // What the kernel's copies are unrolled for (the launch parameters' ranges keep within it).
  if (p.qkPanelsPerStep > maxScoreStepPanels(shape)) p.qkPanelsPerStep = maxScoreStepPanels(shape);
  if (p.vPanelsPerStep > maxValueStepPanels(shape)) p.vPanelsPerStep = maxValueStepPanels(shape);
  p.qkSteps = (qkPanels + p.qkPanelsPerStep - 1) / p.qkPanelsPerStep;
  p.vSteps = (p.vPanels + p.vPanelsPerStep - 1) / p.vPanelsPerStep;
  p.persistQ = choice.persistQ;
  p.qRowBytes = choice.swizzleQ ? 32 : 48;
  p.kRowBytes = choice.swizzleK ? 32 : 48;
  p.vRowBytes = choice.swizzleV ? 32 : 48;

  const uint64_t qStepBytes =
      choice.persistQ ? 0 : uint64_t(shape.rows()) * p.qkPanelsPerStep * p.qRowBytes;
  const uint64_t kStepBytes = uint64_t(shape.keys()) * p.qkPanelsPerStep * p.kRowBytes;
  const uint64_t vStepBytes =
      uint64_t(shape.keys()) * shape.colWarps * p.vPanelsPerStep * p.vRowBytes;
  p.qkSlotKOffset = alignUp(qStepBytes, 128);

  uint32_t offset = 0;
  p.qPersistOffset = offset;
  // Q for the whole of d_qk: the persisted tile (which is also where Q fragments come from when
  // they are kept in registers).
  if (choice.persistQ) offset += alignUp(uint64_t(shape.rows()) * qkPanels * p.qRowBytes, 128);
  offset = layOutRings(p.rings, choice.stages, choice.prefetch, choice.shareSmem,
                       p.qkSlotKOffset + kStepBytes, vStepBytes, offset);
  p.pOffset = offset;
  if (shape.colWarps > 1) offset += 2u * shape.rowWarps * 16 * shape.keys() * 2;
  p.statsOffset = offset;
  // Row maxima: 2 buffers x rowWarps x colWarps x 16 rows; row sums: rowWarps x colWarps x 16.
  offset += 3u * shape.rowWarps * shape.colWarps * 16 * 4;
  p.sharedBytes = alignUp(offset, 128);
  return p.sharedBytes;
}

}  // namespace ffpa::sm80
