// The main() of the device test suites. Without a usable GPU the suite is skipped: doctest still
// runs with every case filtered out, so its summary reports how many cases were skipped, and the
// process exits 77, which Meson reports as SKIP. A device suite never passes without a GPU.
// FFPA_TEST_TRACE: see trace_listener.h.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include "trace_listener.h"

#include <cuda_runtime.h>

#include <cstdio>

int main(int argc, char** argv) {
  doctest::Context context(argc, argv);
  int devices = 0;
  const cudaError_t status = cudaGetDeviceCount(&devices);
  if (status != cudaSuccess || devices == 0) {
    std::printf("no usable CUDA GPU (%s): every device test case is skipped\n",
                status != cudaSuccess ? cudaGetErrorName(status) : "0 devices");
    context.addFilter("test-case-exclude", "*");
    context.run();
    return 77;
  }
  return context.run();
}
