// ffpa-autotune: tunes libffpa's launch configs on this machine's GPUs and writes the device's
// tuned-config file; merges such files. See kUsage (options.cpp) and docs/tuned-configs.rst.
#include "device_tuner.h"
#include "options.h"
#include "report.h"
#include "task_grid.h"
#include "worker_pool.h"

#include "ffpa_build_config.h"
#include "tuning/tuned_config.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

namespace fs = std::filesystem;
using namespace ffpa_autotune;

namespace {

constexpr int kExitFailed = 1, kExitUsage = 2, kExitNoGpu = 77;

bool writeFile(const fs::path& path, const std::string& text, bool overwrite) {
  if (fs::exists(path) && !overwrite) {
    std::cerr << "ffpa-autotune: " << path.string() << " exists; --overwrite replaces it\n";
    return false;
  }
  std::error_code error;
  if (path.has_parent_path()) fs::create_directories(path.parent_path(), error);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  if (!out) {
    std::cerr << "ffpa-autotune: cannot write " << path.string() << "\n";
    return false;
  }
  return true;
}

int merge(const Options& o) {
  std::vector<ffpa::tuning::TunedFile> files;
  for (const std::string& input : o.inputs) {
    std::ifstream in(input, std::ios::binary);
    if (!in) {
      std::cerr << "ffpa-autotune: cannot read " << input << "\n";
      return kExitFailed;
    }
    std::ostringstream text;
    text << in.rdbuf();
    ffpa::tuning::ParseResult parsed = ffpa::tuning::parseTunedFile(text.str());
    if (!parsed.file) {
      std::cerr << "ffpa-autotune: " << input << ": " << parsed.error << "\n";
      return kExitFailed;
    }
    files.push_back(std::move(*parsed.file));
  }
  const ffpa::tuning::MergeResult merged = ffpa::tuning::mergeTunedFiles(files);
  if (!merged.file) {
    std::cerr << "ffpa-autotune: merge: " << merged.error << "\n";
    return kExitFailed;
  }
  if (!writeFile(o.output, ffpa::tuning::serializeTunedFile(*merged.file), o.overwrite)) return kExitFailed;
  std::cout << "merged " << files.size() << " files: " << merged.file->entries.size() << " entries for "
            << merged.file->deviceName << " (" << merged.file->mode << ") -> " << o.output << "\n";
  return 0;
}

int tune(const Options& o) {
  if (deviceCount() == 0) {
    std::cerr << "ffpa-autotune: no usable CUDA GPU; nothing to tune\n";
    return kExitNoGpu;
  }
  const std::vector<int> devices = o.devices.empty() ? std::vector<int>{0} : o.devices;
  std::vector<DeviceSummary> summaries;
  for (int d : devices) {
    if (d >= deviceCount()) {
      std::cerr << "ffpa-autotune: --devices: GPU " << d << " does not exist (" << deviceCount() << " visible)\n";
      return kExitUsage;
    }
    summaries.push_back(describeDevice(d));
    if (summaries.back().name != summaries.front().name) {
      std::cerr << "ffpa-autotune: --devices: GPU " << d << " is a " << summaries.back().name << ", GPU "
                << devices.front() << " a " << summaries.front().name << "; tune one model per run\n";
      return kExitUsage;
    }
  }
  int64_t memory = summaries.front().memoryBytes;
  for (const DeviceSummary& s : summaries) memory = std::min(memory, s.memoryBytes);

  const std::vector<int64_t> headDims = o.headDims.empty() ? compiledHeadDims() : o.headDims;
  const std::vector<int64_t> seqlens = o.seqlens.empty() ? defaultSeqlens(memory) : o.seqlens;
  std::vector<std::string> notes;
  const std::vector<Task> tasks =
      taskGrid(o, headDims, seqlens, maxTasksFromEnvironment(std::getenv("FFPA_AUTOTUNE_MAX_CONFIGS")), &notes);
  const fs::path path = fs::path(o.outputDir.empty() ? FFPA_TUNED_CONFIG_INSTALL_DIR : o.outputDir) /
                        ffpa::tuning::deviceFileName(summaries.front().name);
  if (fs::exists(path) && !o.overwrite) {  // before hours of tuning, not after
    std::cerr << "ffpa-autotune: " << path.string() << " exists; --overwrite replaces it\n";
    return kExitFailed;
  }
  std::cerr << "ffpa-autotune: " << tasks.size() << " tasks on " << devices.size() << " x " << summaries.front().name
            << ", mode " << o.mode << "\n";
  for (const std::string& note : notes) std::cerr << "  note: " << note << "\n";

  const bool terminal = isatty(STDERR_FILENO) != 0;
  const auto start = std::chrono::steady_clock::now();
  const std::vector<TaskResult> results = runTasks(
      tasks, devices, [&](const Task& task, int device) { return tuneOnDevice(task, device, o.mode); },
      [&](size_t done, size_t total, const Task& task, const TaskResult& result) {
        const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        std::cerr << (terminal ? "\r\033[K" : "") << progressLine(done, total, elapsed, task, result)
                  << (terminal && done < total ? "" : "\n") << std::flush;
      });

  std::cout << summaryTable(tasks, results);
  const RunInfo info{std::string("libffpa ") + FFPA_BUILD_VERSION, summaries.front().name,
                     summaries.front().computeCapability};
  const ffpa::tuning::TunedFile file = runFile(info, o, headDims, seqlens, results);
  if (!writeFile(path, ffpa::tuning::serializeTunedFile(file), o.overwrite)) return kExitFailed;
  std::cout << "wrote " << file.entries.size() << " entries to " << path.string() << "\n";
  const auto untunable = std::count_if(results.begin(), results.end(),
                                       [](const TaskResult& r) { return !r.untunable.empty(); });
  return file.entries.size() + size_t(untunable) == tasks.size() ? 0 : kExitFailed;
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  try {
    options = parseOptions(std::vector<std::string>(argv + 1, argv + argc));
  } catch (const std::invalid_argument& e) {
    std::cerr << "ffpa-autotune: " << e.what() << "\n";
    return kExitUsage;
  }
  try {
    switch (options.command) {
      case Command::help:
        std::cout << kUsage;
        return 0;
      case Command::merge:
        return merge(options);
      case Command::tune:
        return tune(options);
    }
  } catch (const std::exception& e) {
    std::cerr << "ffpa-autotune: " << e.what() << "\n";
    return kExitFailed;
  }
  return kExitFailed;
}
