#include "report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

namespace ffpa_autotune {
namespace {

std::string fixed(double value, int digits) {
  char text[64];
  std::snprintf(text, sizeof text, "%.*f", digits, value);
  return text;
}

std::string configText(const ffpa::tuning::LaunchConfig& config) {
  std::string text;
  for (const auto& [name, value] : config) text += (text.empty() ? "" : " ") + name + "=" + std::to_string(value);
  return text.empty() ? "(defaults)" : text;
}

}  // namespace

std::string formatDuration(double seconds) {
  const long long s = std::llround(std::max(0.0, seconds));
  char text[32];
  if (s < 60) {
    std::snprintf(text, sizeof text, "%llds", s);
  } else if (s < 3600) {
    std::snprintf(text, sizeof text, "%lldm%02llds", s / 60, s % 60);
  } else {
    std::snprintf(text, sizeof text, "%lldh%02lldm", s / 3600, (s % 3600) / 60);
  }
  return text;
}

std::string progressLine(size_t done, size_t total, double elapsedSeconds, const Task& last, const TaskResult& result) {
  constexpr size_t kWidth = 20;
  const size_t filled = total == 0 ? kWidth : done * kWidth / total;
  std::string bar = "[" + std::string(filled, '#') + std::string(kWidth - filled, '-') + "]";
  const double eta = done == 0 ? 0.0 : elapsedSeconds / double(done) * double(total - done);
  std::ostringstream line;
  line << bar << " " << done << "/" << total << "  " << formatDuration(elapsedSeconds) << ", ETA "
       << formatDuration(eta) << "  " << last.label() << " (" << fixed(result.seconds, 1) << " s"
       << (result.ok ? "" : result.untunable.empty() ? ", FAILED" : ", not tunable") << ")";
  return line.str();
}

std::string summaryTable(const std::vector<Task>& tasks, const std::vector<TaskResult>& results) {
  std::vector<std::vector<std::string>> rows = {
      {"task", "best config", "ms", "default ms", "speedup", "GPU"}};
  int failed = 0, untunable = 0;
  double gainSum = 0.0;
  int gains = 0;
  for (size_t i = 0; i < tasks.size(); ++i) {
    const TaskResult& r = results[i];
    if (!r.untunable.empty()) {
      ++untunable;
      rows.push_back({tasks[i].label(), "not tunable: " + r.untunable, "-", "-", "-", std::to_string(r.device)});
      continue;
    }
    if (!r.ok) {
      ++failed;
      rows.push_back({tasks[i].label(), "FAILED: " + r.error, "-", "-", "-", std::to_string(r.device)});
      continue;
    }
    const double speedup = r.entry.timeMs > 0.0 ? r.entry.defaultTimeMs / r.entry.timeMs : 0.0;
    if (speedup > 0.0) {
      gainSum += speedup;
      ++gains;
    }
    rows.push_back({tasks[i].label(), configText(r.entry.config), fixed(r.entry.timeMs, 3),
                    fixed(r.entry.defaultTimeMs, 3), fixed(speedup, 2) + "x", std::to_string(r.device)});
  }
  std::vector<size_t> widths(rows.front().size(), 0);
  for (const auto& row : rows) {
    for (size_t c = 0; c < row.size(); ++c) widths[c] = std::max(widths[c], row[c].size());
  }
  std::ostringstream table;
  for (const auto& row : rows) {
    std::string line;
    for (size_t c = 0; c < row.size(); ++c) {
      line += row[c];
      if (c + 1 < row.size()) line += std::string(widths[c] - row[c].size() + 2, ' ');
    }
    table << line << "\n";
  }
  table << tasks.size() << " tasks, " << tasks.size() - failed - untunable << " tuned, ";
  if (untunable > 0) table << untunable << " not tunable, ";
  table << failed << " failed";
  if (gains > 0) table << "; mean speedup over the built-in defaults " << fixed(gainSum / gains, 2) << "x";
  table << "\n";
  return table.str();
}

ffpa::tuning::TunedFile runFile(const RunInfo& info, const Options& o, const std::vector<int64_t>& headDims,
                                const std::vector<int64_t>& seqlens, const std::vector<TaskResult>& results) {
  ffpa::tuning::TunedFile file;
  file.library = info.library;
  file.deviceName = info.deviceName;
  file.computeCapability = info.computeCapability;
  file.mode = o.mode;
  file.grid.headDims = headDims;
  file.grid.seqlens = seqlens;
  file.grid.dtypes = o.dtypes;
  file.grid.directions = o.directions;
  file.grid.batch = o.batch;
  file.grid.heads = o.heads;
  file.grid.fullTasks = o.fullTasks;
  for (const TaskResult& r : results) {
    if (r.ok) file.entries.push_back(r.entry);
  }
  return file;
}

}  // namespace ffpa_autotune
