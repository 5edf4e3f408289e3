#include "bench_device.h"

#include "device_fill.h"

#include <algorithm>

namespace ffpa_bench {
namespace {

std::string lastError() {
  std::string text(ffpaGetLastErrorString(nullptr, 0), '\0');
  ffpaGetLastErrorString(text.data(), text.size() + 1);
  return text;
}

size_t elementBytes(ffpaDataType_t dtype) { return dtype == FFPA_DATA_TYPE_FLOAT32 ? 4 : 2; }

}  // namespace

void check(ffpaStatus_t status, const char* call) {
  if (status != FFPA_STATUS_SUCCESS) {
    throw Failure(std::string(call) + ": " + ffpaGetErrorString(status) + ": " + lastError());
  }
}

void checkCuda(cudaError_t error, const char* call) {
  if (error != cudaSuccess) throw Failure(std::string(call) + ": " + cudaGetErrorString(error));
}

DeviceMemory::DeviceMemory(size_t bytes) {
  checkCuda(cudaMalloc(&pointer_, bytes == 0 ? 256 : bytes), "cudaMalloc");
}

DeviceMemory::~DeviceMemory() { cudaFree(pointer_); }

void* Workspace::reserve(size_t bytes) {
  if (bytes > bytes_) {
    memory_.reset();  // the old block goes first: both may not fit together
    bytes_ = 0;
    memory_ = std::make_unique<DeviceMemory>(bytes);
    bytes_ = bytes;
  }
  return memory_ ? memory_->get() : nullptr;
}

Stream::Stream() { checkCuda(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate"); }
Stream::~Stream() { cudaStreamDestroy(stream); }

Event::Event() { checkCuda(cudaEventCreate(&event), "cudaEventCreate"); }
Event::~Event() { cudaEventDestroy(event); }

Handle::Handle(cudaStream_t stream) {
  ffpaHandle_t created = nullptr;
  const ffpaStatus_t status = ffpaCreate(&created);
  handle_.reset(created);
  if (status == FFPA_STATUS_NOT_INITIALIZED_NO_DEVICE || status == FFPA_STATUS_NOT_SUPPORTED_ARCH_MISMATCH) {
    throw NoGpu(std::string("ffpaCreate: ") + ffpaGetErrorString(status) + ": " + lastError());
  }
  check(status, "ffpaCreate");
  check(ffpaSetStream(get(), stream), "ffpaSetStream");
}

void Handle::setInt32(ffpaPolicyKnob_t knob, int32_t value) {
  check(ffpaSetPolicy(get(), knob, &value, sizeof value), "ffpaSetPolicy");
}

AttentionSlices::AttentionSlices(ffpaHandle_t handle, const std::vector<int64_t>& lengths, ffpaSliceMask_t mask) {
  ffpaAttentionSlices_t created = nullptr;
  check(ffpaCreateAttentionSlices(handle, &created), "ffpaCreateAttentionSlices");
  slices_.reset(created);
  std::vector<int32_t> offsets{0};
  for (const int64_t length : lengths) offsets.push_back(offsets.back() + static_cast<int32_t>(length));
  check(ffpaSetAttentionSlicesFromOffsets(get(), static_cast<int32_t>(lengths.size()), offsets.data(), nullptr, mask),
        "ffpaSetAttentionSlicesFromOffsets");
}

int64_t AttentionSlices::visiblePairs() const {
  int64_t pairs = 0;
  check(ffpaGetAttentionSlicesInfo(get(), nullptr, nullptr, nullptr, &pairs), "ffpaGetAttentionSlicesInfo");
  return pairs;
}

AttentionDescriptor::AttentionDescriptor(ffpaCausalMode_t causal, const AttentionSlices* slices) {
  ffpaAttentionDescriptor_t created = nullptr;
  check(ffpaCreateAttentionDescriptor(&created), "ffpaCreateAttentionDescriptor");
  desc_.reset(created);
  const int32_t mode = causal;
  check(ffpaSetAttentionAttribute(get(), FFPA_ATTENTION_CAUSAL_MODE, &mode, sizeof mode),
        "ffpaSetAttentionAttribute");
  if (slices != nullptr) check(ffpaSetAttentionDescriptorSlices(get(), slices->get()), "ffpaSetAttentionDescriptorSlices");
}

std::unique_ptr<Tensor> Tensor::attention(ffpaDataType_t dtype, int64_t b, int64_t h, int64_t n, int64_t d,
                                          bool bnhd, int count) {
  const int64_t dims[] = {b, h, n, d};
  const int64_t bhndStrides[] = {h * n * d, n * d, d, 1};
  const int64_t bnhdStrides[] = {n * h * d, d, h * d, 1};
  std::unique_ptr<Tensor> tensor(new Tensor(dtype, 4, dims, bnhd ? bnhdStrides : bhndStrides, count));
  std::copy(dims, dims + 4, tensor->dims_);
  tensor->bnhd_ = bnhd;
  return tensor;
}

std::unique_ptr<Tensor> Tensor::lse(int64_t b, int64_t h, int64_t n, int count) {
  const int64_t dims[] = {b, h, n};
  return std::unique_ptr<Tensor>(new Tensor(FFPA_DATA_TYPE_FLOAT32, 3, dims, nullptr, count));
}

Tensor::Tensor(ffpaDataType_t dtype, int nbDims, const int64_t* dims, const int64_t* strides, int count)
    : dtype_(dtype) {
  ffpaTensorDescriptor_t created = nullptr;
  check(ffpaCreateTensorDescriptor(&created), "ffpaCreateTensorDescriptor");
  desc_.reset(created);
  check(ffpaSetTensorDescriptor(desc(), dtype, nbDims, dims, strides), "ffpaSetTensorDescriptor");
  for (int i = 0; i < nbDims; ++i) elements_ *= static_cast<size_t>(dims[i]);
  for (int i = 0; i < count; ++i) copies_.push_back(std::make_unique<DeviceMemory>(bytes()));
}

size_t Tensor::bytes() const { return elements_ * elementBytes(dtype_); }

void Tensor::poison(cudaStream_t stream) const {
  for (const auto& copy : copies_) checkCuda(cudaMemsetAsync(copy->get(), 0xff, bytes(), stream), "cudaMemsetAsync");
}

void Tensor::poisonRowsFrom(const std::vector<int64_t>& rows, cudaStream_t stream) const {
  const auto [b, h, n, d] = dims_;
  const size_t element = elementBytes(dtype_);
  for (const auto& copy : copies_) {
    for (int64_t batch = 0; batch < b; ++batch) {
      const int64_t first = rows.at(static_cast<size_t>(batch));
      if (first >= n) continue;
      for (int64_t head = 0; head < h; ++head) {
        // Row `first` of (batch, head), and the stride between rows.
        const int64_t at = bnhd_ ? (batch * n + first) * h + head : (batch * h + head) * n + first;
        char* start = static_cast<char*>(copy->get()) + static_cast<size_t>(at * d) * element;
        checkCuda(cudaMemset2DAsync(start, static_cast<size_t>((bnhd_ ? h * d : d)) * element, 0xff,
                                    static_cast<size_t>(d) * element, static_cast<size_t>(n - first), stream),
                  "cudaMemset2DAsync");
      }
    }
  }
}

void Tensor::fillUniform(uint64_t seed, float range, cudaStream_t stream) const {
  for (size_t i = 0; i < copies_.size(); ++i) {
    checkCuda(ffpa_bench::fillUniform(copies_[i]->get(), dtype_, elements_, seed + 1000 * i, range, stream),
              "fill inputs");
  }
}

}  // namespace ffpa_bench
