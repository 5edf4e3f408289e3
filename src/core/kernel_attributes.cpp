#include "core/kernel_attributes.h"

#include "core/cuda_check.h"
#include "core/error.h"

#include <cuda_runtime.h>

namespace ffpa {

void allowDynamicSharedMemory(const void* kernel, const DeviceInfo& device, const char* what) {
  checkCuda(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 static_cast<int>(device.sharedMemPerBlockOptin)),
            cat("cudaFuncSetAttribute(", what, ")").c_str(), FFPA_STATUS_NOT_SUPPORTED_ARCH_MISMATCH);
}

}  // namespace ffpa
