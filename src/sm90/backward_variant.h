// The sm90 backward as a kernel variant of the registry: the mma.sync row-statistics and dK/dV
// kernels (src/sm80/backward_resolve.h) around the sm90 dQ kernel (query_gradient_call.h). With
// FFPA_POLICY_HOPPER_KERNELS on, on compute capability 9.0 it comes before the sm80 backward for
// the problems the dQ kernel serves, unless a knob only the mma.sync kernels have is set.
#pragma once

#include "core/kernel_registry.h"
#include "sm90/query_gradient_call.h"

#include <ffpa/ffpa.h>

#include <string>

namespace ffpa::sm90 {

constexpr const char* kBackwardVariantName = "sm90.backward";

// "sm90.backward.bf16.d512.cluster2": the variant, the element type, the dQ instance's d_qk and,
// for a cluster of two, its size.
std::string backwardInstanceName(ffpaDataType_t dtype, QueryGradientShape shape);

void registerBackwardVariant(KernelRegistry& registry);

}  // namespace ffpa::sm90
