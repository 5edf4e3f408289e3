// The CUDA and libffpa objects ffpa-bench holds, each owned by a small RAII type, and the checks
// that turn a failing call into an exception carrying the call's name and the library's message.
#pragma once

#include <cuda_runtime.h>
#include <ffpa/ffpa.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace ffpa_bench {

// A call that failed: the row is reported as an error and the sweep goes on.
struct Failure : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// No GPU this library can use: the tool exits 77.
struct NoGpu : std::runtime_error {
  using std::runtime_error::runtime_error;
};

void check(ffpaStatus_t status, const char* call);
void checkCuda(cudaError_t error, const char* call);

class DeviceMemory {
 public:
  explicit DeviceMemory(size_t bytes);
  ~DeviceMemory();
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;
  void* get() const { return pointer_; }

 private:
  void* pointer_ = nullptr;
};

// Scratch that grows to the largest size asked for, shared by the rows of a sweep.
class Workspace {
 public:
  void* reserve(size_t bytes);

 private:
  std::unique_ptr<DeviceMemory> memory_;
  size_t bytes_ = 0;
};

struct Stream {
  Stream();
  ~Stream();
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  cudaStream_t get() const { return stream; }
  cudaStream_t stream = nullptr;
};

struct Event {
  Event();
  ~Event();
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  cudaEvent_t event = nullptr;
};

// An owner of a libffpa object, destroyed with the library's own function.
template <class T>
using Owned = std::unique_ptr<T, ffpaStatus_t (*)(T*)>;

// A handle on the current device whose work goes to `stream`. Throws NoGpu when the library
// finds no usable device.
class Handle {
 public:
  explicit Handle(cudaStream_t stream);
  ffpaHandle_t get() const { return handle_.get(); }
  void setInt32(ffpaPolicyKnob_t knob, int32_t value);

 private:
  Owned<ffpaContext> handle_{nullptr, ffpaDestroy};
};

// A slice list on the handle's device: one slice per sequence of a packed batch.
class AttentionSlices {
 public:
  AttentionSlices(ffpaHandle_t handle, const std::vector<int64_t>& lengths, ffpaSliceMask_t mask);
  ffpaAttentionSlices_t get() const { return slices_.get(); }
  // The (query, key) pairs the slices let attend, per head.
  int64_t visiblePairs() const;

 private:
  Owned<ffpaSlicesStruct> slices_{nullptr, ffpaDestroyAttentionSlices};
};

class AttentionDescriptor {
 public:
  // With `slices` (kept by the descriptor), `causal` must be FFPA_CAUSAL_NONE.
  explicit AttentionDescriptor(ffpaCausalMode_t causal, const AttentionSlices* slices = nullptr);
  ffpaAttentionDescriptor_t get() const { return desc_.get(); }

 private:
  Owned<ffpaAttentionStruct> desc_{nullptr, ffpaDestroyAttentionDescriptor};
};

// A packed tensor in `count` copies (rotated input or output sets) under one descriptor.
class Tensor {
 public:
  // [B, H, N, D], stored BHND or BNHD.
  static std::unique_ptr<Tensor> attention(ffpaDataType_t dtype, int64_t b, int64_t h, int64_t n, int64_t d,
                                           bool bnhd, int count);
  // The fp32 log-sum-exp [B, H, N].
  static std::unique_ptr<Tensor> lse(int64_t b, int64_t h, int64_t n, int count);
  ffpaTensorDescriptor_t desc() const { return desc_.get(); }
  ffpaDataType_t dtype() const { return dtype_; }
  size_t elements() const { return elements_; }
  size_t bytes() const;
  // Copy i of the rotation (taken modulo the number of copies).
  void* data(int i = 0) const { return copies_[static_cast<size_t>(i) % copies_.size()]->get(); }
  // Every byte 0xFF, NaN in fp16, bf16 and fp32: an element a call leaves unwritten shows.
  void poison(cudaStream_t stream) const;
  // Uniform values in [-range, range), a different set per copy, reproducible from `seed`.
  void fillUniform(uint64_t seed, float range, cudaStream_t stream) const;
  // NaN (every byte 0xFF) in the rows of each batch entry b from rows[b] on, in every copy of an
  // attention tensor: with the entries' key counts, keys that no kernel may read.
  void poisonRowsFrom(const std::vector<int64_t>& rows, cudaStream_t stream) const;

 private:
  Tensor(ffpaDataType_t dtype, int nbDims, const int64_t* dims, const int64_t* strides, int count);
  Owned<ffpaTensorStruct> desc_{nullptr, ffpaDestroyTensorDescriptor};
  ffpaDataType_t dtype_;
  int64_t dims_[4] = {1, 1, 1, 1};  // [B, H, N, D] of an attention tensor
  bool bnhd_ = false;
  size_t elements_ = 1;
  std::vector<std::unique_ptr<DeviceMemory>> copies_;
};

}  // namespace ffpa_bench
