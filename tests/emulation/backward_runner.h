// Runs one backward problem on the CPU warp emulator as the library would on a GPU: the
// planner's resolveBackward() picks the instance and computes its parameters; the emulated twins
// of its three kernels run in order on host tensors (O and LSE from float64 attention, rounded as
// a forward returns them; gradients and workspace poisoned); the gradients are checked against
// float64 attention.
#pragma once

#include "attention_case.h"

#include "core/plan.h"
#include "core/problem.h"
#include "emulation/launch.h"

#include <string>
#include <vector>

namespace emulation_test {

struct BackwardOutcome {
  std::string kernel;  // the instance's plan name, e.g. "sm80.backward.f16.d512"
  std::string config;
  ffpa_tools::HostTensor dq, dk, dv;
  // float64 gradients: exact, and computed from the rounded O the kernels are given.
  std::vector<double> exact[3], fromGivenO[3];
};

// A gradient kernel to run in place of the planned mma.sync one (the sm90 dQ or dK/dV kernel,
// which the planner pairs with the mma.sync row-statistics kernel): it is given the problem, the
// tensors, the row statistics written before it, the buffers it may touch and the schedule seed,
// and returns its name.
using GradientRun = std::string (*)(const ffpa::AttentionProblem& problem, const ffpa::TensorArgs& tensors,
                                    const float* rowStats, std::vector<ffpa::emulation::Buffer> buffers,
                                    uint64_t scheduleSeed);

// Plans and runs `c` (with `queryGradient` for dQ and `keyGradient` for dK and dV when given).
// With per-batch key lengths (c.shape.key_lengths) K and V hold NaN past each count. Throws
// std::runtime_error when the planner refuses the problem and ffpa::emulation::KernelError when
// the emulator finds a bug in a kernel.
BackwardOutcome runBackward(const AttentionCase& c, GradientRun queryGradient = nullptr,
                            GradientRun keyGradient = nullptr);

// CHECKs the outcome as the device tests do: each gradient within FlashAttention's criterion of
// float64 (twice what rounding the exact gradient and the given O cost, plus a floor); dQ of
// queries that see no key and dK, dV of keys no query sees exactly 0; layout gaps untouched.
void checkBackward(const AttentionCase& c, const BackwardOutcome& outcome);

// runBackward() and checkBackward(), with a failure to run reported as a failed CHECK.
void runAndCheckBackward(const AttentionCase& c, GradientRun queryGradient = nullptr,
                         GradientRun keyGradient = nullptr);

}  // namespace emulation_test
