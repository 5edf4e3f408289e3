// CUDA function attributes the fast kernels need before their first launch on a device.
#pragma once

#include "core/device.h"

namespace ffpa {

// Lets `kernel` launch with up to the device's opt-in dynamic shared memory per block. The
// attribute belongs to the function, not to a plan: setting it to the largest value once covers
// every plan of the kernel (a plan's own, smaller size would break the launches of plans that
// need more). Throws ffpa::Error naming `what` when the device refuses: NOT_SUPPORTED_ARCH_MISMATCH
// when the library holds no image of the kernel for the device, else EXECUTION_FAILED_CUDA.
void allowDynamicSharedMemory(const void* kernel, const DeviceInfo& device, const char* what);

}  // namespace ffpa
