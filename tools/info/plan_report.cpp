#include "plan_report.h"

#include "library_call.h"

#include "common/whole_integer.h"

#include <map>
#include <sstream>
#include <stdexcept>
#include <vector>

namespace ffpa_info {
namespace {

struct Problem {
  int64_t b = 1, hq = 16, hkv = 0, nq = 4096, nkv = 0, dqk = 512, dv = 0;
  ffpaDataType_t dtype = FFPA_DATA_TYPE_BFLOAT16;
  ffpaCausalMode_t causal = FFPA_CAUSAL_NONE;
  bool bnhd = false;
  bool keyLengths = false;  // FFPA_ATTENTION_KEY_LENGTHS attached
};

int64_t positive(const std::string& key, const std::string& text) {
  const std::optional<int64_t> value = ffpa_tools::wholeInteger(text);
  if (!value || *value < 1) throw std::invalid_argument(key + "=" + text + " is not a positive integer");
  return *value;
}

template <class T>
T pick(const std::string& key, const std::string& text, const std::map<std::string, T>& choices) {
  const auto found = choices.find(text);
  if (found != choices.end()) return found->second;
  std::string allowed;
  for (const auto& [name, value] : choices) allowed += (allowed.empty() ? "" : ", ") + name;
  throw std::invalid_argument(key + "=" + text + " is not one of " + allowed);
}

Problem parse(const std::string& text) {
  Problem p;
  std::istringstream items(text);
  for (std::string item; std::getline(items, item, ',');) {
    const size_t eq = item.find('=');
    if (eq == std::string::npos) throw std::invalid_argument("expected key=value, got \"" + item + "\"");
    const std::string key = item.substr(0, eq), value = item.substr(eq + 1);
    if (key == "b") p.b = positive(key, value);
    else if (key == "hq") p.hq = positive(key, value);
    else if (key == "hkv") p.hkv = positive(key, value);
    else if (key == "nq") p.nq = positive(key, value);
    else if (key == "nkv") p.nkv = positive(key, value);
    else if (key == "dqk" || key == "d") p.dqk = positive(key, value);
    else if (key == "dv") p.dv = positive(key, value);
    else if (key == "dtype") {
      p.dtype = pick<ffpaDataType_t>(key, value, {{"fp16", FFPA_DATA_TYPE_FLOAT16},
                                                  {"bf16", FFPA_DATA_TYPE_BFLOAT16},
                                                  {"fp32", FFPA_DATA_TYPE_FLOAT32}});
    } else if (key == "causal") {
      p.causal = pick<ffpaCausalMode_t>(key, value, {{"none", FFPA_CAUSAL_NONE},
                                                     {"top-left", FFPA_CAUSAL_TOP_LEFT},
                                                     {"bottom-right", FFPA_CAUSAL_BOTTOM_RIGHT}});
    } else if (key == "layout") {
      p.bnhd = pick<bool>(key, value, {{"bhnd", false}, {"bnhd", true}});
    } else if (key == "key-lengths") {
      p.keyLengths = pick<bool>(key, value, {{"no", false}, {"yes", true}});
    } else {
      throw std::invalid_argument("unknown key \"" + key + "\" (see --help)");
    }
  }
  if (p.hkv == 0) p.hkv = p.hq;
  if (p.nkv == 0) p.nkv = p.nq;
  if (p.dv == 0) p.dv = p.dqk;
  return p;
}

// A descriptor owned for the length of one report.
class Tensor {
 public:
  Tensor(ffpaDataType_t dtype, std::vector<int64_t> dims, bool bnhd) {
    check(ffpaCreateTensorDescriptor(&desc_), "ffpaCreateTensorDescriptor");
    std::vector<int64_t> strides;
    if (bnhd && dims.size() == 4) {  // [B, N, H, D] storage of a [B, H, N, D] tensor
      strides = {dims[2] * dims[1] * dims[3], dims[3], dims[1] * dims[3], 1};
    }
    check(ffpaSetTensorDescriptor(desc_, dtype, static_cast<int32_t>(dims.size()), dims.data(),
                                  strides.empty() ? nullptr : strides.data()),
          "ffpaSetTensorDescriptor");
  }
  ~Tensor() { ffpaDestroyTensorDescriptor(desc_); }
  Tensor(const Tensor&) = delete;
  Tensor& operator=(const Tensor&) = delete;
  operator ffpaTensorDescriptor_t() const { return desc_; }

 private:
  ffpaTensorDescriptor_t desc_ = nullptr;
};

// Calls a describe function twice: once for the length, once for the text.
template <class Describe>
std::string described(Describe&& describe, const char* call) {
  size_t length = 0;
  check(describe(nullptr, 0, &length), call);
  std::string text(length + 1, '\0');
  check(describe(text.data(), text.size(), nullptr), call);
  text.resize(length);
  return text;
}

void indent(std::ostream& out, const std::string& text) {
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) out << "  " << line << '\n';
}

}  // namespace

const char* planSyntax() {
  return "comma-separated key=value: b, hq, hkv (default hq), nq, nkv (default nq), dqk or d,\n"
         "dv (default dqk), dtype (fp16, bf16, fp32), causal (none, top-left, bottom-right),\n"
         "layout (bhnd, bnhd), key-lengths (no, yes: per-batch key counts attached);\n"
         "defaults b=1,hq=16,nq=4096,d=512,dtype=bf16,causal=none,key-lengths=no";
}

void writePlans(std::ostream& out, ffpaHandle_t handle, const std::string& text) {
  const Problem p = parse(text);
  ffpaAttentionDescriptor_t attn = nullptr;
  check(ffpaCreateAttentionDescriptor(&attn), "ffpaCreateAttentionDescriptor");
  struct Owner {
    ffpaAttentionDescriptor_t attn;
    ~Owner() { ffpaDestroyAttentionDescriptor(attn); }
  } owner{attn};
  const int32_t causal = p.causal;
  check(ffpaSetAttentionAttribute(attn, FFPA_ATTENTION_CAUSAL_MODE, &causal, sizeof causal),
        "ffpaSetAttentionAttribute");
  if (p.keyLengths) {
    // Planning reads no counts, only whether there are any: this host array stands for the
    // device one a call would pass, and is never dereferenced.
    static const int32_t kNeverRead[1] = {0};
    const int32_t* counts = kNeverRead;
    check(ffpaSetAttentionAttribute(attn, FFPA_ATTENTION_KEY_LENGTHS, &counts, sizeof counts),
          "ffpaSetAttentionAttribute");
  }
  const Tensor q(p.dtype, {p.b, p.hq, p.nq, p.dqk}, p.bnhd), k(p.dtype, {p.b, p.hkv, p.nkv, p.dqk}, p.bnhd),
      v(p.dtype, {p.b, p.hkv, p.nkv, p.dv}, p.bnhd), o(p.dtype, {p.b, p.hq, p.nq, p.dv}, p.bnhd),
      lse(FFPA_DATA_TYPE_FLOAT32, {p.b, p.hq, p.nq}, false);
  out << "forward plan:\n";
  indent(out, described([&](char* buffer, size_t size, size_t* length) {
    return ffpaDescribeAttentionForwardPlan(handle, attn, q, k, v, o, lse, buffer, size, length);
  }, "ffpaDescribeAttentionForwardPlan"));
  out << "backward plan:\n";
  indent(out, described([&](char* buffer, size_t size, size_t* length) {
    return ffpaDescribeAttentionBackwardPlan(handle, attn, q, k, v, o, o, lse, q, k, v, buffer, size, length);
  }, "ffpaDescribeAttentionBackwardPlan"));
}

}  // namespace ffpa_info
