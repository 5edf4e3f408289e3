/* The public header compiles as strict C11 without any CUDA header, and its types have the
 * fixed sizes foreign-function bindings rely on. */
#include <ffpa/ffpa.h>

#include <stddef.h>
#include <stdio.h>

_Static_assert(sizeof(ffpaStatus_t) == 4, "enums are 32-bit");
_Static_assert(sizeof(ffpaPolicyKnob_t) == 4, "enums are 32-bit");
_Static_assert(sizeof(ffpaDataType_t) == 4, "enums are 32-bit");
_Static_assert(sizeof(ffpaCausalMode_t) == 4, "enums are 32-bit");
_Static_assert(sizeof(ffpaDeviceDesc_t) == 296, "ffpaDeviceDesc_t layout");
_Static_assert(offsetof(ffpaDeviceDesc_t, sharedMemPerBlockOptin) == 16, "ffpaDeviceDesc_t layout");
_Static_assert(sizeof(ffpaPlanCacheStats_t) == 48, "ffpaPlanCacheStats_t layout");
_Static_assert(offsetof(ffpaPlanCacheStats_t, hits) == 8, "ffpaPlanCacheStats_t layout");
_Static_assert(sizeof(ffpaPolicyInfo_t) == 72, "ffpaPolicyInfo_t layout");
_Static_assert(FFPA_VERSION == FFPA_VERSION_MAJOR * 10000 + FFPA_VERSION_MINOR * 100 + FFPA_VERSION_PATCH,
               "version encoding");
_Static_assert(FFPA_STATUS_CATEGORY(FFPA_STATUS_BAD_PARAM_STRIDE) == FFPA_STATUS_BAD_PARAM, "categories");

int main(void) {
  /* The stream type is usable without cuda_runtime.h. */
  ffpaStream_t stream = NULL;
  ffpaHandle_t handle = NULL;
  int failed = (stream != NULL) + (handle != NULL) + (ffpaGetVersion() != FFPA_VERSION);
  printf("[doctest] test cases: 1 | %d passed | %d failed | 0 skipped\n", !failed, failed != 0);
  return failed != 0;
}
