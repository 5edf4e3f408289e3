// The sm90 forward instances (compiled for sm_90a only; see kernels/meson.build).
#include "sm90/forward_instances.h"
#include "sm90/forward_kernel.cuh"

namespace ffpa::sm90 {
namespace {

using ffpa::kernels::Bf16Tag;
using ffpa::kernels::HalfTag;

// d_v <= 512: one CTA per row tile, and the pair of CTAs that share K and V.
template <int kHeadDimV>
void append(ForwardInstanceList& out) {
  using ffpa::kernels::sm90::forwardKernel;
  using ffpa::kernels::sm90::kvSharingForwardKernel;
  out.push_back(
      {kHeadDimV, FFPA_DATA_TYPE_FLOAT16, reinterpret_cast<const void*>(&forwardKernel<HalfTag, kHeadDimV>), 1});
  out.push_back(
      {kHeadDimV, FFPA_DATA_TYPE_BFLOAT16, reinterpret_cast<const void*>(&forwardKernel<Bf16Tag, kHeadDimV>), 1});
  out.push_back({kHeadDimV, FFPA_DATA_TYPE_FLOAT16,
                 reinterpret_cast<const void*>(&kvSharingForwardKernel<HalfTag, kHeadDimV>), kKvSharingCtas});
  out.push_back({kHeadDimV, FFPA_DATA_TYPE_BFLOAT16,
                 reinterpret_cast<const void*>(&kvSharingForwardKernel<Bf16Tag, kHeadDimV>), kKvSharingCtas});
}

// d_v > 512: the cluster-of-two kernel (sm90/forward_params.h).
template <int kHeadDimV>
void appendClustered(ForwardInstanceList& out) {
  static_assert(clusterSizeFor(kHeadDimV) == kMaxClusterSize, "clusters serve d_v above 512");
  using ffpa::kernels::sm90::clusterForwardKernel;
  out.push_back(
      {kHeadDimV, FFPA_DATA_TYPE_FLOAT16, reinterpret_cast<const void*>(&clusterForwardKernel<HalfTag, kHeadDimV>), 1});
  out.push_back(
      {kHeadDimV, FFPA_DATA_TYPE_BFLOAT16, reinterpret_cast<const void*>(&clusterForwardKernel<Bf16Tag, kHeadDimV>), 1});
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
