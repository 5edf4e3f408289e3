// What ffpa-autotune shows and writes: the progress line, the summary table, the tuned-config
// file of a run.
#pragma once

#include "options.h"
#include "task_grid.h"
#include "tuning/tuned_config.h"
#include "worker_pool.h"

#include <string>
#include <vector>

namespace ffpa_autotune {

// "45s", "9m05s", "1h02m".
std::string formatDuration(double seconds);

// "[########------------] 12/48  2m10s, ETA 6m30s  backward bf16 d=512 N=4096 (3.2 s)"; the ETA
// extrapolates the mean time of the tasks done so far.
std::string progressLine(size_t done, size_t total, double elapsedSeconds, const Task& last, const TaskResult& result);

// One row per task: the task, the winning config, its time, the built-in defaults' time, the
// speedup, the GPU; failures and untunable tasks with their reason. Ends with a line of totals.
std::string summaryTable(const std::vector<Task>& tasks, const std::vector<TaskResult>& results);

// The device and run a file describes.
struct RunInfo {
  std::string library;  // "libffpa 0.1.0"
  std::string deviceName;
  std::string computeCapability;  // "9.0"
};

// The tuned-config file of a run: its grid, and the entries of the tasks that succeeded.
ffpa::tuning::TunedFile runFile(const RunInfo& info, const Options& options, const std::vector<int64_t>& headDims,
                                const std::vector<int64_t>& seqlens, const std::vector<TaskResult>& results);

}  // namespace ffpa_autotune
