// CUDA runtime and cuBLASLt failures as ffpa::Error, with the library's own error names.
#pragma once

#include "core/error.h"
#include "core/fault_injection.h"

#include <cublasLt.h>
#include <cuda_runtime.h>

namespace ffpa {

inline void checkCuda(cudaError_t status, const char* what,
                      ffpaStatus_t failure = FFPA_STATUS_EXECUTION_FAILED_CUDA) {
  if (status == cudaSuccess) {
    if (!testing::injectedFailureDue()) return;
    status = cudaErrorInvalidValue;  // a non-sticky error, as a rejected call reports
  } else {
    cudaGetLastError();  // our call set the thread's last error too: clear it, the status carries it
  }
  fail(failure, cat(what, " failed with ", cudaGetErrorName(status), " (", cudaGetErrorString(status), ")"));
}

inline void checkCublas(cublasStatus_t status, const char* what,
                        ffpaStatus_t failure = FFPA_STATUS_EXECUTION_FAILED_CUBLAS) {
  if (status == CUBLAS_STATUS_SUCCESS) {
    if (!testing::injectedFailureDue()) return;
    status = CUBLAS_STATUS_EXECUTION_FAILED;
  }
  fail(failure, cat(what, " failed with ", cublasLtGetStatusName(status), " (",
                    cublasLtGetStatusString(status), ")"));
}

}  // namespace ffpa
