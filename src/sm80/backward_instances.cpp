#include "sm80/backward_variant.h"

#include "ffpa_build_config.h"

namespace ffpa::sm80 {

// Defined by the generated translation units, one per head dim of the kernel set.
#define FFPA_DECLARE_BACKWARD_INSTANCES(d) void appendBackwardInstancesD##d(BackwardInstanceList& out);
FFPA_KERNEL_HEAD_DIMS(FFPA_DECLARE_BACKWARD_INSTANCES)
#undef FFPA_DECLARE_BACKWARD_INSTANCES

const BackwardInstanceList& backwardInstances() {
  static const BackwardInstanceList instances = [] {
    BackwardInstanceList all;
#define FFPA_APPEND_BACKWARD_INSTANCES(d) appendBackwardInstancesD##d(all);
    FFPA_KERNEL_HEAD_DIMS(FFPA_APPEND_BACKWARD_INSTANCES)
#undef FFPA_APPEND_BACKWARD_INSTANCES
    return all;
  }();
  return instances;
}

}  // namespace ffpa::sm80
