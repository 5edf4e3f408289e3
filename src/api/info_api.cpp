// Versions, build information, status names, the thread-local message, the log sink.
#include "api/boundary.h"

#include "ffpa_build_config.h"


extern "C" {

FFPA_API uint32_t ffpaGetVersion(void) { return FFPA_VERSION; }

FFPA_API const char* ffpaGetBuildInfo(void) {
  return "libffpa " FFPA_BUILD_VERSION " (CUDA " FFPA_BUILD_CUDA_VERSION "; architectures "
         FFPA_BUILD_ARCHS "; head dims " FFPA_BUILD_HEADDIMS "; stages " FFPA_BUILD_STAGES
         "; kernel set " FFPA_BUILD_KERNEL_SET "; NCCL " FFPA_BUILD_NCCL ")";
}

FFPA_API const char* ffpaGetErrorString(ffpaStatus_t status) { return ffpa::statusName(status); }

FFPA_API size_t ffpaGetLastErrorString(char* buffer, size_t size) {
  return ffpa::copyText(ffpa::lastErrorMessage(), buffer, size);
}

FFPA_API ffpaStatus_t ffpaSetLogCallback(ffpaLogCallback_t callback, void* userData) {
  return ffpa::guarded("ffpaSetLogCallback", [&] { ffpa::setLogCallback(callback, userData); });
}

}  // extern "C"
