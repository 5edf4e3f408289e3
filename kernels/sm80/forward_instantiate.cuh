// The CUDA instances of one head dim: forward_instance_set.h's set, each as a __global__ kernel
// whose address the planner launches; one part of them per translation unit (kForwardParts).
#pragma once

#include "sm80/forward_instance_set.h"
#include "sm80/forward_kernel.cuh"

namespace ffpa::sm80 {

template <int kPart>
struct CompiledForwardInstances {
  ForwardInstanceList& out;

  template <class Tag, int kHeadDimV, bool kQkF16, bool kPvF16, bool kPipeKv, bool kQInRegisters,
            bool kVInRegisters, bool kWideKeys>
  void instance() {
    // Instances of the other parts are not even instantiated here.
    if constexpr (forwardPartOf<Tag, kQkF16, kPvF16, kWideKeys>() == kPart) {
      ForwardInstance described = describeForwardInstance<Tag, kHeadDimV, kQkF16, kPvF16, kPipeKv,
                                                          kQInRegisters, kVInRegisters, kWideKeys>();
      described.kernel = reinterpret_cast<const void*>(
          &ffpa::kernels::sm80::forwardKernel<Tag, kHeadDimV, kQkF16, kPvF16, kPipeKv,
                                              kQInRegisters, kVInRegisters, kWideKeys>);
      out.push_back(described);
    }
  }
};

template <int kHeadDim, int kPart>
void appendForwardInstances(ForwardInstanceList& out) {
  static_assert(kPart >= 0 && kPart < kForwardParts, "a part of the head dim's instances");
  CompiledForwardInstances<kPart> visitor{out};
  visitForwardInstances<kHeadDim>(visitor);
}

}  // namespace ffpa::sm80
