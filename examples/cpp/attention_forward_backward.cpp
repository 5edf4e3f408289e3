// Attention forward and backward with libffpa from C++17.
//
// Shows: small RAII owners for the handle, the descriptors, streams and device buffers;
// tensors stored as [B, N, H, D] (the layout most models produce) described through strides;
// grouped-query attention (8 query heads share 2 K/V heads); one workspace sized for both
// passes; the forward pass writing the log-sum-exp that the backward pass needs.
//
// Build (installed libffpa), as one command line:
//   c++ -std=c++17 attention_forward_backward.cpp $(pkg-config --cflags --libs ffpa)
//       -I/usr/local/cuda/include -L/usr/local/cuda/lib64 -lcudart
//
// Exit status: 0 on success, 77 when there is no usable GPU, 1 on any other failure.
#include <ffpa/ffpa.h>

#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

namespace {

constexpr int kExitNoGpu = 77;

// --- Errors -------------------------------------------------------------------------------------

struct NoUsableGpu : std::runtime_error {
  using std::runtime_error::runtime_error;
};

std::string lastErrorMessage() {
  const size_t length = ffpaGetLastErrorString(nullptr, 0);  // measures only
  std::string message(length + 1, '\0');
  ffpaGetLastErrorString(&message[0], message.size());
  message.resize(length);
  return message;
}

void check(ffpaStatus_t status, const char* call) {
  if (status == FFPA_STATUS_SUCCESS) return;
  throw std::runtime_error(std::string(call) + ": " + ffpaGetErrorString(status) + ": " +
                           lastErrorMessage());
}

void checkCuda(cudaError_t error, const char* call) {
  if (error == cudaSuccess) return;
  throw std::runtime_error(std::string(call) + ": " + cudaGetErrorName(error) + ": " +
                           cudaGetErrorString(error));
}

// --- Owners -------------------------------------------------------------------------------------

// libffpa's objects are pointers to incomplete structs, so std::unique_ptr owns them directly
// with a deleter that calls the matching destroy function. Destroying a live object cannot
// fail, so the status is not inspected.
template <auto destroy>
struct Destroyer {
  template <class Object>
  void operator()(Object* object) const noexcept {
    static_cast<void>(destroy(object));
  }
};

template <class Pointer, auto destroy>
using Owner = std::unique_ptr<std::remove_pointer_t<Pointer>, Destroyer<destroy>>;

using Handle = Owner<ffpaHandle_t, ffpaDestroy>;
using TensorDescriptor = Owner<ffpaTensorDescriptor_t, ffpaDestroyTensorDescriptor>;
using AttentionDescriptor = Owner<ffpaAttentionDescriptor_t, ffpaDestroyAttentionDescriptor>;
using Stream = Owner<cudaStream_t, cudaStreamDestroy>;

Handle createHandle() {
  ffpaHandle_t handle = nullptr;
  const ffpaStatus_t status = ffpaCreate(&handle);
  if (status == FFPA_STATUS_NOT_INITIALIZED_NO_DEVICE ||
      status == FFPA_STATUS_NOT_SUPPORTED_ARCH_MISMATCH) {
    throw NoUsableGpu(std::string(ffpaGetErrorString(status)) + ": " + lastErrorMessage());
  }
  check(status, "ffpaCreate");
  return Handle(handle);
}

Stream createStream() {
  cudaStream_t stream = nullptr;
  checkCuda(cudaStreamCreate(&stream), "cudaStreamCreate");
  return Stream(stream);
}

// A tensor descriptor; NULL strides mean packed row-major (used here for the log-sum-exp).
TensorDescriptor describe(ffpaDataType_t type, const std::vector<int64_t>& dims,
                          const int64_t* strides = nullptr) {
  ffpaTensorDescriptor_t desc = nullptr;
  check(ffpaCreateTensorDescriptor(&desc), "ffpaCreateTensorDescriptor");
  TensorDescriptor owner(desc);  // owned before the next call can throw
  const auto nbDims = static_cast<int32_t>(dims.size());
  check(ffpaSetTensorDescriptor(desc, type, nbDims, dims.data(), strides),
        "ffpaSetTensorDescriptor");
  return owner;
}

// The descriptor [B, H, N, D] of a tensor stored as [B, N, H, D]: the heads of one token are
// adjacent in memory, so the stride of H is D and the stride of N is H * D.
TensorDescriptor describeBnhd(ffpaDataType_t type, int64_t batch, int64_t heads, int64_t seqLen,
                              int64_t headDim) {
  const int64_t strides[4] = {seqLen * heads * headDim, headDim, heads * headDim, 1};
  return describe(type, {batch, heads, seqLen, headDim}, strides);
}

// Device memory for `count` elements of T. cudaMalloc aligns to 256 bytes, which satisfies both
// the tensor (16) and the workspace (256) alignment libffpa requires.
template <class T>
class DeviceArray {
 public:
  explicit DeviceArray(size_t count) : count_(count) {
    if (count == 0) return;
    void* memory = nullptr;
    checkCuda(cudaMalloc(&memory, count * sizeof(T)), "cudaMalloc");
    data_ = static_cast<T*>(memory);
  }
  ~DeviceArray() { cudaFree(data_); }  // waits for work still using the memory
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;

  T* get() const { return data_; }
  size_t bytes() const { return count_ * sizeof(T); }

  void upload(const std::vector<T>& host, cudaStream_t stream) {
    checkCuda(cudaMemcpyAsync(data_, host.data(), bytes(), cudaMemcpyHostToDevice, stream),
              "cudaMemcpyAsync");
  }
  // Complete when the stream is synchronized.
  void download(std::vector<T>& host, cudaStream_t stream) const {
    host.resize(count_);
    checkCuda(cudaMemcpyAsync(host.data(), data_, bytes(), cudaMemcpyDeviceToHost, stream),
              "cudaMemcpyAsync");
  }

 private:
  T* data_ = nullptr;
  size_t count_;
};

// --- Data and checks ----------------------------------------------------------------------------

// Uniform values in [-1, 1); a fixed generator state gives the same data on every run.
std::vector<__half> randomHalves(size_t count, unsigned initialState) {
  std::mt19937 generator(initialState);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<__half> values(count);
  for (__half& value : values) value = __float2half(uniform(generator));
  return values;
}

float largestMagnitude(const std::vector<__half>& values) {
  float largest = 0.0f;
  for (const __half& value : values) largest = std::max(largest, std::fabs(__half2float(value)));
  return largest;
}

double euclideanNorm(const std::vector<__half>& values) {
  double sum = 0.0;
  for (const __half& value : values) sum += double(__half2float(value)) * __half2float(value);
  return std::sqrt(sum);
}

float toFloat(float value) { return value; }
float toFloat(__half value) { return __half2float(value); }

template <class T>
bool allFinite(const std::vector<T>& values) {
  return std::all_of(values.begin(), values.end(),
                     [](const T& value) { return std::isfinite(toFloat(value)); });
}

void require(bool condition, const char* what) {
  if (!condition) throw std::runtime_error(std::string("check failed: ") + what);
}

// --- The example --------------------------------------------------------------------------------

void run() {
  constexpr int64_t kBatch = 2, kQueryHeads = 8, kKvHeads = 2, kSeqLen = 384, kHeadDim = 320;
  constexpr size_t kQElements = size_t{kBatch} * kQueryHeads * kSeqLen * kHeadDim;
  constexpr size_t kKvElements = size_t{kBatch} * kKvHeads * kSeqLen * kHeadDim;
  constexpr size_t kLseElements = size_t{kBatch} * kQueryHeads * kSeqLen;

  if (!FFPA_VERSION_IS_COMPATIBLE(ffpaGetVersion())) {
    throw std::runtime_error("the loaded libffpa is older than the header of this program");
  }
  const Handle handle = createHandle();  // first: it also tells whether a usable GPU exists
  const Stream stream = createStream();
  check(ffpaSetStream(handle.get(), stream.get()), "ffpaSetStream");

  // One descriptor per shape: Q, O, dO and dQ share one; K, V, dK and dV share another.
  const auto queryShaped =
      describeBnhd(FFPA_DATA_TYPE_FLOAT16, kBatch, kQueryHeads, kSeqLen, kHeadDim);
  const auto kvShaped =
      describeBnhd(FFPA_DATA_TYPE_FLOAT16, kBatch, kKvHeads, kSeqLen, kHeadDim);
  const auto lseDesc = describe(FFPA_DATA_TYPE_FLOAT32, {kBatch, kQueryHeads, kSeqLen});

  ffpaAttentionDescriptor_t rawAttention = nullptr;
  check(ffpaCreateAttentionDescriptor(&rawAttention), "ffpaCreateAttentionDescriptor");
  const AttentionDescriptor attention(rawAttention);
  const int32_t causal = FFPA_CAUSAL_BOTTOM_RIGHT;
  check(ffpaSetAttentionAttribute(attention.get(), FFPA_ATTENTION_CAUSAL_MODE, &causal,
                                  sizeof causal),
        "ffpaSetAttentionAttribute(FFPA_ATTENTION_CAUSAL_MODE)");
  const float scale = 1.0f / std::sqrt(float(kHeadDim));  // the default, set here to show how
  check(ffpaSetAttentionAttribute(attention.get(), FFPA_ATTENTION_SOFTMAX_SCALE, &scale,
                                  sizeof scale),
        "ffpaSetAttentionAttribute(FFPA_ATTENTION_SOFTMAX_SCALE)");

  const ffpaTensorDescriptor_t qDesc = queryShaped.get(), kvDesc = kvShaped.get();

  // Both queries plan their problem; one workspace large enough for either pass is reused.
  size_t forwardBytes = 0, backwardBytes = 0;
  check(ffpaGetAttentionForwardWorkspaceSize(handle.get(), attention.get(), qDesc, kvDesc, kvDesc,
                                             qDesc, lseDesc.get(), &forwardBytes),
        "ffpaGetAttentionForwardWorkspaceSize");
  check(ffpaGetAttentionBackwardWorkspaceSize(handle.get(), attention.get(), qDesc, kvDesc, kvDesc,
                                              qDesc, qDesc, lseDesc.get(), qDesc, kvDesc, kvDesc,
                                              &backwardBytes),
        "ffpaGetAttentionBackwardWorkspaceSize");
  DeviceArray<unsigned char> workspace(std::max(forwardBytes, backwardBytes));

  DeviceArray<__half> q(kQElements), k(kKvElements), v(kKvElements), o(kQElements);
  DeviceArray<__half> dO(kQElements), dQ(kQElements), dK(kKvElements), dV(kKvElements);
  DeviceArray<float> lse(kLseElements);
  const std::vector<__half> hostV = randomHalves(kKvElements, 3);
  q.upload(randomHalves(kQElements, 1), stream.get());
  k.upload(randomHalves(kKvElements, 2), stream.get());
  v.upload(hostV, stream.get());
  dO.upload(randomHalves(kQElements, 4), stream.get());

  check(ffpaAttentionForward(handle.get(), attention.get(), qDesc, q.get(), kvDesc, k.get(),
                             kvDesc, v.get(), qDesc, o.get(), lseDesc.get(), lse.get(),
                             workspace.get(), workspace.bytes()),
        "ffpaAttentionForward");
  // dK and dV of each K/V head sum the contributions of the 4 query heads that share it.
  check(ffpaAttentionBackward(handle.get(), attention.get(), qDesc, q.get(), kvDesc, k.get(),
                              kvDesc, v.get(), qDesc, o.get(), qDesc, dO.get(), lseDesc.get(),
                              lse.get(), qDesc, dQ.get(), kvDesc, dK.get(), kvDesc, dV.get(),
                              workspace.get(), workspace.bytes()),
        "ffpaAttentionBackward");

  std::vector<__half> hostO, hostDq, hostDk, hostDv;
  std::vector<float> hostLse;
  o.download(hostO, stream.get());
  lse.download(hostLse, stream.get());
  dQ.download(hostDq, stream.get());
  dK.download(hostDk, stream.get());
  dV.download(hostDv, stream.get());
  checkCuda(cudaStreamSynchronize(stream.get()), "cudaStreamSynchronize");

  // Softmax weights are positive and sum to 1, so no output exceeds the largest |V|; with
  // Nq == Nkv every query sees at least one key, so every log-sum-exp is finite.
  require(allFinite(hostO) && largestMagnitude(hostO) <= largestMagnitude(hostV) * 1.01f,
          "O is finite and within the range of V");
  require(allFinite(hostLse), "the log-sum-exp is finite");
  require(allFinite(hostDq) && allFinite(hostDk) && allFinite(hostDv), "the gradients are finite");

  std::printf("forward + backward, [B=%lld, N=%lld, H=%lld/%lld, D=%lld] fp16 stored BNHD, causal:"
              " ok\n  workspace %zu bytes (forward %zu, backward %zu)\n"
              "  |dQ| = %.4g, |dK| = %.4g, |dV| = %.4g\n",
              static_cast<long long>(kBatch), static_cast<long long>(kSeqLen),
              static_cast<long long>(kQueryHeads), static_cast<long long>(kKvHeads),
              static_cast<long long>(kHeadDim), workspace.bytes(), forwardBytes, backwardBytes,
              euclideanNorm(hostDq), euclideanNorm(hostDk), euclideanNorm(hostDv));
}

}  // namespace

int main() {
  try {
    run();
    return 0;
  } catch (const NoUsableGpu& reason) {
    std::printf("skipped: no GPU libffpa can use (%s)\n", reason.what());
    return kExitNoGpu;
  } catch (const std::exception& failure) {
    std::fprintf(stderr, "failed: %s\n", failure.what());
    return 1;
  }
}
