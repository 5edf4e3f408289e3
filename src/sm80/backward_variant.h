// The sm80 backward kernels as a kernel variant of the registry (see backward_resolve.h).
#pragma once

#include "core/kernel_registry.h"
#include "sm80/backward_instances.h"

#include <string>

namespace ffpa::sm80 {

// Every compiled backward instance.
const BackwardInstanceList& backwardInstances();

// "sm80.backward.f16.d512".
std::string backwardInstanceName(const BackwardInstance& instance);

void registerBackwardVariant(KernelRegistry& registry);

constexpr const char* kBackwardVariantName = "sm80.backward";

}  // namespace ffpa::sm80
