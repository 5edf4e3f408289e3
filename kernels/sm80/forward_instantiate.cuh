// The CUDA instances of one head dim: forward_instance_set.h's set, each as a __global__ kernel
// whose address the planner launches.
#pragma once

#include "sm80/forward_instance_set.h"
#include "sm80/forward_kernel.cuh"

namespace ffpa::sm80 {

struct CompiledForwardInstances {
  ForwardInstanceList& out;

  template <class Tag, int kHeadDimV, bool kQkF16, bool kPvF16, bool kPipeKv, bool kQInRegisters,
            bool kVInRegisters>
  void instance() {
    ForwardInstance described = describeForwardInstance<Tag, kHeadDimV, kQkF16, kPvF16, kPipeKv,
                                                        kQInRegisters, kVInRegisters>();
    described.kernel = reinterpret_cast<const void*>(
        &ffpa::kernels::sm80::forwardKernel<Tag, kHeadDimV, kQkF16, kPvF16, kPipeKv,
                                            kQInRegisters, kVInRegisters>);
    out.push_back(described);
  }
};

template <int kHeadDim>
void appendForwardInstances(ForwardInstanceList& out) {
  CompiledForwardInstances visitor{out};
  visitForwardInstances<kHeadDim>(visitor);
}

}  // namespace ffpa::sm80
