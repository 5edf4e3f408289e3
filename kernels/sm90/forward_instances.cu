// The sm90 forward instances (compiled for sm_90a only; see kernels/meson.build).
#include "sm90/forward_instances.h"
#include "sm90/forward_kernel.cuh"

namespace ffpa::sm90 {
namespace {

template <int kHeadDimV>
void append(ForwardInstanceList& out) {
  using ffpa::kernels::Bf16Tag;
  using ffpa::kernels::HalfTag;
  using ffpa::kernels::sm90::forwardKernel;
  out.push_back({kHeadDimV, FFPA_DATA_TYPE_FLOAT16, reinterpret_cast<const void*>(&forwardKernel<HalfTag, kHeadDimV>)});
  out.push_back({kHeadDimV, FFPA_DATA_TYPE_BFLOAT16, reinterpret_cast<const void*>(&forwardKernel<Bf16Tag, kHeadDimV>)});
}

}  // namespace

const ForwardInstanceList& forwardInstances() {
  static const ForwardInstanceList instances = [] {
    ForwardInstanceList all;
    append<320>(all);
    append<384>(all);
    append<448>(all);
    append<512>(all);
    return all;
  }();
  return instances;
}

}  // namespace ffpa::sm90
