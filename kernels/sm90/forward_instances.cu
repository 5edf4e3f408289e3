// The sm90 forward instances of one CTA per row tile, and the list of all (compiled for sm_90a
// only; see kernels/meson.build).
#include "sm90/forward_instances.h"
#include "sm90/forward_kernel.cuh"

namespace ffpa::sm90 {
namespace {

using ffpa::kernels::Bf16Tag;
using ffpa::kernels::HalfTag;

// d_v <= 512: one CTA per row tile with each split (one where they agree), and the pair of CTAs
// that share K and V.
template <int kHeadDimV>
void append(ForwardInstanceList& out) {
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

}  // namespace

void appendOneCtaForwardInstances(ForwardInstanceList& out) {
  append<320>(out);
  append<384>(out);
  append<448>(out);
  append<512>(out);
}

const ForwardInstanceList& forwardInstances() {
  static const ForwardInstanceList instances = [] {
    ForwardInstanceList all;
    appendOneCtaForwardInstances(all);
    appendClusterForwardInstances(all);
    return all;
  }();
  return instances;
}

}  // namespace ffpa::sm90
