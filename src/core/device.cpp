#include "core/device.h"

#include "core/cuda_check.h"
#include "core/error.h"

#include <cuda_runtime.h>

#include <cstring>

namespace ffpa {
namespace {

constexpr int64_t kMinSharedMemOptin = 48 * 1024;
constexpr int64_t kMaxSharedMem = 16 * 1024 * 1024;

}  // namespace

DeviceInfo queryCurrentDevice() {
  int count = 0;
  const cudaError_t countStatus = cudaGetDeviceCount(&count);
  if (countStatus != cudaSuccess) {
    cudaGetLastError();  // leave no error behind in the caller's CUDA state
    fail(FFPA_STATUS_NOT_INITIALIZED_NO_DEVICE,
         cat("no usable CUDA device: cudaGetDeviceCount failed with ", cudaGetErrorName(countStatus),
             " (", cudaGetErrorString(countStatus), ")"));
  }
  require(count > 0, FFPA_STATUS_NOT_INITIALIZED_NO_DEVICE, "no usable CUDA device: none is visible");

  DeviceInfo info;
  int ordinal = 0;
  checkCuda(cudaGetDevice(&ordinal), "cudaGetDevice", FFPA_STATUS_NOT_INITIALIZED_NO_DEVICE);
  cudaDeviceProp props{};
  checkCuda(cudaGetDeviceProperties(&props, ordinal), "cudaGetDeviceProperties",
            FFPA_STATUS_NOT_INITIALIZED_NO_DEVICE);
  info.ordinal = ordinal;
  info.smVersion = props.major * 10 + props.minor;
  info.smCount = props.multiProcessorCount;
  info.sharedMemPerBlockOptin = static_cast<int64_t>(props.sharedMemPerBlockOptin);
  info.sharedMemPerSm = static_cast<int64_t>(props.sharedMemPerMultiprocessor);
  info.globalMemBytes = static_cast<int64_t>(props.totalGlobalMem);
  info.name = props.name;
  require(info.smVersion >= kMinSmVersion, FFPA_STATUS_NOT_SUPPORTED_ARCH_MISMATCH, "device ",
          ordinal, " (", info.name, ") has compute capability ", props.major, ".", props.minor,
          "; libffpa needs 8.0 or newer");
  return info;
}

DeviceInfo deviceFromDesc(const ffpaDeviceDesc_t* desc) {
  requireNotNull(desc, "device");
  require(desc->structSize >= sizeof(ffpaDeviceDesc_t), FFPA_STATUS_BAD_PARAM_SIZE_INSUFFICIENT,
          "device->structSize is ", desc->structSize, "; set it to sizeof(ffpaDeviceDesc_t) = ",
          sizeof(ffpaDeviceDesc_t));
  require(desc->ordinal >= 0, FFPA_STATUS_BAD_PARAM_OUT_OF_BOUND, "device->ordinal is ",
          desc->ordinal, "; allowed: >= 0");
  require(desc->smVersion >= kMinSmVersion, FFPA_STATUS_NOT_SUPPORTED_ARCH_MISMATCH,
          "device->smVersion is ", desc->smVersion, "; libffpa needs 80 (compute capability 8.0) or newer");
  require(desc->smVersion <= 999, FFPA_STATUS_BAD_PARAM_OUT_OF_BOUND, "device->smVersion is ",
          desc->smVersion, "; allowed: major * 10 + minor, from 80 to 999");
  require(desc->smCount >= 1 && desc->smCount <= 65536, FFPA_STATUS_BAD_PARAM_OUT_OF_BOUND,
          "device->smCount is ", desc->smCount, "; allowed: 1 to 65536");
  require(desc->sharedMemPerBlockOptin >= kMinSharedMemOptin &&
              desc->sharedMemPerBlockOptin <= kMaxSharedMem,
          FFPA_STATUS_BAD_PARAM_OUT_OF_BOUND, "device->sharedMemPerBlockOptin is ",
          desc->sharedMemPerBlockOptin, "; allowed: ", kMinSharedMemOptin, " to ", kMaxSharedMem);
  require(desc->sharedMemPerSm >= desc->sharedMemPerBlockOptin && desc->sharedMemPerSm <= kMaxSharedMem,
          FFPA_STATUS_BAD_PARAM_OUT_OF_BOUND, "device->sharedMemPerSm is ", desc->sharedMemPerSm,
          "; allowed: sharedMemPerBlockOptin (", desc->sharedMemPerBlockOptin, ") to ", kMaxSharedMem);
  require(desc->globalMemBytes >= 1, FFPA_STATUS_BAD_PARAM_OUT_OF_BOUND,
          "device->globalMemBytes is ", desc->globalMemBytes, "; allowed: >= 1");
  require(std::memchr(desc->name, '\0', sizeof desc->name) != nullptr,
          FFPA_STATUS_BAD_PARAM_OUT_OF_BOUND, "device->name is not NUL-terminated within ",
          sizeof desc->name, " bytes");

  DeviceInfo info;
  info.ordinal = desc->ordinal;
  info.smVersion = desc->smVersion;
  info.smCount = desc->smCount;
  info.sharedMemPerBlockOptin = desc->sharedMemPerBlockOptin;
  info.sharedMemPerSm = desc->sharedMemPerSm;
  info.globalMemBytes = desc->globalMemBytes;
  info.name = desc->name;
  return info;
}

void fillDeviceDesc(const DeviceInfo& device, ffpaDeviceDesc_t* desc) {
  requireNotNull(desc, "device");
  require(desc->structSize >= sizeof(ffpaDeviceDesc_t), FFPA_STATUS_BAD_PARAM_SIZE_INSUFFICIENT,
          "device->structSize is ", desc->structSize, "; set it to sizeof(ffpaDeviceDesc_t) = ",
          sizeof(ffpaDeviceDesc_t));
  ffpaDeviceDesc_t out{};
  out.structSize = desc->structSize;
  out.ordinal = device.ordinal;
  out.smVersion = device.smVersion;
  out.smCount = device.smCount;
  out.sharedMemPerBlockOptin = device.sharedMemPerBlockOptin;
  out.sharedMemPerSm = device.sharedMemPerSm;
  out.globalMemBytes = device.globalMemBytes;
  std::strncpy(out.name, device.name.c_str(), sizeof out.name - 1);
  std::memcpy(desc, &out, sizeof out);
}

ScopedDevice::ScopedDevice(int32_t ordinal) {
  int current = -1;
  checkCuda(cudaGetDevice(&current), "cudaGetDevice");
  if (current != ordinal) {
    checkCuda(cudaSetDevice(ordinal), "cudaSetDevice");
    previous_ = current;
  }
}

ScopedDevice::~ScopedDevice() {
  // A destructor cannot report; leave no error pending in the caller's CUDA state either.
  if (previous_ >= 0 && cudaSetDevice(previous_) != cudaSuccess) cudaGetLastError();
}

}  // namespace ffpa
