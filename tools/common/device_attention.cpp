#include "common/device_attention.h"

#include <algorithm>
#include <sstream>
#include <utility>
#include <vector>

#include "common/random.h"

namespace ffpa_tools {

std::string last_error_message() {
  std::vector<char> text(ffpaGetLastErrorString(nullptr, 0) + 1);
  ffpaGetLastErrorString(text.data(), text.size());
  return text.data();
}

std::string status_report(ffpaStatus_t status) {
  return std::string(ffpaGetErrorString(status)) + ": " + last_error_message();
}

void check(ffpaStatus_t status, const char* call) {
  if (status != FFPA_STATUS_SUCCESS) {
    throw CallFailed(status, std::string(call) + " failed with " + status_report(status));
  }
}

void check_cuda(cudaError_t error, const char* call) {
  if (error != cudaSuccess) {
    throw CallFailed(FFPA_STATUS_EXECUTION_FAILED_CUDA, std::string(call) + " failed with " +
                                                            cudaGetErrorName(error) + ": " +
                                                            cudaGetErrorString(error));
  }
}

CallTiming time_calls(cudaStream_t stream, int64_t warmup, int64_t repeat,
                      const std::function<void(int64_t)>& call) {
  struct Event {
    Event() { check_cuda(cudaEventCreate(&event), "cudaEventCreate"); }
    ~Event() { cudaEventDestroy(event); }
    cudaEvent_t event = nullptr;
  };
  for (int64_t i = 0; i < warmup; ++i) call(i);
  Event start, stop;
  std::vector<double> times;
  for (int64_t i = 0; i < repeat; ++i) {
    check_cuda(cudaEventRecord(start.event, stream), "cudaEventRecord");
    call(warmup + i);
    check_cuda(cudaEventRecord(stop.event, stream), "cudaEventRecord");
    check_cuda(cudaEventSynchronize(stop.event), "cudaEventSynchronize");
    float ms = 0.0f;
    check_cuda(cudaEventElapsedTime(&ms, start.event, stop.event), "cudaEventElapsedTime");
    times.push_back(ms);
  }
  if (times.empty()) return {};
  std::sort(times.begin(), times.end());
  const size_t middle = times.size() / 2;
  return {times.size() % 2 ? times[middle] : 0.5 * (times[middle - 1] + times[middle]), times.front()};
}

ffpaDataType_t to_ffpa(DType type) {
  switch (type) {
    case DType::float16: return FFPA_DATA_TYPE_FLOAT16;
    case DType::bfloat16: return FFPA_DATA_TYPE_BFLOAT16;
    case DType::float32: return FFPA_DATA_TYPE_FLOAT32;
  }
  return FFPA_DATA_TYPE_FLOAT32;
}

ffpaCausalMode_t to_ffpa(CausalMask mask) {
  switch (mask) {
    case CausalMask::none: return FFPA_CAUSAL_NONE;
    case CausalMask::top_left: return FFPA_CAUSAL_TOP_LEFT;
    case CausalMask::bottom_right: return FFPA_CAUSAL_BOTTOM_RIGHT;
  }
  return FFPA_CAUSAL_NONE;
}

// --- DeviceBuffer, Workspace ---------------------------------------------------------------------

DeviceBuffer::DeviceBuffer(size_t bytes) : bytes_(bytes) {
  check_cuda(cudaMalloc(&data_, bytes), "cudaMalloc");
}

DeviceBuffer::~DeviceBuffer() {
  if (data_) cudaFree(data_);
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    if (data_) cudaFree(data_);
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

void DeviceBuffer::upload(const void* source, size_t bytes) {
  check_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize before an upload");
  check_cuda(cudaMemcpy(data_, source, bytes, cudaMemcpyHostToDevice), "cudaMemcpy to device");
  // A copy from pageable memory may return before it lands; later work on another stream must
  // not see half of it.
  check_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize after an upload");
}

void DeviceBuffer::download(void* destination, size_t bytes) const {
  check_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize before a download");
  check_cuda(cudaMemcpy(destination, data_, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy to host");
}

void* Workspace::reserve(size_t bytes) {
  if (bytes > buffer_.size()) buffer_ = DeviceBuffer(bytes);
  return buffer_.get();
}

// --- Handle and descriptors ----------------------------------------------------------------------

Handle::Handle() {
  check(ffpaCreate(&handle_), "ffpaCreate");
}

Handle::~Handle() {
  ffpaDestroy(handle_);
}

void Handle::set_policy(ffpaPolicyKnob_t knob, int32_t value) {
  check(ffpaSetPolicy(handle_, knob, &value, sizeof value), "ffpaSetPolicy");
}

void Handle::set_policy_int64(ffpaPolicyKnob_t knob, int64_t value) {
  check(ffpaSetPolicy(handle_, knob, &value, sizeof value), "ffpaSetPolicy");
}

void Handle::set_stream(cudaStream_t stream) {
  check(ffpaSetStream(handle_, stream), "ffpaSetStream");
}

TensorDescriptor::TensorDescriptor(DType type, const TensorLayout& layout) {
  check(ffpaCreateTensorDescriptor(&desc_), "ffpaCreateTensorDescriptor");
  const ffpaStatus_t status =
      ffpaSetTensorDescriptor(desc_, to_ffpa(type), layout.nb_dims, layout.dims, layout.strides);
  if (status != FFPA_STATUS_SUCCESS) {
    ffpaDestroyTensorDescriptor(desc_);
    check(status, "ffpaSetTensorDescriptor");
  }
}

TensorDescriptor::~TensorDescriptor() {
  ffpaDestroyTensorDescriptor(desc_);
}

AttentionDescriptor::AttentionDescriptor(CausalMask mask, bool set_scale, double scale) {
  check(ffpaCreateAttentionDescriptor(&desc_), "ffpaCreateAttentionDescriptor");
  try {
    const int32_t mode = to_ffpa(mask);
    check(ffpaSetAttentionAttribute(desc_, FFPA_ATTENTION_CAUSAL_MODE, &mode, sizeof mode),
          "ffpaSetAttentionAttribute(FFPA_ATTENTION_CAUSAL_MODE)");
    if (set_scale) {
      const float value = static_cast<float>(scale);
      check(ffpaSetAttentionAttribute(desc_, FFPA_ATTENTION_SOFTMAX_SCALE, &value, sizeof value),
            "ffpaSetAttentionAttribute(FFPA_ATTENTION_SOFTMAX_SCALE)");
    }
  } catch (...) {
    ffpaDestroyAttentionDescriptor(desc_);
    throw;
  }
}

AttentionDescriptor::~AttentionDescriptor() {
  ffpaDestroyAttentionDescriptor(desc_);
}

AttentionSlices::AttentionSlices(const Handle& handle, const std::vector<Slice>& slices) {
  std::vector<int32_t> queries, keys, masks;
  for (const Slice& slice : slices) {
    queries.insert(queries.end(), {static_cast<int32_t>(slice.q0), static_cast<int32_t>(slice.q1)});
    keys.insert(keys.end(), {static_cast<int32_t>(slice.k0), static_cast<int32_t>(slice.k1)});
    masks.push_back(slice.mask);
  }
  check(ffpaCreateAttentionSlices(handle.get(), &slices_), "ffpaCreateAttentionSlices");
  try {
    check(ffpaSetAttentionSlices(slices_, static_cast<int32_t>(slices.size()), queries.data(),
                                 keys.data(), masks.data()),
          "ffpaSetAttentionSlices");
  } catch (...) {
    ffpaDestroyAttentionSlices(slices_);
    throw;
  }
}

AttentionSlices::~AttentionSlices() { ffpaDestroyAttentionSlices(slices_); }

// --- Tensors and problems
// -------------------------------------------------------------------------

DeviceTensor::DeviceTensor(DType type, const TensorLayout& layout)
    : host(type, layout), desc(type, layout), memory(host.size_bytes()) {}

void DeviceTensor::poison() {
  host.poison();
  check_cuda(cudaMemset(memory.get(), 0xff, memory.size()), "cudaMemset");
  check_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize after cudaMemset");
}

std::string ProblemConfig::to_string() const {
  std::ostringstream text;
  text << problem.to_string() << (set_scale ? " (set)" : " (default)") << " " << dtype_name(dtype)
       << " " << layout_name(layout);
  return text.str();
}

ProblemConfig make_config(const AttentionProblem& shape_and_mask, DType dtype, LayoutKind layout,
                          double scale) {
  ProblemConfig config;
  config.problem = shape_and_mask;
  config.set_scale = scale > 0.0;
  config.problem.scale =
      config.set_scale ? static_cast<float>(scale) : default_scale(shape_and_mask.dim_qk);
  config.dtype = dtype;
  config.layout = layout;
  return config;
}

namespace {

TensorLayout layout_of(const ProblemConfig& c, int64_t heads, int64_t seq, int64_t dim) {
  return attention_layout(c.layout, c.problem.batch, heads, seq, dim);
}

}  // namespace

DeviceProblem::DeviceProblem(const ProblemConfig& c)
    : attention(c.problem.causal, c.set_scale, c.problem.scale),
      q(c.dtype, layout_of(c, c.problem.heads_q, c.problem.seq_q, c.problem.dim_qk)),
      k(c.dtype, layout_of(c, c.problem.heads_kv, c.problem.seq_kv, c.problem.dim_qk)),
      v(c.dtype, layout_of(c, c.problem.heads_kv, c.problem.seq_kv, c.problem.dim_v)),
      o(c.dtype, layout_of(c, c.problem.heads_q, c.problem.seq_q, c.problem.dim_v)),
      lse(DType::float32,
          lse_layout(c.layout, c.problem.batch, c.problem.heads_q, c.problem.seq_q)),
      d_o(c.dtype, o.host.layout()),
      dq(c.dtype, q.host.layout()),
      dk(c.dtype, k.host.layout()),
      dv(c.dtype, v.host.layout()),
      config_(c) {
  // Per-batch key counts (FFPA_ATTENTION_KEY_LENGTHS) on the device, attached for good.
  if (c.problem.key_lengths.empty()) return;
  const std::vector<int32_t> counts(c.problem.key_lengths.begin(), c.problem.key_lengths.end());
  key_lengths_ = DeviceBuffer(counts.size() * sizeof(int32_t));
  key_lengths_.upload(counts.data(), counts.size() * sizeof(int32_t));
  const int32_t* device_counts = static_cast<const int32_t*>(key_lengths_.get());
  check(ffpaSetAttentionAttribute(attention.get(), FFPA_ATTENTION_KEY_LENGTHS, &device_counts, sizeof device_counts),
        "ffpaSetAttentionAttribute(FFPA_ATTENTION_KEY_LENGTHS)");
}

void DeviceProblem::attach_slices(const Handle& handle) {
  if (config_.problem.slices.empty()) return;
  slices_ = std::make_unique<AttentionSlices>(handle, config_.problem.slices);
  check(ffpaSetAttentionDescriptorSlices(attention.get(), slices_->get()),
        "ffpaSetAttentionDescriptorSlices");
}

void DeviceProblem::fill_inputs(uint64_t start) {
  Random random(start);
  q.host.fill_uniform(random, -2.0, 2.0);
  k.host.fill_uniform(random, -2.0, 2.0);
  v.host.fill_uniform(random, -1.0, 1.0);
  d_o.host.fill_uniform(random, -1.0, 1.0);
  for (DeviceTensor* input : {&q, &k, &v, &d_o}) input->upload();
}

void DeviceProblem::poison_forward_outputs() {
  o.poison();
  lse.poison();
}

void DeviceProblem::poison_backward_outputs() {
  dq.poison();
  dk.poison();
  dv.poison();
}

size_t DeviceProblem::forward_workspace_size(const Handle& handle, bool with_lse) const {
  size_t bytes = 0;
  check(ffpaGetAttentionForwardWorkspaceSize(handle.get(), attention.get(), q.desc.get(),
                                             k.desc.get(), v.desc.get(), o.desc.get(),
                                             with_lse ? lse.desc.get() : nullptr, &bytes),
        "ffpaGetAttentionForwardWorkspaceSize");
  return bytes;
}

size_t DeviceProblem::backward_workspace_size(const Handle& handle) const {
  size_t bytes = 0;
  check(ffpaGetAttentionBackwardWorkspaceSize(
            handle.get(), attention.get(), q.desc.get(), k.desc.get(), v.desc.get(), o.desc.get(),
            d_o.desc.get(), lse.desc.get(), dq.desc.get(), dk.desc.get(), dv.desc.get(), &bytes),
        "ffpaGetAttentionBackwardWorkspaceSize");
  return bytes;
}

ffpaStatus_t DeviceProblem::call_forward(const Handle& handle, void* workspace,
                                         size_t workspace_bytes, bool with_lse) {
  return ffpaAttentionForward(handle.get(), attention.get(), q.desc.get(), q.memory.get(),
                              k.desc.get(), k.memory.get(), v.desc.get(), v.memory.get(),
                              o.desc.get(), o.memory.get(), with_lse ? lse.desc.get() : nullptr,
                              with_lse ? static_cast<float*>(lse.memory.get()) : nullptr, workspace,
                              workspace_bytes);
}

void DeviceProblem::enqueue_forward(const Handle& handle, void* workspace, size_t workspace_bytes,
                                    bool with_lse) {
  check(call_forward(handle, workspace, workspace_bytes, with_lse), "ffpaAttentionForward");
}

ffpaStatus_t DeviceProblem::call_backward(const Handle& handle, void* workspace,
                                          size_t workspace_bytes) {
  return ffpaAttentionBackward(
      handle.get(), attention.get(), q.desc.get(), q.memory.get(), k.desc.get(), k.memory.get(),
      v.desc.get(), v.memory.get(), o.desc.get(), o.memory.get(), d_o.desc.get(), d_o.memory.get(),
      lse.desc.get(), static_cast<const float*>(lse.memory.get()), dq.desc.get(), dq.memory.get(),
      dk.desc.get(), dk.memory.get(), dv.desc.get(), dv.memory.get(), workspace, workspace_bytes);
}

void DeviceProblem::enqueue_backward(const Handle& handle, void* workspace,
                                     size_t workspace_bytes) {
  check(call_backward(handle, workspace, workspace_bytes), "ffpaAttentionBackward");
}

void DeviceProblem::forward(const Handle& handle, Workspace& workspace, bool with_lse) {
  poison_forward_outputs();
  const size_t bytes = forward_workspace_size(handle, with_lse);
  enqueue_forward(handle, workspace.reserve(bytes), bytes, with_lse);
  o.download();
  if (with_lse) lse.download();
}

void DeviceProblem::backward(const Handle& handle, Workspace& workspace) {
  poison_backward_outputs();
  const size_t bytes = backward_workspace_size(handle);
  enqueue_backward(handle, workspace.reserve(bytes), bytes);
  for (DeviceTensor* gradient : {&dq, &dk, &dv}) gradient->download();
}

}  // namespace ffpa_tools
