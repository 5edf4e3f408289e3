#include "options.h"

#include "common/whole_integer.h"

#include <algorithm>
#include <sstream>
#include <stdexcept>

namespace ffpa_autotune {
namespace {

[[noreturn]] void bad(const std::string& message) { throw std::invalid_argument(message); }

int64_t number(const std::string& option, const std::string& text, int64_t low, int64_t high) {
  const std::optional<int64_t> value = ffpa_tools::wholeInteger(text);
  if (!value || *value < low || *value > high) {
    bad(option + ": \"" + text + "\" is not an integer from " + std::to_string(low) + " to " + std::to_string(high));
  }
  return *value;
}

std::vector<std::string> split(const std::string& text) {
  std::vector<std::string> items;
  std::istringstream list(text);
  for (std::string item; std::getline(list, item, ',');) {
    if (!item.empty()) items.push_back(item);
  }
  return items;
}

std::vector<std::string> choices(const std::string& option, const std::string& text,
                                 const std::vector<std::string>& allowed) {
  std::vector<std::string> picked;
  for (const std::string& item : split(text)) {
    if (std::find(allowed.begin(), allowed.end(), item) == allowed.end()) {
      std::string list;
      for (const std::string& a : allowed) list += (list.empty() ? "" : ", ") + a;
      bad(option + ": \"" + item + "\" is not one of " + list);
    }
    if (std::find(picked.begin(), picked.end(), item) == picked.end()) picked.push_back(item);
  }
  if (picked.empty()) bad(option + ": an empty list");
  return picked;
}

}  // namespace

std::vector<int64_t> defaultSeqlens(int64_t deviceMemoryBytes) {
  std::vector<int64_t> seqlens = {512, 1024, 2048, 4096, 8192};
  if (deviceMemoryBytes >= (int64_t{48} << 30)) seqlens.push_back(16384);
  return seqlens;
}

std::vector<int64_t> parseNumberList(const std::string& option, const std::string& text, int64_t low) {
  std::vector<int64_t> values;
  for (const std::string& item : split(text)) {
    const size_t colon = item.find(':');
    if (colon == std::string::npos) {
      values.push_back(number(option, item, low, int64_t{1} << 31));
      continue;
    }
    const std::vector<std::string> parts = [&] {
      std::vector<std::string> p;
      std::istringstream range(item);
      for (std::string part; std::getline(range, part, ':');) p.push_back(part);
      return p;
    }();
    if (parts.size() != 3) bad(option + ": \"" + item + "\" is neither a number nor first:last:step");
    const int64_t first = number(option, parts[0], low, int64_t{1} << 31);
    const int64_t last = number(option, parts[1], first, int64_t{1} << 31);
    const int64_t step = number(option, parts[2], 1, int64_t{1} << 31);
    for (int64_t v = first; v <= last; v += step) values.push_back(v);
  }
  if (values.empty()) bad(option + ": an empty list");
  std::sort(values.begin(), values.end());
  values.erase(std::unique(values.begin(), values.end()), values.end());
  return values;
}

Options parseOptions(const std::vector<std::string>& args) {
  Options o;
  size_t i = 0;
  if (!args.empty() && args[0] == "merge") {
    o.command = Command::merge;
    i = 1;
  }
  auto value = [&](const std::string& option) -> const std::string& {
    if (i + 1 >= args.size()) bad(option + " needs a value");
    return args[++i];
  };
  for (; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--help" || arg == "-h") {
      o.command = Command::help;
      return o;
    }
    if (arg == "--overwrite") {
      o.overwrite = true;
    } else if (arg == "--output-dir") {
      o.outputDir = value(arg);
    } else if (o.command == Command::merge) {
      if (arg == "-o" || arg == "--output") {
        o.output = value(arg);
      } else if (!arg.empty() && arg[0] == '-') {
        bad("merge: unknown option " + arg + " (merge takes files, -o FILE and --overwrite)");
      } else {
        o.inputs.push_back(arg);
      }
    } else if (arg == "--mode") {
      o.mode = choices(arg, value(arg), {"fast", "max"}).front();
    } else if (arg == "--directions") {
      const std::string& text = value(arg);
      o.directions = text == "both" ? std::vector<std::string>{"forward", "backward"}
                                    : choices(arg, text, {"forward", "backward"});
    } else if (arg == "--dtypes") {
      o.dtypes = choices(arg, value(arg), {"bf16", "fp16"});
    } else if (arg == "--B") {
      o.batch = number(arg, value(arg), 1, 65535);
    } else if (arg == "--H") {
      o.heads = number(arg, value(arg), 1, 65535);
    } else if (arg == "--full-tasks") {
      o.fullTasks = true;
    } else if (arg == "--head-dims") {
      o.headDims = parseNumberList(arg, value(arg));
      for (int64_t d : o.headDims) {
        if (d % 16 != 0 || d > 1024) bad(arg + ": " + std::to_string(d) + " is not a multiple of 16 up to 1024");
      }
    } else if (arg == "--seqlens") {
      o.seqlens = parseNumberList(arg, value(arg));
    } else if (arg == "--devices") {
      for (int64_t d : parseNumberList(arg, value(arg), 0)) o.devices.push_back(static_cast<int>(d));
    } else if (arg.rfind("--", 0) != 0) {
      bad("unexpected argument \"" + arg + "\" (see --help)");
    } else {
      bad("unknown option " + arg + " (see --help)");
    }
  }
  if (o.command == Command::merge) {
    if (o.inputs.size() < 1) bad("merge: name the files to merge");
    if (o.output.empty()) bad("merge: name the output file with -o FILE");
  }
  return o;
}

const char* const kUsage = R"(ffpa-autotune: tunes libffpa's launch configs on this machine's GPUs and writes them as the
device's tuned-config file, which later processes use without tuning (docs: Tuned configs).

  ffpa-autotune [options]
  ffpa-autotune merge FILE... -o OUT [--overwrite]

Tuning (each task: one problem shape, every candidate launch config timed, the fastest kept):
  --mode fast|max         search space (default fast); the file records it and lookup needs it
  --directions LIST       forward, backward or both (default both)
  --dtypes LIST           bf16, fp16 (default bf16)
  --B N --H N             batch and query heads of every task (default 1 and 32)
  --full-tasks            add GQA, MQA and cross-attention variants (attention masks and dropout
                          are not features of libffpa: not tuned)
  --head-dims LIST        head dims (default: those this build compiles), e.g. 320:1024:64
  --seqlens LIST          sequence lengths (default 512..8192, and 16384 on GPUs of 48 GiB or more)
  --devices LIST          GPUs to tune on in parallel, one worker each (default 0); all the same model
  --output-dir DIR        where the file goes (default: the installed tuned-config directory)
  --overwrite             replace an existing file (refused otherwise)
Environment: FFPA_AUTOTUNE_MAX_CONFIGS=N tunes the first N tasks only (smoke runs).

Merging (per-node results of one device model and mode into one file, validated):
  merge FILE... -o OUT    later files win for the same task; --overwrite to replace OUT

Exit status: 0 done, 1 a task or a file failed, 2 bad options, 77 no usable GPU.
)";

}  // namespace ffpa_autotune
