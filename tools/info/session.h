// The handle ffpa-info reports on: one bound to the current GPU, or, without a usable GPU or when
// asked, one for a described device (ffpaCreateForDevice), which plans exactly like a real one.
#pragma once

#include <ffpa/ffpa.h>

#include <optional>
#include <string>

namespace ffpa_info {

// Properties of common GPUs, for planning on a machine without them: "sm80" (A100 40 GB),
// "sm86" (RTX 3090), "sm89" (RTX 4090), "sm90" (H100 80 GB), "sm100" (B200), "sm120" (RTX 5090).
std::optional<ffpaDeviceDesc_t> describedDevice(const std::string& name);
const char* describedDeviceNames();

class Session {
 public:
  // `described`: plan for that device instead of the current GPU. Throws LibraryCallError when a
  // handle cannot be made (for example a malformed environment variable).
  explicit Session(const std::optional<ffpaDeviceDesc_t>& described);
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  ffpaHandle_t handle() const { return handle_; }
  bool onRealDevice() const { return real_; }
  // Why there is no real device ("" when there is one).
  const std::string& whyDescribed() const { return whyDescribed_; }

 private:
  ffpaHandle_t handle_ = nullptr;
  bool real_ = false;
  std::string whyDescribed_;
};

}  // namespace ffpa_info
