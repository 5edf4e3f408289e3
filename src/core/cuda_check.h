// CUDA runtime and cuBLASLt failures as ffpa::Error, with the library's own error names.
#pragma once

#include "core/error.h"

#include <cublasLt.h>
#include <cuda_runtime.h>

namespace ffpa {

inline void checkCuda(cudaError_t status, const char* what,
                      ffpaStatus_t failure = FFPA_STATUS_EXECUTION_FAILED_CUDA) {
  if (status == cudaSuccess) return;
  cudaGetLastError();  // clear the non-sticky error so the caller's next CUDA call is not blamed
  fail(failure, cat(what, " failed with ", cudaGetErrorName(status), " (", cudaGetErrorString(status), ")"));
}

// Checks that the kernels just enqueued were launched (bad configuration, missing image, ...).
inline void checkLaunch(const char* kernel) { checkCuda(cudaGetLastError(), kernel); }

inline void checkCublas(cublasStatus_t status, const char* what,
                        ffpaStatus_t failure = FFPA_STATUS_EXECUTION_FAILED_CUBLAS) {
  if (status == CUBLAS_STATUS_SUCCESS) return;
  fail(failure, cat(what, " failed with ", cublasLtGetStatusName(status), " (",
                    cublasLtGetStatusString(status), ")"));
}

}  // namespace ffpa
