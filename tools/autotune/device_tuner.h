// The GPU side of ffpa-autotune: the machine's devices, the build's head dims, and one task tuned
// through the library itself.
#pragma once

#include "task_grid.h"
#include "tuning/tuned_config.h"

#include <cstdint>
#include <string>
#include <vector>

namespace ffpa_autotune {

struct DeviceSummary {
  std::string name;
  std::string computeCapability;  // "9.0"
  int64_t memoryBytes = 0;
};

// The CUDA devices visible (0 without a usable GPU or driver).
int deviceCount();
// Throws std::runtime_error naming the device when it cannot be queried.
DeviceSummary describeDevice(int device);

// The head dims this build compiles kernels for (ffpaGetBuildInfo).
std::vector<int64_t> compiledHeadDims();

// Tunes `task` on GPU `device`: a handle there with runtime autotune in `mode` and the persisted
// configs skipped (so that the defaults timed are the built-in ones), the task's descriptors, and
// a workspace query, which plans and so tunes. Returns the entry the handle recorded; throws
// std::runtime_error with the library's message when a call fails.
ffpa::tuning::TunedEntry tuneOnDevice(const Task& task, int device, const std::string& mode);

}  // namespace ffpa_autotune
