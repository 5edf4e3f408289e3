#include "emulation/fiber.h"

#include <sys/mman.h>
#include <unistd.h>
#include <stdexcept>

// AddressSanitizer and ThreadSanitizer must be told about stack switches, or they take a fiber's
// frames for the caller's (false reports, or a crash in ASan's stack-use checks).
#if defined(__SANITIZE_ADDRESS__)
#define FFPA_EMULATION_ASAN 1
#elif defined(__SANITIZE_THREAD__)
#define FFPA_EMULATION_TSAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define FFPA_EMULATION_ASAN 1
#elif __has_feature(thread_sanitizer)
#define FFPA_EMULATION_TSAN 1
#endif
#endif

#if defined(FFPA_EMULATION_ASAN)
#include <sanitizer/common_interface_defs.h>
#elif defined(FFPA_EMULATION_TSAN)
#include <sanitizer/tsan_interface.h>
#endif

namespace ffpa::emulation {
namespace {

// Kernels keep a few kilobytes of locals; sanitizers and unoptimized builds need more. Pages are
// committed only when touched.
constexpr std::size_t kStackBytes = 512 * 1024;

std::size_t pageBytes() { return static_cast<std::size_t>(sysconf(_SC_PAGESIZE)); }

// The fiber being resumed on this CPU thread: makecontext passes the entry no pointer.
thread_local Fiber* tResumed = nullptr;

}  // namespace

Fiber::Fiber() {
  // A stack overflow hits the guard page below the stack instead of another fiber's stack.
  mapping_ = mmap(nullptr, pageBytes() + kStackBytes, PROT_READ | PROT_WRITE,
                  MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (mapping_ == MAP_FAILED) throw std::runtime_error("emulator: cannot map a fiber stack");
  mprotect(mapping_, pageBytes(), PROT_NONE);
#if defined(FFPA_EMULATION_TSAN)
  sanitizer_.fiber = __tsan_create_fiber(0);
#endif
}

Fiber::~Fiber() {
#if defined(FFPA_EMULATION_TSAN)
  __tsan_destroy_fiber(sanitizer_.fiber);
#endif
  munmap(mapping_, pageBytes() + kStackBytes);
}

void Fiber::start(void (*entry)(void*), void* argument) {
  entry_ = entry;
  argument_ = argument;
  getcontext(&context_);
  context_.uc_stack.ss_sp = static_cast<char*>(mapping_) + pageBytes();
  context_.uc_stack.ss_size = kStackBytes;
  context_.uc_link = nullptr;
  makecontext(&context_, &Fiber::trampoline, 0);
}

void Fiber::resume() {
  tResumed = this;
#if defined(FFPA_EMULATION_ASAN)
  void* callerFakeStack = nullptr;
  __sanitizer_start_switch_fiber(&callerFakeStack, context_.uc_stack.ss_sp, kStackBytes);
#elif defined(FFPA_EMULATION_TSAN)
  sanitizer_.caller = __tsan_get_current_fiber();
  __tsan_switch_to_fiber(sanitizer_.fiber, 0);
#endif
  swapcontext(&caller_, &context_);
#if defined(FFPA_EMULATION_ASAN)
  __sanitizer_finish_switch_fiber(callerFakeStack, nullptr, nullptr);
#endif
}

void Fiber::suspend() {
  switchToCaller(false);
#if defined(FFPA_EMULATION_ASAN)
  __sanitizer_finish_switch_fiber(sanitizer_.fakeStack, &sanitizer_.callerStack,
                                  &sanitizer_.callerStackBytes);
#endif
}

void Fiber::switchToCaller([[maybe_unused]] bool finished) {
#if defined(FFPA_EMULATION_ASAN)
  // A finished fiber's fake frames are released (no save slot).
  __sanitizer_start_switch_fiber(finished ? nullptr : &sanitizer_.fakeStack, sanitizer_.callerStack,
                                 sanitizer_.callerStackBytes);
#elif defined(FFPA_EMULATION_TSAN)
  __tsan_switch_to_fiber(sanitizer_.caller, 0);
#endif
  swapcontext(&context_, &caller_);
}

void Fiber::trampoline() {
  Fiber* self = tResumed;
#if defined(FFPA_EMULATION_ASAN)
  __sanitizer_finish_switch_fiber(nullptr, &self->sanitizer_.callerStack,
                                  &self->sanitizer_.callerStackBytes);
#endif
  self->entry_(self->argument_);
  self->switchToCaller(true);  // not resumed again before the next start()
}

}  // namespace ffpa::emulation
