#include "core/fault_injection.h"

#include <atomic>

namespace ffpa::testing {
namespace {
std::atomic<int64_t> gCountdown{-1};
}  // namespace

void failCheckedCallAfter(int64_t calls) { gCountdown.store(calls, std::memory_order_relaxed); }

bool injectedFailureDue() {
  int64_t left = gCountdown.load(std::memory_order_relaxed);
  while (left >= 0) {
    // The call that takes the countdown to -1 is the one that fails.
    if (gCountdown.compare_exchange_weak(left, left - 1, std::memory_order_relaxed)) return left == 0;
  }
  return false;
}

bool injectionArmed() { return gCountdown.load(std::memory_order_relaxed) >= 0; }

}  // namespace ffpa::testing
