#include "sm80/backward_variant.h"

#include "ffpa_build_config.h"

#include <utility>

namespace ffpa::sm80 {
namespace {

// Every part of head dim kHeadDim's instances (each defined in a generated translation unit).
template <int kHeadDim, int... kParts>
void appendAllParts(BackwardInstanceList& out, std::integer_sequence<int, kParts...>) {
  (appendBackwardInstances<kHeadDim, kParts>(out), ...);
}

}  // namespace

const BackwardInstanceList& backwardInstances() {
  static const BackwardInstanceList instances = [] {
    BackwardInstanceList all;
#define FFPA_APPEND_BACKWARD_INSTANCES(d) appendAllParts<d>(all, std::make_integer_sequence<int, kBackwardParts>{});
    FFPA_KERNEL_HEAD_DIMS(FFPA_APPEND_BACKWARD_INSTANCES)
#undef FFPA_APPEND_BACKWARD_INSTANCES
    return all;
  }();
  return instances;
}

}  // namespace ffpa::sm80
