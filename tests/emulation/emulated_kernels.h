// The sm80 kernel instances of this build, compiled for the CPU warp emulator: the same sets as
// the CUDA build (kernels/sm80/forward_instance_set.h, backward_instance_set.h), each with
// functions that run it on the emulator. Tests plan a problem with the library's own resolvers
// and run the emulated twin of the instance they pick, with the parameters they compute.
#pragma once

#include "emulation/launch.h"
#include "sm80/backward_instances.h"
#include "sm80/backward_params.h"
#include "sm80/forward_instances.h"
#include "sm80/forward_params.h"

#include <vector>

namespace emulation_test {

struct EmulatedForwardInstance {
  ffpa::sm80::ForwardInstance described;  // kernel pointer null
  // Runs the instance over config's grid; throws ffpa::emulation::KernelError for a kernel bug.
  void (*run)(const ffpa::emulation::Config& config, const ffpa::sm80::ForwardParams& params);
};

struct EmulatedBackwardInstance {
  using Run = void (*)(const ffpa::emulation::Config& config, const ffpa::sm80::BackwardParams& params);
  ffpa::sm80::BackwardInstance described;  // kernel pointers null
  Run rowStats;
  Run queryGradient;
  Run keyGradient;
};

using EmulatedForwardList = std::vector<EmulatedForwardInstance>;
using EmulatedBackwardList = std::vector<EmulatedBackwardInstance>;

// Every instance of the build's head dims, one entry per distinct kernel.
const EmulatedForwardList& emulatedForwardInstances();
const EmulatedBackwardList& emulatedBackwardInstances();

// The emulated instance with the same parameters as `planned` (an entry of the CUDA build's
// list); null when there is none.
const EmulatedForwardInstance* emulatedTwin(const ffpa::sm80::ForwardInstance& planned);
const EmulatedBackwardInstance* emulatedTwin(const ffpa::sm80::BackwardInstance& planned);

}  // namespace emulation_test
