// The cuBLASLt reference path as two kernel variants (forward, backward) of the registry: the
// lowest priority, serving every problem the API accepts, and the only path for fp32 tensors or
// when FFPA_POLICY_REFERENCE_BACKEND is set.
#pragma once

#include "core/kernel_registry.h"

namespace ffpa {

void registerReferenceVariants(KernelRegistry& registry);

namespace reference {
constexpr const char* kForwardName = "reference.cublaslt.forward";
constexpr const char* kBackwardName = "reference.cublaslt.backward";
}  // namespace reference

}  // namespace ffpa
