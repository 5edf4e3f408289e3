// ffpa-autotune's host-side parts: options, the task grid, the worker pool (with a fake tuner on
// fake GPUs), the progress line, the summary table and the file of a run.
#include "options.h"
#include "report.h"
#include "task_grid.h"
#include "worker_pool.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <set>
#include <stdexcept>
#include <thread>

using namespace ffpa_autotune;

namespace {

Options parse(std::initializer_list<const char*> args) {
  return parseOptions(std::vector<std::string>(args.begin(), args.end()));
}

std::string refusal(std::initializer_list<const char*> args) {
  try {
    parse(args);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "(accepted)";
}

}  // namespace

TEST_CASE("ffpa-autotune: options and their refusals") {
  const Options defaults = parse({});
  CHECK(defaults.command == Command::tune);
  CHECK(defaults.mode == "fast");
  CHECK(defaults.directions == std::vector<std::string>{"forward", "backward"});
  CHECK(defaults.dtypes == std::vector<std::string>{"bf16"});
  CHECK(defaults.batch == 1);
  CHECK(defaults.heads == 32);
  CHECK_FALSE(defaults.overwrite);

  const Options o = parse({"--mode", "max", "--directions", "backward", "--dtypes", "bf16,fp16", "--B", "2", "--H",
                           "48", "--full-tasks", "--overwrite", "--output-dir", "/tmp/x", "--devices", "0,1,2",
                           "--head-dims", "320:512:64", "--seqlens", "1024,4096"});
  CHECK(o.mode == "max");
  CHECK(o.directions == std::vector<std::string>{"backward"});
  CHECK(o.dtypes == std::vector<std::string>{"bf16", "fp16"});
  CHECK(o.heads == 48);
  CHECK(o.fullTasks);
  CHECK(o.devices == std::vector<int>{0, 1, 2});
  CHECK(o.headDims == std::vector<int64_t>{320, 384, 448, 512});
  CHECK(o.seqlens == std::vector<int64_t>{1024, 4096});
  CHECK(parse({"--directions", "both"}).directions.size() == 2);
  CHECK(parse({"--help"}).command == Command::help);

  CHECK(refusal({"--mode", "slow"}) == "--mode: \"slow\" is not one of fast, max");
  CHECK(refusal({"--dtypes", "fp32"}) == "--dtypes: \"fp32\" is not one of bf16, fp16");
  CHECK(refusal({"--H", "0"}) == "--H: \"0\" is not an integer from 1 to 65535");
  CHECK(refusal({"--head-dims", "100"}) == "--head-dims: 100 is not a multiple of 16 up to 1024");
  CHECK(refusal({"--B"}) == "--B needs a value");
  CHECK(refusal({"--speed"}) == "unknown option --speed (see --help)");
  CHECK(refusal({"tune"}) == "unexpected argument \"tune\" (see --help)");

  const Options m = parse({"merge", "a.json", "b.json", "-o", "out.json", "--overwrite"});
  CHECK(m.command == Command::merge);
  CHECK(m.inputs == std::vector<std::string>{"a.json", "b.json"});
  CHECK(m.output == "out.json");
  CHECK(refusal({"merge", "a.json"}) == "merge: name the output file with -o FILE");
  CHECK(refusal({"merge", "-o", "x.json"}) == "merge: name the files to merge");
  CHECK(refusal({"merge", "a.json", "--mode", "max", "-o", "x"}).find("merge: unknown option --mode") == 0);
}

TEST_CASE("ffpa-autotune: the task grid, its variants, its notes and its cap") {
  CHECK(defaultSeqlens(int64_t{80} << 30) == std::vector<int64_t>{512, 1024, 2048, 4096, 8192, 16384});
  CHECK(defaultSeqlens(int64_t{40} << 30) == std::vector<int64_t>{512, 1024, 2048, 4096, 8192});
  CHECK(gqaHeads(32) == 8);
  CHECK(gqaHeads(48) == 12);
  CHECK(gqaHeads(7) == 1);
  CHECK(gqaHeads(1) == 1);

  Options o = parse({"--dtypes", "bf16,fp16"});
  std::vector<std::string> notes;
  const std::vector<Task> base = taskGrid(o, {320, 512}, {1024, 4096}, 0, &notes);
  // 2 directions x 2 dtypes x 2 head dims x 2 seqlens x {non-causal, causal}, and the forward's
  // decode of each: 2 dtypes x 2 head dims x 2 KV lengths x {non-causal, causal}
  CHECK(base.size() == 32 + 16);
  CHECK(base.front().label() == "forward bf16 d=320 N=1024");
  CHECK(base[1].label() == "forward bf16 d=320 N=1024 causal");
  CHECK(base[2].label() == "forward bf16 d=320 N=1/1024 decode(32/32)");
  CHECK(base[3].label() == "forward bf16 d=320 N=1/1024 causal decode(32/32)");
  CHECK((base[2].seqQ == 1 && base[2].seqKv == 1024 && base[2].headsKv == 32));
  CHECK(base.back().label() == "backward fp16 d=512 N=4096 causal");
  for (const Task& t : base) CHECK((t.direction == "forward" || t.seqQ == t.seqKv));  // no decode backward
  CHECK(notes.size() == 1);  // no single-query backward kernel
  o.directions = {"forward"};
  notes.clear();
  CHECK(taskGrid(o, {512}, {1, 2048}, 0, &notes).size() == 2 * (2 + 2 + 2));  // no decode of one key
  CHECK(notes.empty());
  o.directions = {"forward", "backward"};

  o.fullTasks = true;
  notes.clear();
  const std::vector<Task> full = taskGrid(o, {512}, {2048}, 0, &notes);
  CHECK(full.size() == 2 * 2 * 5 + 2 * 4);  // and the forward's decode: plain, causal, GQA, MQA
  std::set<std::string> labels;
  for (const Task& t : full) labels.insert(t.label());
  CHECK(labels.count("forward bf16 d=512 N=2048 gqa(32/8)") == 1);
  CHECK(labels.count("backward fp16 d=512 N=2048 mqa(32/1)") == 1);
  CHECK(labels.count("forward fp16 d=512 N=2048/4096 cross(32/32)") == 1);
  CHECK(labels.count("forward bf16 d=512 N=1/2048 decode-gqa(32/8)") == 1);
  CHECK(labels.count("forward fp16 d=512 N=1/2048 decode-mqa(32/1)") == 1);
  CHECK(notes.size() == 2);  // no single-query backward kernel; no masks or dropout

  notes.clear();
  const std::vector<Task> capped = taskGrid(o, {512}, {2048}, 4, &notes);
  CHECK(capped.size() == 4);
  CHECK(notes.back() == "FFPA_AUTOTUNE_MAX_CONFIGS=4: the first 4 of 28 tasks");
  CHECK(maxTasksFromEnvironment(nullptr) == 0);
  CHECK(maxTasksFromEnvironment("") == 0);
  CHECK(maxTasksFromEnvironment("12") == 12);
  CHECK_THROWS_WITH_AS(maxTasksFromEnvironment("0"), "FFPA_AUTOTUNE_MAX_CONFIGS: \"0\" is not a positive integer",
                       std::invalid_argument);
  CHECK_THROWS_AS(maxTasksFromEnvironment("4x"), std::invalid_argument);
}

TEST_CASE("ffpa-autotune: the worker pool runs every task once, one at a time per GPU") {
  const Options o = parse({});
  const std::vector<Task> tasks = taskGrid(o, {128, 256, 512}, {512, 1024, 2048}, 0, nullptr);
  REQUIRE(tasks.size() == 36 + 18);  // prefill, decode
  std::mutex mutex;
  std::map<int, int> running;  // GPU -> tasks in flight
  std::map<int, int> ranOn;
  std::atomic<int> calls{0};
  bool overlapped = false;
  std::vector<size_t> progressDone;
  const std::vector<TaskResult> results = runTasks(
      tasks, {0, 3, 5},
      [&](const Task& task, int device) {
        {
          std::lock_guard<std::mutex> lock(mutex);
          overlapped = overlapped || running[device]++ > 0;
          ++ranOn[device];
        }
        ++calls;
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
        {
          std::lock_guard<std::mutex> lock(mutex);
          --running[device];
        }
        if (task.headDim == 256 && task.seqQ == 1024 && task.causal && task.direction == "backward") {
          throw std::runtime_error("out of memory");
        }
        if (task.headDim == 512 && task.seqQ == 2048 && !task.causal && task.direction == "forward") {
          throw NothingToTune("plain kernel");
        }
        ffpa::tuning::TunedEntry e;
        e.direction = task.direction;
        e.headDim = e.headDimV = task.headDim;
        e.seqlenQ = e.seqlenKv = task.seqQ;
        e.causal = task.causal;
        e.config = {{"stages", device}};
        e.timeMs = 1.0;
        e.defaultTimeMs = 1.5;
        return e;
      },
      [&](size_t done, size_t total, const Task&, const TaskResult&) {
        CHECK(total == tasks.size());
        progressDone.push_back(done);
      });
  CHECK(size_t(calls) == tasks.size());
  CHECK_FALSE(overlapped);
  CHECK(ranOn.size() == 3);  // every GPU worked
  REQUIRE(results.size() == tasks.size());
  int failed = 0, untunable = 0;
  for (size_t i = 0; i < results.size(); ++i) {
    if (!results[i].untunable.empty()) {
      ++untunable;
      CHECK_FALSE(results[i].ok);
      CHECK(results[i].untunable == "plain kernel");
      CHECK(results[i].error.empty());
      continue;
    }
    if (!results[i].ok) {
      ++failed;
      CHECK(results[i].error == "out of memory");
      continue;
    }
    // Results come back in task order, whichever GPU ran them.
    CHECK(results[i].entry.headDim == tasks[i].headDim);
    CHECK(results[i].entry.seqlenQ == tasks[i].seqQ);
    CHECK(results[i].entry.config.at("stages") == results[i].device);
  }
  CHECK(failed == 1);
  CHECK(untunable == 1);
  std::vector<size_t> expected(tasks.size());
  for (size_t i = 0; i < tasks.size(); ++i) expected[i] = i + 1;
  CHECK(progressDone == expected);
}

TEST_CASE("ffpa-autotune: progress, summary and the file of a run") {
  CHECK(formatDuration(45) == "45s");
  CHECK(formatDuration(545) == "9m05s");
  CHECK(formatDuration(3725) == "1h02m");
  Task t;
  t.direction = "backward";
  t.dtype = "bf16";
  t.headDim = 512;
  t.seqQ = t.seqKv = 4096;
  TaskResult r;
  r.ok = true;
  r.seconds = 3.2;
  CHECK(progressLine(12, 48, 130.0, t, r) ==
        "[#####---------------] 12/48  2m10s, ETA 6m30s  backward bf16 d=512 N=4096 (3.2 s)");

  r.entry.direction = "backward";
  r.entry.kernel = "sm80.backward";
  r.entry.dtype = "bf16";
  r.entry.headDim = r.entry.headDimV = 512;
  r.entry.seqlenQ = r.entry.seqlenKv = 4096;
  r.entry.config = {{"stages", 1}, {"score_step", 64}};
  r.entry.timeMs = 2.0;
  r.entry.defaultTimeMs = 2.5;
  r.device = 0;
  TaskResult failure;
  failure.error = "out of memory";
  failure.device = 1;
  const std::string table = summaryTable({t, t}, {r, failure});
  CHECK(table.find("score_step=64 stages=1") != std::string::npos);
  CHECK(table.find("1.25x") != std::string::npos);
  CHECK(table.find("FAILED: out of memory") != std::string::npos);
  CHECK(table.find("2 tasks, 1 tuned, 1 failed; mean speedup over the built-in defaults 1.25x") != std::string::npos);
  TaskResult plain;
  plain.untunable = "sm90.forward.bf16.d512 has no launch parameters to tune";
  plain.device = 0;
  CHECK(progressLine(1, 3, 1.0, t, plain).find(", not tunable)") != std::string::npos);
  const std::string withPlain = summaryTable({t, t, t}, {r, failure, plain});
  CHECK(withPlain.find("not tunable: sm90.forward.bf16.d512 has no launch parameters") != std::string::npos);
  CHECK(withPlain.find("3 tasks, 1 tuned, 1 not tunable, 1 failed") != std::string::npos);

  const Options o = parse({"--directions", "backward"});
  const ffpa::tuning::TunedFile file =
      runFile({"libffpa 0.1.0", "NVIDIA H100 80GB HBM3", "9.0"}, o, {512}, {4096}, {r, failure});
  REQUIRE(file.entries.size() == 1);
  const ffpa::tuning::ParseResult back = ffpa::tuning::parseTunedFile(ffpa::tuning::serializeTunedFile(file));
  REQUIRE_MESSAGE(back.file.has_value(), back.error);
  CHECK(back.file->deviceName == "NVIDIA H100 80GB HBM3");
  CHECK(back.file->grid.directions == std::vector<std::string>{"backward"});
  CHECK(back.file->entries.front().config == r.entry.config);
}
