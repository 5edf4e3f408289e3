// The C side of SetLogCallback: cgo cannot pass a Go function as a C function
// pointer, so libffpa calls this trampoline, which hands the message to the
// exported Go function together with the cgo.Handle naming the Go callback.
#include <ffpa/ffpa.h>
#include <stdint.h>

#include "_cgo_export.h"

static void trampoline(ffpaLogLevel_t level, const char* message, void* userData) {
  ffpaGoLog(level, (char*)message, (uintptr_t)userData);
}

ffpaStatus_t ffpaGoSetLogCallback(uintptr_t handle) {
  return ffpaSetLogCallback(handle ? trampoline : NULL, (void*)handle);
}
