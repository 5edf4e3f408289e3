// The TMA descriptions every sm90 kernel loads its operands through: one rank-4 map per tensor
// over [batch][head][row][d] with the caller's strides, boxes of 64 rows x 64 columns. Plain C++,
// shared by the forward and the backward's call descriptions.
#pragma once

#include "core/plan.h"
#include "core/problem.h"
#include "sm90/tensor_map.h"

#include <cstdint>
#include <string>

namespace ffpa::sm90 {

// The map of a tensor of 2-byte elements with `dim` columns, `rows` rows, `heads` heads and
// `batch` batches, at `base`, with element strides `strides` ([B, H, N, D], D unit).
TensorMapSpec rowMap(const void* base, int64_t dim, int64_t rows, int64_t heads, int64_t batch,
                     const Strides& strides);

// The maps of the backward's Q, K, V and dO (the gradient kernels' operands).
struct GradientMaps {
  TensorMapSpec q, k, v, dO;
};
GradientMaps gradientMaps(const AttentionProblem& problem, const TensorArgs& tensors);

// What the arguments of both gradient kernels carry alike: the problem's sizes (per-batch key
// lengths too), the softmax scale, the row statistics and the grid layout.
template <class GradientArguments>
void copyGradientSizes(const AttentionProblem& problem, const float* rowStats, bool gridDnhb, GradientArguments& a) {
  copyProblemSizes(problem, a);
  a.rowStats = rowStats;
  a.scale = static_cast<float>(problem.scale);
  a.gridDnhb = gridDnhb;
}

// Whether TMA can address such a tensor: a unit stride on d, and byte strides (of the dimensions
// with more than one element) that are positive multiples of 16 below 2^40.
bool rowMapAddressable(const Strides& strides, int64_t dim, int64_t rows, int64_t heads, int64_t batch);

// Why the sm90 kernels cannot take `problem` whole: sizes past their 32-bit fields (empty when
// they can).
std::string sizeRefusal(const AttentionProblem& problem);

// Why the sm90 gradient kernels cannot load the backward's Q, K, V and dO (sizeRefusal, or
// strides TMA cannot address); empty when they can.
std::string gradientOperandsRefusal(const AttentionProblem& problem);

}  // namespace ffpa::sm90
