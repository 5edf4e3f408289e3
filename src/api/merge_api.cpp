// ffpaAttentionMerge: checks the descriptors, then the pointers, then enqueues one kernel.
#include "api/boundary.h"
#include "api/operands.h"

#include "core/device.h"
#include "core/handle.h"
#include "merge/merge_call.h"

extern "C" {

FFPA_API ffpaStatus_t ffpaAttentionMerge(ffpaHandle_t handle, int32_t count,
                                         ffpaTensorDescriptor_t partialODesc,
                                         const void* const* partialO,
                                         ffpaTensorDescriptor_t partialLseDesc,
                                         const float* const* partialLse,
                                         ffpaTensorDescriptor_t oDesc, void* o,
                                         ffpaTensorDescriptor_t lseDesc, float* lse) {
  return ffpa::guarded("ffpaAttentionMerge", [&] {
    ffpa::Context& context = ffpa::contextOf(handle);
    const ffpa::CallSnapshot snapshot = context.snapshot();
    ffpa::setCallLogLevel(snapshot.policy->logLevel());
    const ffpa::MergeLayouts layouts{&ffpa::tensorLayout(partialODesc, "partialODesc"),
                                     &ffpa::tensorLayout(partialLseDesc, "partialLseDesc"),
                                     &ffpa::tensorLayout(oDesc, "oDesc"),
                                     ffpa::optionalLse(lseDesc, lse)};
    const ffpa::MergeProblem problem = ffpa::mergeProblem(count, layouts);
    const ffpa::MergeTensors tensors =
        ffpa::checkedMergeTensors(problem, layouts, partialO, partialLse, o, lse);
    context.executableRuntime();  // refuses a handle made for a described device
    ffpa::ScopedDevice device(context.device().ordinal);
    ffpa::enqueueMerge(problem, tensors, snapshot.stream);
  });
}

}  // extern "C"
