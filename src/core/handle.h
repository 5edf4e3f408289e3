// The library context behind ffpaHandle_t: device, stream, policies, plan cache.
//
// Thread safety: policies are copy-on-write (a setter publishes a new immutable Policy), and each
// call takes a snapshot of the policy and stream at its start, so calls on one handle from many
// threads see consistent settings without holding a lock while they plan or launch.
#pragma once

#include "core/device.h"
#include "core/kernel_registry.h"
#include "core/plan_cache.h"
#include "core/planner.h"
#include "core/policy.h"

#include <memory>
#include <mutex>
#include <vector>

namespace ffpa {

struct CallSnapshot {
  std::shared_ptr<const Policy> policy;
  ffpaStream_t stream;
};

class Context {
 public:
  // A handle that can execute: creates the cuBLASLt context on the current device.
  Context(DeviceInfo device, Policy policy, const KernelRegistry& registry, bool createRuntime);
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  const DeviceInfo& device() const { return device_; }
  // Null for a handle made for a described device.
  const DeviceRuntime* runtime() const { return hasRuntime_ ? &runtime_ : nullptr; }
  // The runtime of a handle that can execute; throws NOT_INITIALIZED_NO_DEVICE for one made for a
  // described device.
  const DeviceRuntime& executableRuntime() const;

  CallSnapshot snapshot() const;
  void setStream(ffpaStream_t stream);
  void setPolicy(ffpaPolicyKnob_t knob, const void* value, size_t size);

  // The plan for a problem under the given policy snapshot: from the cache, or planned now.
  // `mayTune`: the call may allocate and synchronize, so runtime autotune may run (workspace
  // queries and descriptions); a cached plan whose tuning is pending is then tuned and replaced.
  std::shared_ptr<const Plan> plan(const AttentionProblem& problem, const Policy& policy, bool mayTune);

  // The tuned-config entries runtime autotune produced on this handle, in the order it made them.
  std::vector<std::shared_ptr<const tuning::TunedEntry>> tunedEntries() const;

  PlanCacheStats planCacheStats() const { return cache_.stats(); }
  void clearPlanCache() { cache_.clear(); }

 private:
  DeviceInfo device_;
  DeviceRuntime runtime_;
  bool hasRuntime_ = false;
  Planner planner_;
  PlanCache cache_;
  mutable std::mutex mutex_;  // guards policy_, stream_ and tuned_
  std::shared_ptr<const Policy> policy_;
  ffpaStream_t stream_ = nullptr;
  std::vector<std::shared_ptr<const tuning::TunedEntry>> tuned_;
};

}  // namespace ffpa

struct ffpaContext {
  static constexpr uint64_t kMagic = 0x46465041'48444c45ull;  // "FFPAHDLE"
  uint64_t magic = kMagic;
  std::unique_ptr<ffpa::Context> context;
};

namespace ffpa {
// Resolves a handle argument or throws (NULL, destroyed, foreign).
Context& contextOf(ffpaHandle_t handle);
}  // namespace ffpa
