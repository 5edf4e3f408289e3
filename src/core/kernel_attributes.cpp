#include "core/kernel_attributes.h"

#include "core/cuda_check.h"
#include "core/error.h"

#include <cuda_runtime.h>

namespace ffpa {

void allowDynamicSharedMemory(const void* kernel, const DeviceInfo& device, const char* what) {
  const cudaError_t status = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                  static_cast<int>(device.sharedMemPerBlockOptin));
  // No image of the kernel for this device means the library was built for other architectures;
  // any other failure is the runtime's.
  const bool noImage = status == cudaErrorNoKernelImageForDevice || status == cudaErrorInvalidDeviceFunction;
  checkCuda(status, cat("cudaFuncSetAttribute(", what, ")").c_str(),
            noImage ? FFPA_STATUS_NOT_SUPPORTED_ARCH_MISMATCH : FFPA_STATUS_EXECUTION_FAILED_CUDA);
}

}  // namespace ffpa
