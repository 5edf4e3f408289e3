// Failure injection: every host allocation a call makes, and every checked CUDA or cuBLASLt call,
// can fail; the call must then return its documented status, leak nothing (the sanitizer build
// checks) and leave the handle usable.
#include "core/fault_injection.h"

#include <ffpa/ffpa.h>

#include <doctest/doctest.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>

namespace {

// Countdown of successful allocations before one fails; -1 when disarmed.
std::atomic<int64_t> gAllocationsLeft{-1};

void* allocate(size_t size) {
  int64_t left = gAllocationsLeft.load(std::memory_order_relaxed);
  while (left >= 0) {
    if (gAllocationsLeft.compare_exchange_weak(left, left - 1, std::memory_order_relaxed)) {
      if (left == 0) throw std::bad_alloc();
      break;
    }
  }
  if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
  throw std::bad_alloc();
}

// Arms the countdown for the life of the object.
class FailAllocationAfter {
 public:
  explicit FailAllocationAfter(int64_t allocations) { gAllocationsLeft = allocations; }
  ~FailAllocationAfter() { gAllocationsLeft = -1; }
  // True when the countdown ran out, i.e. an allocation was made to fail.
  static bool fired() { return gAllocationsLeft.load() == -1; }
};

ffpaDeviceDesc_t device() {
  ffpaDeviceDesc_t d{};
  d.structSize = sizeof d;
  d.smVersion = 80;
  d.smCount = 108;
  d.sharedMemPerBlockOptin = 163 * 1024;
  d.sharedMemPerSm = 164 * 1024;
  d.globalMemBytes = int64_t{40} << 30;
  std::strcpy(d.name, "described A100");
  return d;
}

bool allowed(ffpaStatus_t status) {
  return status == FFPA_STATUS_SUCCESS || status == FFPA_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED;
}

// One user's session: create a handle (unless given one), describe a problem, plan it, read the
// plan back. Returns the first failing status (or success); `handle` is set once created.
ffpaStatus_t session(ffpaHandle_t& handle, size_t* workspace) {
  const ffpaDeviceDesc_t d = device();
  ffpaStatus_t status = handle == nullptr ? ffpaCreateForDevice(&handle, &d) : FFPA_STATUS_SUCCESS;
  if (status != FFPA_STATUS_SUCCESS) return status;
  ffpaTensorDescriptor_t q = nullptr, kv = nullptr, lse = nullptr;
  ffpaAttentionDescriptor_t attn = nullptr;
  const int64_t qDims[4] = {2, 8, 333, 320}, kvDims[4] = {2, 2, 333, 320}, lseDims[3] = {2, 8, 333};
  const int32_t prefetch = 0;
  char text[256];
  if ((status = ffpaCreateTensorDescriptor(&q)) == FFPA_STATUS_SUCCESS &&
      (status = ffpaCreateTensorDescriptor(&kv)) == FFPA_STATUS_SUCCESS &&
      (status = ffpaCreateTensorDescriptor(&lse)) == FFPA_STATUS_SUCCESS &&
      (status = ffpaCreateAttentionDescriptor(&attn)) == FFPA_STATUS_SUCCESS &&
      (status = ffpaSetTensorDescriptor(q, FFPA_DATA_TYPE_BFLOAT16, 4, qDims, nullptr)) == FFPA_STATUS_SUCCESS &&
      (status = ffpaSetTensorDescriptor(kv, FFPA_DATA_TYPE_BFLOAT16, 4, kvDims, nullptr)) == FFPA_STATUS_SUCCESS &&
      (status = ffpaSetTensorDescriptor(lse, FFPA_DATA_TYPE_FLOAT32, 3, lseDims, nullptr)) == FFPA_STATUS_SUCCESS &&
      (status = ffpaSetPolicy(handle, FFPA_POLICY_PREFETCH_QKV, &prefetch, sizeof prefetch)) == FFPA_STATUS_SUCCESS &&
      (status = ffpaGetAttentionForwardWorkspaceSize(handle, attn, q, kv, kv, q, lse, workspace)) == FFPA_STATUS_SUCCESS) {
    status = ffpaDescribeAttentionForwardPlan(handle, attn, q, kv, kv, q, lse, text, sizeof text, nullptr);
  }
  ffpaDestroyTensorDescriptor(q);
  ffpaDestroyTensorDescriptor(kv);
  ffpaDestroyTensorDescriptor(lse);
  ffpaDestroyAttentionDescriptor(attn);
  return status;
}

}  // namespace

void* operator new(size_t size) { return allocate(size); }
void* operator new[](size_t size) { return allocate(size); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }
void operator delete[](void* p, size_t) noexcept { std::free(p); }

TEST_CASE("each host allocation of a session can fail: a status, no crash, a usable handle") {
  // Every injected failure is logged as an error: keep them out of the test output.
  REQUIRE(ffpaSetLogCallback([](ffpaLogLevel_t, const char*, void*) {}, nullptr) == FFPA_STATUS_SUCCESS);
  struct RestoreLog {
    ~RestoreLog() { ffpaSetLogCallback(nullptr, nullptr); }
  } restoreLog;
  ffpaHandle_t reference = nullptr;
  size_t expected = 0;
  REQUIRE(session(reference, &expected) == FFPA_STATUS_SUCCESS);
  ffpaDestroy(reference);

  int64_t failurePoints = 0;
  for (int64_t n = 0;; ++n) {
    ffpaHandle_t handle = nullptr;
    size_t workspace = 0;
    ffpaStatus_t status;
    bool fired;
    {
      FailAllocationAfter arm(n);
      status = session(handle, &workspace);
      fired = FailAllocationAfter::fired();
    }
    CAPTURE(n);
    CHECK_MESSAGE(allowed(status), std::string(ffpaGetErrorString(status)));
    if (handle != nullptr) {  // whatever failed, the same handle still works
      size_t again = 0;
      CHECK(session(handle, &again) == FFPA_STATUS_SUCCESS);
      CHECK(again == expected);
      ffpaDestroy(handle);
    }
    if (!fired) {
      CHECK(status == FFPA_STATUS_SUCCESS);
      break;  // the session made fewer than n allocations: every point has been tried
    }
    ++failurePoints;
    REQUIRE(n < 100000);
  }
  CHECK(failurePoints > 20);
  MESSAGE("allocation failure points exercised: ", failurePoints);
}

TEST_CASE("an injected CUDA or cuBLASLt failure is reported by status, and the seam disarms") {
  // Without a GPU the first checked call of ffpaCreate is never reached (the device count fails
  // first); with one, an injected failure of its first checked call must give a status, not a
  // handle.
  ffpa::testing::failCheckedCallAfter(0);
  ffpaHandle_t handle = nullptr;
  const ffpaStatus_t status = ffpaCreate(&handle);
  ffpa::testing::failCheckedCallAfter(-1);
  CHECK(status != FFPA_STATUS_SUCCESS);
  CHECK(handle == nullptr);
  CHECK_FALSE(ffpa::testing::injectedFailureDue());
  ffpa::testing::failCheckedCallAfter(2);
  CHECK_FALSE(ffpa::testing::injectedFailureDue());
  CHECK_FALSE(ffpa::testing::injectedFailureDue());
  CHECK(ffpa::testing::injectedFailureDue());
  CHECK_FALSE(ffpa::testing::injectedFailureDue());
}
