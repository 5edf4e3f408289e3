// ffpa-autotune's command line: parsed into Options, or a message naming the option and what it
// accepts (std::invalid_argument). Separate from the GPU code so that host tests check it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ffpa_autotune {

enum class Command { tune, merge, help };

struct Options {
  Command command = Command::tune;
  // tune
  std::string mode = "fast";                                // --mode fast|max
  std::vector<std::string> directions{"forward", "backward"};  // --directions forward|backward|both
  std::vector<std::string> dtypes{"bf16"};                  // --dtypes bf16,fp16
  int64_t batch = 1;                                        // --B
  int64_t heads = 32;                                       // --H
  bool fullTasks = false;                                   // --full-tasks
  std::vector<int64_t> headDims;                            // --head-dims (default: the build's)
  std::vector<int64_t> seqlens;                             // --seqlens (default: the grid below)
  std::vector<int> devices;                                 // --devices 0,1 (default: 0)
  // both
  bool overwrite = false;   // --overwrite
  std::string outputDir;    // --output-dir (default: the installed tuned-config directory)
  // merge
  std::vector<std::string> inputs;  // merge a.json b.json ...
  std::string output;               // -o out.json
};

// The sequence lengths tuned by default (ffpa-attn's grid; its decode length 1 is the query
// length of the decode tasks, whose KV lengths are these); 16384 only on GPUs with at least 48 GiB.
std::vector<int64_t> defaultSeqlens(int64_t deviceMemoryBytes);

Options parseOptions(const std::vector<std::string>& args);

// "320,512" or "320:1024:64" or a mix (as ffpa-bench's --D), each value at least `low`; sorted,
// without repeats.
std::vector<int64_t> parseNumberList(const std::string& option, const std::string& text, int64_t low = 1);

extern const char* const kUsage;

}  // namespace ffpa_autotune
