// The sm90 forward instances for d_v 65..256 (one CTA per row tile; compiled for sm_90a only,
// beside forward_instances.cu: see kernels/meson.build).
#include "sm90/forward_one_cta.cuh"

namespace ffpa::sm90 {

void appendSmallForwardInstances(ForwardInstanceList& out) {
  appendOneCta<128>(out);
  appendOneCta<192>(out);
  appendOneCta<256>(out);
}

}  // namespace ffpa::sm90
