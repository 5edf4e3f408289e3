// The CUDA instances of one head dim: backward_instance_set.h's set, each kernel as a __global__
// function whose address the planner launches; one part of them (a dtype) per translation unit.
#pragma once

#include "sm80/backward_instance_set.h"
#include "sm80/backward_key_kernel.cuh"
#include "sm80/backward_query_kernel.cuh"
#include "sm80/backward_row_stats.cuh"

namespace ffpa::sm80 {

template <int kPart>
struct CompiledBackwardInstances {
  BackwardInstanceList& out;

  template <class Tag, int kHeadDim>
  void instance() {
    if constexpr (backwardPartOf<Tag>() == kPart) {
      BackwardInstance described = describeBackwardInstance<Tag, kHeadDim>();
      described.rowStats = reinterpret_cast<const void*>(&ffpa::kernels::sm80::rowStatsKernel<Tag>);
      described.queryGradient =
          reinterpret_cast<const void*>(&ffpa::kernels::sm80::queryGradientKernel<Tag, kHeadDim>);
      described.keyGradient =
          reinterpret_cast<const void*>(&ffpa::kernels::sm80::keyGradientKernel<Tag, kHeadDim>);
      out.push_back(described);
    }
  }
};

template <int kHeadDim, int kPart>
void appendBackwardInstances(BackwardInstanceList& out) {
  static_assert(kPart >= 0 && kPart < kBackwardParts, "a part of the head dim's instances");
  CompiledBackwardInstances<kPart> visitor{out};
  visitBackwardInstances<kHeadDim>(visitor);
}

}  // namespace ffpa::sm80
