// Command-line options of ffpa-demo.
#pragma once

#include <cstdint>

#include "common/cpu_attention.h"
#include "common/host_tensor.h"

namespace ffpa_demo {

struct DemoOptions {
  int64_t batch = 1;
  int64_t heads = 16;
  int64_t kv_heads = 0;  // 0: as many as --heads
  int64_t seq = 2048;
  int64_t seq_kv = 0;  // 0: as long as --seq
  int64_t dim = 512;
  int64_t dim_v = 0;  // 0: as large as --dim
  ffpa_tools::DType dtype = ffpa_tools::DType::bfloat16;
  ffpa_tools::CausalMask causal = ffpa_tools::CausalMask::none;
  int64_t repeat = 20;
  int64_t warmup = 3;

  // The attention problem the options describe, defaults resolved (its scale is left to
  // ffpa_tools::make_config).
  ffpa_tools::AttentionProblem problem() const;
};

// Fills `options` from the command line. Returns false when the program should stop at once:
// after --help (*exit_code 0) or a bad option (*exit_code 2, with a message on stderr).
bool parse_demo_options(int argc, char** argv, DemoOptions* options, int* exit_code);

}  // namespace ffpa_demo
