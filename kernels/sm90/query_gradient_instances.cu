// The sm90 dQ kernel instances (compiled for sm_90a only; see kernels/meson.build).
#include "sm90/query_gradient_instances.h"
#include "sm90/query_gradient_kernel.cuh"

namespace ffpa::sm90 {
namespace {

using ffpa::kernels::Bf16Tag;
using ffpa::kernels::HalfTag;

template <int kHeadDimQk>
void appendSingle(QueryGradientInstanceList& out) {
  using ffpa::kernels::sm90::queryGradientKernel;
  out.push_back({kHeadDimQk, 1, FFPA_DATA_TYPE_FLOAT16,
                 reinterpret_cast<const void*>(&queryGradientKernel<HalfTag, kHeadDimQk>)});
  out.push_back({kHeadDimQk, 1, FFPA_DATA_TYPE_BFLOAT16,
                 reinterpret_cast<const void*>(&queryGradientKernel<Bf16Tag, kHeadDimQk>)});
}

template <int kHeadDimQk, int kCluster>
void appendClustered(QueryGradientInstanceList& out) {
  using ffpa::kernels::sm90::clusterQueryGradientKernel;
  static_assert(gradientInstanceDimQk(kHeadDimQk, kCluster) == kHeadDimQk, "an instance the planner asks for");
  out.push_back({kHeadDimQk, kCluster, FFPA_DATA_TYPE_FLOAT16,
                 reinterpret_cast<const void*>(&clusterQueryGradientKernel<HalfTag, kHeadDimQk, kCluster>)});
  out.push_back({kHeadDimQk, kCluster, FFPA_DATA_TYPE_BFLOAT16,
                 reinterpret_cast<const void*>(&clusterQueryGradientKernel<Bf16Tag, kHeadDimQk, kCluster>)});
}

}  // namespace

const QueryGradientInstanceList& queryGradientInstances() {
  static const QueryGradientInstanceList instances = [] {
    QueryGradientInstanceList all;
    appendSingle<64>(all);
    appendSingle<128>(all);
    appendSingle<192>(all);
    appendSingle<256>(all);
    appendSingle<320>(all);
    appendSingle<384>(all);
    appendClustered<384, 2>(all);
    appendClustered<512, 2>(all);
    appendClustered<640, 2>(all);
    appendClustered<768, 4>(all);
    appendClustered<1024, 4>(all);
    return all;
  }();
  return instances;
}

}  // namespace ffpa::sm90
