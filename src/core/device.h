// The device a handle is bound to: what the planner needs to know about it.
#pragma once

#include <ffpa/ffpa.h>

#include <cstdint>
#include <string>

namespace ffpa {

struct DeviceInfo {
  int32_t ordinal = 0;
  int32_t smVersion = 0;  // major * 10 + minor
  int32_t smCount = 0;
  int64_t sharedMemPerBlockOptin = 0;
  int64_t sharedMemPerSm = 0;
  int64_t globalMemBytes = 0;
  std::string name;
};

constexpr int32_t kMinSmVersion = 80;

// The current CUDA device. Throws NOT_INITIALIZED_NO_DEVICE (no GPU or driver) or
// NOT_SUPPORTED_ARCH_MISMATCH (below sm_80) with CUDA's own explanation.
DeviceInfo queryCurrentDevice();

// A described device (ffpaCreateForDevice); every field is checked.
DeviceInfo deviceFromDesc(const ffpaDeviceDesc_t* desc);
void fillDeviceDesc(const DeviceInfo& device, ffpaDeviceDesc_t* desc);

// Leaves the calling thread's current device as it was, whatever happens in between, so that
// libffpa calls never change the caller's CUDA state.
class ScopedDevice {
 public:
  explicit ScopedDevice(int32_t ordinal);
  ~ScopedDevice();
  ScopedDevice(const ScopedDevice&) = delete;
  ScopedDevice& operator=(const ScopedDevice&) = delete;

 private:
  int previous_ = -1;
};

}  // namespace ffpa
