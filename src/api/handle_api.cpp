// Handles: creation for the current or a described device, stream, device, plan cache.
#include "api/boundary.h"

#include "core/device.h"
#include "core/environment.h"
#include "core/handle.h"

#include <memory>

namespace {

ffpaHandle_t newHandle(ffpa::DeviceInfo device, ffpa::Policy policy, bool executable) {
  auto handle = std::make_unique<ffpaContext>();
  handle->context = std::make_unique<ffpa::Context>(std::move(device), std::move(policy),
                                                    ffpa::builtinKernels(), executable);
  return handle.release();
}

}  // namespace

extern "C" {

FFPA_API ffpaStatus_t ffpaCreate(ffpaHandle_t* handle) {
  return ffpa::guarded("ffpaCreate", [&] {
    ffpa::requireNotNull(handle, "handle");
    *handle = nullptr;
    // The environment first: a malformed variable is reported even on a machine without a GPU.
    ffpa::Policy policy = ffpa::policyFromEnvironment();
    ffpa::setCallLogLevel(policy.logLevel());
    *handle = newHandle(ffpa::queryCurrentDevice(), std::move(policy), true);
  });
}

FFPA_API ffpaStatus_t ffpaCreateForDevice(ffpaHandle_t* handle, const ffpaDeviceDesc_t* device) {
  return ffpa::guarded("ffpaCreateForDevice", [&] {
    ffpa::requireNotNull(handle, "handle");
    *handle = nullptr;
    ffpa::DeviceInfo info = ffpa::deviceFromDesc(device);
    ffpa::Policy policy = ffpa::policyFromEnvironment();
    ffpa::setCallLogLevel(policy.logLevel());
    *handle = newHandle(std::move(info), std::move(policy), false);
  });
}

FFPA_API ffpaStatus_t ffpaDestroy(ffpaHandle_t handle) {
  return ffpa::guarded("ffpaDestroy", [&] {
    if (handle == nullptr) return;
    ffpa::contextOf(handle);  // refuses a handle that is not live
    handle->magic = 0;
    delete handle;
  });
}

FFPA_API ffpaStatus_t ffpaSetStream(ffpaHandle_t handle, ffpaStream_t stream) {
  return ffpa::guarded("ffpaSetStream", [&] { ffpa::contextOf(handle).setStream(stream); });
}

FFPA_API ffpaStatus_t ffpaGetStream(ffpaHandle_t handle, ffpaStream_t* stream) {
  return ffpa::guarded("ffpaGetStream", [&] {
    ffpa::Context& context = ffpa::contextOf(handle);
    ffpa::requireNotNull(stream, "stream");
    *stream = context.snapshot().stream;
  });
}

FFPA_API ffpaStatus_t ffpaGetDeviceDesc(ffpaHandle_t handle, ffpaDeviceDesc_t* device) {
  return ffpa::guarded("ffpaGetDeviceDesc", [&] {
    ffpa::fillDeviceDesc(ffpa::contextOf(handle).device(), device);
  });
}

FFPA_API ffpaStatus_t ffpaGetPlanCacheStats(ffpaHandle_t handle, ffpaPlanCacheStats_t* stats) {
  return ffpa::guarded("ffpaGetPlanCacheStats", [&] {
    ffpa::Context& context = ffpa::contextOf(handle);
    ffpa::requireNotNull(stats, "stats");
    ffpa::require(stats->structSize >= sizeof(ffpaPlanCacheStats_t),
                  FFPA_STATUS_BAD_PARAM_SIZE_INSUFFICIENT, "stats->structSize is ", stats->structSize,
                  "; set it to sizeof(ffpaPlanCacheStats_t) = ", sizeof(ffpaPlanCacheStats_t));
    const ffpa::PlanCacheStats s = context.planCacheStats();
    ffpaPlanCacheStats_t out{};
    out.structSize = stats->structSize;
    out.hits = s.hits;
    out.misses = s.misses;
    out.evictions = s.evictions;
    out.size = s.size;
    out.capacity = s.capacity;
    *stats = out;
  });
}

FFPA_API ffpaStatus_t ffpaClearPlanCache(ffpaHandle_t handle) {
  return ffpa::guarded("ffpaClearPlanCache", [&] { ffpa::contextOf(handle).clearPlanCache(); });
}

}  // extern "C"
