// Included by the generated translation units (instances.cpp.in), one per head dim: the head
// dim's forward and backward instances, each compiled for the emulator.
#pragma once

#include "emulated_kernels.h"
#include "sm80/backward_instance_set.h"
#include "sm80/backward_key_kernel.cuh"
#include "sm80/backward_query_kernel.cuh"
#include "sm80/backward_row_stats.cuh"
#include "sm80/forward_instance_set.h"
#include "sm80/forward_kernel.cuh"

#include <stdexcept>
#include <string>

namespace emulation_test {

// Runs Kernel::run(params) over config's grid, with the block size the kernel was written for.
template <class Kernel, class Params>
void runEmulated(const ffpa::emulation::Config& config, const Params& params, int threads) {
  if (config.blockThreads != threads) {
    throw std::invalid_argument("the kernel runs " + std::to_string(threads) + " threads per block");
  }
  ffpa::emulation::launch(config, [](const Params& p) { Kernel::run(p); }, params);
}

template <class Tag, int kHeadDimV, bool kQkF16, bool kPvF16, bool kPipeKv, bool kQInRegisters,
          bool kVInRegisters, bool kWideKeys>
void runEmulatedForward(const ffpa::emulation::Config& config, const ffpa::sm80::ForwardParams& params) {
  using Kernel = ffpa::kernels::sm80::ForwardKernel<Tag, kHeadDimV, kQkF16, kPvF16, kPipeKv,
                                                    kQInRegisters, kVInRegisters, kWideKeys>;
  runEmulated<Kernel>(config, params, Kernel::kThreads);
}

template <class Tag>
void runEmulatedRowStats(const ffpa::emulation::Config& config, const ffpa::sm80::BackwardParams& params) {
  runEmulated<ffpa::kernels::sm80::RowStatsKernel<Tag>>(config, params, 32 * ffpa::sm80::kRowStatsWarps);
}

template <class Tag, int kHeadDim>
void runEmulatedQueryGradient(const ffpa::emulation::Config& config,
                              const ffpa::sm80::BackwardParams& params) {
  using Kernel = ffpa::kernels::sm80::QueryGradientKernel<Tag, kHeadDim>;
  runEmulated<Kernel>(config, params, Kernel::kThreads);
}

template <class Tag, int kHeadDim>
void runEmulatedKeyGradient(const ffpa::emulation::Config& config,
                            const ffpa::sm80::BackwardParams& params) {
  using Kernel = ffpa::kernels::sm80::KeyGradientKernel<Tag, kHeadDim>;
  runEmulated<Kernel>(config, params, Kernel::kThreads);
}

struct EmulatedForwardInstances {
  EmulatedForwardList& out;

  template <class Tag, int kHeadDimV, bool kQkF16, bool kPvF16, bool kPipeKv, bool kQInRegisters,
            bool kVInRegisters, bool kWideKeys>
  void instance() {
    out.push_back({ffpa::sm80::describeForwardInstance<Tag, kHeadDimV, kQkF16, kPvF16, kPipeKv,
                                                       kQInRegisters, kVInRegisters, kWideKeys>(),
                   &runEmulatedForward<Tag, kHeadDimV, kQkF16, kPvF16, kPipeKv, kQInRegisters,
                                       kVInRegisters, kWideKeys>});
  }
};

struct EmulatedBackwardInstances {
  EmulatedBackwardList& out;

  template <class Tag, int kHeadDim>
  void instance() {
    out.push_back({ffpa::sm80::describeBackwardInstance<Tag, kHeadDim>(), &runEmulatedRowStats<Tag>,
                   &runEmulatedQueryGradient<Tag, kHeadDim>, &runEmulatedKeyGradient<Tag, kHeadDim>});
  }
};

template <int kHeadDim>
void appendEmulatedInstances(EmulatedForwardList& forward, EmulatedBackwardList& backward) {
  EmulatedForwardInstances forwardVisitor{forward};
  ffpa::sm80::visitForwardInstances<kHeadDim>(forwardVisitor);
  EmulatedBackwardInstances backwardVisitor{backward};
  ffpa::sm80::visitBackwardInstances<kHeadDim>(backwardVisitor);
}

}  // namespace emulation_test
