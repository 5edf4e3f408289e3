// The instances compiled for one head dim: every accumulator mode with the default fragment
// handling, plus the fragment-handling variants (register ping-pong, Q or V fragments kept in
// registers) with fp32 accumulation. Other combinations are not compiled; the planner says so.
#pragma once

#include "sm80/forward_instances.h"
#include "sm80/forward_kernel.cuh"

namespace ffpa::sm80 {

template <class Tag, int kHeadDimV, bool kQkF16, bool kPvF16, bool kPipeKv, bool kQInRegisters,
          bool kVInRegisters>
void appendForwardInstance(ForwardInstanceList& out) {
  using ffpa::kernels::HalfTag;
  constexpr bool isHalf = std::is_same_v<Tag, HalfTag>;
  constexpr ffpaAccumulator_t accumulator =
      kQkF16 ? (kPvF16 ? FFPA_ACCUMULATOR_F16 : FFPA_ACCUMULATOR_QK_F16)
             : (kPvF16 ? FFPA_ACCUMULATOR_PV_F16 : FFPA_ACCUMULATOR_F32);
  out.push_back({kHeadDimV, isHalf ? FFPA_DATA_TYPE_FLOAT16 : FFPA_DATA_TYPE_BFLOAT16, accumulator,
                 kPipeKv, kQInRegisters, kVInRegisters,
                 reinterpret_cast<const void*>(
                     &ffpa::kernels::sm80::forwardKernel<Tag, kHeadDimV, kQkF16, kPvF16, kPipeKv,
                                                         kQInRegisters, kVInRegisters>)});
}

template <class Tag, int kHeadDimV, bool kSmall>
void appendFragmentVariants(ForwardInstanceList& out) {
  appendForwardInstance<Tag, kHeadDimV, false, false, false, false, kSmall>(out);
  appendForwardInstance<Tag, kHeadDimV, false, false, true, false, kSmall>(out);
  if constexpr (kSmall) {
    appendForwardInstance<Tag, kHeadDimV, false, false, false, true, true>(out);
    appendForwardInstance<Tag, kHeadDimV, false, false, false, false, false>(out);
  }
}

template <int kHeadDim>
void appendForwardInstances(ForwardInstanceList& out) {
  using ffpa::kernels::Bf16Tag;
  using ffpa::kernels::HalfTag;
  constexpr ForwardShape shape = forwardShape(kHeadDim);
  constexpr int dv = shape.maxHeadDimV();
  // V fragments in registers is the default (and only meaningful) on one-warp-per-row shapes.
  constexpr bool small = shape.colWarps == 1;
  appendFragmentVariants<HalfTag, dv, small>(out);
  appendFragmentVariants<Bf16Tag, dv, small>(out);
  appendForwardInstance<HalfTag, dv, true, false, false, false, small>(out);
  appendForwardInstance<HalfTag, dv, false, true, false, false, small>(out);
  appendForwardInstance<HalfTag, dv, true, true, false, false, small>(out);
}

}  // namespace ffpa::sm80
