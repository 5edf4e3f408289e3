// The device timer of runtime autotune: scratch tensors of the problem's shape on the handle's
// device, CUDA events on a stream of its own.
#include "core/autotune.h"

#include "core/cuda_check.h"
#include "core/device.h"
#include "core/error.h"
#include "core/slice_table.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <vector>

namespace ffpa {
namespace {

size_t elementBytes(ffpaDataType_t dtype) { return dtype == FFPA_DATA_TYPE_FLOAT32 ? 4 : 2; }

// Elements from the first to one past the last of a [d0, d1, d2, d3] tensor with these strides.
size_t span(const Strides& strides, std::initializer_list<int64_t> dims) {
  int64_t last = 0, i = 0;
  for (const int64_t d : dims) last += (d - 1) * strides[i++];
  return static_cast<size_t>(last + 1);
}

class DeviceMemory {
 public:
  explicit DeviceMemory(size_t bytes, int fill) {
    if (bytes == 0) return;
    checkCuda(cudaMalloc(&data_, bytes), "cudaMalloc (autotune scratch)");
    checkCuda(cudaMemset(data_, fill, bytes), "cudaMemset (autotune scratch)");
  }
  ~DeviceMemory() { cudaFree(data_); }
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;
  void* get() const { return data_; }

 private:
  void* data_ = nullptr;
};

class DeviceTimer final : public CandidateTimer {
 public:
  explicit DeviceTimer(const PlanRequest& r)
      : problem_(timedProblem(r.problem)),
        runtime_(*r.runtime),
        onDevice_(r.device.ordinal),
        iterations_(r.policy.value(FFPA_POLICY_AUTOTUNE_MODE) == FFPA_AUTOTUNE_MODE_MAX ? 5 : 3) {
    const AttentionProblem& p = problem_;
    if (p.slices != nullptr) slices_ = p.slices->deviceView(r.device.ordinal, "attn");
    const size_t e = elementBytes(p.dtype);
    // 16-bit inputs of about 1.06 (fp16) or 0.011 (bf16); an LSE of about 48.6, finite P and dS.
    constexpr int kInput = 0x3c, kLse = 0x42;
    q_ = std::make_unique<DeviceMemory>(e * span(p.q, {p.batch, p.headsQ, p.seqQ, p.headDimQk}), kInput);
    k_ = std::make_unique<DeviceMemory>(e * span(p.k, {p.batch, p.headsKv, p.seqKv, p.headDimQk}), kInput);
    v_ = std::make_unique<DeviceMemory>(e * span(p.v, {p.batch, p.headsKv, p.seqKv, p.headDimV}), kInput);
    o_ = std::make_unique<DeviceMemory>(e * span(p.o, {p.batch, p.headsQ, p.seqQ, p.headDimV}), kInput);
    if (p.hasLse || p.direction == Direction::Backward) {
      lse_ = std::make_unique<DeviceMemory>(4 * span(p.lse, {p.batch, p.headsQ, p.seqQ, 1}), kLse);
    }
    if (p.direction == Direction::Backward) {
      dO_ = std::make_unique<DeviceMemory>(e * span(p.dO, {p.batch, p.headsQ, p.seqQ, p.headDimV}), kInput);
      dq_ = std::make_unique<DeviceMemory>(e * span(p.dq, {p.batch, p.headsQ, p.seqQ, p.headDimQk}), 0);
      dk_ = std::make_unique<DeviceMemory>(e * span(p.dk, {p.batch, p.headsKv, p.seqKv, p.headDimQk}), 0);
      dv_ = std::make_unique<DeviceMemory>(e * span(p.dv, {p.batch, p.headsKv, p.seqKv, p.headDimV}), 0);
    }
    checkCuda(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate (autotune)");
    checkCuda(cudaEventCreate(&start_), "cudaEventCreate (autotune)");
    checkCuda(cudaEventCreate(&stop_), "cudaEventCreate (autotune)");
  }

  ~DeviceTimer() override {
    if (start_) cudaEventDestroy(start_);
    if (stop_) cudaEventDestroy(stop_);
    if (stream_) cudaStreamDestroy(stream_);
  }

  double milliseconds(const Plan& plan) override {
    if (!workspace_ || workspaceBytes_ < plan.kernelWorkspaceBytes) {
      workspace_.reset();
      workspace_ = std::make_unique<DeviceMemory>(plan.kernelWorkspaceBytes, 0);
      workspaceBytes_ = plan.kernelWorkspaceBytes;
    }
    TensorArgs t;
    t.slices = slices_;
    t.q = q_->get();
    t.k = k_->get();
    t.v = v_->get();
    if (problem_.direction == Direction::Forward) {
      t.out = o_->get();
      t.lseOut = lse_ ? static_cast<float*>(lse_->get()) : nullptr;
    } else {
      t.o = o_->get();
      t.dO = dO_->get();
      t.lse = static_cast<const float*>(lse_->get());
      t.dq = dq_->get();
      t.dk = dk_->get();
      t.dv = dv_->get();
    }
    const LaunchArgs args{problem_, t, workspace_->get(), plan.kernelWorkspaceBytes, stream_, runtime_};
    plan.payload->launch(args);  // warm-up
    std::vector<double> times;
    for (int i = 0; i < iterations_; ++i) {
      checkCuda(cudaEventRecord(start_, stream_), "cudaEventRecord (autotune)");
      plan.payload->launch(args);
      checkCuda(cudaEventRecord(stop_, stream_), "cudaEventRecord (autotune)");
      checkCuda(cudaEventSynchronize(stop_), "cudaEventSynchronize (autotune)");
      float ms = 0.0f;
      checkCuda(cudaEventElapsedTime(&ms, start_, stop_), "cudaEventElapsedTime (autotune)");
      times.push_back(ms);
    }
    std::sort(times.begin(), times.end());
    return times[times.size() / 2];
  }

 private:
  // The problem with every key present: tuning runs where planning may, before the calls, when
  // the caller's per-batch key counts (FFPA_ATTENTION_KEY_LENGTHS) need not be on the device yet.
  static AttentionProblem timedProblem(AttentionProblem p) {
    p.keyLengths = nullptr;
    return p;
  }

  const AttentionProblem problem_;
  const DeviceRuntime& runtime_;
  ScopedDevice onDevice_;
  slices::SliceView slices_;  // the problem's slices on the device (none: null)
  int iterations_;
  std::unique_ptr<DeviceMemory> q_, k_, v_, o_, lse_, dO_, dq_, dk_, dv_, workspace_;
  size_t workspaceBytes_ = 0;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t start_ = nullptr, stop_ = nullptr;
};

}  // namespace

TimerFactory deviceTimers() {
  return [](const PlanRequest& r) -> std::unique_ptr<CandidateTimer> {
    if (r.runtime == nullptr) return nullptr;  // a described device: nothing to time on
    return std::make_unique<DeviceTimer>(r);
  };
}

}  // namespace ffpa
