// Which instances of the sm80 backward kernels are compiled for one head dim, as a visitor walk
// (as forward_instance_set.h), so that the CUDA build (backward_instantiate.cuh) and the CPU warp
// emulator's tests instantiate the same set: for each dtype the visitor's
//
//   template <class Tag, int kHeadDim> void instance();
//
// is called. Gradients always accumulate in fp32.
#pragma once

#include "common/platform.cuh"
#include "sm80/backward_instances.h"

#include <type_traits>

namespace ffpa::sm80 {

template <class Tag, int kHeadDim>
BackwardInstance describeBackwardInstance() {
  constexpr bool isHalf = std::is_same_v<Tag, ffpa::kernels::HalfTag>;
  return {kHeadDim, isHalf ? FFPA_DATA_TYPE_FLOAT16 : FFPA_DATA_TYPE_BFLOAT16, nullptr, nullptr, nullptr};
}

// The translation unit (of kBackwardParts) an instance is compiled in: one per dtype.
template <class Tag>
constexpr int backwardPartOf() {
  return std::is_same_v<Tag, ffpa::kernels::HalfTag> ? 0 : 1;
}

template <int kHeadDim, class Visitor>
void visitBackwardInstances(Visitor& visitor) {
  visitor.template instance<ffpa::kernels::HalfTag, kHeadDim>();
  visitor.template instance<ffpa::kernels::Bf16Tag, kHeadDim>();
}

}  // namespace ffpa::sm80
