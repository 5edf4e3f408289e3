// The tasks of a tuning run: one problem shape each, from the options and the machine.
#pragma once

#include "options.h"

#include <cstdint>
#include <string>
#include <vector>

namespace ffpa_autotune {

struct Task {
  std::string direction;  // "forward" or "backward"
  std::string dtype;      // "bf16" or "fp16"
  int64_t batch = 1;
  int64_t headsQ = 1;
  int64_t headsKv = 1;
  int64_t seqQ = 1;
  int64_t seqKv = 1;
  int64_t headDim = 64;  // d_qk = d_v
  bool causal = false;
  std::string variant;  // "", "gqa", "mqa", "cross", "decode", "decode-gqa", "decode-mqa"

  std::string label() const;  // "backward bf16 d=512 N=4096 causal gqa(32/8)"
};

// GQA's K/V head count for `heads` query heads: the largest divisor of `heads` at most heads / 4
// (at least 1), as ffpa-attn's benchmark chooses it.
int64_t gqaHeads(int64_t heads);

// Every task: direction x dtype x head dim x seqlen x {non-causal, causal}, self-attention with
// equal heads, and for the forward decode (Nq = 1, Nkv = seqlen) non-causal and causal; with full
// tasks, non-causal GQA and MQA decode, then non-causal GQA, MQA and cross-attention (Nkv = 2 Nq)
// at each head dim and seqlen. At most `maxTasks` (0: all), in that order. `notes` receives what
// the grid leaves out and why.
std::vector<Task> taskGrid(const Options& options, const std::vector<int64_t>& headDims,
                           const std::vector<int64_t>& seqlens, size_t maxTasks, std::vector<std::string>* notes);

// FFPA_AUTOTUNE_MAX_CONFIGS: a positive integer, or 0 (all) when unset; throws
// std::invalid_argument naming the variable when malformed.
size_t maxTasksFromEnvironment(const char* value);

}  // namespace ffpa_autotune
