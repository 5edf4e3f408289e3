// The sanity check of FFPA_POLICY_SANITY_CHECK: after a call, wait for it, surface any CUDA error
// at the call that caused it, and scan inputs and outputs for NaN/infinity.
#pragma once

#include "core/plan.h"
#include "core/problem.h"

namespace ffpa {

// `scratch` is kSanityScratchBytes of the caller's workspace. Throws ffpa::Error
// (EXECUTION_FAILED_CUDA, EXECUTION_FAILED_NON_FINITE). Skipped, with a warning, while the stream
// is being captured into a CUDA graph, where synchronizing is not allowed.
void runSanityCheck(const AttentionProblem& problem, const TensorArgs& tensors, void* scratch,
                    ffpaStream_t stream, ffpaLogLevel_t logLevel);

}  // namespace ffpa
