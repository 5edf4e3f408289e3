// Where a CTA of the tiled kernels works, which tiles its rows meet under a causal mask, and which
// keys of a tile each row sees; for the key-major dK/dV kernels, the mirror: which query tiles a
// CTA's keys meet, and which queries see each key. Shared by the mma.sync kernels and the Hopper
// kernels (kernels/sm90), whose CTAs cover the same rows and keys.
//
// The tiled kernels arrange their warps as row groups of 16 rows with kColWarps column warps
// each, and launch grids (tiles, B * H) or (tiles, H, B).
#pragma once

#include "common/key_split.h"
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
  int firstTile = 0;  // split-KV (common/key_split.h): the first KV tile of the CTA's run
};

// The keys batch entry `batch` has: seqKv, or its count of p.keyLengths (FFPA_ATTENTION_KEY_LENGTHS)
// clamped to [0, seqKv], so that a wrong count reads no key past the tensor. Worked out where it
// is used, not kept: without counts it is a parameter, and at the register limit a value held
// across the KV loop is what ptxas spills first.
template <class Params>
FFPA_DEVICE int keysOfBatch(const Params& p, int64_t batch) {
  if (p.keyLengths == nullptr) return p.seqKv;
  const int count = p.keyLengths[batch];
  return count < 0 ? 0 : count > p.seqKv ? p.seqKv : count;
}

// The causal offset of a batch entry of `keyEnd` keys (query i sees key j iff j <= i + offset):
// the problem's, moved with the entry's keys where a bottom-right diagonal ends at its last key.
template <class Params>
FFPA_DEVICE int64_t causalOffsetOf(const Params& p, int keyEnd) {
  return p.causalAtKeyEnd ? p.causalOffset + (keyEnd - p.seqKv) : p.causalOffset;
}

// The row tile query-major CTA `x` of a grid of one CTA per `rows` rows of the queries (no
// attention slices) takes: under a causal mask the last first. A later row tile sees more keys,
// so the CTAs the GPU starts first get the longest tiles and the last ones the shortest (as in
// FlashAttention-2): an SM that frees up near the end finds a short tile, instead of the run
// waiting on long ones started last.
template <class Params>
FFPA_DEVICE int rowTileInOrder(const Params& p, int x, int rows) {
  if (!p.causal) return x;
  const int tiles = static_cast<int>((p.seqQ + rows - 1) / rows);
  return tiles - 1 - x;
}

template <class Params>
FFPA_DEVICE CtaRows ctaRows(const Params& p, int rows) {
  if (p.slices.slices == nullptr) return {rowTileInOrder(p, blockIndexX(), rows) * rows, p.seqQ, -1};
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
  if (p.slices.slices == nullptr) return {(r.firstTile + tile) * tileKeys, -1};
  const slices::WalkTile t = slices::walkTile(p.slices, true, r.segment, r.firstRow, r.rowEnd - 1, tileKeys, tile);
  return {static_cast<int>(t.first), t.slice};
}

// The number of KV tiles of `tileKeys` keys a query-major CTA of `rows` rows walks (0 when the
// mask hides every key); `keyEnd`: the keys of its batch entry (keysOfBatch).
template <class Params>
FFPA_DEVICE int visibleKeyTilesOf(const Params& p, const CtaRows& r, int tileKeys, int rows, int keyEnd) {
  if (p.slices.slices == nullptr) {
    return visibleKeyTiles(p.seqQ, keyEnd, tileKeys, r.firstRow, rows, p.causal, causalOffsetOf(p, keyEnd));
  }
  return slices::walkTiles(p.slices, true, r.segment, r.firstRow, r.rowEnd - 1, tileKeys);
}

// Split-KV (common/key_split.h, no slices): of the `tiles` KV tiles rows `r` see, those of the
// run of CTA z, tiles [z * tilesPerSplit, (z + 1) * tilesPerSplit), as tiles 0, 1, ... from
// r.firstTile on (keyTileOf adds it). Returns how many; 0 for a run past the rows' last tile.
FFPA_DEVICE int splitKeyTiles(const ffpa::KeySplit& split, CtaRows& r, int tiles) {
  if (split.splits <= 1) return tiles;
  r.firstTile = blockIndexZ() * split.tilesPerSplit;
  const int left = tiles - r.firstTile;
  return left < 0 ? 0 : left < split.tilesPerSplit ? left : split.tilesPerSplit;
}

// Which keys of a KV tile (keys [firstKey, firstKey + tileKeys)) the thread's two rows, `row`
// and row + 8, see in a query-major kernel (the forward, dQ): through slice `slice` of p.slices
// when it is >= 0, else every key of the rows' batch entry (keys [0, keyEnd)) under the causal
// mask. `masked` is false when every row of the CTA, `r`, sees every key of the tile, so that no
// element needs the test.
struct RowKeyMask {
  bool masked;
  slices::KeySpan span[2];

  FFPA_DEVICE bool hides(int half, int64_t key) const {
    return masked && (key < span[half].begin || key >= span[half].end);
  }
};

template <class Params>
FFPA_DEVICE RowKeyMask rowKeyMask(const Params& p, int slice, const CtaRows& r, int firstKey, int tileKeys,
                                  int64_t row, int keyEnd) {
  RowKeyMask m;
  if (slice >= 0) {
    const slices::SliceRange s = p.slices.slices[slice];
    m.masked = !slices::seesWholeTile(s, r.firstRow, r.rowEnd - 1, firstKey, firstKey + tileKeys - 1);
    for (int half = 0; half < 2; ++half) m.span[half] = slices::keySpan(s, row + 8 * half);
  } else {
    const int64_t offset = causalOffsetOf(p, keyEnd);
    m.masked = firstKey + tileKeys > keyEnd || (p.causal && firstKey + tileKeys - 1 > r.firstRow + offset);
    for (int half = 0; half < 2; ++half) {
      const int64_t end = row + 8 * half + offset + 1;  // under the causal mask
      m.span[half] = {0, p.causal && end < keyEnd ? end : keyEnd};
    }
  }
  return m;
}

// The keys of a key-major CTA (dK/dV) of `keys` keys, and the query tiles of `tileQueries`
// queries it walks per query head. Without slices: keys from cta * keys on, query tiles from the
// first that sees any of them under the causal mask (query i sees key j iff j <= i +
// causalOffset: the first key is seen from query firstKey - causalOffset on, and every later query
// sees at least as many keys). With slices (`view`, and `tiles`, the key axis' table for `keys`):
// key tile `cta` of the key segments, then the CTAs past the slices' key extent, walking the
// query hull of each slice covering the segment in turn. `keyEnd`: the keys of the CTA's batch
// entry (keysOfBatch; seqKv with slices): keys from it on are seen by no query, but stored (as
// the zeros they get) up to the tensor's end.
struct CtaKeys {
  int firstKey;
  int keyEnd;          // one past the last key to store (the tensor's end, or the key tile's)
  int segment;         // -1: keys no slice covers, or no slices
  int firstQueryTile;  // without slices: the first query tile that sees any of the keys
  int queryTiles;      // per query head; 0 when no query sees the keys
};

template <class Params>
FFPA_DEVICE CtaKeys ctaKeys(const Params& p, const slices::SliceView& view, const slices::AxisTile* tiles,
                            int tileCount, int cta, int keys, int tileQueries, int keyEnd) {
  CtaKeys c{cta * keys, p.seqKv, -1, 0, 0};
  if (view.slices != nullptr) {
    const slices::AxisTile tile = slices::ctaTile(view.keys, tiles, tileCount, cta, keys, p.seqKv);
    c.firstKey = tile.begin;
    c.keyEnd = tile.end;
    c.segment = tile.segment;
    c.queryTiles = slices::walkTiles(view, false, c.segment, c.firstKey, c.keyEnd - 1, tileQueries);
    return c;
  }
  const int allTiles = (p.seqQ + tileQueries - 1) / tileQueries;
  int64_t firstQuery = p.causal ? int64_t(c.firstKey) - causalOffsetOf(p, keyEnd) : 0;
  if (firstQuery < 0) firstQuery = 0;
  c.firstQueryTile = firstQuery >= p.seqQ ? allTiles : static_cast<int>(firstQuery / tileQueries);
  c.queryTiles = c.firstKey < keyEnd ? allTiles - c.firstQueryTile : 0;
  return c;
}

// Step `step` of a key-major CTA `c` over the query tiles of all `groupSize` query heads of KV
// head `kvHead`: the query head, the tile's first query, and the slice it is seen through (-1:
// no slices; the tiles then follow each other from firstQueryTile).
struct QueryTile {
  int head;  // an int (heads < 2^31): the dK/dV kernels keep it across their loops
  int firstQuery;
  int slice;
};

// The query head of a step, step / queryTiles, is found without an integer division (some 20
// instructions, and the dK/dV kernels find it at every pipeline step): none is needed without
// GQA, and the rounded float quotient (step + 1/2) / queryTiles truncates to it below 2^22
// steps: the exact quotient lies at least 1/2 / queryTiles from an integer, the rounding moves it
// by at most 2^-24 of itself.
FFPA_DEVICE int queryHeadOfStep(const CtaKeys& c, int groupSize, int step) {
  if (groupSize == 1) return 0;
  if (step < (1 << 22)) return static_cast<int>((static_cast<float>(step) + 0.5f) / static_cast<float>(c.queryTiles));
  return step / c.queryTiles;
}

FFPA_DEVICE QueryTile queryTileOf(const slices::SliceView& view, const CtaKeys& c, int64_t kvHead, int groupSize,
                                  int tileQueries, int step) {
  const int group = queryHeadOfStep(c, groupSize, step);
  const int head = static_cast<int>(kvHead * groupSize + group);
  const int tile = step - group * c.queryTiles;
  if (view.slices == nullptr) return {head, (c.firstQueryTile + tile) * tileQueries, -1};
  const slices::WalkTile t = slices::walkTile(view, false, c.segment, c.firstKey, c.keyEnd - 1, tileQueries, tile);
  return {head, static_cast<int>(t.first), t.slice};
}

// The queries [begin, end) that see key `key` of a key-major CTA `c` (empty when end <= begin):
// none for keys from c.keyEnd on (another segment's, or past the tensor), else those of slice
// `slice` of `view` when it is >= 0, else, below `keyEnd` (the keys of the CTA's batch entry),
// every query under the causal mask (begin is then not clamped to [0, seqQ]).
template <class Params>
FFPA_DEVICE slices::KeySpan queriesSeeing(const Params& p, const slices::SliceView& view, const CtaKeys& c, int slice,
                                          int64_t key, int keyEnd) {
  if (key >= c.keyEnd) return {0, 0};
  if (slice >= 0) return slices::querySpan(view.slices[slice], key);
  if (key >= keyEnd) return {0, 0};
  return {p.causal ? key - causalOffsetOf(p, keyEnd) : 0, p.seqQ};
}

}  // namespace ffpa::kernels::sm80
