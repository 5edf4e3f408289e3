#include "tuned_config_directory.h"

#include <unistd.h>

#include <cctype>
#include <fstream>

#include <cuda_runtime.h>

namespace device_tests {

using ffpa_tools::check;
using ffpa_tools::check_cuda;

TunedConfigDirectory::TunedConfigDirectory(const std::string& name, const std::string& entries)
    : path_(std::filesystem::temp_directory_path() /
            ("ffpa-device-tuned-" + name + "-" + std::to_string(::getpid()))) {
  std::filesystem::remove_all(path_);
  std::filesystem::create_directories(path_);
  int device = 0;
  cudaDeviceProp properties{};
  check_cuda(cudaGetDevice(&device), "cudaGetDevice");
  check_cuda(cudaGetDeviceProperties(&properties, device), "cudaGetDeviceProperties");
  std::string file = properties.name;
  for (char& c : file) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '-' && c != '_') c = '_';
  }
  std::ofstream(path_ / (file + ".json"))
      << R"({"schema_version": 1, "device": {"name": ")" << properties.name
      << R"("}, "autotune_mode": "fast", "entries": [)" << entries << "]}";
}

TunedConfigDirectory::~TunedConfigDirectory() { std::filesystem::remove_all(path_); }

void TunedConfigDirectory::use(ffpa_tools::Handle& handle) const {
  const std::string dir = path_.string();
  check(ffpaSetPolicy(handle.get(), FFPA_POLICY_TUNED_CONFIG_DIR, dir.c_str(), dir.size() + 1),
        "ffpaSetPolicy(FFPA_POLICY_TUNED_CONFIG_DIR)");
}

std::string tuned_entries(const char* direction, const char* kernel, const char* dtype, int head_dim,
                          const std::string& config) {
  std::string entries;
  for (const char* causal : {"false", "true"}) {
    entries += std::string(entries.empty() ? "" : ",") + R"({"direction": ")" + direction + R"(", "kernel": ")" +
               kernel + R"(", "dtype": ")" + dtype + R"(", "head_dim": )" + std::to_string(head_dim) +
               R"(, "seqlen": 4096, "causal": )" + causal + R"(, "config": )" + config + "}";
  }
  return entries;
}

}  // namespace device_tests
