// Where a CTA of the tiled kernels works, and which tiles its rows meet under a causal mask.
//
// The tiled kernels arrange their warps as row groups of 16 rows with kColWarps column warps
// each, and launch grids (tiles, B * H) or (tiles, H, B).
#pragma once

#include "common/platform.cuh"

#include <cstdint>

namespace ffpa::kernels::sm80 {

// The calling thread's role: its row group, its column warp, and its lane as group/quad.
struct WarpRole {
  int rowGroup;
  int colWarp;
  int group;  // lane / 4
  int quad;   // lane % 4
};

FFPA_DEVICE WarpRole warpRole(int colWarps) {
  const int warp = threadIndex() / 32, lane = threadIndex() % 32;
  return {warp / colWarps, warp % colWarps, lane / 4, lane % 4};
}

// The (batch, head) of the CTA from a grid (tiles, B * H) or (tiles, H, B).
struct GridPosition {
  int64_t batch;
  int64_t head;
};

FFPA_DEVICE GridPosition gridPosition(bool gridDnhb, int heads) {
  if (gridDnhb) return {blockIndexZ(), blockIndexY()};
  return {blockIndexY() / heads, blockIndexY() % heads};
}

// The number of key tiles of `tileKeys` keys that rows [firstRow, firstRow + rows) of `seqQ`
// see: all of them, or under a causal mask (query i sees key j iff j <= i + causalOffset) those
// up to the last row's last key; 0 when the mask hides every key.
FFPA_DEVICE int visibleKeyTiles(int seqQ, int seqKv, int tileKeys, int firstRow, int rows, bool causal,
                                int64_t causalOffset) {
  int tiles = (seqKv + tileKeys - 1) / tileKeys;
  if (causal) {
    const int lastRow = firstRow + rows < seqQ ? firstRow + rows : seqQ;
    const int64_t lastKey = int64_t(lastRow - 1) + causalOffset;
    if (lastKey < 0) return 0;
    const int64_t causalTiles = lastKey / tileKeys + 1;
    if (causalTiles < tiles) tiles = static_cast<int>(causalTiles);
  }
  return tiles;
}

}  // namespace ffpa::kernels::sm80
