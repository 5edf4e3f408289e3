// The sm90 backward as a kernel variant of the registry: the mma.sync row-statistics kernel
// (src/sm80/backward_resolve.h), then the sm90 dQ kernel (query_gradient_call.h) and the sm90
// dK/dV kernel (key_gradient_call.h) where each serves the problem, the mma.sync ones where not.
// With FFPA_POLICY_HOPPER_KERNELS on, on compute capability 9.0 it comes before the sm80 backward
// for the problems at least one sm90 gradient kernel serves, unless a knob only the mma.sync
// kernels have is set.
#pragma once

#include "core/kernel_registry.h"
#include "sm90/key_gradient_call.h"
#include "sm90/query_gradient_call.h"

#include <ffpa/ffpa.h>

#include <optional>
#include <string>

namespace ffpa::sm90 {

constexpr const char* kBackwardVariantName = "sm90.backward";

// "sm90.backward.bf16.dq512x2.dkdv512x2": the variant, the element type, and the sm90 kernels
// that run: the dQ instance's d_qk ("x2", "x4": a cluster of two or four) and the dK/dV
// instance's head dim and cluster size; a kernel left out is the mma.sync one.
std::string backwardInstanceName(ffpaDataType_t dtype, std::optional<QueryGradientShape> query,
                                 std::optional<KeyGradientShape> key);

void registerBackwardVariant(KernelRegistry& registry);

}  // namespace ffpa::sm90
