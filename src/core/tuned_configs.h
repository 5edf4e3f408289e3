// The persisted tuned configs a plan may take its launch parameters from: the file of the plan's
// device in the policy's directory (FFPA_POLICY_TUNED_CONFIG_DIR, else the installed one), read
// once per process and path. A missing, malformed or incompatible file leaves the built-in
// defaults, with one warning per file and process; FFPA_POLICY_SKIP_PERSISTENT_TUNED_CONFIG skips
// the lookup altogether. A hit is logged at DEBUG level, once per process.
#pragma once

#include "core/device.h"
#include "core/policy.h"
#include "tuning/tuned_config.h"

#include <string>

namespace ffpa {

struct TunedChoice {
  tuning::LaunchConfig config;
  std::string source;  // "NVIDIA_H100_80GB_HBM3.json: forward bf16 d=512 Nq=8192 Nkv=8192"
};

// The directory the policy names, or the installed one.
std::string tunedConfigDirectory(const Policy& policy);

// The entry for `query` in the device's file, if any (TunedFile::lookup's rules).
std::optional<TunedChoice> findTunedConfig(const Policy& policy, const DeviceInfo& device,
                                           const tuning::TunedQuery& query);

// Forgets the files read so far (tests that rewrite a file in one process).
void forgetTunedConfigFiles();

}  // namespace ffpa
