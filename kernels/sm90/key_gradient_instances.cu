// The sm90 dK/dV kernel instances (compiled for sm_90a only; see kernels/meson.build).
#include "sm90/key_gradient_instances.h"
#include "sm90/key_gradient_kernel.cuh"

namespace ffpa::sm90 {
namespace {

// One CTA (max(d_qk, d_v) up to 256) or a cluster, as keyGradientClusterSize says for kHeadDim.
template <int kHeadDim>
void append(KeyGradientInstanceList& out) {
  using ffpa::kernels::Bf16Tag;
  using ffpa::kernels::HalfTag;
  using ffpa::kernels::sm90::clusterKeyGradientKernel;
  using ffpa::kernels::sm90::keyGradientKernel;
  constexpr int kCluster = keyGradientClusterSize(kHeadDim, kHeadDim);
  static_assert(keyGradientInstanceDim(kHeadDim, kHeadDim) == kHeadDim, "an instance the planner asks for");
  const auto entry = [](auto tag) {
    using Tag = decltype(tag);
    if constexpr (kCluster == 1) {
      return reinterpret_cast<const void*>(&keyGradientKernel<Tag, kHeadDim>);
    } else {
      return reinterpret_cast<const void*>(&clusterKeyGradientKernel<Tag, kHeadDim, kCluster>);
    }
  };
  out.push_back({kHeadDim, kCluster, FFPA_DATA_TYPE_FLOAT16, entry(HalfTag{})});
  out.push_back({kHeadDim, kCluster, FFPA_DATA_TYPE_BFLOAT16, entry(Bf16Tag{})});
}

}  // namespace

const KeyGradientInstanceList& keyGradientInstances() {
  static const KeyGradientInstanceList instances = [] {
    KeyGradientInstanceList all;
    append<64>(all);
    append<128>(all);
    append<192>(all);
    append<256>(all);
    append<384>(all);
    append<512>(all);
    append<768>(all);
    append<1024>(all);
    return all;
  }();
  return instances;
}

}  // namespace ffpa::sm90
