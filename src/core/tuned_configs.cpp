#include "core/tuned_configs.h"

#include "core/error.h"
#include "core/logging.h"
#include "ffpa_build_config.h"

#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>

namespace ffpa {
namespace {

// A file as read: usable, or why not (said once, when it was read).
struct LoadedFile {
  std::optional<tuning::TunedFile> file;
  std::string problem;
};

std::mutex gMutex;
std::map<std::string, std::shared_ptr<const LoadedFile>> gFiles;  // by path

std::string deviceCapability(const DeviceInfo& device) {
  return cat(device.smVersion / 10, ".", device.smVersion % 10);
}

LoadedFile load(const std::string& path, const DeviceInfo& device) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return {std::nullopt, "no tuned configs for this device (" + path + " cannot be read)"};
  std::ostringstream content;
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  if (size > static_cast<std::streamoff>(tuning::kMaxFileBytes)) {
    return {std::nullopt, cat(path, ": ", size, " bytes; at most ", tuning::kMaxFileBytes, " are read")};
  }
  in.seekg(0);
  content << in.rdbuf();
  tuning::ParseResult parsed = tuning::parseTunedFile(content.str());
  if (!parsed.file) return {std::nullopt, cat(path, ": ", parsed.error)};
  if (parsed.file->deviceName != device.name) {
    return {std::nullopt, cat(path, ": written for \"", parsed.file->deviceName, "\", not \"", device.name, "\"")};
  }
  if (!parsed.file->computeCapability.empty() && parsed.file->computeCapability != deviceCapability(device)) {
    return {std::nullopt, cat(path, ": written for compute capability ", parsed.file->computeCapability,
                              ", the device has ", deviceCapability(device))};
  }
  return {std::move(parsed.file), ""};
}

std::shared_ptr<const LoadedFile> fileFor(const std::string& path, const DeviceInfo& device,
                                          ffpaLogLevel_t level) {
  std::lock_guard<std::mutex> lock(gMutex);
  auto& slot = gFiles[path];
  if (!slot) {
    slot = std::make_shared<const LoadedFile>(load(path, device));
    if (!slot->file) {
      logMessage(level, FFPA_LOG_LEVEL_WARNING, cat("tuned configs: ", slot->problem, "; using the built-in launch defaults"));
    }
  }
  return slot;
}

}  // namespace

std::string tunedConfigDirectory(const Policy& policy) {
  return policy.tunedConfigDir().empty() ? std::string(FFPA_TUNED_CONFIG_INSTALL_DIR) : policy.tunedConfigDir();
}

std::optional<TunedChoice> findTunedConfig(const Policy& policy, const DeviceInfo& device,
                                           const tuning::TunedQuery& query) {
  if (policy.flag(FFPA_POLICY_SKIP_PERSISTENT_TUNED_CONFIG)) return std::nullopt;
  const std::string name = tuning::deviceFileName(device.name);
  const auto loaded = fileFor(tunedConfigDirectory(policy) + "/" + name, device, policy.logLevel());
  if (!loaded->file) return std::nullopt;
  const tuning::TunedEntry* entry = loaded->file->lookup(query);
  if (entry == nullptr) return std::nullopt;
  TunedChoice choice{entry->config, cat(name, ": ", entry->direction, " ", entry->dtype, " d=", entry->headDim,
                                        entry->headDimV != entry->headDim ? cat("/", entry->headDimV) : "",
                                        " Nq=", entry->seqlenQ, " Nkv=", entry->seqlenKv)};
  std::string config;
  for (const auto& [key, value] : choice.config) config += cat(config.empty() ? "" : " ", key, "=", value);
  logMessage(policy.logLevel(), FFPA_LOG_LEVEL_DEBUG,
             cat("tuned config hit: ", query.kernel, " ", query.direction, " ", query.dtype, " d=", query.headDim,
                 " Nq=", query.seqlenQ, " Nkv=", query.seqlenKv, " <- ", choice.source, " [", config, "]"));
  return choice;
}

void forgetTunedConfigFiles() {
  std::lock_guard<std::mutex> lock(gMutex);
  gFiles.clear();
}

}  // namespace ffpa
