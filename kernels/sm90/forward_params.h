// What the host and the sm90 forward kernel agree on: the tile shape, the launch parameters and
// the shared-memory layout. Plain C++ (no CUDA), for the planner, the kernel and the emulator.
//
// A CTA computes O and LSE for 64 query rows of one (batch, head) with three warpgroups (for
// d_v > 512, a cluster of two CTAs shares the rows: see "Clusters" below):
//   warpgroup 0, the producer: one thread issues the TMA loads of Q (once), K and V (per KV tile);
//   warpgroup 1, consumer 0: S = Q K^T (one wgmma chain over the whole d_qk), the online softmax,
//     P to shared memory, then O[:, 0 : columns0] += P V;
//   warpgroup 2, consumer 1: O[:, columns0 : d_v] += P V with consumer 0's P and row scales
//     (half of the columns or about five eighths: forwardConsumer1Columns).
// O stays in fp32 registers, split by columns so that a thread holds at most 160 of them.
// Every tile is stored as 64-column blocks of 64 rows x 128 bytes, 128-byte swizzled (TMA boxes).
//
// Key sharing (FFPA_POLICY_HOPPER_KV_MULTICAST; d_v <= 512, no attention slices): every CTA reads
// whole K and V tiles of its (batch, head), 4 d bytes per key, for 64 query rows: 64 FLOPs per byte
// the L2 delivers: 7.3 TB/s at the 466 TFLOPS measured at d = 512 on an H100, a rate at which the
// L2 rather than the tensor cores may set the pace. So the CTAs of two adjacent 64-row tiles form
// a cluster of two: each producer loads half of the 64-column blocks of every K and V tile (rank r the blocks b with
// b % 2 == r) with TMA multicast, which lands each box in both CTAs, and announces the whole tile's
// bytes on its own full barrier. The pair walks the KV tiles both of its row tiles see (under a
// causal mask the later rows see more: the earlier CTA's rows see the extra tile as masked), and a
// CTA may overwrite a K or V buffer only when the consumers of both have released it: the empty
// barriers count the arrivals of both CTAs (remote arrivals), and the CTAs leave together (a
// cluster barrier at the end), so that no arrival or copy reaches a block that has exited.
//
// Clusters (d_v 513..1024): O[64, d_v] in fp32 is 256 KiB at d_v = 1024, all of an SM's
// registers, and Q, K and V tiles of d = 1024 would need 384 KiB of shared memory. So two CTAs of
// a cluster take the same 64 rows and split the head dims by 64-column blocks: rank r loads and
// keeps only its share of Q, K and V, computes a partial S over its share of d_qk, sends it to the
// other CTA's shared memory (st.async, completing on the receiver's mbarrier) and adds the
// partial it receives. Both then hold the same S (fp32 addition commutes), run the same softmax,
// and accumulate their own share of O's columns. Every MMA FLOP is done once; the price is 16 KiB
// of partial scores per CTA and KV tile through distributed shared memory.
#pragma once

#include "common/key_split.h"
#include "common/problem_sizes.h"
#include "common/slice_mask.h"
#include "sm90/tensor_map.h"

#include <cstdint>

namespace ffpa::sm90 {

constexpr int kRows = 64;                 // Br: the M of one wgmma
constexpr int kKeys = 64;                 // Bc: keys per KV tile
constexpr int kBlockColumns = 64;         // elements of a 128-byte swizzled row (bf16/fp16)
constexpr uint32_t kBlockBytes = 64 * 128;  // one 64 x 64 block
constexpr int kThreads = 384;             // three warpgroups
constexpr int kMaxClusterSize = 2;          // the forward's clusters
constexpr int kKvSharingCtas = 2;           // CTAs of a cluster that share K and V (multicast)
constexpr int kMaxGradientClusterSize = 4;  // the backward's, for head dims above 512 or 640
constexpr uint32_t kExchangeBytes = 128 * 32 * 4;  // a partial S: 32 fp32 per consumer-0 thread
constexpr uint32_t kMaxSharedBytes = 227 * 1024;  // dynamic shared memory per block on sm_90

constexpr int columnBlocks(int headDim) { return (headDim + kBlockColumns - 1) / kBlockColumns; }

// A cluster of 2^n CTAs sums a partial tile in n stages (recursive doubling: at stage s each CTA
// swaps its running sum with the CTA whose rank differs in bit s), each through its own
// kExchangeBytes receive buffer and pair of mbarriers per product exchanged.
constexpr int kMaxExchangeStages = 2;
constexpr int exchangeStages(int clusterSize) { return clusterSize >= 4 ? 2 : clusterSize >= 2 ? 1 : 0; }

// CTAs per cluster: two for d_v above 512 (d_v <= 1024), one otherwise.
constexpr int clusterSizeFor(int headDimV) { return headDimV > 512 ? 2 : 1; }

// The forward's d_v: 65..1024. Each consumer owns at least one 64-column block of O, so the
// smallest instance has two (d_v 65..128 runs on the 128 instance); d_v up to 64 stays on the
// mma.sync kernels, where the second block would be all columns past d_v.
constexpr int kMinForwardHeadDimV = kBlockColumns + 1;
constexpr int kMaxForwardHeadDimV = 1024;

// With per-batch key lengths, consumer w zeroes the rows past its batch entry's keys of the K or
// V blocks it multiplies (the forward's split of the columns: V; the gradient kernels: V, and the
// dQ kernel's K), then waits for its warpgroup at named barrier kClearedRowsBarrierId + w
// (warpgroup_tiles.cuh, zeroBlockRows); in the row split, where both read every V block, each
// zeroes a share of them and both meet at kClearedRowsBarrierId (256 threads).
constexpr int kClearedRowsBarrierId = 4;

// The row split (forward_row_split_kernel.cuh; no attention slices, no K and V sharing): a CTA of
// 128 rows, each consumer 64 of them with all of O's columns, d_v up to 256 (128 fp32 registers),
// any multiple of 16 from 16 on (the 64 instance serves 16..64). Consumer w waits for its turn
// to issue its products (ForwardArguments::pingpong) at named barrier kRowSplitTurnBarrierId + w.
constexpr int kRowSplitRows = 2 * kRows;
constexpr int kRowSplitMaxHeadDimV = 256;
constexpr int kRowSplitTurnBarrierId = 2;

// The row split's KV tiles: kKeys keys, or kRowSplitWideKeys on the instances of d_v up to
// kRowSplitWideMaxHeadDimV (the "tile_keys" launch parameter), FlashAttention-3's 128 x 128 tile
// of d = 64 and 128. A tile's S is then m64n128: per k16 step a wgmma reads A (2 KiB of Q) and B
// (4 KiB of K) for 262,144 FLOPs, where an m64n64 one reads 4 KiB for half of them. At the
// tensor cores' 4,096 dense 16-bit FLOPs per clock per SM that is 96 bytes of shared memory per
// clock instead of 128, the whole of what an SM's shared memory delivers (and TMA's writes share
// it). The tile's barrier waits, turns and row reductions also serve twice the FLOPs. The price:
// 64 fp32 registers of S and 32 of P per thread (beside at most 64 of O), and K and V buffers
// twice the size (two K buffers up to d_qk 192 at d_v 128 and 256 at d_v 64, one up to 320 and
// 384).
constexpr int kRowSplitWideKeys = 2 * kKeys;
constexpr int kRowSplitWideMaxHeadDimV = 128;
constexpr bool rowSplitHasWideKeys(int instanceHeadDimV) { return instanceHeadDimV <= kRowSplitWideMaxHeadDimV; }

// The largest d_qk: what 227 KiB of Q, K, V and P tiles hold (576 / 512 is the absorbed-MLA
// shape), and with two CTAs each keeping half of d_qk, the library's 1024.
constexpr int maxHeadDimQk(int clusterSize) { return clusterSize == 1 ? 576 : 1024; }

// The 64-column blocks of a head dim of `blocks` blocks that the CTA of cluster rank `rank` holds:
// ceil(blocks / clusterSize) from rank * that on (fewer for the last rank, maybe none).
struct BlockShare {
  int first;
  int count;
};
constexpr BlockShare blockShare(int blocks, int clusterSize, int rank) {
  const int each = (blocks + clusterSize - 1) / clusterSize;
  const int first = rank * each;
  const int left = blocks - first;
  return {first, left < 0 ? 0 : (left < each ? left : each)};
}

// The columns of a head dim of `headDim` that `share` holds (a partial last block holds
// headDim % 64 of them; an empty share none).
constexpr int columnsHeld(int headDim, BlockShare share) {
  const int held = share.count * kBlockColumns;
  const int left = headDim - share.first * kBlockColumns;
  return share.count == 0 ? 0 : (held < left ? held : left);
}
// Output columns of consumer 0 and of consumer 1, in whole blocks, for the forward and the
// gradient kernels alike: consumer 0 computes S and what follows from it (the softmax and P; in
// the gradients also dS) besides its share of the output, and the CTA waits for it (consumer 1
// spends a tenth to a third of its time waiting for it, Nsight Compute, H100), so consumer 1 takes
// the larger half of an odd number of blocks (d 320: 128 + 192 columns).
constexpr int consumer0Columns(int ctaColumns) { return columnBlocks(ctaColumns) / 2 * kBlockColumns; }
constexpr int consumer1Columns(int ctaColumns) { return (columnBlocks(ctaColumns) + 1) / 2 * kBlockColumns; }
// The fp32 accumulator registers per thread of a warpgroup's `columns` output columns of 64 rows:
// one where it owns none (a gradient kernel's consumer 0 in a CTA of one 64-column block), which
// stays unused, as C++ has no empty arrays.
constexpr int accumulatorRegisters(int columns) { return columns > 0 ? columns / 2 : 1; }

// The forward's split of a CTA's output columns between its consumers, a launch parameter
// ("split" in tuned configs; sm90/forward_variant.cpp compiles both where they differ):
//   kEvenSplit:   as above (d 512: 256 + 256; 448: 192 + 256);
//   kSkewedSplit: consumer 1 takes about five eighths of the blocks (at most five, 160 fp32
//                 registers of O): 512 columns 192 + 320, 448: 128 + 320, 384: 128 + 256, 320:
//                 128 + 192 and 256 or fewer the same as even.
// Skewed, consumer 1's P V still runs while consumer 0 exchanges scores (in a cluster) and runs
// the softmax: consumer 1 spent 35% of its time waiting for P at d = 1024 and 27% at d = 512
// (Nsight Compute, H100, even split). Even, the two consumers release V together sooner: a CTA's K
// and V tiles each take about half of a tile's time to arrive from the L2 (the L2 was 77% busy at
// d = 512), and V is reloaded only once both are done with it. Which wins is measured (runtime
// autotune, tuned configs); by default one CTA (d_v <= 512) splits evenly and clusters skew.
constexpr int kEvenSplit = 0;
constexpr int kSkewedSplit = 1;
constexpr int defaultForwardSplit(int clusterSize) { return clusterSize == 1 ? kEvenSplit : kSkewedSplit; }

constexpr int forwardConsumer0Columns(int ctaColumns, int split) {
  const int even = consumer0Columns(ctaColumns);
  if (split == kEvenSplit) return even;
  const int blocks = 3 * columnBlocks(ctaColumns) / 8;
  const int first = (blocks < 2 ? 2 : blocks) * kBlockColumns;
  // Never more than the even split (two or three blocks: the same as even).
  return first < even ? first : even;
}
constexpr int forwardConsumer1Columns(int ctaColumns, int split) {
  return columnBlocks(ctaColumns) * kBlockColumns - forwardConsumer0Columns(ctaColumns, split);
}
// Whether the two splits give a CTA of `ctaColumns` different columns (only then is a second
// instance compiled: 384, 448 and 512 columns per CTA).
constexpr bool forwardSplitsDiffer(int ctaColumns) {
  return forwardConsumer0Columns(ctaColumns, kEvenSplit) != forwardConsumer0Columns(ctaColumns, kSkewedSplit);
}

// The mbarriers, in shared memory after the tiles.
enum Barrier : int {
  kQFull,
  kKFull0,   // kKFull0 + K buffer
  kKFull1,
  kKEmpty0,  // kKEmpty0 + K buffer: consumer 0 is done with it (S)
  kKEmpty1,
  kVFull0,   // V; where V goes in two parts (K and V not shared), consumer 0's blocks
  kVFull1,   // consumer 1's blocks of V (two parts)
  kVEmpty0,  // the consumers are done with V (two parts: consumer 0 with its blocks)
  kVEmpty1,  // consumer 1 is done with its blocks (two parts)
  kPFull0,   // kPFull0 + slot
  kPFull1,
  kPEmpty0,  // kPEmpty0 + slot
  kPEmpty1,
  kScoresNext0,  // kScoresNext0 + slot: consumer 0 completed S of the tile after the one whose P
  kScoresNext1,  // is in the slot (overlap)
  kExchangeFull,   // the other CTA's partial S has arrived (cluster of two)
  kExchangeEmpty,  // the other CTA has read the partial S this CTA sent it
  kBarrierCount
};

// Attention slices (common/slice_mask.h) as an sm90 kernel walks them; its clusters own 64-index
// tiles of one axis (the queries for the forward and dQ, the keys for dK/dV). Without slices
// (slices.slices null) cluster c owns indices [64c, 64c + 64) and `causal` masks. With them
// (`causal` is 0) cluster c < tileCount owns tiles[c], up to 64 indices of one segment of that
// axis, and the clusters after those the indices from the slices' extent on, which see nothing.
// A cluster walks the other axis in 64-index tiles: for each slice covering its segment in turn,
// from the first index that slice shows its own (slices::walkTile), masked by that slice's rule.
struct SlicedTiles {
  slices::SliceView slices;
  const slices::AxisTile* tiles;  // the owned axis' table of 64-index tiles
  int32_t tileCount;
};

// Everything but the tensor maps, whose type differs between the GPU and the emulator: what the
// host computes (src/sm90/forward_call.cpp) in either build.
struct ForwardArguments : ProblemSizes {
  void* o;
  float* lse;  // may be null
  int64_t oStrides[3];  // elements, [batch, head, row]
  int64_t lseStrides[3];
  // Split-KV (common/key_split.h): with split.splits > 1, `o` and `lse` are the fp32 partial
  // results of split 0 in the workspace (oStrides and lseStrides theirs), those of split z (grid
  // z) split.partialOStride and split.partialLseStride floats further.
  KeySplit split;
  // Of every 8 score exponentials of a row (a thread's 8 column groups), how many exp2Polynomial
  // computes instead of the special-function unit: 0..8 (FFPA_POLICY_EXP2_EMULATION).
  int32_t exp2Emulated;
  // A kernel that shares no K and V: 1 (the default) makes consumer 1's P V of tile j wait until
  // consumer 0 has completed S(j + 1), so that it runs under consumer 0's softmax of tile j + 1
  // (and in a cluster the partial's round trip) instead of beside S(j + 1) (the "overlap" launch
  // parameter; 0 in the kernels that share K and V).
  int32_t overlap;
  // The row split: 1 (the default) makes the consumers take turns issuing a tile's products
  // (FlashAttention-3's ping-pong), so that one's softmax runs while the other's products have
  // the tensor cores (the "pingpong" launch parameter; 0 in the other kernels).
  int32_t pingpong;
  // Keys per KV tile: kKeys, or in the row split kRowSplitWideKeys on the instances that have them
  // (the kernel's template argument; the layout follows it).
  int32_t tileKeys;
  SlicedTiles sliced;  // the queries' tiles

  // Shared memory: byte offsets from the first 1024-byte aligned address of dynamic shared memory.
  uint32_t qOffset;
  uint32_t kOffset;   // kBuffers buffers of kBufferBytes
  uint32_t kBufferBytes;
  int32_t kBuffers;   // 2 in clusters where shared memory holds them (K loads a tile ahead), else 1
  uint32_t vOffset;
  uint32_t vBufferBytes;  // the row split: two V buffers of this size; else one
  uint32_t pOffset;      // two P slots of one block each (none in the row split: P stays in registers)
  uint32_t statsOffset;  // row scales of the two slots, then the final 1 / row sums
  uint32_t exchangeOffset;  // the partial S received from the other CTA (cluster of two)
  uint32_t barrierOffset;
  uint32_t sharedBytes;  // to request, including up to 1023 bytes of alignment
};

// The kernel's parameter: the arguments and the tensor maps over [batch][head][row][d] with the
// caller's strides, boxes of 64 x 64 elements.
struct ForwardParams : ForwardArguments {
  TensorMap qMap;
  TensorMap kMap;
  TensorMap vMap;
};

// Hands out consecutive byte ranges of a CTA's shared memory, from 0 on (the kernels' layouts).
struct LayoutCursor {
  uint32_t end = 0;
  uint32_t take(uint32_t bytes) {
    const uint32_t at = end;
    end += bytes;
    return at;
  }
  // The dynamic shared memory to request: what was taken, and up to 1023 bytes of alignment.
  uint32_t sharedBytes() const { return end + 1024; }
};

// Fills the layout fields of `p` (headDimQk and headDimV must be set) for one CTA of the cluster
// d_v asks for; returns the dynamic shared memory the launch needs.
//
// Two K buffers in a cluster where kMaxSharedBytes holds them (a CTA's share of d_qk up to 384
// columns: d 640 and 768): there consumer 0 issues S(j + 1) as soon as P(j) is written, which
// leaves one K buffer only the exchange and the softmax of tile j to reload in, and the producer
// loads K(j + 1) a whole tile earlier into the other. One CTA keeps one K buffer: its S(j + 1)
// waits for P V(j), which K(j + 1) loads behind.
inline uint32_t forwardLayout(ForwardArguments& p) {
  const int clusterSize = clusterSizeFor(p.headDimV);
  const uint32_t qkBytes = blockShare(columnBlocks(p.headDimQk), clusterSize, 0).count * kBlockBytes;
  p.tileKeys = kKeys;
  for (p.kBuffers = clusterSize > 1 ? 2 : 1;; p.kBuffers = 1) {
    LayoutCursor at;
    p.qOffset = at.take(qkBytes);
    p.kBufferBytes = qkBytes;
    p.kOffset = at.take(p.kBuffers * qkBytes);
    p.vBufferBytes = blockShare(columnBlocks(p.headDimV), clusterSize, 0).count * kBlockBytes;
    p.vOffset = at.take(p.vBufferBytes);
    p.pOffset = at.take(2 * kBlockBytes);
    p.exchangeOffset = at.take(clusterSize > 1 ? kExchangeBytes : 0);
    p.statsOffset = at.take(3 * kRows * 4);
    p.barrierOffset = at.take(kBarrierCount * 8);
    p.sharedBytes = at.sharedBytes();
    if (p.sharedBytes <= kMaxSharedBytes || p.kBuffers == 1) return p.sharedBytes;
  }
}

// The row split's layout (forward_row_split_kernel.cuh) in `p` (headDimQk and headDimV set) for
// KV tiles of `keys` keys (kKeys or kRowSplitWideKeys): Q of both row tiles, K in two buffers
// where kMaxSharedBytes holds them (else one) and V in two (P stays in the consumers'
// registers); returns the dynamic shared memory the launch needs (above kMaxSharedBytes where
// even one K buffer does not fit: the kernel cannot serve the problem). A K or V tile is stored
// as 64-column blocks of `keys` rows (keys / 64 TMA boxes stacked), the B operand wgmma reads.
inline uint32_t forwardRowSplitLayout(ForwardArguments& p, int keys = kKeys) {
  const uint32_t qkBytes = columnBlocks(p.headDimQk) * kBlockBytes;
  const uint32_t keyBoxes = uint32_t(keys / kKeys);
  p.tileKeys = keys;
  for (p.kBuffers = 2;; p.kBuffers = 1) {
    LayoutCursor at;
    p.qOffset = at.take(kRowSplitRows / kRows * qkBytes);
    p.kBufferBytes = keyBoxes * qkBytes;
    p.kOffset = at.take(p.kBuffers * p.kBufferBytes);
    p.vBufferBytes = keyBoxes * columnBlocks(p.headDimV) * kBlockBytes;
    p.vOffset = at.take(2 * p.vBufferBytes);
    p.pOffset = at.take(0);
    p.exchangeOffset = at.take(0);
    p.statsOffset = at.take(0);
    p.barrierOffset = at.take(kBarrierCount * 8);
    p.sharedBytes = at.sharedBytes();
    if (p.sharedBytes <= kMaxSharedBytes || p.kBuffers == 1) return p.sharedBytes;
  }
}

}  // namespace ffpa::sm90
