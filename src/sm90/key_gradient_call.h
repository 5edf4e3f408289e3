// How the sm90 dK/dV kernel (kernels/sm90/key_gradient_kernel.cuh) serves a backward problem:
// whether it can, the instance it needs, and the arguments and tensor-map descriptions of one
// call. Plain C++ calling nothing on the device, shared by the planner (backward_variant.cpp)
// and the emulator's tests.
#pragma once

#include "core/plan.h"
#include "core/problem.h"
#include "sm90/key_gradient_params.h"
#include "sm90/row_maps.h"

#include <cstdint>
#include <string>

namespace ffpa::sm90 {

// Why the kernel cannot compute dK and dV of `problem` (empty when it can): not fp16 / bf16, the
// larger head dim outside 16..1024, head dims not multiples of 16, sizes beyond 2^31, or strides
// of Q, K, V or dO that TMA cannot address.
std::string keyGradientRefusal(const AttentionProblem& problem);

// The instance that serves `problem`: its head dim (keyGradientInstanceDim) and cluster size
// (keyGradientClusterSize).
struct KeyGradientShape {
  int headDim;
  int clusterSize;
};
KeyGradientShape keyGradientShape(const AttentionProblem& problem);

// The shared-memory layout of one CTA of the instance for `problem` (the layout fields and
// qBuffers set), and the dynamic shared memory it needs.
KeyGradientArguments keyGradientLayoutOf(const AttentionProblem& problem);
uint32_t keyGradientSharedBytes(const AttentionProblem& problem);

struct KeyGradientCall {
  KeyGradientArguments arguments;  // layout filled
  GradientMaps maps;
  KeyGradientShape shape;  // keyGradientShape of the problem
  uint32_t grid[3];
};

// The arguments of one call; `rowStats` is the workspace the row-statistics kernel fills first.
KeyGradientCall describeKeyGradientCall(const AttentionProblem& problem, const TensorArgs& tensors,
                                        const float* rowStats, bool gridDnhb);

}  // namespace ffpa::sm90
