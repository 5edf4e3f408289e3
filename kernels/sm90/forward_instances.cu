// The sm90 forward instances (compiled for sm_90a only; see kernels/meson.build).
#include "sm90/forward_instances.h"
#include "sm90/forward_kernel.cuh"

namespace ffpa::sm90 {
namespace {

using ffpa::kernels::Bf16Tag;
using ffpa::kernels::HalfTag;

// The fp16 and bf16 instances of one kernel, the __global__ functions taken as plain addresses.
void appendBoth(ForwardInstanceList& out, int headDimV, void (*half)(ForwardParams), void (*bf16)(ForwardParams),
                int kvSharing) {
  out.push_back({headDimV, FFPA_DATA_TYPE_FLOAT16, reinterpret_cast<const void*>(half), kvSharing});
  out.push_back({headDimV, FFPA_DATA_TYPE_BFLOAT16, reinterpret_cast<const void*>(bf16), kvSharing});
}

// d_v <= 512: one CTA per row tile, and the pair of CTAs that share K and V.
template <int kHeadDimV>
void append(ForwardInstanceList& out) {
  using ffpa::kernels::sm90::forwardKernel;
  using ffpa::kernels::sm90::kvSharingForwardKernel;
  appendBoth(out, kHeadDimV, &forwardKernel<HalfTag, kHeadDimV>, &forwardKernel<Bf16Tag, kHeadDimV>, 1);
  appendBoth(out, kHeadDimV, &kvSharingForwardKernel<HalfTag, kHeadDimV>, &kvSharingForwardKernel<Bf16Tag, kHeadDimV>,
             kKvSharingCtas);
}

// d_v > 512: the cluster-of-two kernel (sm90/forward_params.h).
template <int kHeadDimV>
void appendClustered(ForwardInstanceList& out) {
  static_assert(clusterSizeFor(kHeadDimV) == kMaxClusterSize, "clusters serve d_v above 512");
  using ffpa::kernels::sm90::clusterForwardKernel;
  appendBoth(out, kHeadDimV, &clusterForwardKernel<HalfTag, kHeadDimV>, &clusterForwardKernel<Bf16Tag, kHeadDimV>, 1);
}

}  // namespace

const ForwardInstanceList& forwardInstances() {
  static const ForwardInstanceList instances = [] {
    ForwardInstanceList all;
    append<320>(all);
    append<384>(all);
    append<448>(all);
    append<512>(all);
    appendClustered<640>(all);
    appendClustered<768>(all);
    appendClustered<896>(all);
    appendClustered<1024>(all);
    return all;
  }();
  return instances;
}

}  // namespace ffpa::sm90
