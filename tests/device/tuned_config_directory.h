// Tuned-config files for the device tests: a directory holding one file for this GPU, and the
// entries that pin a kernel variant's launch parameters (docs/tuned-configs.rst).
#pragma once

#include <filesystem>
#include <string>

#include "common/device_attention.h"

namespace device_tests {

// A directory holding one tuned-config file for this GPU, named as docs/tuned-configs.rst says
// (the device name, characters other than letters, digits, '.', '-' and '_' replaced by '_'),
// with the given entries; removed with the object.
class TunedConfigDirectory {
 public:
  TunedConfigDirectory(const std::string& name, const std::string& entries);
  ~TunedConfigDirectory();
  TunedConfigDirectory(const TunedConfigDirectory&) = delete;
  TunedConfigDirectory& operator=(const TunedConfigDirectory&) = delete;

  // A handle that reads its tuned configs here.
  void use(ffpa_tools::Handle& handle) const;

 private:
  std::filesystem::path path_;
};

// The entries of a tuned-config file for `direction` ("forward" or "backward") of `kernel` at
// `dtype` and `head_dim`, with `config`: one for causal problems and one for the others (a
// lookup matches the mask).
std::string tuned_entries(const char* direction, const char* kernel, const char* dtype, int head_dim,
                          const std::string& config);

inline std::string forward_entry(const char* kernel, const char* dtype, int head_dim, const std::string& config) {
  return tuned_entries("forward", kernel, dtype, head_dim, config);
}

}  // namespace device_tests
