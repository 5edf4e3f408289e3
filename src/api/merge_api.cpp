// ffpaAttentionMerge and the attention sinks: each checks the descriptors, then the pointers, then
// enqueues one kernel.
#include "api/boundary.h"
#include "api/operands.h"

#include "core/device.h"
#include "core/handle.h"
#include "merge/merge_call.h"

namespace ffpa {
namespace {

// The frame the three calls share: the handle's stream and log level, then the call's own checks
// (`prepare` returns the enqueueing of its kernel), then the device. Nothing touches the device
// before every argument is checked.
template <class Prepare>
void enqueueChecked(ffpaHandle_t handle, Prepare&& prepare) {
  Context& context = contextOf(handle);
  const CallSnapshot snapshot = context.snapshot();
  setCallLogLevel(snapshot.policy->logLevel());
  const auto enqueue = prepare();
  context.executableRuntime();  // refuses a handle made for a described device
  ScopedDevice device(context.device().ordinal);
  enqueue(snapshot.stream);
}

}  // namespace
}  // namespace ffpa

extern "C" {

FFPA_API ffpaStatus_t ffpaAttentionMerge(ffpaHandle_t handle, int32_t count,
                                         ffpaTensorDescriptor_t partialODesc,
                                         const void* const* partialO,
                                         ffpaTensorDescriptor_t partialLseDesc,
                                         const float* const* partialLse,
                                         ffpaTensorDescriptor_t oDesc, void* o,
                                         ffpaTensorDescriptor_t lseDesc, float* lse) {
  return ffpa::guarded("ffpaAttentionMerge", [&] {
    ffpa::enqueueChecked(handle, [&] {
      const ffpa::MergeLayouts layouts{&ffpa::tensorLayout(partialODesc, "partialODesc"),
                                       &ffpa::tensorLayout(partialLseDesc, "partialLseDesc"),
                                       &ffpa::tensorLayout(oDesc, "oDesc"),
                                       ffpa::optionalLse(lseDesc, lse)};
      const ffpa::MergeProblem problem = ffpa::mergeProblem(count, layouts);
      const ffpa::MergeTensors tensors =
          ffpa::checkedMergeTensors(problem, layouts, partialO, partialLse, o, lse);
      return [=](ffpaStream_t stream) { ffpa::enqueueMerge(problem, tensors, stream); };
    });
  });
}

FFPA_API ffpaStatus_t ffpaAttentionApplySinks(ffpaHandle_t handle, const float* sinks,
                                              ffpaTensorDescriptor_t oDesc, void* o,
                                              ffpaTensorDescriptor_t lseDesc, float* lse) {
  return ffpa::guarded("ffpaAttentionApplySinks", [&] {
    ffpa::enqueueChecked(handle, [&] {
      const ffpa::TensorLayout& oLayout = ffpa::tensorLayout(oDesc, "oDesc");
      const ffpa::TensorLayout& lseLayout = ffpa::tensorLayout(lseDesc, "lseDesc");
      const ffpa::MergeProblem problem = ffpa::applySinksProblem(oLayout, lseLayout);
      const ffpa::MergeTensors tensors =
          ffpa::checkedApplySinksTensors(problem, oLayout, lseLayout, sinks, o, lse);
      return [=](ffpaStream_t stream) { ffpa::enqueueMerge(problem, tensors, stream); };
    });
  });
}

FFPA_API ffpaStatus_t ffpaAttentionSinksBackward(ffpaHandle_t handle, const float* sinks,
                                                 ffpaTensorDescriptor_t oDesc, const void* o,
                                                 ffpaTensorDescriptor_t doDesc, const void* dO,
                                                 ffpaTensorDescriptor_t lseDesc, const float* lse,
                                                 float* dSinks) {
  return ffpa::guarded("ffpaAttentionSinksBackward", [&] {
    ffpa::enqueueChecked(handle, [&] {
      const ffpa::TensorLayout& oLayout = ffpa::tensorLayout(oDesc, "oDesc");
      const ffpa::TensorLayout& dOLayout = ffpa::tensorLayout(doDesc, "doDesc");
      const ffpa::TensorLayout& lseLayout = ffpa::tensorLayout(lseDesc, "lseDesc");
      const ffpa::SinkGradientProblem problem = ffpa::sinkGradientProblem(oLayout, dOLayout, lseLayout);
      const ffpa::SinkGradientTensors tensors{sinks, o, dO, lse, dSinks};
      ffpa::checkSinkGradientTensors(problem, oLayout, dOLayout, lseLayout, tensors);
      return [=](ffpaStream_t stream) { ffpa::enqueueSinkGradient(problem, tensors, stream); };
    });
  });
}

}  // extern "C"
