#include "bench_options.h"

#include <sstream>
#include <stdexcept>

namespace ffpa_bench {
namespace {

[[noreturn]] void bad(const std::string& option, const std::string& value, const std::string& allowed) {
  throw std::invalid_argument(option + ": \"" + value + "\" is not valid; allowed: " + allowed);
}

std::vector<std::string> split(const std::string& text, char separator) {
  std::vector<std::string> parts;
  std::stringstream in(text);
  for (std::string part; std::getline(in, part, separator);) parts.push_back(part);
  return parts;
}

int64_t parseInt(const std::string& option, const std::string& text, int64_t min, int64_t max) {
  size_t used = 0;
  int64_t value = 0;
  try {
    value = std::stoll(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != text.size() || text.empty() || value < min || value > max) {
    bad(option, text, "an integer from " + std::to_string(min) + " to " + std::to_string(max));
  }
  return value;
}

ffpaDataType_t parseDtype(const std::string& text) {
  if (text == "f16" || text == "fp16") return FFPA_DATA_TYPE_FLOAT16;
  if (text == "bf16") return FFPA_DATA_TYPE_BFLOAT16;
  bad("--dtype", text, "f16, bf16 (comma-separated)");
}

ffpaAccumulator_t parseAccumulator(const std::string& text) {
  const char* names[] = {"f32", "qk_f16", "pv_f16", "f16"};
  for (int i = 0; i < 4; ++i) {
    if (text == names[i]) return static_cast<ffpaAccumulator_t>(i);
  }
  bad("--acc", text, "f32, qk_f16, pv_f16, f16 (comma-separated)");
}

}  // namespace

std::vector<int64_t> parseHeadDims(const std::string& text) {
  std::vector<int64_t> dims;
  for (const std::string& part : split(text, ',')) {
    const std::vector<std::string> range = split(part, ':');
    if (range.size() == 1) {
      dims.push_back(parseInt("--D", part, 1, 1024));
    } else if (range.size() == 3) {
      const int64_t first = parseInt("--D", range[0], 1, 1024), last = parseInt("--D", range[1], 1, 1024);
      const int64_t step = parseInt("--D", range[2], 1, 1024);
      if (last < first) bad("--D", part, "first:last:step with first <= last");
      for (int64_t d = first; d <= last; d += step) dims.push_back(d);
    } else {
      bad("--D", part, "head dims 1..1024 as a list (320,512) or ranges first:last:step (320:1024:64)");
    }
  }
  if (dims.empty()) bad("--D", text, "at least one head dim");
  return dims;
}

Options parseOptions(const std::vector<std::string>& args) {
  Options o;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    auto value = [&]() -> const std::string& {
      if (i + 1 >= args.size()) throw std::invalid_argument(arg + " needs a value (see --help)");
      return args[++i];
    };
    if (arg == "--help" || arg == "-h") o.help = true;
    else if (arg == "--B") o.batch = parseInt(arg, value(), 1, 1 << 20);
    else if (arg == "--H") o.heads = parseInt(arg, value(), 1, 1 << 20);
    else if (arg == "--Hkv") o.headsKv = parseInt(arg, value(), 1, 1 << 20);
    else if (arg == "--N") o.seqQ = parseInt(arg, value(), 1, int64_t{1} << 30);
    else if (arg == "--Nkv") o.seqKv = parseInt(arg, value(), 1, int64_t{1} << 30);
    else if (arg == "--D") o.headDims = parseHeadDims(value());
    else if (arg == "--Dv") o.headDimV = parseInt(arg, value(), 1, 1024);
    else if (arg == "--dtype") {
      o.dtypes.clear();
      for (const std::string& t : split(value(), ',')) o.dtypes.push_back(parseDtype(t));
    } else if (arg == "--acc") {
      for (const std::string& t : split(value(), ',')) o.accumulators.push_back(parseAccumulator(t));
    } else if (arg == "--causal") {
      const std::string& v = value();
      if (v == "none") o.causal = FFPA_CAUSAL_NONE;
      else if (v == "top-left") o.causal = FFPA_CAUSAL_TOP_LEFT;
      else if (v == "bottom-right") o.causal = FFPA_CAUSAL_BOTTOM_RIGHT;
      else bad(arg, v, "none, top-left, bottom-right");
    } else if (arg == "--layout") {
      const std::string& v = value();
      if (v != "bhnd" && v != "bnhd") bad(arg, v, "bhnd, bnhd");
      o.bnhd = v == "bnhd";
    } else if (arg == "--warmup") o.warmup = static_cast<int>(parseInt(arg, value(), 0, 1000));
    else if (arg == "--iters") o.iters = static_cast<int>(parseInt(arg, value(), 1, 100000));
    else if (arg == "--rotate") o.rotate = static_cast<int>(parseInt(arg, value(), 1, 16));
    else if (arg == "--policy") {
      const std::string& v = value();
      const size_t eq = v.find('=');
      if (eq == std::string::npos || eq == 0) bad(arg, v, "NAME=VALUE, e.g. FFPA_POLICY_STAGES=2");
      o.policies.emplace_back(v.substr(0, eq), v.substr(eq + 1));
    } else if (arg == "--reference") o.reference = true;
    else if (arg == "--check") o.check = true;
    else if (arg == "--bwd") o.backward = true;
    else if (arg == "--markdown") o.format = Format::markdown;
    else if (arg == "--csv") o.format = Format::csv;
    else if (arg == "--output") o.output = value();
    else throw std::invalid_argument("unknown option \"" + arg + "\" (see --help)");
  }
  if (o.headDims.empty()) o.headDims = parseHeadDims("320:1024:64");
  if (o.headsKv == 0) o.headsKv = o.heads;
  if (o.heads % o.headsKv != 0) bad("--Hkv", std::to_string(o.headsKv), "a divisor of --H");
  if (o.seqKv == 0) o.seqKv = o.seqQ;
  return o;
}

const char* const kUsage = R"(ffpa-bench: times libffpa's attention on this GPU (seed 000's tables by default)

  ffpa-bench [options]

  --B N --H N --Hkv N --N N --Nkv N   shape (default B=1, H=48, N=8192; Hkv=H, Nkv=N)
  --D LIST      head dims: 320,512 or 320:1024:64 (default 320:1024:64)
  --Dv N        value head dim (default: each D)
  --dtype LIST  f16, bf16 (default f16)
  --acc LIST    f32, qk_f16, pv_f16, f16 (default: all for f16, f32 for bf16)
  --causal M    none, top-left, bottom-right (default none)
  --layout L    bhnd, bnhd (default bhnd)
  --warmup N --iters N   timing repeats (default 3, 10); times are medians (and minima)
  --rotate K    K input sets, used in turn so that L2 does not hold them (default 2)
  --policy NAME=VALUE    any knob (ffpa-info --knobs), repeatable
  --reference   also time the cuBLASLt reference path and print the speedup
  --check       compare every result with the reference path (exit 1 when off)
  --bwd         also time the backward pass (2.5x the forward FLOPs)
  --markdown | --csv     output format (default: aligned text); --output FILE
Exit status: 0 done, 1 a check or a call failed, 2 bad options, 77 no GPU.
)";

}  // namespace ffpa_bench
