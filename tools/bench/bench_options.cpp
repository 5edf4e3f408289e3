#include "bench_options.h"

#include "common/whole_integer.h"

#include <algorithm>
#include <climits>
#include <numeric>
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
  const std::optional<int64_t> value = ffpa_tools::wholeInteger(text);
  if (!value || *value < min || *value > max) {
    bad(option, text, "an integer from " + std::to_string(min) + " to " + std::to_string(max));
  }
  return *value;
}

ffpaDataType_t parseDtype(const std::string& text) {
  if (text == "f16" || text == "fp16") return FFPA_DATA_TYPE_FLOAT16;
  if (text == "bf16") return FFPA_DATA_TYPE_BFLOAT16;
  bad("--dtype", text, "f16, bf16 (comma-separated)");
}

const char* const kAccumulatorNames[] = {"f32", "qk_f16", "pv_f16", "f16"};

ffpaAccumulator_t parseAccumulator(const std::string& text) {
  for (int i = 0; i < 4; ++i) {
    if (text == kAccumulatorNames[i]) return static_cast<ffpaAccumulator_t>(i);
  }
  bad("--acc", text, "f32, qk_f16, pv_f16, f16 (comma-separated)");
}

template <class T>
bool contains(const std::vector<T>& values, T value) {
  return std::find(values.begin(), values.end(), value) != values.end();
}

}  // namespace

const char* dtypeName(ffpaDataType_t dtype) {
  return dtype == FFPA_DATA_TYPE_FLOAT16 ? "f16" : dtype == FFPA_DATA_TYPE_BFLOAT16 ? "bf16" : "f32";
}

const char* accumulatorName(ffpaAccumulator_t mode) { return kAccumulatorNames[mode]; }

const char* causalName(ffpaCausalMode_t mode) {
  return mode == FFPA_CAUSAL_TOP_LEFT ? "top-left" : mode == FFPA_CAUSAL_BOTTOM_RIGHT ? "bottom-right" : "none";
}

std::vector<int64_t> parseHeadDims(const std::string& text) {
  std::vector<int64_t> dims;
  for (const std::string& part : split(text, ',')) {
    const std::vector<std::string> range = split(part, ':');
    if (range.size() == 1) {
      dims.push_back(parseInt("--D", part, 1, FFPA_MAX_HEAD_DIM));
    } else if (range.size() == 3) {
      const int64_t first = parseInt("--D", range[0], 1, FFPA_MAX_HEAD_DIM);
      const int64_t last = parseInt("--D", range[1], 1, FFPA_MAX_HEAD_DIM);
      const int64_t step = parseInt("--D", range[2], 1, FFPA_MAX_HEAD_DIM);
      if (last < first) bad("--D", part, "first:last:step with first <= last");
      for (int64_t d = first; d <= last; d += step) dims.push_back(d);
    } else {
      bad("--D", part, "head dims 1..1024 as a list (320,512) or ranges first:last:step (320:1024:64)");
    }
  }
  if (dims.empty()) bad("--D", text, "at least one head dim");
  return dims;
}

std::vector<int64_t> parseLengths(const std::string& text) {
  const std::string allowed = "sequence lengths as a list (512,2048) with repeats (512x16), at least one, "
                              "summing to at most 2^31 - 1 tokens";
  std::vector<int64_t> lengths;
  int64_t total = 0;
  for (const std::string& part : split(text, ',')) {
    const size_t times = part.find('x');  // LENGTHxCOUNT
    if (times != std::string::npos && part.find('x', times + 1) != std::string::npos) bad("--varlen", part, allowed);
    const int64_t length = parseInt("--varlen", part.substr(0, times), 1, INT32_MAX);
    const int64_t count = times == std::string::npos ? 1 : parseInt("--varlen", part.substr(times + 1), 1, 1 << 20);
    for (int64_t i = 0; i < count; ++i) {
      total += length;
      if (total > INT32_MAX) bad("--varlen", text, allowed);
      lengths.push_back(length);
    }
  }
  if (lengths.empty()) bad("--varlen", text, allowed);
  return lengths;
}

Options parseOptions(const std::vector<std::string>& args) {
  Options o;
  bool shapeGiven = false;  // --B, --N or --Nkv: --varlen sets them
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    auto value = [&]() -> const std::string& {
      if (i + 1 >= args.size()) throw std::invalid_argument(arg + " needs a value (see --help)");
      return args[++i];
    };
    if (arg == "--help" || arg == "-h") o.help = true;
    else if (arg == "--B") o.batch = parseInt(arg, value(), 1, 1 << 20), shapeGiven = true;
    else if (arg == "--H") o.heads = parseInt(arg, value(), 1, 1 << 20);
    else if (arg == "--Hkv") o.headsKv = parseInt(arg, value(), 1, 1 << 20);
    else if (arg == "--N") o.seqQ = parseInt(arg, value(), 1, int64_t{1} << 30), shapeGiven = true;
    else if (arg == "--Nkv") o.seqKv = parseInt(arg, value(), 1, int64_t{1} << 30), shapeGiven = true;
    else if (arg == "--varlen") o.varlen = parseLengths(value());
    else if (arg == "--key-lengths") {
      o.keyLengths.clear();
      for (const std::string& part : split(value(), ',')) {
        o.keyLengths.push_back(parseInt(arg, part, 0, int64_t{1} << 30));
      }
    }
    else if (arg == "--merge") o.merge = static_cast<int>(parseInt(arg, value(), 1, FFPA_MAX_MERGE_PARTIALS));
    else if (arg == "--D") o.headDims = parseHeadDims(value());
    else if (arg == "--Dv") o.headDimV = parseInt(arg, value(), 1, FFPA_MAX_HEAD_DIM);
    else if (arg == "--dtype") {
      o.dtypes.clear();
      for (const std::string& t : split(value(), ',')) o.dtypes.push_back(parseDtype(t));
      if (o.dtypes.empty()) bad(arg, "", "f16, bf16 (comma-separated)");
    } else if (arg == "--acc") {
      o.accumulators.clear();
      for (const std::string& t : split(value(), ',')) o.accumulators.push_back(parseAccumulator(t));
      if (o.accumulators.empty()) bad(arg, "", "f32, qk_f16, pv_f16, f16 (comma-separated)");
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
      const PolicySetting setting = resolvePolicy(value());
      // The accumulator is a column of the sweep: a second way to set it would contradict it.
      if (setting.knob == FFPA_POLICY_ACCUMULATOR) bad(arg, args[i], "any knob but the accumulator (use --acc)");
      o.policies.push_back(setting);
    } else if (arg == "--reference") o.reference = true;
    else if (arg == "--check") o.check = true;
    else if (arg == "--bwd") o.backward = true;
    else if (arg == "--markdown") o.format = Format::markdown;
    else if (arg == "--csv") o.format = Format::csv;
    else if (arg == "--output") o.output = value();
    else throw std::invalid_argument("unknown option \"" + arg + "\" (see --help)");
  }
  if (o.headDims.empty()) o.headDims = parseHeadDims("320:1024:64");
  if (!o.varlen.empty()) {
    if (shapeGiven) {
      throw std::invalid_argument("--varlen sets B = 1 and N = Nkv = the sum of its lengths; drop --B, --N and --Nkv");
    }
    o.batch = 1;
    o.seqQ = o.seqKv = std::accumulate(o.varlen.begin(), o.varlen.end(), int64_t{0});
  }
  if (o.merge > 0) {
    for (const auto& [given, name] : {std::pair<bool, const char*>{o.backward, "--bwd"}, {o.reference, "--reference"},
                                      {o.check, "--check"}, {!o.varlen.empty(), "--varlen"},
                                      {!o.accumulators.empty(), "--acc"}, {o.causal != FFPA_CAUSAL_NONE, "--causal"},
                                      {o.headsKv != 0, "--Hkv"}, {o.seqKv != 0, "--Nkv"}, {o.headDimV != 0, "--Dv"},
                                      {!o.policies.empty(), "--policy (the merge ignores policies)"}}) {
      if (given) {
        throw std::invalid_argument(std::string("--merge times ffpaAttentionMerge alone: drop ") + name);
      }
    }
  }
  if (o.headsKv == 0) o.headsKv = o.heads;
  if (o.heads % o.headsKv != 0) bad("--Hkv", std::to_string(o.headsKv), "a divisor of --H");
  if (o.seqKv == 0) o.seqKv = o.seqQ;
  if (!o.keyLengths.empty()) {
    if (!o.varlen.empty() || o.merge > 0) {
      throw std::invalid_argument("--key-lengths gives the keys of each batch entry: not with --varlen or --merge");
    }
    if (o.keyLengths.size() == 1) o.keyLengths.assign(static_cast<size_t>(o.batch), o.keyLengths.front());
    if (static_cast<int64_t>(o.keyLengths.size()) != o.batch) {
      bad("--key-lengths", std::to_string(o.keyLengths.size()) + " values", "one value, or one per batch entry (--B)");
    }
    for (const int64_t keys : o.keyLengths) {
      if (keys > o.seqKv) bad("--key-lengths", std::to_string(keys), "counts from 0 to Nkv");
    }
  }
  if (sweepVariants(o).empty()) {
    bad("--acc", "", "f32 with --dtype bf16 (the fp16-accumulation modes need --dtype f16)");
  }
  return o;
}

double visiblePairs(const Options& o, int64_t b) {
  if (o.keyLengths.empty()) {
    return double(o.seqQ) * double(o.seqKv) * (o.causal == FFPA_CAUSAL_NONE ? 1.0 : 0.5);
  }
  const int64_t keys = o.keyLengths.at(static_cast<size_t>(b));
  if (o.causal == FFPA_CAUSAL_NONE) return double(o.seqQ) * double(keys);
  double pairs = 0;
  const int64_t offset = o.causal == FFPA_CAUSAL_BOTTOM_RIGHT ? keys - o.seqQ : 0;
  for (int64_t i = 0; i < o.seqQ; ++i) pairs += double(std::clamp<int64_t>(i + offset + 1, 0, keys));
  return pairs;
}

std::vector<Variant> sweepVariants(const Options& o) {
  std::vector<Variant> variants;
  for (const ffpaDataType_t dtype : o.dtypes) {
    for (int a = 0; a < 4; ++a) {
      const auto mode = static_cast<ffpaAccumulator_t>(a);
      const bool asked = o.accumulators.empty() || contains(o.accumulators, mode);
      if (asked && (mode == FFPA_ACCUMULATOR_F32 || dtype == FFPA_DATA_TYPE_FLOAT16)) {
        variants.push_back({dtype, mode});
      }
    }
  }
  return variants;
}

const char* const kUsage = R"(ffpa-bench: times libffpa's attention on this GPU through its C API

  ffpa-bench [options]

The defaults are the FFPA benchmark tables: B=1, H=48, N=8192, head dims 320..1024 step 64,
fp16, no mask, every accumulator mode.

  --B N --H N --Hkv N --N N --Nkv N   shape (default B=1, H=48, N=8192; Hkv=H, Nkv=N)
  --D LIST      head dims of Q and K: 320,512 or 320:1024:64 or both (default 320:1024:64)
  --Dv N        head dim of V and O (default: each D)
  --dtype LIST  f16, bf16 (default f16)
  --acc LIST    f32, qk_f16, pv_f16, f16 (default: all); bf16 runs f32 only
  --causal M    none, top-left, bottom-right (default none)
  --varlen LIST one packed batch of sequences of these lengths (512,2048 or 512x16 or both):
                B = 1, N = Nkv = their sum, one attention slice per sequence (causal unless
                --causal none); --layout bnhd is the packed [tokens, H, D] layout
  --key-lengths LIST  the keys of each batch entry (FFPA_ATTENTION_KEY_LENGTHS: a KV cache filled
                to another length in each sequence): one count for every entry or B of them,
                each 0 to Nkv; the keys past them hold NaN, which no kernel may read
  --merge P     time ffpaAttentionMerge of P partial results (1 to 32) of [B, H, N, D] each,
                fp32 LSE in and out, against cudaMemcpy of as many bytes in the same run
                (with --B --H --N --D --dtype --layout only)
  --layout L    bhnd, bnhd: memory order of Q, K, V, O (default bhnd)
  --warmup N    untimed calls first (default 3)
  --iters N     timed calls; the table shows their median and minimum (default 10)
  --rotate K    K input sets, used in turn so that L2 does not hold them (default 2)
  --policy NAME=VALUE   set a knob as ffpa-info --knobs lists it, e.g. FFPA_POLICY_STAGES=2
                (repeatable; the accumulator is set by --acc)
  --reference   also time the cuBLASLt reference path (a second handle with
                FFPA_POLICY_REFERENCE_BACKEND) and show the speedup over it
  --check       compare every output with the reference path's: relative Frobenius error and
                max abs; FAIL above 2e-2 (f32 accumulation) or 5e-2 (fp16 accumulation)
  --bwd         also time ffpaAttentionBackward (2.5x the forward FLOPs)
  --markdown | --csv    output format (default: aligned text)
  --output FILE also write the table to FILE
  --help        this text

TFLOPS count 2*B*Hq*Nq*Nkv*(Dqk+Dv) per forward, halved with a causal mask; with --varlen,
2*Hq*pairs*(Dqk+Dv) for the (query, key) pairs the slices let attend, with --key-lengths for
those each batch entry's keys and mask let attend. --merge reports GB/s of
the bytes it reads and writes ((P + 1) * (O + LSE)); cudaMemcpy of half as many bytes moves as
many (it reads and writes each), and "of memcpy" is the merge's share of the copy's bandwidth.
Exit status: 0 done, 1 a check or a call failed, 2 bad options, 77 no usable GPU.
)";

}  // namespace ffpa_bench
