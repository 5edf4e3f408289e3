#include "core/handle.h"

#include "core/cuda_check.h"
#include "core/error.h"

#include <cublasLt.h>

#include <optional>

namespace ffpa {

Context::Context(DeviceInfo device, Policy policy, const KernelRegistry& registry,
                 bool createRuntime)
    : device_(std::move(device)),
      planner_(registry),
      cache_(static_cast<size_t>(policy.value(FFPA_POLICY_PLAN_CACHE_CAPACITY))),
      policy_(std::make_shared<const Policy>(std::move(policy))) {
  if (createRuntime) {
    cublasLtHandle_t lt = nullptr;
    checkCublas(cublasLtCreate(&lt), "cublasLtCreate", FFPA_STATUS_NOT_INITIALIZED_LIBRARY);
    runtime_.lt = lt;
    hasRuntime_ = true;
  }
}

Context::~Context() {
  // Plans hold cuBLASLt descriptors: drop them before the cuBLASLt context goes.
  cache_.clear();
  if (hasRuntime_) cublasLtDestroy(runtime_.lt);
}

const DeviceRuntime& Context::executableRuntime() const {
  require(hasRuntime_, FFPA_STATUS_NOT_INITIALIZED_NO_DEVICE,
          "this handle was created with ffpaCreateForDevice for a described device (", device_.name,
          "); it plans but cannot execute");
  return runtime_;
}

CallSnapshot Context::snapshot() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return {policy_, stream_};
}

void Context::setStream(ffpaStream_t stream) {
  std::lock_guard<std::mutex> lock(mutex_);
  stream_ = stream;
}

void Context::setPolicy(ffpaPolicyKnob_t knob, const void* value, size_t size) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto updated = std::make_shared<Policy>(*policy_);
  setPolicyFromBytes(*updated, knob, value, size);
  policy_ = std::move(updated);
  if (knob == FFPA_POLICY_PLAN_CACHE_CAPACITY) {
    cache_.setCapacity(static_cast<size_t>(policy_->value(FFPA_POLICY_PLAN_CACHE_CAPACITY)));
  }
}

std::shared_ptr<const Plan> Context::plan(const AttentionProblem& problem, const Policy& policy, bool mayTune) {
  const PlanKey key = PlanKey::make(problem, policy, device_);
  auto make = [&] {
    // Plans prepare library descriptors (cuBLASLt's algorithm choice) for the handle's device,
    // whichever device is current on the calling thread.
    std::optional<ScopedDevice> onDevice;
    if (hasRuntime_) onDevice.emplace(device_.ordinal);
    auto fresh = std::make_shared<const Plan>(planner_.plan({problem, policy, device_, runtime()}, mayTune));
    if (fresh->tuned) {
      std::lock_guard<std::mutex> lock(mutex_);
      tuned_.push_back(fresh->tuned);
    }
    return fresh;
  };
  std::shared_ptr<const Plan> plan = cache_.getOrCreate(key, make);
  if (mayTune && plan->autotunePending) {
    plan = make();
    cache_.replace(key, plan);
  }
  return plan;
}

std::vector<std::shared_ptr<const tuning::TunedEntry>> Context::tunedEntries() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return tuned_;
}

Context& contextOf(ffpaHandle_t handle) {
  requireNotNull(handle, "handle");
  require(handle->magic == ffpaContext::kMagic && handle->context != nullptr,
          FFPA_STATUS_BAD_PARAM_INVALID_HANDLE,
          "handle is not a live ffpa handle (destroyed, or not from ffpaCreate)");
  return *handle->context;
}

}  // namespace ffpa
