// libffpa and the CUDA runtime behind small RAII wrappers, for the programs that check the
// library (device tests, ffpa-demo). Every call's status is checked; a failure throws CallFailed
// carrying the call's name, the status name and the library's own message.
#pragma once

#include <cuda_runtime.h>
#include <ffpa/ffpa.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>

#include "common/cpu_attention.h"
#include "common/host_tensor.h"

namespace ffpa_tools {

class CallFailed : public std::runtime_error {
 public:
  CallFailed(ffpaStatus_t status, const std::string& message)
      : std::runtime_error(message), status_(status) {}
  ffpaStatus_t status() const { return status_; }

 private:
  ffpaStatus_t status_;
};

// The detailed message of this thread's last failing libffpa call ("" if none).
std::string last_error_message();
// "FFPA_STATUS_...: <last error message>", for reporting a status just returned.
std::string status_report(ffpaStatus_t status);
// Throws CallFailed unless `status` is FFPA_STATUS_SUCCESS.
void check(ffpaStatus_t status, const char* call);
// Throws CallFailed (status FFPA_STATUS_EXECUTION_FAILED_CUDA) unless `error` is cudaSuccess.
void check_cuda(cudaError_t error, const char* call);

// The time of one call enqueued on `stream`, by CUDA events: the median and the fastest of
// `repeat` timed runs after `warmup` untimed ones. call(i) is told the run's index (warm-up runs
// first), e.g. to rotate input sets so that the L2 cache does not hold them.
struct CallTiming {
  double median_ms = 0.0;
  double min_ms = 0.0;
};
CallTiming time_calls(cudaStream_t stream, int64_t warmup, int64_t repeat,
                      const std::function<void(int64_t)>& call);

ffpaDataType_t to_ffpa(DType type);
ffpaCausalMode_t to_ffpa(CausalMask mask);

// Device memory from cudaMalloc (aligned to 256 bytes, as libffpa wants).
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* get() const { return data_; }
  size_t size() const { return bytes_; }
  // Synchronous copies of the first `bytes` bytes (the whole device is synchronized first, so
  // work on any stream is finished).
  void upload(const void* source, size_t bytes);
  void download(void* destination, size_t bytes) const;

 private:
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

// A workspace that grows to the largest size asked for.
class Workspace {
 public:
  // A pointer to at least `bytes` bytes; null when `bytes` is 0 and nothing was allocated yet.
  void* reserve(size_t bytes);
  size_t size() const { return buffer_.size(); }

 private:
  DeviceBuffer buffer_;
};

class Handle {
 public:
  // ffpaCreate on the current device. Without a GPU it throws CallFailed with status
  // FFPA_STATUS_NOT_INITIALIZED_NO_DEVICE.
  Handle();
  ~Handle();
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;

  ffpaHandle_t get() const { return handle_; }
  void set_policy(ffpaPolicyKnob_t knob, int32_t value);  // bool, int32 and enum knobs
  void set_policy_int64(ffpaPolicyKnob_t knob, int64_t value);
  void set_stream(cudaStream_t stream);

 private:
  ffpaHandle_t handle_ = nullptr;
};

class TensorDescriptor {
 public:
  TensorDescriptor(DType type, const TensorLayout& layout);
  ~TensorDescriptor();
  TensorDescriptor(const TensorDescriptor&) = delete;
  TensorDescriptor& operator=(const TensorDescriptor&) = delete;
  ffpaTensorDescriptor_t get() const { return desc_; }

 private:
  ffpaTensorDescriptor_t desc_ = nullptr;
};

class AttentionDescriptor {
 public:
  // `scale` is set only when `set_scale`; otherwise the library's default 1/sqrt(Dqk) applies.
  AttentionDescriptor(CausalMask mask, bool set_scale, double scale);
  ~AttentionDescriptor();
  AttentionDescriptor(const AttentionDescriptor&) = delete;
  AttentionDescriptor& operator=(const AttentionDescriptor&) = delete;
  ffpaAttentionDescriptor_t get() const { return desc_; }

 private:
  ffpaAttentionDescriptor_t desc_ = nullptr;
};

// A slice list (ffpaCreateAttentionSlices on a handle) set from CPU-attention slices.
class AttentionSlices {
 public:
  AttentionSlices(const Handle& handle, const std::vector<Slice>& slices);
  ~AttentionSlices();
  AttentionSlices(const AttentionSlices&) = delete;
  AttentionSlices& operator=(const AttentionSlices&) = delete;
  ffpaAttentionSlices_t get() const { return slices_; }

 private:
  ffpaAttentionSlices_t slices_ = nullptr;
};

// One tensor three ways: its host bytes, its libffpa descriptor, its device memory.
struct DeviceTensor {
  DeviceTensor(DType type, const TensorLayout& layout);

  void upload() { memory.upload(host.data(), host.size_bytes()); }
  void download() { memory.download(host.data(), host.size_bytes()); }
  // Host and device bytes all 0xFF (NaN), gaps included.
  void poison();

  HostTensor host;
  TensorDescriptor desc;
  DeviceBuffer memory;
};

// Everything that defines one attention call.
struct ProblemConfig {
  AttentionProblem problem;  // shapes, mask, and the scale the CPU attention uses
  bool set_scale = false;    // pass problem.scale to libffpa; else rely on its default
  DType dtype = DType::bfloat16;
  LayoutKind layout = LayoutKind::bhnd;

  std::string to_string() const;  // the problem, dtype and layout, on one line
};

// A ProblemConfig with the scale libffpa will use: `scale` > 0 is set explicitly (rounded to
// float, as the attribute is a float); 0 keeps the default 1/sqrt(Dqk).
ProblemConfig make_config(const AttentionProblem& shape_and_mask, DType dtype, LayoutKind layout,
                          double scale);

// One attention problem on the device: its descriptors and all nine tensors.
class DeviceProblem {
 public:
  explicit DeviceProblem(const ProblemConfig& config);
  const ProblemConfig& config() const { return config_; }

  // Q, K, V, dO uniform random (Q and K in [-2, 2) for a peaked softmax, V and dO in [-1, 1)),
  // rounded to the element type, uploaded.
  void fill_inputs(uint64_t start);
  void poison_forward_outputs();   // O and LSE
  void poison_backward_outputs();  // dQ, dK, dV

  size_t forward_workspace_size(const Handle& handle, bool with_lse) const;
  size_t backward_workspace_size(const Handle& handle) const;
  // The calls themselves, their status returned rather than thrown (for tests of failures).
  ffpaStatus_t call_forward(const Handle& handle, void* workspace, size_t workspace_bytes,
                            bool with_lse);
  ffpaStatus_t call_backward(const Handle& handle, void* workspace, size_t workspace_bytes);
  // Enqueue on the handle's stream; nothing is waited for.
  void enqueue_forward(const Handle& handle, void* workspace, size_t workspace_bytes,
                       bool with_lse);
  void enqueue_backward(const Handle& handle, void* workspace, size_t workspace_bytes);
  // Poison the outputs (so an element left unwritten shows as NaN), size the workspace, run, wait,
  // download the outputs into the host tensors.
  void forward(const Handle& handle, Workspace& workspace, bool with_lse);
  void backward(const Handle& handle, Workspace& workspace);  // the same for dQ, dK, dV

  // Attaches the problem's slices (config().problem.slices) to `attention`, made on `handle`'s
  // device. Needed once before calls when there are slices; nothing happens when there are none.
  void attach_slices(const Handle& handle);

  AttentionDescriptor attention;
  DeviceTensor q, k, v, o, lse, d_o, dq, dk, dv;

 private:
  ProblemConfig config_;
  std::unique_ptr<AttentionSlices> slices_;
  DeviceBuffer key_lengths_;  // config().problem.key_lengths as int32, attached to `attention`
};

}  // namespace ffpa_tools
