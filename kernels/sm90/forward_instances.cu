// The sm90 forward instances of one CTA per row tile for d_v 257..512, and the list of all
// (compiled for sm_90a only; see kernels/meson.build).
#include "sm90/forward_one_cta.cuh"

namespace ffpa::sm90 {

void appendOneCtaForwardInstances(ForwardInstanceList& out) {
  appendOneCta<320>(out);
  appendOneCta<384>(out);
  appendOneCta<448>(out);
  appendOneCta<512>(out);
}

const ForwardInstanceList& forwardInstances() {
  static const ForwardInstanceList instances = [] {
    ForwardInstanceList all;
    appendSmallForwardInstances(all);
    appendOneCtaForwardInstances(all);
    appendClusterForwardInstances(all);
    return all;
  }();
  return instances;
}

}  // namespace ffpa::sm90
