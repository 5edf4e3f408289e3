#include "device_tuner.h"

#include "worker_pool.h"

#include "common/plan_text.h"

#include "core/handle.h"

#include <cuda_runtime.h>
#include <ffpa/ffpa.h>

#include <memory>
#include <sstream>
#include <stdexcept>

namespace ffpa_autotune {
namespace {

void check(ffpaStatus_t status, const char* call) {
  if (status == FFPA_STATUS_SUCCESS) return;
  std::vector<char> message(ffpaGetLastErrorString(nullptr, 0) + 1);
  ffpaGetLastErrorString(message.data(), message.size());
  throw std::runtime_error(std::string(call) + ": " + ffpaGetErrorString(status) + ": " + message.data());
}

template <class T>
using Owned = std::unique_ptr<T, ffpaStatus_t (*)(T*)>;

Owned<ffpaTensorStruct> tensor(ffpaDataType_t dtype, std::initializer_list<int64_t> dims) {
  ffpaTensorDescriptor_t desc = nullptr;
  check(ffpaCreateTensorDescriptor(&desc), "ffpaCreateTensorDescriptor");
  Owned<ffpaTensorStruct> owned(desc, ffpaDestroyTensorDescriptor);
  const std::vector<int64_t> extents(dims);
  check(ffpaSetTensorDescriptor(desc, dtype, static_cast<int32_t>(extents.size()), extents.data(), nullptr),
        "ffpaSetTensorDescriptor");
  return owned;
}

// The "kernel: " line of the task's plan description.
std::string plannedKernel(ffpaHandle_t h, ffpaAttentionDescriptor_t attn, const Task& task, ffpaTensorDescriptor_t q,
                          ffpaTensorDescriptor_t kv, ffpaTensorDescriptor_t lse) {
  std::vector<char> text(4096);
  size_t length = 0;
  if (task.direction == "forward") {
    check(ffpaDescribeAttentionForwardPlan(h, attn, q, kv, kv, q, lse, text.data(), text.size(), &length),
          "ffpaDescribeAttentionForwardPlan");
  } else {
    check(ffpaDescribeAttentionBackwardPlan(h, attn, q, kv, kv, q, q, lse, q, kv, kv, text.data(), text.size(),
                                            &length),
          "ffpaDescribeAttentionBackwardPlan");
  }
  const std::string kernel = ffpa_tools::parsePlanText(text.data()).kernel;
  return kernel.empty() ? "an unnamed kernel" : kernel;
}

}  // namespace

int deviceCount() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) return 0;
  return count;
}

DeviceSummary describeDevice(int device) {
  cudaDeviceProp properties{};
  if (cudaGetDeviceProperties(&properties, device) != cudaSuccess) {
    throw std::runtime_error("GPU " + std::to_string(device) + " cannot be queried");
  }
  return {properties.name, std::to_string(properties.major) + "." + std::to_string(properties.minor),
          static_cast<int64_t>(properties.totalGlobalMem)};
}

std::vector<int64_t> compiledHeadDims() {
  const std::string info = ffpaGetBuildInfo();
  std::vector<int64_t> dims;
  const size_t start = info.find("head dims ");
  if (start == std::string::npos) return dims;
  std::istringstream list(info.substr(start + 10, info.find(';', start) - start - 10));
  for (std::string item; std::getline(list, item, ',');) dims.push_back(std::stoll(item));
  return dims;
}

ffpa::tuning::TunedEntry tuneOnDevice(const Task& task, int device, const std::string& mode) {
  if (cudaSetDevice(device) != cudaSuccess) throw std::runtime_error("cannot use GPU " + std::to_string(device));
  ffpaHandle_t raw = nullptr;
  check(ffpaCreate(&raw), "ffpaCreate");
  Owned<ffpaContext> handle(raw, ffpaDestroy);
  const int32_t on = 1, modeValue = mode == "max" ? FFPA_AUTOTUNE_MODE_MAX : FFPA_AUTOTUNE_MODE_FAST;
  check(ffpaSetPolicy(raw, FFPA_POLICY_AUTOTUNE, &on, sizeof on), "ffpaSetPolicy(AUTOTUNE)");
  check(ffpaSetPolicy(raw, FFPA_POLICY_AUTOTUNE_MODE, &modeValue, sizeof modeValue), "ffpaSetPolicy(AUTOTUNE_MODE)");
  check(ffpaSetPolicy(raw, FFPA_POLICY_SKIP_PERSISTENT_TUNED_CONFIG, &on, sizeof on),
        "ffpaSetPolicy(SKIP_PERSISTENT_TUNED_CONFIG)");

  ffpaAttentionDescriptor_t attnRaw = nullptr;
  check(ffpaCreateAttentionDescriptor(&attnRaw), "ffpaCreateAttentionDescriptor");
  Owned<ffpaAttentionStruct> attn(attnRaw, ffpaDestroyAttentionDescriptor);
  const int32_t causal = task.causal ? FFPA_CAUSAL_BOTTOM_RIGHT : FFPA_CAUSAL_NONE;
  check(ffpaSetAttentionAttribute(attnRaw, FFPA_ATTENTION_CAUSAL_MODE, &causal, sizeof causal),
        "ffpaSetAttentionAttribute");
  const ffpaDataType_t dtype = task.dtype == "fp16" ? FFPA_DATA_TYPE_FLOAT16 : FFPA_DATA_TYPE_BFLOAT16;
  const auto q = tensor(dtype, {task.batch, task.headsQ, task.seqQ, task.headDim});
  const auto kv = tensor(dtype, {task.batch, task.headsKv, task.seqKv, task.headDim});
  const auto lse = tensor(FFPA_DATA_TYPE_FLOAT32, {task.batch, task.headsQ, task.seqQ});
  size_t bytes = 0;
  if (task.direction == "forward") {
    check(ffpaGetAttentionForwardWorkspaceSize(raw, attnRaw, q.get(), kv.get(), kv.get(), q.get(), lse.get(), &bytes),
          "ffpaGetAttentionForwardWorkspaceSize");
  } else {
    check(ffpaGetAttentionBackwardWorkspaceSize(raw, attnRaw, q.get(), kv.get(), kv.get(), q.get(), q.get(),
                                                lse.get(), q.get(), kv.get(), kv.get(), &bytes),
          "ffpaGetAttentionBackwardWorkspaceSize");
  }
  const auto entries = ffpa::contextOf(raw).tunedEntries();
  if (entries.empty()) {
    const std::string kernel = plannedKernel(raw, attnRaw, task, q.get(), kv.get(), lse.get());
    if (kernel.rfind("reference", 0) == 0) {
      throw std::runtime_error("no kernel of this build tunes " + task.label() + " (" + kernel + " serves it)");
    }
    throw NothingToTune(kernel + " has no launch parameters to tune");
  }
  return *entries.back();
}

}  // namespace ffpa_autotune
