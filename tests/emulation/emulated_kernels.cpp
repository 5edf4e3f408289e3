#include "emulated_kernels.h"

#include "ffpa_build_config.h"

namespace emulation_test {

// Defined by the generated translation units, one per head dim of the kernel set.
#define FFPA_DECLARE_EMULATED(d) \
  void appendEmulatedInstancesD##d(EmulatedForwardList& forward, EmulatedBackwardList& backward);
FFPA_KERNEL_HEAD_DIMS(FFPA_DECLARE_EMULATED)
#undef FFPA_DECLARE_EMULATED

namespace {

bool sameInstance(const ffpa::sm80::ForwardInstance& a, const ffpa::sm80::ForwardInstance& b) {
  return a.headDimV == b.headDimV && a.dtype == b.dtype && a.accumulator == b.accumulator &&
         a.pipeKv == b.pipeKv && a.qInRegisters == b.qInRegisters &&
         a.vInRegisters == b.vInRegisters && a.wideKeys == b.wideKeys;
}

bool sameInstance(const ffpa::sm80::BackwardInstance& a, const ffpa::sm80::BackwardInstance& b) {
  return a.headDim == b.headDim && a.dtype == b.dtype;
}

struct Lists {
  EmulatedForwardList forward;
  EmulatedBackwardList backward;
};

// Head dims with the same tile shape give the same forward instances: keep one of each.
template <class List>
List unique(const List& all) {
  List kept;
  for (const auto& candidate : all) {
    bool seen = false;
    for (const auto& instance : kept) seen = seen || sameInstance(instance.described, candidate.described);
    if (!seen) kept.push_back(candidate);
  }
  return kept;
}

const Lists& lists() {
  static const Lists instances = [] {
    Lists all;
#define FFPA_APPEND_EMULATED(d) appendEmulatedInstancesD##d(all.forward, all.backward);
    FFPA_KERNEL_HEAD_DIMS(FFPA_APPEND_EMULATED)
#undef FFPA_APPEND_EMULATED
    return Lists{unique(all.forward), unique(all.backward)};
  }();
  return instances;
}

template <class List, class Described>
const typename List::value_type* twinIn(const List& list, const Described& planned) {
  for (const auto& instance : list) {
    if (sameInstance(instance.described, planned)) return &instance;
  }
  return nullptr;
}

}  // namespace

const EmulatedForwardList& emulatedForwardInstances() { return lists().forward; }
const EmulatedBackwardList& emulatedBackwardInstances() { return lists().backward; }

const EmulatedForwardInstance* emulatedTwin(const ffpa::sm80::ForwardInstance& planned) {
  return twinIn(lists().forward, planned);
}
const EmulatedBackwardInstance* emulatedTwin(const ffpa::sm80::BackwardInstance& planned) {
  return twinIn(lists().backward, planned);
}

}  // namespace emulation_test
