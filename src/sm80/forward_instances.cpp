#include "sm80/forward_variant.h"

#include "ffpa_build_config.h"

#include <utility>

namespace ffpa::sm80 {
namespace {

// Every part of head dim kHeadDim's instances (each defined in a generated translation unit).
template <int kHeadDim, int... kParts>
void appendAllParts(ForwardInstanceList& out, std::integer_sequence<int, kParts...>) {
  (appendForwardInstances<kHeadDim, kParts>(out), ...);
}

}  // namespace

const ForwardInstanceList& forwardInstances() {
  static const ForwardInstanceList instances = [] {
    ForwardInstanceList all;
#define FFPA_APPEND_FORWARD_INSTANCES(d) appendAllParts<d>(all, std::make_integer_sequence<int, kForwardParts>{});
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
