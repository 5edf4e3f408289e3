// The device the core tests plan for: the limits of an H100 (compute capability 9.0, 132 SMs,
// 227 KiB of shared memory per block), with no CUDA device behind it.
#pragma once

#include "core/device.h"

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

}  // namespace ffpa_test
