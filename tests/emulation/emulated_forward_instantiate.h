// Included by the generated translation units (forward_instances.cpp.in), one per head dim: the
// head dim's instances of forward_instance_set.h, each compiled for the emulator.
#pragma once

#include "emulated_forward.h"
#include "sm80/forward_instance_set.h"
#include "sm80/forward_kernel.cuh"

namespace emulation_test {

template <class Tag, int kHeadDimV, bool kQkF16, bool kPvF16, bool kPipeKv, bool kQInRegisters,
          bool kVInRegisters>
void runEmulatedForward(const ffpa::emulation::Config& config,
                        const ffpa::sm80::ForwardParams& params) {
  using Kernel = ffpa::kernels::sm80::ForwardKernel<Tag, kHeadDimV, kQkF16, kPvF16, kPipeKv,
                                                    kQInRegisters, kVInRegisters>;
  if (config.blockThreads != Kernel::kThreads) {
    throw std::invalid_argument("the instance runs " + std::to_string(Kernel::kThreads) +
                                " threads per block");
  }
  ffpa::emulation::launch(config, [](const ffpa::sm80::ForwardParams& p) { Kernel::run(p); },
                          params);
}

struct EmulatedForwardInstances {
  EmulatedForwardList& out;

  template <class Tag, int kHeadDimV, bool kQkF16, bool kPvF16, bool kPipeKv, bool kQInRegisters,
            bool kVInRegisters>
  void instance() {
    out.push_back({ffpa::sm80::describeForwardInstance<Tag, kHeadDimV, kQkF16, kPvF16, kPipeKv,
                                                       kQInRegisters, kVInRegisters>(),
                   &runEmulatedForward<Tag, kHeadDimV, kQkF16, kPvF16, kPipeKv, kQInRegisters,
                                       kVInRegisters>});
  }
};

template <int kHeadDim>
void appendEmulatedForward(EmulatedForwardList& out) {
  EmulatedForwardInstances visitor{out};
  ffpa::sm80::visitForwardInstances<kHeadDim>(visitor);
}

}  // namespace emulation_test
