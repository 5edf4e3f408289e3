// How the sm90 forward kernel (kernels/sm90) serves a problem: whether it can, the instance it
// needs, and the arguments and tensor-map descriptions of one call. Plain C++ calling nothing on
// the device, shared by the planner and the tests that run the kernel on the CPU warp emulator;
// turning the descriptions into CUtensorMaps is tensor_map.cpp's job, on the GPU path only.
#pragma once

#include "core/plan.h"
#include "core/key_splits.h"
#include "core/problem.h"
#include "sm90/forward_params.h"
#include "sm90/tensor_map.h"

#include <cstdint>
#include <string>

namespace ffpa::sm90 {

// Why the kernel cannot compute `problem` (empty when it can): d_v outside 65..1024 or not a
// multiple of 16, d_qk above maxHeadDimQk (576 up to d_v = 512, shared memory), strides TMA
// cannot address, lengths beyond 2^31.
std::string forwardRefusal(const AttentionProblem& problem);

// Why the row split (kernels/sm90/forward_row_split_kernel.cuh: 128 rows per CTA, each consumer
// 64 of them with all of O's columns) cannot compute `problem` (empty when it can): d_v above 256
// or head dims not multiples of 16, attention slices, d_qk too large for its shared memory, and
// what forwardRefusal says of the element type, sizes and strides.
std::string rowSplitRefusal(const AttentionProblem& problem);

// Whether the planner takes the row split for `problem` when nothing asks otherwise: where it
// serves the problem, with two K buffers or as the only arrangement that serves it (d_v up to 64).
bool rowSplitByDefault(const AttentionProblem& problem);

// The d_v of the row split's instance that serves `headDimV` (up to 256): the next multiple of 64.
int rowSplitHeadDimV(int64_t headDimV);

// The layout (shared memory, K buffers) of the instance for `problem`'s head dims: the row split's
// (forwardRowSplitLayout, KV tiles of `tileKeys` keys) or the split of the columns' (forwardLayout).
ForwardArguments forwardLayoutFor(const AttentionProblem& problem, bool rowSplit, int tileKeys = kKeys);

// Whether the row split serves `problem` with KV tiles of kRowSplitWideKeys keys: d_v up to
// kRowSplitWideMaxHeadDimV, and d_qk up to what shared memory holds (with one K buffer, 320 at d_v
// 128 and 384 at d_v 64).
bool rowSplitWideKeysServe(const AttentionProblem& problem);

// The row split's keys per KV tile when nothing asks otherwise (the "tile_keys" launch
// parameter): kRowSplitWideKeys where they serve with two K buffers (d_qk up to 192 at d_v 128,
// 256 at d_v 64), else kKeys.
int rowSplitTileKeysByDefault(const AttentionProblem& problem);

// The d_v of the instance that serves `headDimV` (65..1024): the next multiple of 64 up to 512
// (one CTA; 128 at least), of 128 above (a cluster of two CTAs of whole 64-column blocks each).
int instanceHeadDimV(int64_t headDimV);

// How many CTAs of adjacent row tiles share each K and V tile for `problem` (forward_params.h):
// kKvSharingCtas when `multicast` (FFPA_POLICY_HOPPER_KV_MULTICAST) asks for it and the problem
// allows it (d_v <= 512, no attention slices, at least two row tiles), else 1.
int kvSharingFor(const AttentionProblem& problem, bool multicast);

// The grid's x extent for `problem`: CTAs per cluster times the 64-row tiles of the queries (with
// `kvSharing` CTAs sharing K and V, the row tiles rounded up to a multiple of it).
int64_t gridBlocksX(const AttentionProblem& problem, int kvSharing = 1);

// The same for either arrangement: with the row split, a CTA per 128 rows.
int64_t forwardGridBlocksX(const AttentionProblem& problem, int kvSharing, bool rowSplit);

struct ForwardCall {
  ForwardArguments arguments;  // layout filled
  TensorMapSpec q, k, v;
  int clusterSize;  // CTAs per cluster along x
  int kvSharing;    // of them, sharing K and V (1: none)
  uint32_t grid[3];
};

// Whether consumer 1 may run a tile behind consumer 0 for `problem` with `kvSharing`
// (ForwardArguments::overlap, the "overlap" launch parameter): a kernel that shares no K and V
// (one CTA or a cluster that splits the head dims).
bool overlapApplies(const AttentionProblem& problem, int kvSharing);

// The arguments of one call. Pointers are used as they are (device pointers, or host pointers on
// the emulator). `exp2Emulated`: FFPA_POLICY_EXP2_EMULATION (0..8); `kvSharing`: kvSharingFor();
// `overlap`: ForwardArguments::overlap (0 where overlapApplies is false); `rowSplit`: the row
// split's kernel (rowSplitRefusal empty; kvSharing 1 and overlap 0), else the split of the columns;
// `pingpong`: ForwardArguments::pingpong (the row split's only); `tileKeys`: keys per KV tile (the
// row split's kRowSplitWideKeys where rowSplitWideKeysServe, else kKeys); `split`: split-KV
// (grid z; O and LSE are then the partial results in `workspace`, split.bytes).
ForwardCall describeForwardCall(const AttentionProblem& problem, const TensorArgs& tensors, bool gridDnhb,
                                int exp2Emulated = 0, int kvSharing = 1, int overlap = 0, bool rowSplit = false,
                                int pingpong = 0, int tileKeys = kKeys, const KeySplitPlan& split = {},
                                void* workspace = nullptr);

}  // namespace ffpa::sm90
