// A plan: which kernel variant serves a problem, with which launch configuration, and how much
// workspace it needs. Plans are immutable once built and shared through the plan cache.
#pragma once

#include "core/problem.h"
#include "common/slice_mask.h"
#include "tuning/tuned_config.h"

#include <ffpa/ffpa.h>

#include <cstddef>
#include <memory>
#include <string>

struct cublasLtContext;

namespace ffpa {

// CUDA resources of a handle bound to a real device (absent for described devices).
struct DeviceRuntime {
  cublasLtContext* lt = nullptr;  // cublasLtHandle_t
};

// The device pointers of one call. Forward: q, k, v -> out (O), lseOut. Backward: q, k, v, o,
// dO, lse -> dq, dk, dv.
struct TensorArgs {
  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  const void* o = nullptr;
  void* out = nullptr;
  float* lseOut = nullptr;
  const void* dO = nullptr;
  const float* lse = nullptr;
  void* dq = nullptr;
  void* dk = nullptr;
  void* dv = nullptr;
  slices::SliceView slices;  // the device copy of the problem's slices (null `slices` if none)
};

struct LaunchArgs {
  const AttentionProblem& problem;  // with the scale of this call
  TensorArgs tensors;
  void* workspace;        // the kernel's part of the caller's workspace
  size_t workspaceBytes;
  ffpaStream_t stream;
  const DeviceRuntime& runtime;
};

// What a kernel variant keeps in its plans: launch configuration, prepared library descriptors.
class PlanPayload {
 public:
  virtual ~PlanPayload() = default;
  // Enqueues the work; never allocates device memory or synchronizes. Throws ffpa::Error.
  virtual void launch(const LaunchArgs& args) const = 0;
};

struct Plan {
  std::string kernel;             // the variant's name, e.g. "reference.cublaslt.forward"
  std::string config;             // its launch configuration, human-readable
  std::string skipped;            // "variant: why not" per variant passed over, one per line
  size_t kernelWorkspaceBytes = 0;
  size_t sanityScratchOffset = 0; // where the sanity check's counters live, when enabled
  size_t workspaceBytes = 0;      // everything the caller must provide
  // Launches the plan. For a described device it holds sizes only, no library descriptors.
  std::unique_ptr<const PlanPayload> payload;
  // Runtime autotune: asked for by the policy but not run (the plan was made in an execute
  // call); the next workspace query or description tunes and replaces it.
  bool autotunePending = false;
  // The tuned-config entry autotuning produced for this plan (null when it was not tuned).
  std::shared_ptr<const tuning::TunedEntry> tuned;
};

}  // namespace ffpa
