// ffpa-bench's command line: parsed into Options, or a message naming the option and what it
// accepts. Separate from the GPU code so that the host tests can check it.
#pragma once

#include <ffpa/ffpa.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace ffpa_bench {

enum class Format { text, markdown, csv };

struct Options {
  int64_t batch = 1, heads = 48, headsKv = 0, seqQ = 8192, seqKv = 0;  // 0: same as heads / seqQ
  std::vector<int64_t> headDims;   // default: 320..1024 step 64
  int64_t headDimV = 0;            // 0: same as each head dim
  std::vector<ffpaDataType_t> dtypes{FFPA_DATA_TYPE_FLOAT16};
  std::vector<ffpaAccumulator_t> accumulators;  // default: every mode (fp16 only beyond f32)
  ffpaCausalMode_t causal = FFPA_CAUSAL_NONE;
  bool bnhd = false;
  int warmup = 3, iters = 10, rotate = 2;
  std::vector<std::pair<std::string, std::string>> policies;  // NAME=VALUE
  bool reference = false, check = false, backward = false;
  Format format = Format::text;
  std::string output;
  bool help = false;
};

// Throws std::invalid_argument with a message naming the option and the allowed values.
Options parseOptions(const std::vector<std::string>& args);

// "320,512" or "320:1024:64" (first:last:step) or a mix: "64,128,320:1024:64".
std::vector<int64_t> parseHeadDims(const std::string& text);

extern const char* const kUsage;

}  // namespace ffpa_bench
