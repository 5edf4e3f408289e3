#include "task_grid.h"

#include "common/whole_integer.h"

#include <algorithm>
#include <sstream>
#include <stdexcept>

namespace ffpa_autotune {

std::string Task::label() const {
  std::ostringstream text;
  text << direction << " " << dtype << " d=" << headDim << " N=" << seqQ;
  if (seqKv != seqQ) text << "/" << seqKv;
  if (causal) text << " causal";
  if (!variant.empty()) text << " " << variant << "(" << headsQ << "/" << headsKv << ")";
  return text.str();
}

namespace {

// `task`, its causal twin, and with full tasks its non-causal GQA and MQA twins (variants
// `prefix` + "gqa" and "mqa").
void addWithTwins(const Task& task, const Options& o, const std::string& prefix, std::vector<Task>& tasks) {
  tasks.push_back(task);
  Task causal = task;
  causal.causal = true;
  tasks.push_back(causal);
  if (!o.fullTasks) return;
  Task gqa = task;
  gqa.variant = prefix + "gqa";
  gqa.headsKv = gqaHeads(o.heads);
  if (gqa.headsKv != o.heads) tasks.push_back(gqa);
  Task mqa = task;
  mqa.variant = prefix + "mqa";
  mqa.headsKv = 1;
  if (o.heads > 1) tasks.push_back(mqa);
}

}  // namespace

int64_t gqaHeads(int64_t heads) {
  for (int64_t kv = heads / 4; kv > 1; --kv) {
    if (heads % kv == 0) return kv;
  }
  return 1;
}

std::vector<Task> taskGrid(const Options& o, const std::vector<int64_t>& headDims, const std::vector<int64_t>& seqlens,
                           size_t maxTasks, std::vector<std::string>* notes) {
  std::vector<Task> tasks;
  for (const std::string& direction : o.directions) {
    for (const std::string& dtype : o.dtypes) {
      for (const int64_t d : headDims) {
        for (const int64_t n : seqlens) {
          Task base;
          base.direction = direction;
          base.dtype = dtype;
          base.batch = o.batch;
          base.headsQ = base.headsKv = o.heads;
          base.seqQ = base.seqKv = n;
          base.headDim = d;
          addWithTwins(base, o, "", tasks);
          // Decode: one query row against the KV length (a single-token KV cache is no decode
          // workload); a causal row sees every key (bottom-right), but the lookup keeps the two
          // apart. GQA and MQA decode run their query heads as rows of their KV head.
          if (direction == "forward" && n > 1) {
            Task decode = base;
            decode.seqQ = 1;
            decode.variant = "decode";
            addWithTwins(decode, o, "decode-", tasks);
          }
          if (!o.fullTasks) continue;
          Task cross = base;
          cross.variant = "cross";
          cross.seqKv = 2 * n;
          tasks.push_back(cross);
        }
      }
    }
  }
  if (notes != nullptr) {
    if (std::count(o.directions.begin(), o.directions.end(), "backward") > 0) {
      notes->push_back("decode backward (Nq = 1): libffpa has no single-query backward kernel; not tuned");
    }
    if (o.fullTasks) notes->push_back("attention-mask and dropout variants: not features of libffpa; not tuned");
  }
  if (maxTasks > 0 && tasks.size() > maxTasks) {
    if (notes != nullptr) {
      notes->push_back("FFPA_AUTOTUNE_MAX_CONFIGS=" + std::to_string(maxTasks) + ": the first " +
                       std::to_string(maxTasks) + " of " + std::to_string(tasks.size()) + " tasks");
    }
    tasks.resize(maxTasks);
  }
  return tasks;
}

size_t maxTasksFromEnvironment(const char* value) {
  if (value == nullptr || *value == '\0') return 0;
  const std::optional<int64_t> n = ffpa_tools::wholeInteger(value);
  if (!n || *n < 1) {
    throw std::invalid_argument(std::string("FFPA_AUTOTUNE_MAX_CONFIGS: \"") + value + "\" is not a positive integer");
  }
  return static_cast<size_t>(*n);
}

}  // namespace ffpa_autotune
