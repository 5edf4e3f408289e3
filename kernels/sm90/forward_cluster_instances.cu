// The sm90 forward instances of clusters of two CTAs (d_v > 512; compiled for sm_90a only, beside
// forward_instances.cu: see kernels/meson.build).
#include "sm90/forward_instances.h"
#include "sm90/forward_kernel.cuh"

namespace ffpa::sm90 {
namespace {

using ffpa::kernels::Bf16Tag;
using ffpa::kernels::HalfTag;

// d_v > 512: the cluster-of-two kernel (sm90/forward_params.h), with each split.
template <int kHeadDimV>
void appendClustered(ForwardInstanceList& out) {
  static_assert(clusterSizeFor(kHeadDimV) == kMaxClusterSize, "clusters serve d_v above 512");
  using ffpa::kernels::sm90::clusterForwardKernel;
  appendBoth(out, kHeadDimV, &clusterForwardKernel<HalfTag, kHeadDimV, kSkewedSplit>,
             &clusterForwardKernel<Bf16Tag, kHeadDimV, kSkewedSplit>, 1, kSkewedSplit);
  if constexpr (forwardSplitsDiffer(kHeadDimV / kMaxClusterSize)) {
    appendBoth(out, kHeadDimV, &clusterForwardKernel<HalfTag, kHeadDimV, kEvenSplit>,
               &clusterForwardKernel<Bf16Tag, kHeadDimV, kEvenSplit>, 1, kEvenSplit);
  }
}

}  // namespace

void appendClusterForwardInstances(ForwardInstanceList& out) {
  appendClustered<640>(out);
  appendClustered<768>(out);
  appendClustered<896>(out);
  appendClustered<1024>(out);
}

}  // namespace ffpa::sm90
