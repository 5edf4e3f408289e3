// The sm90 forward instances of one CTA per row tile for one d_v (d_v <= 512), as the translation
// units of forward_instances.cu and forward_small_instances.cu append them.
#pragma once

#include "sm90/forward_instances.h"
#include "sm90/forward_kernel.cuh"

namespace ffpa::sm90 {

// One CTA per row tile with each split (one where they agree), and the pair of CTAs that share K
// and V.
template <int kHeadDimV>
void appendOneCta(ForwardInstanceList& out) {
  static_assert(clusterSizeFor(kHeadDimV) == 1, "one CTA serves d_v up to 512");
  using ffpa::kernels::Bf16Tag;
  using ffpa::kernels::HalfTag;
  using ffpa::kernels::sm90::forwardKernel;
  using ffpa::kernels::sm90::kvSharingForwardKernel;
  appendBoth(out, kHeadDimV, &forwardKernel<HalfTag, kHeadDimV, kEvenSplit>,
             &forwardKernel<Bf16Tag, kHeadDimV, kEvenSplit>, 1, kEvenSplit);
  if constexpr (forwardSplitsDiffer(kHeadDimV)) {
    appendBoth(out, kHeadDimV, &forwardKernel<HalfTag, kHeadDimV, kSkewedSplit>,
               &forwardKernel<Bf16Tag, kHeadDimV, kSkewedSplit>, 1, kSkewedSplit);
  }
  appendBoth(out, kHeadDimV, &kvSharingForwardKernel<HalfTag, kHeadDimV>, &kvSharingForwardKernel<Bf16Tag, kHeadDimV>,
             kKvSharingCtas, kEvenSplit);
}

}  // namespace ffpa::sm90
