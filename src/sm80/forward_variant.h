// The sm80 forward kernels as a kernel variant of the registry: which compiled instance serves a
// problem under the policies, with which pipeline and shared-memory layout, and why not when none.
#pragma once

#include "core/kernel_registry.h"
#include "sm80/forward_instances.h"

#include <string>

namespace ffpa::sm80 {

// Every compiled forward instance, one entry per distinct kernel.
const ForwardInstanceList& forwardInstances();

// "sm80.forward.f16.d512.acc_f32", with ".pipe_kv", ".q_s2r", ".v_s2r" for those variants.
std::string instanceName(const ForwardInstance& instance);

void registerForwardVariant(KernelRegistry& registry);

constexpr const char* kForwardVariantName = "sm80.forward";

}  // namespace ffpa::sm80
