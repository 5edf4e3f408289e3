// The device the core tests plan for: the limits of an H100 (compute capability 9.0, 132 SMs,
// 227 KiB of shared memory per block), with no CUDA device behind it; and the built-in variants
// by name.
#pragma once

#include "core/device.h"
#include "core/kernel_registry.h"

#include <algorithm>
#include <string>

namespace ffpa_test {

inline ffpa::DeviceInfo hopper() {
  ffpa::DeviceInfo d;
  d.smVersion = 90;
  d.smCount = 132;
  d.sharedMemPerBlockOptin = 227 * 1024;
  d.sharedMemPerSm = 228 * 1024;
  d.globalMemBytes = int64_t{80} << 30;
  d.name = "test";
  return d;
}

// The built-in kernel variant of that name, or null.
inline const ffpa::KernelVariant* builtinVariant(const std::string& name) {
  const ffpa::KernelRegistry& registry = ffpa::builtinKernels();
  const auto found = std::find_if(registry.variants().begin(), registry.variants().end(),
                                  [&](const ffpa::KernelVariant& v) { return v.name == name; });
  return found == registry.variants().end() ? nullptr : &*found;
}

}  // namespace ffpa_test
