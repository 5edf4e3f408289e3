#include "demo_options.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <string>

namespace ffpa_demo {
namespace {

const char kUsage[] =
    "usage: ffpa-demo [options]\n"
    "Runs libffpa's attention forward and backward on one problem, checks the results against\n"
    "the cuBLASLt reference backend and a float64 CPU attention on sampled rows, and times both\n"
    "passes (CUDA events, median of --repeat runs after --warmup runs).\n"
    "\n"
    "  --batch N           batch size B (default 1)\n"
    "  --heads N           query heads Hq (default 16)\n"
    "  --kv-heads N        key/value heads Hkv, dividing Hq (default: Hq)\n"
    "  --seq N             query length Nq (default 2048)\n"
    "  --seq-kv N          key/value length Nkv (default: Nq)\n"
    "  --dim N             head dim of Q and K, 1 to 1024 (default 512)\n"
    "  --dim-v N           head dim of V and O, 1 to 1024 (default: --dim)\n"
    "  --dtype T           fp16, bf16 or fp32 (default bf16)\n"
    "  --causal M          none, top-left or bottom-right (default none)\n"
    "  --repeat N          timed runs per pass (default 20)\n"
    "  --warmup N          untimed runs first (default 3)\n"
    "\n"
    "Exit status: 0 all checks passed, 1 a check failed, 2 bad options, 77 no usable GPU.\n";

bool parse_count(const char* text, int64_t low, int64_t high, int64_t* value) {
  char* end = nullptr;
  const long long parsed = std::strtoll(text, &end, 10);
  if (end == text || *end != '\0' || parsed < low || parsed > high) return false;
  *value = parsed;
  return true;
}

bool fail(const std::string& message, int* exit_code) {
  std::fprintf(stderr, "ffpa-demo: %s (see --help)\n", message.c_str());
  *exit_code = 2;
  return false;
}

}  // namespace

ffpa_tools::AttentionProblem DemoOptions::problem() const {
  return ffpa_tools::attention_shape(batch, heads, kv_heads > 0 ? kv_heads : heads, seq,
                                     seq_kv > 0 ? seq_kv : seq, dim, dim_v > 0 ? dim_v : dim,
                                     causal);
}

bool parse_demo_options(int argc, char** argv, DemoOptions* options, int* exit_code) {
  constexpr int64_t kMaxCount = (int64_t{1} << 31) - 1;
  struct CountOption {
    const char* name;
    int64_t* value;
    int64_t low, high;
  };
  const CountOption counts[] = {
      {"--batch", &options->batch, 1, kMaxCount},
      {"--heads", &options->heads, 1, kMaxCount},
      {"--kv-heads", &options->kv_heads, 1, kMaxCount},
      {"--seq", &options->seq, 1, kMaxCount},
      {"--seq-kv", &options->seq_kv, 1, kMaxCount},
      {"--dim", &options->dim, 1, 1024},
      {"--dim-v", &options->dim_v, 1, 1024},
      {"--repeat", &options->repeat, 1, 100000},
      {"--warmup", &options->warmup, 0, 100000},
  };

  const auto is_count = [&](const std::string& name) {
    return std::any_of(std::begin(counts), std::end(counts),
                       [&](const CountOption& option) { return name == option.name; });
  };

  for (int i = 1; i < argc; ++i) {
    std::string name = argv[i];
    if (name == "--help" || name == "-h") {
      std::fputs(kUsage, stdout);
      *exit_code = 0;
      return false;
    }
    // Both "--name value" and "--name=value".
    std::string value;
    const size_t equals = name.find('=');
    if (equals != std::string::npos) {
      value = name.substr(equals + 1);
      name = name.substr(0, equals);
    }
    if (name != "--dtype" && name != "--causal" && !is_count(name)) {
      return fail("unknown option " + name, exit_code);
    }
    if (equals == std::string::npos) {
      if (i + 1 == argc) return fail("option " + name + " needs a value", exit_code);
      value = argv[++i];
    }

    for (const CountOption& option : counts) {
      if (name == option.name &&
          !parse_count(value.c_str(), option.low, option.high, option.value)) {
        return fail(name + ": \"" + value + "\" is not a whole number from " +
                        std::to_string(option.low) + " to " + std::to_string(option.high),
                    exit_code);
      }
    }
    if (name == "--dtype" && !ffpa_tools::parse_dtype(value, &options->dtype)) {
      return fail("--dtype: \"" + value + "\" is not fp16, bf16 or fp32", exit_code);
    }
    if (name == "--causal" && !ffpa_tools::parse_causal(value, &options->causal)) {
      return fail("--causal: \"" + value + "\" is not none, top-left or bottom-right", exit_code);
    }
  }

  const ffpa_tools::AttentionProblem p = options->problem();
  if (p.heads_q % p.heads_kv != 0) {
    return fail("--heads (" + std::to_string(p.heads_q) + ") must be a multiple of --kv-heads (" +
                    std::to_string(p.heads_kv) + ")",
                exit_code);
  }
  return true;
}

}  // namespace ffpa_demo
