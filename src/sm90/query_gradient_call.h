// How the sm90 dQ kernel (kernels/sm90/query_gradient_kernel.cuh) serves a backward problem:
// whether it can, the instance it needs, and the arguments and tensor-map descriptions of one
// call. Plain C++ calling nothing on the device, shared by the planner (backward_variant.cpp)
// and the emulator's tests.
#pragma once

#include "core/plan.h"
#include "core/problem.h"
#include "sm90/query_gradient_params.h"
#include "sm90/row_maps.h"

#include <cstdint>
#include <string>

namespace ffpa::sm90 {

// Why the kernel cannot compute dQ of `problem` (empty when it can): not fp16 / bf16, d_qk
// outside 16..1024, d_v above 1024, head dims not multiples of 16, sizes beyond 2^31, or strides
// of Q, K, V or dO that TMA cannot address.
std::string queryGradientRefusal(const AttentionProblem& problem);

// The instance that serves `problem`: its d_qk and cluster size.
struct QueryGradientShape {
  int headDimQk;
  int clusterSize;
};
QueryGradientShape queryGradientShape(const AttentionProblem& problem);

// The shared-memory layout of one CTA of the instance for `problem` (the layout fields and
// kBuffers set), and the dynamic shared memory it needs.
QueryGradientArguments queryGradientLayoutOf(const AttentionProblem& problem);
uint32_t queryGradientSharedBytes(const AttentionProblem& problem);

struct QueryGradientCall {
  QueryGradientArguments arguments;  // layout filled
  GradientMaps maps;
  uint32_t grid[3];
};

// The arguments of one call; `rowStats` is the workspace the row-statistics kernel fills first.
QueryGradientCall describeQueryGradientCall(const AttentionProblem& problem, const TensorArgs& tensors,
                                            const float* rowStats, bool gridDnhb);

}  // namespace ffpa::sm90
