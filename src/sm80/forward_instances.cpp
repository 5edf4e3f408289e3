#include "sm80/forward_variant.h"

#include "ffpa_build_config.h"

namespace ffpa::sm80 {

// Defined by the generated translation units, one per head dim of the kernel set.
#define FFPA_DECLARE_FORWARD_INSTANCES(d) void appendForwardInstancesD##d(ForwardInstanceList& out);
FFPA_KERNEL_HEAD_DIMS(FFPA_DECLARE_FORWARD_INSTANCES)
#undef FFPA_DECLARE_FORWARD_INSTANCES

const ForwardInstanceList& forwardInstances() {
  static const ForwardInstanceList instances = [] {
    ForwardInstanceList all;
#define FFPA_APPEND_FORWARD_INSTANCES(d) appendForwardInstancesD##d(all);
    FFPA_KERNEL_HEAD_DIMS(FFPA_APPEND_FORWARD_INSTANCES)
#undef FFPA_APPEND_FORWARD_INSTANCES
    // Head dims with the same tile shape compile the same kernels: keep one entry of each.
    ForwardInstanceList unique;
    for (const ForwardInstance& candidate : all) {
      bool seen = false;
      for (const ForwardInstance& kept : unique) seen = seen || kept.kernel == candidate.kernel;
      if (!seen) unique.push_back(candidate);
    }
    return unique;
  }();
  return instances;
}

}  // namespace ffpa::sm80
