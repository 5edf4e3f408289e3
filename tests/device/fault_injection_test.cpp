// On a GPU: every checked CUDA runtime and cuBLASLt call of a forward and a backward (planning
// included) is made to fail in turn. Each failure must come back as an FFPA_STATUS_EXECUTION_FAILED
// code, and the same handle must afterwards compute exactly what it computed before.
#include "core/fault_injection.h"

#include <ffpa/ffpa.h>

#include <cuda_runtime.h>
#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace {

#define REQUIRE_CUDA(call) REQUIRE_MESSAGE((call) == cudaSuccess, #call)

constexpr int64_t kB = 1, kH = 2, kN = 64, kD = 64;
constexpr size_t kElements = kB * kH * kN * kD;

struct DeviceBuffers {
  void* q = nullptr;
  void* k = nullptr;
  void* v = nullptr;
  void* o = nullptr;
  void* dO = nullptr;
  void* dq = nullptr;
  void* dk = nullptr;
  void* dv = nullptr;
  float* lse = nullptr;
  void* workspace = nullptr;
  size_t workspaceBytes = 0;

  DeviceBuffers() {
    for (void** p : {&q, &k, &v, &o, &dO, &dq, &dk, &dv}) REQUIRE_CUDA(cudaMalloc(p, kElements * 2));
    REQUIRE_CUDA(cudaMalloc(reinterpret_cast<void**>(&lse), kB * kH * kN * sizeof(float)));
    // fp16 values from a fixed pattern: small, varied, never all equal.
    std::vector<uint16_t> host(kElements);
    uint32_t state = 12345;
    for (void* p : {q, k, v, dO}) {
      for (uint16_t& x : host) {
        state = state * 1664525u + 1013904223u;
        x = static_cast<uint16_t>(0x3000 + (state >> 22));  // fp16 in [0.125, 0.25)
      }
      REQUIRE_CUDA(cudaMemcpy(p, host.data(), kElements * 2, cudaMemcpyHostToDevice));
    }
  }
  ~DeviceBuffers() {
    for (void* p : {q, k, v, o, dO, dq, dk, dv, static_cast<void*>(lse), workspace}) cudaFree(p);
  }
};

struct Descriptors {
  ffpaTensorDescriptor_t t = nullptr;
  ffpaTensorDescriptor_t lse = nullptr;
  ffpaAttentionDescriptor_t attn = nullptr;
  Descriptors() {
    const int64_t dims[4] = {kB, kH, kN, kD}, lseDims[3] = {kB, kH, kN};
    REQUIRE(ffpaCreateTensorDescriptor(&t) == FFPA_STATUS_SUCCESS);
    REQUIRE(ffpaCreateTensorDescriptor(&lse) == FFPA_STATUS_SUCCESS);
    REQUIRE(ffpaCreateAttentionDescriptor(&attn) == FFPA_STATUS_SUCCESS);
    REQUIRE(ffpaSetTensorDescriptor(t, FFPA_DATA_TYPE_FLOAT16, 4, dims, nullptr) == FFPA_STATUS_SUCCESS);
    REQUIRE(ffpaSetTensorDescriptor(lse, FFPA_DATA_TYPE_FLOAT32, 3, lseDims, nullptr) == FFPA_STATUS_SUCCESS);
  }
  ~Descriptors() {
    ffpaDestroyTensorDescriptor(t);
    ffpaDestroyTensorDescriptor(lse);
    ffpaDestroyAttentionDescriptor(attn);
  }
};

// Forward then backward; the first failing status, or success.
ffpaStatus_t forwardBackward(ffpaHandle_t h, const Descriptors& d, DeviceBuffers& b) {
  ffpaStatus_t s = ffpaAttentionForward(h, d.attn, d.t, b.q, d.t, b.k, d.t, b.v, d.t, b.o, d.lse, b.lse,
                                        b.workspace, b.workspaceBytes);
  if (s != FFPA_STATUS_SUCCESS) return s;
  return ffpaAttentionBackward(h, d.attn, d.t, b.q, d.t, b.k, d.t, b.v, d.t, b.o, d.t, b.dO, d.lse, b.lse, d.t,
                               b.dq, d.t, b.dk, d.t, b.dv, b.workspace, b.workspaceBytes);
}

std::vector<char> download(const DeviceBuffers& b) {
  std::vector<char> all;
  for (const void* p : {b.o, b.dq, b.dk, b.dv}) {
    std::vector<char> part(kElements * 2);
    REQUIRE_CUDA(cudaMemcpy(part.data(), p, part.size(), cudaMemcpyDeviceToHost));
    all.insert(all.end(), part.begin(), part.end());
  }
  return all;
}

}  // namespace

TEST_CASE("each checked CUDA or cuBLASLt call can fail; the handle stays usable and exact") {
  ffpaHandle_t h = nullptr;
  REQUIRE(ffpaCreate(&h) == FFPA_STATUS_SUCCESS);
  Descriptors d;
  DeviceBuffers b;
  size_t forward = 0, backward = 0;
  REQUIRE(ffpaGetAttentionForwardWorkspaceSize(h, d.attn, d.t, d.t, d.t, d.t, d.lse, &forward) == FFPA_STATUS_SUCCESS);
  REQUIRE(ffpaGetAttentionBackwardWorkspaceSize(h, d.attn, d.t, d.t, d.t, d.t, d.t, d.lse, d.t, d.t, d.t, &backward) ==
          FFPA_STATUS_SUCCESS);
  b.workspaceBytes = forward > backward ? forward : backward;
  REQUIRE_CUDA(cudaMalloc(&b.workspace, b.workspaceBytes));

  REQUIRE(forwardBackward(h, d, b) == FFPA_STATUS_SUCCESS);
  REQUIRE_CUDA(cudaDeviceSynchronize());
  const std::vector<char> expected = download(b);

  int injected = 0;
  for (int64_t n = 0; n < 10000; ++n) {
    REQUIRE(ffpaClearPlanCache(h) == FFPA_STATUS_SUCCESS);  // planning's library calls fail too
    ffpa::testing::failCheckedCallAfter(n);
    const ffpaStatus_t status = forwardBackward(h, d, b);
    const bool fired = !ffpa::testing::injectionArmed();
    ffpa::testing::failCheckedCallAfter(-1);
    CAPTURE(n);
    if (status == FFPA_STATUS_SUCCESS) {
      CHECK_FALSE(fired);
      break;  // fewer than n checked calls: every one has failed once
    }
    ++injected;
    CHECK_MESSAGE(FFPA_STATUS_CATEGORY(status) == FFPA_STATUS_EXECUTION_FAILED, std::string(ffpaGetErrorString(status)));
    REQUIRE_CUDA(cudaDeviceSynchronize());
    REQUIRE(forwardBackward(h, d, b) == FFPA_STATUS_SUCCESS);
    REQUIRE_CUDA(cudaDeviceSynchronize());
    CHECK(download(b) == expected);
  }
  CHECK(injected > 10);
  MESSAGE("checked calls made to fail: ", injected);
  ffpaDestroy(h);
}

TEST_CASE("a NaN in one query row poisons exactly that row of O and its log-sum-exp") {
  ffpaHandle_t h = nullptr;
  REQUIRE(ffpaCreate(&h) == FFPA_STATUS_SUCCESS);
  Descriptors d;
  DeviceBuffers b;
  REQUIRE(ffpaGetAttentionForwardWorkspaceSize(h, d.attn, d.t, d.t, d.t, d.t, d.lse, &b.workspaceBytes) ==
          FFPA_STATUS_SUCCESS);
  REQUIRE_CUDA(cudaMalloc(&b.workspace, b.workspaceBytes));
  constexpr int64_t head = 1, row = 17;
  const uint16_t nan = 0x7e00;  // fp16 quiet NaN
  char* qRow = static_cast<char*>(b.q) + ((head * kN + row) * kD + 5) * 2;
  REQUIRE_CUDA(cudaMemcpy(qRow, &nan, 2, cudaMemcpyHostToDevice));
  REQUIRE(ffpaAttentionForward(h, d.attn, d.t, b.q, d.t, b.k, d.t, b.v, d.t, b.o, d.lse, b.lse, b.workspace,
                               b.workspaceBytes) == FFPA_STATUS_SUCCESS);
  std::vector<uint16_t> o(kElements);
  std::vector<float> lse(kB * kH * kN);
  REQUIRE_CUDA(cudaMemcpy(o.data(), b.o, kElements * 2, cudaMemcpyDeviceToHost));
  REQUIRE_CUDA(cudaMemcpy(lse.data(), b.lse, lse.size() * sizeof(float), cudaMemcpyDeviceToHost));
  const auto isNan = [](uint16_t x) { return (x & 0x7c00) == 0x7c00 && (x & 0x03ff) != 0; };
  for (int64_t hh = 0; hh < kH; ++hh) {
    for (int64_t r = 0; r < kN; ++r) {
      const bool poisoned = hh == head && r == row;
      CHECK((lse[hh * kN + r] != lse[hh * kN + r]) == poisoned);
      for (int64_t c = 0; c < kD; ++c) CHECK(isNan(o[(hh * kN + r) * kD + c]) == poisoned);
    }
  }
  ffpaDestroy(h);
}
