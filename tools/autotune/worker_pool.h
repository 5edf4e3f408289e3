// Runs tuning tasks on several GPUs at once: one worker thread per GPU, each taking the next
// pending task from a shared queue as soon as it finishes one, so that every GPU runs exactly one
// task at a time and none idles while tasks remain.
#pragma once

#include "task_grid.h"
#include "tuning/tuned_config.h"

#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

namespace ffpa_autotune {

struct TaskResult {
  bool ok = false;
  ffpa::tuning::TunedEntry entry;  // when ok
  std::string error;               // when not
  // When the kernel that serves the task has no launch parameters to tune (not a failure): why.
  std::string untunable;
  int device = -1;
  double seconds = 0.0;
};

// Thrown by a TuneTask whose task is served by a kernel with nothing to tune.
struct NothingToTune : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Tunes one task on one GPU; throws NothingToTune, or std::exception for a failure, which the
// pool records.
using TuneTask = std::function<ffpa::tuning::TunedEntry(const Task& task, int device)>;

// Called after each task, from the worker that ran it, one call at a time.
using Progress = std::function<void(size_t done, size_t total, const Task& task, const TaskResult& result)>;

// The results in task order.
std::vector<TaskResult> runTasks(const std::vector<Task>& tasks, const std::vector<int>& devices,
                                 const TuneTask& tune, const Progress& progress);

}  // namespace ffpa_autotune
