// ffpa-bench's command line: parsed into Options, or a message naming the option and what it
// accepts. Separate from the GPU code so that the host tests check it without a GPU.
#pragma once

#include <ffpa/ffpa.h>

#include <cstdint>
#include <string>
#include <vector>

#include "policy_setting.h"

namespace ffpa_bench {

enum class Format { text, markdown, csv };

struct Options {
  int64_t batch = 1, heads = 48, headsKv = 0, seqQ = 8192, seqKv = 0;  // 0: same as heads / seqQ
  std::vector<int64_t> headDims;   // default: 320..1024 step 64
  int64_t headDimV = 0;            // 0: same as each head dim
  std::vector<ffpaDataType_t> dtypes{FFPA_DATA_TYPE_FLOAT16};
  std::vector<ffpaAccumulator_t> accumulators;  // empty: every mode (fp16 only beyond f32)
  ffpaCausalMode_t causal = FFPA_CAUSAL_NONE;
  // --varlen: the sequence lengths of one packed batch (then B = 1 and N = Nkv = their sum, and
  // the mask is one slice per sequence, causal when --causal is not none); empty: dense.
  std::vector<int64_t> varlen;
  // --key-lengths: the keys of each batch entry (FFPA_ATTENTION_KEY_LENGTHS; one value for all, or
  // B of them, each 0..Nkv); empty: every entry has Nkv keys.
  std::vector<int64_t> keyLengths;
  // --merge: time ffpaAttentionMerge of this many partial results of the shape ([B, Hq, Nq, D]
  // each, with their LSE) against cudaMemcpy of as many bytes; 0: attention.
  int merge = 0;
  bool bnhd = false;
  int warmup = 3, iters = 10, rotate = 2;
  std::vector<PolicySetting> policies;  // --policy, resolved against the library's knob table
  bool reference = false, check = false, backward = false;
  Format format = Format::text;
  std::string output;
  bool help = false;
};

// One table row's data type and accumulator mode.
struct Variant {
  ffpaDataType_t dtype;
  ffpaAccumulator_t accumulator;
};

// Throws std::invalid_argument with a message naming the option and the allowed values.
Options parseOptions(const std::vector<std::string>& args);

// "320,512" or "320:1024:64" (first:last:step) or a mix: "64,128,320:1024:64".
std::vector<int64_t> parseHeadDims(const std::string& text);

// "512,2048" or "512x16" (16 sequences of 512) or a mix: "8192,512x16".
std::vector<int64_t> parseLengths(const std::string& text);

// The (query, key) pairs batch entry b of `o` lets attend with a mask (not --varlen): Nq x its
// keys, or under a causal mask half the square (as the FFPA tables count it) without
// --key-lengths and the exact count of the mask with them.
double visiblePairs(const Options& o, int64_t b);

// The (dtype, accumulator) pairs of a sweep, dtypes first. The fp16-accumulation modes exist for
// fp16 inputs only (bf16 has no fp16 accumulation), so bf16 gets f32 whatever --acc lists.
std::vector<Variant> sweepVariants(const Options& options);

const char* dtypeName(ffpaDataType_t dtype);          // "f16", "bf16", "f32"
const char* accumulatorName(ffpaAccumulator_t mode);  // "f32", "qk_f16", "pv_f16", "f16"
const char* causalName(ffpaCausalMode_t mode);        // "none", "top-left", "bottom-right"

extern const char* const kUsage;

}  // namespace ffpa_bench
