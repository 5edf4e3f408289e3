// Helpers shared by the host tests: a described device (tests need no GPU), RAII owners of
// handles and descriptors, environment variables set for one scope.
#pragma once

#include <ffpa/ffpa.h>

#include <doctest/doctest.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

namespace ffpa_test {

// An H100-like device, as ffpaCreateForDevice takes it.
inline ffpaDeviceDesc_t describedH100() {
  ffpaDeviceDesc_t d{};
  d.structSize = sizeof d;
  d.ordinal = 0;
  d.smVersion = 90;
  d.smCount = 132;
  d.sharedMemPerBlockOptin = 227 * 1024;
  d.sharedMemPerSm = 228 * 1024;
  d.globalMemBytes = int64_t{80} << 30;
  std::strncpy(d.name, "Described H100", sizeof d.name - 1);
  return d;
}

inline std::string lastError() {
  const size_t length = ffpaGetLastErrorString(nullptr, 0);
  std::string text(length, '\0');
  ffpaGetLastErrorString(text.data(), length + 1);
  return text;
}

// CHECK that a call failed with `status` and that its message mentions every fragment.
#define CHECK_FAILS_WITH(call, status, ...)                                               \
  do {                                                                                    \
    const ffpaStatus_t got_ = (call);                                                     \
    CHECK_MESSAGE(got_ == (status), std::string(ffpaGetErrorString(got_)), ": ", ffpa_test::lastError()); \
    for (const char* fragment_ : std::initializer_list<const char*>{__VA_ARGS__}) {       \
      CHECK_MESSAGE(ffpa_test::lastError().find(fragment_) != std::string::npos,          \
                    "message \"", ffpa_test::lastError(), "\" lacks \"", std::string(fragment_), "\""); \
    }                                                                                     \
  } while (0)

#define REQUIRE_OK(call)                                                                  \
  do {                                                                                    \
    const ffpaStatus_t got_ = (call);                                                     \
    REQUIRE_MESSAGE(got_ == FFPA_STATUS_SUCCESS, std::string(ffpaGetErrorString(got_)), ": ", ffpa_test::lastError()); \
  } while (0)

class Handle {
 public:
  explicit Handle(const ffpaDeviceDesc_t& device = describedH100()) {
    REQUIRE_OK(ffpaCreateForDevice(&handle_, &device));
  }
  ~Handle() { ffpaDestroy(handle_); }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  operator ffpaHandle_t() const { return handle_; }

  template <class T>
  void set(ffpaPolicyKnob_t knob, T value) {
    REQUIRE_OK(ffpaSetPolicy(handle_, knob, &value, sizeof value));
  }
  int64_t get(ffpaPolicyKnob_t knob) const {
    size_t size = 0;
    REQUIRE_OK(ffpaGetPolicy(handle_, knob, nullptr, 0, &size));
    if (size == sizeof(int64_t)) {
      int64_t v = 0;
      REQUIRE_OK(ffpaGetPolicy(handle_, knob, &v, sizeof v, nullptr));
      return v;
    }
    int32_t v = 0;
    REQUIRE_OK(ffpaGetPolicy(handle_, knob, &v, sizeof v, nullptr));
    return v;
  }
  ffpaPlanCacheStats_t stats() const {
    ffpaPlanCacheStats_t s{};
    s.structSize = sizeof s;
    REQUIRE_OK(ffpaGetPlanCacheStats(handle_, &s));
    return s;
  }

 private:
  ffpaHandle_t handle_ = nullptr;
};

class Tensor {
 public:
  Tensor() { REQUIRE_OK(ffpaCreateTensorDescriptor(&desc_)); }
  Tensor(ffpaDataType_t dtype, std::vector<int64_t> dims, std::vector<int64_t> strides = {}) : Tensor() {
    REQUIRE_OK(ffpaSetTensorDescriptor(desc_, dtype, static_cast<int32_t>(dims.size()), dims.data(),
                                       strides.empty() ? nullptr : strides.data()));
  }
  ~Tensor() { ffpaDestroyTensorDescriptor(desc_); }
  Tensor(const Tensor&) = delete;
  Tensor& operator=(const Tensor&) = delete;
  operator ffpaTensorDescriptor_t() const { return desc_; }

 private:
  ffpaTensorDescriptor_t desc_ = nullptr;
};

class Attention {
 public:
  explicit Attention(ffpaCausalMode_t causal = FFPA_CAUSAL_NONE) {
    REQUIRE_OK(ffpaCreateAttentionDescriptor(&desc_));
    const int32_t mode = causal;
    REQUIRE_OK(ffpaSetAttentionAttribute(desc_, FFPA_ATTENTION_CAUSAL_MODE, &mode, sizeof mode));
  }
  ~Attention() { ffpaDestroyAttentionDescriptor(desc_); }
  Attention(const Attention&) = delete;
  Attention& operator=(const Attention&) = delete;
  operator ffpaAttentionDescriptor_t() const { return desc_; }

 private:
  ffpaAttentionDescriptor_t desc_ = nullptr;
};

// The descriptors of one forward/backward problem, packed BHND.
struct Problem {
  Problem(ffpaDataType_t dtype, int64_t b, int64_t hq, int64_t hkv, int64_t nq, int64_t nkv,
          int64_t dqk, int64_t dv)
      : q(dtype, {b, hq, nq, dqk}), k(dtype, {b, hkv, nkv, dqk}), v(dtype, {b, hkv, nkv, dv}),
        o(dtype, {b, hq, nq, dv}), lse(FFPA_DATA_TYPE_FLOAT32, {b, hq, nq}),
        dO(dtype, {b, hq, nq, dv}), dq(dtype, {b, hq, nq, dqk}), dk(dtype, {b, hkv, nkv, dqk}),
        dv(dtype, {b, hkv, nkv, dv}) {}
  Tensor q, k, v, o, lse, dO, dq, dk, dv;

  ffpaStatus_t forwardWorkspace(ffpaHandle_t h, ffpaAttentionDescriptor_t attn, size_t* bytes,
                                bool withLse = true) const {
    return ffpaGetAttentionForwardWorkspaceSize(h, attn, q, k, v, o, withLse ? (ffpaTensorDescriptor_t)lse : nullptr,
                                                bytes);
  }
  ffpaStatus_t backwardWorkspace(ffpaHandle_t h, ffpaAttentionDescriptor_t attn, size_t* bytes) const {
    return ffpaGetAttentionBackwardWorkspaceSize(h, attn, q, k, v, o, dO, lse, dq, dk, dv, bytes);
  }
};

// Sets (or unsets, with nullptr) environment variables for the life of the object.
class ScopedEnvironment {
 public:
  ScopedEnvironment(std::initializer_list<std::pair<const char*, const char*>> settings) {
    for (const auto& [name, value] : settings) {
      const char* old = std::getenv(name);
      saved_.emplace_back(name, old ? std::make_pair(true, std::string(old)) : std::make_pair(false, std::string()));
      if (value) setenv(name, value, 1); else unsetenv(name);
    }
  }
  ~ScopedEnvironment() {
    for (const auto& [name, old] : saved_) {
      if (old.first) setenv(name.c_str(), old.second.c_str(), 1); else unsetenv(name.c_str());
    }
  }

 private:
  std::vector<std::pair<std::string, std::pair<bool, std::string>>> saved_;
};

}  // namespace ffpa_test
