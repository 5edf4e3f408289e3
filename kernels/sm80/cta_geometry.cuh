// Where a CTA of the tiled kernels works, which tiles its rows meet under a causal mask, and which
// keys of a tile each row sees.
//
// The tiled kernels arrange their warps as row groups of 16 rows with kColWarps column warps
// each, and launch grids (tiles, B * H) or (tiles, H, B).
#pragma once

#include "common/platform.cuh"
#include "common/slice_mask.h"

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

// The rows of a query-major CTA (the forward, dQ) of `rows` rows: [firstRow, rowEnd) and, with
// attention slices, the query segment they lie in (-1: none, or no slices). With slices CTA x
// takes row tile x of the segments (p.rowTiles, the table for `rows`), the CTAs after them the
// rows past the slices' query extent.
struct CtaRows {
  int firstRow;
  int rowEnd;   // one past the last row to store (the tensor's end, or the row tile's)
  int segment;  // -1: rows no slice covers, or no slices
};

template <class Params>
FFPA_DEVICE CtaRows ctaRows(const Params& p, int rows) {
  if (p.slices.slices == nullptr) return {blockIndexX() * rows, p.seqQ, -1};
  const slices::AxisTile tile = slices::ctaTile(p.slices.queries, p.rowTiles, p.rowTileCount, blockIndexX(), rows, p.seqQ);
  return {tile.begin, tile.end, tile.segment};
}

// KV tile `tile` of a query-major CTA with rows `r`: keys [firstKey, firstKey + tileKeys), seen
// through slice `slice` (-1: no slices, tile `tile` of the keys from 0).
struct KeyTile {
  int firstKey;
  int slice;
};

template <class Params>
FFPA_DEVICE KeyTile keyTileOf(const Params& p, const CtaRows& r, int tileKeys, int tile) {
  if (p.slices.slices == nullptr) return {tile * tileKeys, -1};
  const slices::WalkTile t = slices::walkTile(p.slices, true, r.segment, r.firstRow, r.rowEnd - 1, tileKeys, tile);
  return {static_cast<int>(t.first), t.slice};
}

// The number of KV tiles of `tileKeys` keys a query-major CTA of `rows` rows walks (0 when the
// mask hides every key).
template <class Params>
FFPA_DEVICE int visibleKeyTilesOf(const Params& p, const CtaRows& r, int tileKeys, int rows) {
  if (p.slices.slices == nullptr) {
    return visibleKeyTiles(p.seqQ, p.seqKv, tileKeys, r.firstRow, rows, p.causal, p.causalOffset);
  }
  return slices::walkTiles(p.slices, true, r.segment, r.firstRow, r.rowEnd - 1, tileKeys);
}

// Which keys of a KV tile (keys [firstKey, firstKey + tileKeys)) the thread's two rows, `row`
// and row + 8, see in a query-major kernel (the forward, dQ): through slice `slice` of p.slices
// when it is >= 0, else every key under the causal mask. `masked` is false when every row of the
// CTA, `r`, sees every key of the tile, so that no element needs the test.
struct RowKeyMask {
  bool masked;
  slices::KeySpan span[2];

  FFPA_DEVICE bool hides(int half, int64_t key) const {
    return masked && (key < span[half].begin || key >= span[half].end);
  }
};

template <class Params>
FFPA_DEVICE RowKeyMask rowKeyMask(const Params& p, int slice, const CtaRows& r, int firstKey, int tileKeys,
                                  int64_t row) {
  RowKeyMask m;
  if (slice >= 0) {
    const slices::SliceRange s = p.slices.slices[slice];
    m.masked = !slices::seesWholeTile(s, r.firstRow, r.rowEnd - 1, firstKey, firstKey + tileKeys - 1);
    for (int half = 0; half < 2; ++half) m.span[half] = slices::keySpan(s, row + 8 * half);
  } else {
    m.masked = firstKey + tileKeys > p.seqKv || (p.causal && firstKey + tileKeys - 1 > r.firstRow + p.causalOffset);
    for (int half = 0; half < 2; ++half) {
      const int64_t end = row + 8 * half + p.causalOffset + 1;  // under the causal mask
      m.span[half] = {0, p.causal && end < p.seqKv ? end : p.seqKv};
    }
  }
  return m;
}

}  // namespace ffpa::kernels::sm80
