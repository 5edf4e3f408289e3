// Which instances of the sm80 forward kernel are compiled for one head dim, as a visitor walk,
// so that the CUDA build (forward_instantiate.cuh) and the CPU warp emulator's tests instantiate
// exactly the same set. For each instance the visitor's
//
//   template <class Tag, int kHeadDimV, bool kQkF16, bool kPvF16, bool kPipeKv,
//             bool kQInRegisters, bool kVInRegisters, bool kWideKeys>
//   void instance();
//
// is called. The set: every accumulator mode with the default fragment handling, plus the
// fragment-handling variants (register ping-pong, Q or V fragments kept in registers) with fp32
// accumulation, and where the shape has them (d_v <= 128) 64-key tiles with fp32 accumulation and
// the default fragment handling. Other combinations are not compiled; the planner says so.
#pragma once

#include "common/platform.cuh"
#include "sm80/forward_instances.h"
#include "sm80/forward_params.h"

#include <type_traits>

namespace ffpa::sm80 {

// The planner's description of an instance (its kernel pointer left null).
template <class Tag, int kHeadDimV, bool kQkF16, bool kPvF16, bool kPipeKv, bool kQInRegisters,
          bool kVInRegisters, bool kWideKeys>
ForwardInstance describeForwardInstance() {
  constexpr bool isHalf = std::is_same_v<Tag, ffpa::kernels::HalfTag>;
  constexpr ffpaAccumulator_t accumulator =
      kQkF16 ? (kPvF16 ? FFPA_ACCUMULATOR_F16 : FFPA_ACCUMULATOR_QK_F16)
             : (kPvF16 ? FFPA_ACCUMULATOR_PV_F16 : FFPA_ACCUMULATOR_F32);
  return {kHeadDimV, isHalf ? FFPA_DATA_TYPE_FLOAT16 : FFPA_DATA_TYPE_BFLOAT16, accumulator,
          kPipeKv, kQInRegisters, kVInRegisters, kWideKeys, nullptr};
}

// The translation unit (of kForwardParts) an instance is compiled in: fp16 with fp32
// accumulation, fp16 with an fp16 accumulator and the 64-key tiles of both types, bf16 (about as
// many instances in each).
template <class Tag, bool kQkF16, bool kPvF16, bool kWideKeys>
constexpr int forwardPartOf() {
  if constexpr (kWideKeys) return 1;
  if constexpr (!std::is_same_v<Tag, ffpa::kernels::HalfTag>) return 2;
  return kQkF16 || kPvF16 ? 1 : 0;
}

template <class Tag, int kHeadDimV, bool kSmall, class Visitor>
void visitFragmentVariants(Visitor& visitor) {
  visitor.template instance<Tag, kHeadDimV, false, false, false, false, kSmall, false>();
  visitor.template instance<Tag, kHeadDimV, false, false, true, false, kSmall, false>();
  if constexpr (kSmall) {
    // Q fragments in registers: d_qk <= 128, and d_v <= 128, where a warp's O leaves room for them.
    if constexpr (kHeadDimV <= 128) visitor.template instance<Tag, kHeadDimV, false, false, false, true, true, false>();
    visitor.template instance<Tag, kHeadDimV, false, false, false, false, false, false>();
  }
  // 64-key tiles where the shape has them, with the default fragment handling.
  if constexpr (hasWideKeyTiles(kHeadDimV)) {
    visitor.template instance<Tag, kHeadDimV, false, false, false, false, kSmall, true>();
  }
}

// Visits the instances compiled for head dim kHeadDim (those of its tile shape's largest d_v).
template <int kHeadDim, class Visitor>
void visitForwardInstances(Visitor& visitor) {
  using ffpa::kernels::Bf16Tag;
  using ffpa::kernels::HalfTag;
  constexpr ForwardShape shape = forwardShape(kHeadDim);
  constexpr int dv = shape.maxHeadDimV();
  // V fragments in registers is the default (and only meaningful) on one-warp-per-row shapes.
  constexpr bool small = shape.colWarps == 1;
  visitFragmentVariants<HalfTag, dv, small>(visitor);
  visitFragmentVariants<Bf16Tag, dv, small>(visitor);
  visitor.template instance<HalfTag, dv, true, false, false, false, small, false>();
  visitor.template instance<HalfTag, dv, false, true, false, false, small, false>();
  visitor.template instance<HalfTag, dv, true, true, false, false, small, false>();
}

}  // namespace ffpa::sm80
