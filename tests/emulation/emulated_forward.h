// The sm80 forward kernel instances of this build, compiled for the CPU warp emulator: the same
// set as the CUDA build (kernels/sm80/forward_instance_set.h), each with a function that runs it
// on the emulator. Tests plan a problem with the library's own resolveForward() and run the
// emulated twin of the instance it picks, with the parameters it computes.
#pragma once

#include "emulation/launch.h"
#include "sm80/forward_instances.h"
#include "sm80/forward_params.h"

#include <vector>

namespace emulation_test {

struct EmulatedForwardInstance {
  ffpa::sm80::ForwardInstance described;  // kernel pointer null
  // Runs the instance over config's grid; throws ffpa::emulation::KernelError for a kernel bug.
  void (*run)(const ffpa::emulation::Config& config, const ffpa::sm80::ForwardParams& params);
};

using EmulatedForwardList = std::vector<EmulatedForwardInstance>;

// Every instance of the build's head dims, one entry per distinct kernel.
const EmulatedForwardList& emulatedForwardInstances();

// The emulated instance with the same head dim, dtype, accumulator and fragment handling as
// `planned` (an entry of the CUDA build's list); null when there is none.
const EmulatedForwardInstance* emulatedTwin(const ffpa::sm80::ForwardInstance& planned);

}  // namespace emulation_test
