// How a call of an sm90 kernel tiles the axis its clusters own (the queries for the forward and
// dQ, the keys for dK/dV) into 64-index tiles, with attention slices as kernels/sm90/
// forward_params.h (SlicedTiles) describes. Plain C++, shared by the forward's and the gradient
// kernels' call descriptions.
#pragma once

#include "core/plan.h"
#include "core/problem.h"
#include "sm90/forward_params.h"

#include <cstdint>

namespace ffpa::sm90 {

enum class OwnedAxis { queries, keys };

// The CTAs along x of a grid of clusters of `clusterSize` CTAs, one per tile of `axis`: the
// ceil(length / 64) tiles, or with slices (problem.slices not null, read by the kernel through
// tensors.slices: the device view, or the host view on the emulator) the tiles of the slices'
// segments and then those past their extent, whose table `sliced` receives. Without slices
// `sliced` is left as it is.
int64_t ctasAlong(const AttentionProblem& problem, const TensorArgs& tensors, OwnedAxis axis, int clusterSize,
                  SlicedTiles& sliced);

}  // namespace ffpa::sm90
