#include "emulated_forward.h"

#include "ffpa_build_config.h"

namespace emulation_test {

// Defined by the generated translation units, one per head dim of the kernel set.
#define FFPA_DECLARE_EMULATED_FORWARD(d) void appendEmulatedForwardD##d(EmulatedForwardList& out);
FFPA_FORWARD_HEAD_DIMS(FFPA_DECLARE_EMULATED_FORWARD)
#undef FFPA_DECLARE_EMULATED_FORWARD

namespace {

bool sameInstance(const ffpa::sm80::ForwardInstance& a, const ffpa::sm80::ForwardInstance& b) {
  return a.headDimV == b.headDimV && a.dtype == b.dtype && a.accumulator == b.accumulator &&
         a.pipeKv == b.pipeKv && a.qInRegisters == b.qInRegisters &&
         a.vInRegisters == b.vInRegisters;
}

}  // namespace

const EmulatedForwardList& emulatedForwardInstances() {
  static const EmulatedForwardList instances = [] {
    EmulatedForwardList all;
#define FFPA_APPEND_EMULATED_FORWARD(d) appendEmulatedForwardD##d(all);
    FFPA_FORWARD_HEAD_DIMS(FFPA_APPEND_EMULATED_FORWARD)
#undef FFPA_APPEND_EMULATED_FORWARD
    // Head dims with the same tile shape give the same instances: keep one of each.
    EmulatedForwardList unique;
    for (const EmulatedForwardInstance& candidate : all) {
      bool seen = false;
      for (const EmulatedForwardInstance& kept : unique) {
        seen = seen || sameInstance(kept.described, candidate.described);
      }
      if (!seen) unique.push_back(candidate);
    }
    return unique;
  }();
  return instances;
}

const EmulatedForwardInstance* emulatedTwin(const ffpa::sm80::ForwardInstance& planned) {
  for (const EmulatedForwardInstance& instance : emulatedForwardInstances()) {
    if (sameInstance(instance.described, planned)) return &instance;
  }
  return nullptr;
}

}  // namespace emulation_test
