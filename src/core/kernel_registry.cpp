#include "core/kernel_registry.h"

#include "reference/reference_variants.h"
#include "sm80/backward_variant.h"
#include "sm80/forward_variant.h"
#include "sm90/backward_variant.h"
#include "sm90/forward_variant.h"

#include <algorithm>

namespace ffpa {

void KernelRegistry::add(KernelVariant variant) {
  const auto position = std::upper_bound(
      variants_.begin(), variants_.end(), variant.priority,
      [](int priority, const KernelVariant& existing) { return priority > existing.priority; });
  variants_.insert(position, std::move(variant));
}

const KernelRegistry& builtinKernels() {
  static const KernelRegistry registry = [] {
    KernelRegistry r;
    registerReferenceVariants(r);
    sm80::registerForwardVariant(r);
    sm80::registerBackwardVariant(r);
    sm90::registerForwardVariant(r);
    sm90::registerBackwardVariant(r);
    return r;
  }();
  return registry;
}

}  // namespace ffpa
