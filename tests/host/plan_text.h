// Plan descriptions through the public API (ffpaDescribeAttention*Plan): their "kernel: " and
// "config: " lines, and what the build compiled, for the host tests of the fast kernels' plans.
#pragma once

#include "test_support.h"

#include <cstring>
#include <string>

namespace ffpa_test {

struct Described {
  ffpaStatus_t status;
  std::string kernel, config, text;  // text: the whole description, or the failure message
};

// The value of the "key: value" line of a description ("" when there is none).
inline std::string planLine(const std::string& text, const std::string& key) {
  const size_t start = text.find("\n" + key + ": ");
  if (start == std::string::npos) return std::string();
  const size_t from = start + key.size() + 3;
  return text.substr(from, text.find('\n', from) - from);
}

// With any attention descriptor (slices attached, say).
inline Described describeForward(const Handle& h, ffpaAttentionDescriptor_t attn, ffpaTensorDescriptor_t q,
                                 ffpaTensorDescriptor_t k, ffpaTensorDescriptor_t v, ffpaTensorDescriptor_t o,
                                 ffpaTensorDescriptor_t lse) {
  size_t length = 0;
  const ffpaStatus_t status = ffpaDescribeAttentionForwardPlan(h, attn, q, k, v, o, lse, nullptr, 0, &length);
  if (status != FFPA_STATUS_SUCCESS) return {status, "", "", lastError()};
  std::string text(length, '\0');
  REQUIRE_OK(ffpaDescribeAttentionForwardPlan(h, attn, q, k, v, o, lse, text.data(), length + 1, nullptr));
  return {status, planLine(text, "kernel"), planLine(text, "config"), text};
}

inline Described describeForward(const Handle& h, ffpaTensorDescriptor_t q, ffpaTensorDescriptor_t k,
                                 ffpaTensorDescriptor_t v, ffpaTensorDescriptor_t o, ffpaTensorDescriptor_t lse,
                                 ffpaCausalMode_t causal = FFPA_CAUSAL_NONE) {
  Attention attn(causal);
  return describeForward(h, attn, q, k, v, o, lse);
}

inline Described describeForward(const Handle& h, const Problem& p, ffpaCausalMode_t causal = FFPA_CAUSAL_NONE) {
  return describeForward(h, p.q, p.k, p.v, p.o, p.lse, causal);
}

inline Described describeBackward(const Handle& h, ffpaAttentionDescriptor_t attn, ffpaTensorDescriptor_t q,
                                  ffpaTensorDescriptor_t k, ffpaTensorDescriptor_t v, ffpaTensorDescriptor_t o,
                                  ffpaTensorDescriptor_t dO, ffpaTensorDescriptor_t lse, ffpaTensorDescriptor_t dq,
                                  ffpaTensorDescriptor_t dk, ffpaTensorDescriptor_t dv) {
  size_t length = 0;
  const ffpaStatus_t status =
      ffpaDescribeAttentionBackwardPlan(h, attn, q, k, v, o, dO, lse, dq, dk, dv, nullptr, 0, &length);
  if (status != FFPA_STATUS_SUCCESS) return {status, "", "", lastError()};
  std::string text(length, '\0');
  REQUIRE_OK(ffpaDescribeAttentionBackwardPlan(h, attn, q, k, v, o, dO, lse, dq, dk, dv, text.data(), length + 1,
                                               nullptr));
  return {status, planLine(text, "kernel"), planLine(text, "config"), text};
}

inline Described describeBackward(const Handle& h, const Problem& p, ffpaCausalMode_t causal = FFPA_CAUSAL_NONE) {
  Attention attn(causal);
  return describeBackward(h, attn, p.q, p.k, p.v, p.o, p.dO, p.lse, p.dq, p.dk, p.dv);
}

inline bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// Whether the list `key` of ffpaGetBuildInfo ("...; head dims 128,256; ...") has `item`.
inline bool buildListHas(const std::string& key, const std::string& item) {
  const std::string info = ffpaGetBuildInfo();
  const size_t start = info.find(key + " ") + key.size() + 1;
  const std::string list = "," + info.substr(start, info.find(';', start) - start) + ",";
  return has(list, "," + item + ",");
}

// Whether the build compiled instances for head dim d.
inline bool compiled(int d) { return buildListHas("head dims", std::to_string(d)); }

// Whether this build compiled sm_90a code.
inline bool hopperCompiled() { return buildListHas("architectures", "90a"); }

// An H100 description changed into another GPU's: compute capability, SMs and shared memory
// (KiB per block with opt-in, per SM).
inline ffpaDeviceDesc_t describedGpu(int smVersion, int smCount, int blockKiB, int smKiB, const char* name) {
  ffpaDeviceDesc_t d = describedH100();
  d.smVersion = smVersion;
  d.smCount = smCount;
  d.sharedMemPerBlockOptin = blockKiB * 1024;
  d.sharedMemPerSm = smKiB * 1024;
  std::strncpy(d.name, name, sizeof d.name - 1);
  return d;
}

inline ffpaDeviceDesc_t describedA100() { return describedGpu(80, 108, 163, 164, "Described A100"); }
// An Ada GPU (sm_89): 99 KiB of shared memory per block.
inline ffpaDeviceDesc_t describedAda() { return describedGpu(89, 128, 99, 100, "Described Ada"); }

}  // namespace ffpa_test

// The expectations of a test that name instances of the default kernel sets; a build with other
// head dims (-Ddev_headdims) skips them.
#define REQUIRE_COMPILED(...)                                              \
  for (const int d_ : {__VA_ARGS__}) {                                     \
    if (!ffpa_test::compiled(d_)) {                                        \
      MESSAGE("skipped: no instance for head dim ", d_, " in this build"); \
      return;                                                              \
    }                                                                      \
  }

#define CHECK_HAS(text, part) CHECK_MESSAGE(ffpa_test::has(text, part), "\"", text, "\" lacks \"", part, "\"")
#define CHECK_LACKS(text, part) CHECK_MESSAGE(!ffpa_test::has(text, part), "\"", text, "\" has \"", part, "\"")
