#include "worker_pool.h"

#include <atomic>
#include <chrono>
#include <exception>
#include <mutex>
#include <thread>

namespace ffpa_autotune {

std::vector<TaskResult> runTasks(const std::vector<Task>& tasks, const std::vector<int>& devices,
                                 const TuneTask& tune, const Progress& progress) {
  std::vector<TaskResult> results(tasks.size());
  std::atomic<size_t> next{0};
  std::mutex progressMutex;
  size_t done = 0;
  auto worker = [&](int device) {
    for (size_t i = next++; i < tasks.size(); i = next++) {
      TaskResult& result = results[i];
      result.device = device;
      const auto start = std::chrono::steady_clock::now();
      try {
        result.entry = tune(tasks[i], device);
        result.ok = true;
      } catch (const NothingToTune& e) {
        result.untunable = e.what();
      } catch (const std::exception& e) {
        result.error = e.what();
      }
      result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      std::lock_guard<std::mutex> lock(progressMutex);
      ++done;
      if (progress) progress(done, tasks.size(), tasks[i], result);
    }
  };
  std::vector<std::thread> workers;
  for (size_t w = 1; w < devices.size(); ++w) workers.emplace_back(worker, devices[w]);
  worker(devices.empty() ? 0 : devices.front());  // the calling thread is the first worker
  for (std::thread& t : workers) t.join();
  return results;
}

}  // namespace ffpa_autotune
