// A fiber: a function running on its own stack, which the CPU thread that resumes it gets back
// when the function suspends or returns. The emulator runs each CUDA thread as one.
#pragma once

#include <ucontext.h>
#include <cstddef>

namespace ffpa::emulation {

class Fiber {
 public:
  Fiber();
  ~Fiber();
  Fiber(const Fiber&) = delete;
  Fiber& operator=(const Fiber&) = delete;

  // Makes the next resume() run entry(argument) from its start. Only when not running.
  void start(void (*entry)(void*), void* argument);
  // Runs the fiber until it suspends or its entry returns; from outside the fiber.
  void resume();
  // Returns to the resume() that is running the fiber; from inside the fiber.
  void suspend();

 private:
  // What AddressSanitizer or ThreadSanitizer must be told at each switch (unused without them).
  struct SanitizerState {
    void* fakeStack = nullptr;  // ASan: the fiber's fake frames while it is suspended
    const void* callerStack = nullptr;
    std::size_t callerStackBytes = 0;
    void* fiber = nullptr;  // TSan: this fiber's and its caller's handles
    void* caller = nullptr;
  };

  static void trampoline();
  void switchToCaller(bool finished);

  ucontext_t context_{};
  ucontext_t caller_{};
  void* mapping_ = nullptr;  // guard page, then the stack
  void (*entry_)(void*) = nullptr;
  void* argument_ = nullptr;
  SanitizerState sanitizer_;
};

}  // namespace ffpa::emulation
