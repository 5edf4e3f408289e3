#include "session.h"

#include "library_call.h"

#include <cstring>

namespace ffpa_info {
namespace {

struct Preset {
  const char* name;
  const char* gpu;
  int32_t sm;
  int32_t sms;
  int64_t smemOptinKiB;
  int64_t smemPerSmKiB;
  int64_t memoryGiB;
};

constexpr Preset kPresets[] = {
    {"sm80", "NVIDIA A100-SXM4-40GB (described)", 80, 108, 163, 164, 40},
    {"sm86", "NVIDIA GeForce RTX 3090 (described)", 86, 82, 99, 100, 24},
    {"sm89", "NVIDIA GeForce RTX 4090 (described)", 89, 128, 99, 100, 24},
    {"sm90", "NVIDIA H100 80GB HBM3 (described)", 90, 132, 227, 228, 80},
    {"sm100", "NVIDIA B200 (described)", 100, 148, 227, 228, 180},
    {"sm120", "NVIDIA GeForce RTX 5090 (described)", 120, 170, 99, 100, 32},
};

bool noUsableDevice(ffpaStatus_t status) {
  return FFPA_STATUS_CATEGORY(status) == FFPA_STATUS_NOT_INITIALIZED ||
         status == FFPA_STATUS_NOT_SUPPORTED_ARCH_MISMATCH;
}

}  // namespace

std::optional<ffpaDeviceDesc_t> describedDevice(const std::string& name) {
  for (const Preset& p : kPresets) {
    if (name != p.name) continue;
    ffpaDeviceDesc_t d{};
    d.structSize = sizeof d;
    d.smVersion = p.sm;
    d.smCount = p.sms;
    d.sharedMemPerBlockOptin = p.smemOptinKiB * 1024;
    d.sharedMemPerSm = p.smemPerSmKiB * 1024;
    d.globalMemBytes = p.memoryGiB << 30;
    std::strncpy(d.name, p.gpu, sizeof d.name - 1);
    return d;
  }
  return std::nullopt;
}

const char* describedDeviceNames() { return "sm80, sm86, sm89, sm90, sm100, sm120"; }

Session::Session(const std::optional<ffpaDeviceDesc_t>& described) {
  if (!described) {
    const ffpaStatus_t status = ffpaCreate(&handle_);
    if (status == FFPA_STATUS_SUCCESS) {
      real_ = true;
      return;
    }
    if (!noUsableDevice(status)) throw LibraryCallError("ffpaCreate", status);
    whyDescribed_ = describeFailure(status);
  }
  const ffpaDeviceDesc_t device = described ? *described : *describedDevice("sm90");
  check(ffpaCreateForDevice(&handle_, &device), "ffpaCreateForDevice");
}

Session::~Session() { ffpaDestroy(handle_); }

}  // namespace ffpa_info
