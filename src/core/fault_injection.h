// A test seam: makes the n-th checked CUDA runtime or cuBLASLt call from now report a failure, so
// tests can show that every such failure maps to its documented status and leaves the handle
// usable. Not part of the public API (hidden in libffpa.so); reached by tests that link the
// library's internals. Disarmed, it costs one relaxed atomic load per checked call.
#pragma once

#include <cstdint>

namespace ffpa::testing {

// After `calls` more successful checked calls, the next one reports a failure; -1 disarms.
void failCheckedCallAfter(int64_t calls);

// Called by checkCuda/checkCublas for a call that succeeded: true when it must fail instead.
bool injectedFailureDue();

// True while a failure is still to come (armed and not yet fired).
bool injectionArmed();

}  // namespace ffpa::testing
