// ffpa-bench: times libffpa's forward (and backward) through the public C API on this GPU, over a
// sweep of head dims, dtypes and accumulator modes; optionally against the cuBLASLt reference
// path of the same library, with a check of every result. See kUsage for the options.
#include "bench_options.h"
#include "device_fill.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <ffpa/ffpa.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>
#include <iostream>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace ffpa_bench {
namespace {

struct Failure : std::runtime_error {
  using std::runtime_error::runtime_error;
};

std::string lastError() {
  std::string text(ffpaGetLastErrorString(nullptr, 0), '\0');
  ffpaGetLastErrorString(text.data(), text.size() + 1);
  return text;
}

void check(ffpaStatus_t status, const char* call) {
  if (status != FFPA_STATUS_SUCCESS) {
    throw Failure(std::string(call) + ": " + ffpaGetErrorString(status) + ": " + lastError());
  }
}

void checkCuda(cudaError_t error, const char* call) {
  if (error != cudaSuccess) throw Failure(std::string(call) + ": " + cudaGetErrorString(error));
}

size_t elementBytes(ffpaDataType_t dtype) { return dtype == FFPA_DATA_TYPE_FLOAT32 ? 4 : 2; }
const char* dtypeName(ffpaDataType_t dtype) { return dtype == FFPA_DATA_TYPE_BFLOAT16 ? "bf16" : "f16"; }
const char* accumulatorName(ffpaAccumulator_t a) {
  const char* names[] = {"f32", "qk_f16", "pv_f16", "f16"};
  return names[a];
}

struct DeviceMemory {
  explicit DeviceMemory(size_t bytes) { checkCuda(cudaMalloc(&pointer, std::max<size_t>(bytes, 256)), "cudaMalloc"); }
  ~DeviceMemory() { cudaFree(pointer); }
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;
  void* pointer = nullptr;
};

struct Tensor {
  ffpaTensorDescriptor_t desc = nullptr;
  ffpaDataType_t dtype;
  size_t elements = 0;
  std::vector<std::unique_ptr<DeviceMemory>> copies;  // rotated input sets (outputs: one)

  // [B, H, N, D] dims; BNHD storage when `bnhd`.
  Tensor(ffpaDataType_t type, int64_t b, int64_t h, int64_t n, int64_t d, bool bnhd, int count) : dtype(type) {
    check(ffpaCreateTensorDescriptor(&desc), "ffpaCreateTensorDescriptor");
    const int64_t dims[] = {b, h, n, d};
    const int64_t bhnd[] = {h * n * d, n * d, d, 1};
    const int64_t bnhdStrides[] = {n * h * d, d, h * d, 1};
    check(ffpaSetTensorDescriptor(desc, type, d == 0 ? 3 : 4, dims, d == 0 ? nullptr : bnhd ? bnhdStrides : bhnd),
          "ffpaSetTensorDescriptor");
    elements = size_t(b) * h * n * (d == 0 ? 1 : d);
    for (int i = 0; i < count; ++i) copies.push_back(std::make_unique<DeviceMemory>(elements * elementBytes(type)));
  }
  ~Tensor() { ffpaDestroyTensorDescriptor(desc); }
  void* data(int i = 0) const { return copies[i % copies.size()]->pointer; }
};

struct Handle {
  ffpaHandle_t h = nullptr;
  Handle() { check(ffpaCreate(&h), "ffpaCreate"); }
  ~Handle() { ffpaDestroy(h); }
};

// Applies NAME=VALUE: VALUE is a number or one of the knob's value names.
void setPolicy(ffpaHandle_t handle, const std::string& name, const std::string& text) {
  int32_t count = 0;
  check(ffpaGetPolicyKnobs(0, &count, nullptr), "ffpaGetPolicyKnobs");
  std::vector<ffpaPolicyKnob_t> knobs(count);
  check(ffpaGetPolicyKnobs(count, &count, knobs.data()), "ffpaGetPolicyKnobs");
  for (const ffpaPolicyKnob_t knob : knobs) {
    ffpaPolicyInfo_t info{};
    info.structSize = sizeof info;
    check(ffpaGetPolicyInfo(knob, &info), "ffpaGetPolicyInfo");
    if (name != info.name) continue;
    if (info.type == FFPA_POLICY_TYPE_STRING) {
      check(ffpaSetPolicy(handle, knob, text.c_str(), text.size() + 1), "ffpaSetPolicy");
      return;
    }
    int64_t value = 0;
    std::istringstream names(info.valueNames);
    int64_t index = info.minValue;
    bool named = false;
    for (std::string word; names >> word; ++index) {
      if (word == text) {
        value = index;
        named = true;
      }
    }
    if (!named) {
      try {
        value = std::stoll(text);
      } catch (const std::exception&) {
        throw std::invalid_argument("--policy " + name + ": \"" + text + "\" is neither a number nor one of: " +
                                    info.valueNames);
      }
    }
    if (info.type == FFPA_POLICY_TYPE_INT64) {
      check(ffpaSetPolicy(handle, knob, &value, sizeof value), "ffpaSetPolicy");
    } else {
      const int32_t narrow = static_cast<int32_t>(value);
      check(ffpaSetPolicy(handle, knob, &narrow, sizeof narrow), "ffpaSetPolicy");
    }
    return;
  }
  throw std::invalid_argument("--policy: no knob named " + name + " (ffpa-info --knobs lists them)");
}

struct Timing {
  double medianMs = 0, minMs = 0;
};

// Median and minimum of `iters` timed calls after `warmup` untimed ones (CUDA events per call).
Timing timeCalls(const Options& o, const std::function<void(int)>& call) {
  for (int i = 0; i < o.warmup; ++i) call(i);
  cudaEvent_t start, stop;
  checkCuda(cudaEventCreate(&start), "cudaEventCreate");
  checkCuda(cudaEventCreate(&stop), "cudaEventCreate");
  std::vector<double> ms;
  for (int i = 0; i < o.iters; ++i) {
    checkCuda(cudaEventRecord(start), "cudaEventRecord");
    call(i);
    checkCuda(cudaEventRecord(stop), "cudaEventRecord");
    checkCuda(cudaEventSynchronize(stop), "cudaEventSynchronize");
    float elapsed = 0;
    checkCuda(cudaEventElapsedTime(&elapsed, start, stop), "cudaEventElapsedTime");
    ms.push_back(elapsed);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  std::sort(ms.begin(), ms.end());
  return {ms[ms.size() / 2], ms.front()};
}

std::vector<float> download(const Tensor& t) {
  std::vector<uint16_t> raw(t.elements);
  checkCuda(cudaMemcpy(raw.data(), t.data(), t.elements * 2, cudaMemcpyDeviceToHost), "cudaMemcpy");
  std::vector<float> out(t.elements);
  for (size_t i = 0; i < raw.size(); ++i) {
    if (t.dtype == FFPA_DATA_TYPE_BFLOAT16) {
      __nv_bfloat16_raw r{raw[i]};
      out[i] = __bfloat162float(__nv_bfloat16(r));
    } else {
      __half_raw r{raw[i]};
      out[i] = __half2float(__half(r));
    }
  }
  return out;
}

struct Row {
  int64_t d, dv;
  ffpaDataType_t dtype;
  ffpaAccumulator_t accumulator;
  std::string kernel;
  Timing fwd, ref, bwd;
  double tflops = 0, refTflops = 0, bwdTflops = 0, relError = -1, maxAbs = -1;
  bool failed = false;
};

std::string planKernel(ffpaHandle_t h, ffpaAttentionDescriptor_t attn, const Tensor& q, const Tensor& k,
                       const Tensor& v, const Tensor& o, const Tensor& lse) {
  size_t length = 0;
  check(ffpaDescribeAttentionForwardPlan(h, attn, q.desc, k.desc, v.desc, o.desc, lse.desc, nullptr, 0, &length),
        "ffpaDescribeAttentionForwardPlan");
  std::string text(length, '\0');
  check(ffpaDescribeAttentionForwardPlan(h, attn, q.desc, k.desc, v.desc, o.desc, lse.desc, text.data(),
                                         length + 1, nullptr),
        "ffpaDescribeAttentionForwardPlan");
  const size_t start = text.find("\nkernel: ") + 9;
  return text.substr(start, text.find('\n', start) - start);
}

Row runOne(const Options& o, int64_t d, ffpaDataType_t dtype, ffpaAccumulator_t accumulator) {
  Row row;
  row.d = d;
  row.dv = o.headDimV ? o.headDimV : d;
  row.dtype = dtype;
  row.accumulator = accumulator;
  Handle fast;
  for (const auto& [name, value] : o.policies) setPolicy(fast.h, name, value);
  const int32_t acc = accumulator;
  check(ffpaSetPolicy(fast.h, FFPA_POLICY_ACCUMULATOR, &acc, sizeof acc), "ffpaSetPolicy");
  ffpaAttentionDescriptor_t attn = nullptr;
  check(ffpaCreateAttentionDescriptor(&attn), "ffpaCreateAttentionDescriptor");
  std::unique_ptr<ffpaAttentionStruct, decltype(&ffpaDestroyAttentionDescriptor)> attnOwner(
      attn, ffpaDestroyAttentionDescriptor);
  const int32_t causal = o.causal;
  check(ffpaSetAttentionAttribute(attn, FFPA_ATTENTION_CAUSAL_MODE, &causal, sizeof causal),
        "ffpaSetAttentionAttribute");

  Tensor q(dtype, o.batch, o.heads, o.seqQ, d, o.bnhd, o.rotate);
  Tensor k(dtype, o.batch, o.headsKv, o.seqKv, d, o.bnhd, o.rotate);
  Tensor v(dtype, o.batch, o.headsKv, o.seqKv, row.dv, o.bnhd, o.rotate);
  Tensor out(dtype, o.batch, o.heads, o.seqQ, row.dv, o.bnhd, 1);
  Tensor lse(FFPA_DATA_TYPE_FLOAT32, o.batch, o.heads, o.seqQ, 0, false, 1);
  for (int i = 0; i < o.rotate; ++i) {
    checkCuda(fillUniform(q.data(i), dtype, q.elements, 11 + i, 2.0f, nullptr), "fill Q");
    checkCuda(fillUniform(k.data(i), dtype, k.elements, 23 + i, 2.0f, nullptr), "fill K");
    checkCuda(fillUniform(v.data(i), dtype, v.elements, 37 + i, 1.0f, nullptr), "fill V");
  }
  row.kernel = planKernel(fast.h, attn, q, k, v, out, lse);
  size_t bytes = 0;
  check(ffpaGetAttentionForwardWorkspaceSize(fast.h, attn, q.desc, k.desc, v.desc, out.desc, lse.desc, &bytes),
        "ffpaGetAttentionForwardWorkspaceSize");
  DeviceMemory workspace(bytes);
  auto forward = [&](ffpaHandle_t h, void* ws, size_t wsBytes, int i) {
    check(ffpaAttentionForward(h, attn, q.desc, q.data(i), k.desc, k.data(i), v.desc, v.data(i), out.desc,
                               out.data(), lse.desc, static_cast<float*>(lse.data()), ws, wsBytes),
          "ffpaAttentionForward");
  };
  const double flops = 2.0 * o.batch * o.heads * o.seqQ * o.seqKv * double(d + row.dv) *
                       (o.causal == FFPA_CAUSAL_NONE ? 1.0 : 0.5);
  row.fwd = timeCalls(o, [&](int i) { forward(fast.h, workspace.pointer, bytes, i); });
  row.tflops = flops / (row.fwd.medianMs * 1e9);

  if (o.reference || o.check) {
    Handle reference;
    const int32_t on = 1;
    check(ffpaSetPolicy(reference.h, FFPA_POLICY_REFERENCE_BACKEND, &on, sizeof on), "ffpaSetPolicy");
    size_t refBytes = 0;
    check(ffpaGetAttentionForwardWorkspaceSize(reference.h, attn, q.desc, k.desc, v.desc, out.desc, lse.desc,
                                               &refBytes),
          "ffpaGetAttentionForwardWorkspaceSize");
    DeviceMemory refWorkspace(refBytes);
    if (o.reference) {
      row.ref = timeCalls(o, [&](int i) { forward(reference.h, refWorkspace.pointer, refBytes, i); });
      row.refTflops = flops / (row.ref.medianMs * 1e9);
    }
    if (o.check) {
      checkCuda(cudaMemset(out.data(), 0xff, out.elements * 2), "cudaMemset");  // NaN: nothing left unwritten
      forward(fast.h, workspace.pointer, bytes, 0);
      const std::vector<float> mine = download(out);
      forward(reference.h, refWorkspace.pointer, refBytes, 0);
      const std::vector<float> theirs = download(out);
      double diff2 = 0, ref2 = 0, maxAbs = 0;
      for (size_t i = 0; i < mine.size(); ++i) {
        const double e = double(mine[i]) - theirs[i];
        diff2 += e * e;
        ref2 += double(theirs[i]) * theirs[i];
        maxAbs = std::max(maxAbs, std::isnan(e) ? INFINITY : std::fabs(e));
      }
      row.relError = std::isnan(diff2) ? INFINITY : std::sqrt(diff2 / std::max(ref2, 1e-30));
      row.maxAbs = maxAbs;
      const double bound = accumulator == FFPA_ACCUMULATOR_F32 ? 2e-2 : 5e-2;
      row.failed = !(row.relError <= bound);
    }
  }
  if (o.backward) {
    Tensor dO(dtype, o.batch, o.heads, o.seqQ, row.dv, o.bnhd, 1);
    Tensor dq(dtype, o.batch, o.heads, o.seqQ, d, o.bnhd, 1);
    Tensor dk(dtype, o.batch, o.headsKv, o.seqKv, d, o.bnhd, 1);
    Tensor dv(dtype, o.batch, o.headsKv, o.seqKv, row.dv, o.bnhd, 1);
    checkCuda(fillUniform(dO.data(), dtype, dO.elements, 51, 1.0f, nullptr), "fill dO");
    forward(fast.h, workspace.pointer, bytes, 0);
    size_t backBytes = 0;
    check(ffpaGetAttentionBackwardWorkspaceSize(fast.h, attn, q.desc, k.desc, v.desc, out.desc, dO.desc, lse.desc,
                                                dq.desc, dk.desc, dv.desc, &backBytes),
          "ffpaGetAttentionBackwardWorkspaceSize");
    DeviceMemory backWorkspace(backBytes);
    row.bwd = timeCalls(o, [&](int) {
      check(ffpaAttentionBackward(fast.h, attn, q.desc, q.data(), k.desc, k.data(), v.desc, v.data(), out.desc,
                                  out.data(), dO.desc, dO.data(), lse.desc, static_cast<float*>(lse.data()),
                                  dq.desc, dq.data(), dk.desc, dk.data(), dv.desc, dv.data(),
                                  backWorkspace.pointer, backBytes),
            "ffpaAttentionBackward");
    });
    row.bwdTflops = 2.5 * flops / (row.bwd.medianMs * 1e9);
  }
  return row;
}

std::string format(double value, int precision) {
  std::ostringstream out;
  out.setf(std::ios::fixed);
  out.precision(precision);
  out << value;
  return out.str();
}

void print(const Options& o, const std::vector<Row>& rows, std::ostream& out) {
  std::vector<std::string> header = {"d", "dv", "dtype", "acc", "kernel", "ms", "min ms", "TFLOPS"};
  if (o.reference) header.insert(header.end(), {"ref ms", "ref TFLOPS", "speedup"});
  if (o.check) header.insert(header.end(), {"rel err", "max abs", "check"});
  if (o.backward) header.insert(header.end(), {"bwd ms", "bwd TFLOPS"});
  std::vector<std::vector<std::string>> table{header};
  for (const Row& r : rows) {
    std::vector<std::string> cells = {std::to_string(r.d), std::to_string(r.dv), dtypeName(r.dtype),
                                      accumulatorName(r.accumulator), r.kernel, format(r.fwd.medianMs, 3),
                                      format(r.fwd.minMs, 3), format(r.tflops, 1)};
    if (o.reference) {
      cells.insert(cells.end(), {format(r.ref.medianMs, 3), format(r.refTflops, 1),
                                 format(r.ref.medianMs / r.fwd.medianMs, 2) + "x"});
    }
    if (o.check) {
      cells.insert(cells.end(), {format(r.relError, 5), format(r.maxAbs, 5), r.failed ? "FAIL" : "ok"});
    }
    if (o.backward) cells.insert(cells.end(), {format(r.bwd.medianMs, 3), format(r.bwdTflops, 1)});
    table.push_back(cells);
  }
  if (o.format == Format::csv) {
    for (const auto& cells : table) {
      for (size_t i = 0; i < cells.size(); ++i) out << (i ? "," : "") << cells[i];
      out << "\n";
    }
    return;
  }
  std::vector<size_t> widths(header.size(), 0);
  for (const auto& cells : table)
    for (size_t i = 0; i < cells.size(); ++i) widths[i] = std::max(widths[i], cells[i].size());
  for (size_t r = 0; r < table.size(); ++r) {
    for (size_t i = 0; i < table[r].size(); ++i) {
      const std::string cell = table[r][i] + std::string(widths[i] - table[r][i].size(), ' ');
      out << (o.format == Format::markdown ? "| " : "") << cell << (o.format == Format::markdown ? " " : "  ");
    }
    out << (o.format == Format::markdown ? "|\n" : "\n");
    if (r == 0 && o.format == Format::markdown) {
      for (size_t w : widths) out << "|" << std::string(w + 2, '-');
      out << "|\n";
    }
  }
}

int run(const Options& o) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::cerr << "ffpa-bench: no CUDA GPU is visible; nothing to time\n";
    return 77;
  }
  cudaDeviceProp prop{};
  checkCuda(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
  std::vector<std::pair<ffpaDataType_t, ffpaAccumulator_t>> variants;
  for (const ffpaDataType_t dtype : o.dtypes) {
    for (int a = 0; a < 4; ++a) {
      const auto acc = static_cast<ffpaAccumulator_t>(a);
      const bool asked = o.accumulators.empty() ? (a == 0 || dtype == FFPA_DATA_TYPE_FLOAT16)
                                                : std::count(o.accumulators.begin(), o.accumulators.end(), acc) > 0;
      if (asked && (a == 0 || dtype == FFPA_DATA_TYPE_FLOAT16)) variants.emplace_back(dtype, acc);
    }
  }
  const size_t total = variants.size() * o.headDims.size();
  std::vector<Row> rows;
  const auto begin = std::chrono::steady_clock::now();
  bool failed = false;
  for (const int64_t d : o.headDims) {
    for (const auto& [dtype, acc] : variants) {
      try {
        rows.push_back(runOne(o, d, dtype, acc));
        failed = failed || rows.back().failed;
      } catch (const Failure& error) {
        std::cerr << "\nffpa-bench: d=" << d << " " << dtypeName(dtype) << " acc=" << accumulatorName(acc) << ": "
                  << error.what() << "\n";
        failed = true;
      }
      const double elapsed =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
      const size_t done = rows.size();
      std::cerr << "\r[" << done << "/" << total << "] d=" << d << " " << dtypeName(dtype) << " "
                << accumulatorName(acc) << "  eta " << format(done ? elapsed / done * (total - done) : 0, 0)
                << " s   " << std::flush;
    }
  }
  std::cerr << "\n";
  std::ostringstream header;
  header << prop.name << ", B=" << o.batch << " H=" << o.heads << " Hkv=" << o.headsKv << " Nq=" << o.seqQ
         << " Nkv=" << o.seqKv << (o.causal == FFPA_CAUSAL_NONE ? "" : " causal") << ", " << o.iters
         << " iterations (median)\n";
  std::ostringstream body;
  print(o, rows, body);
  std::cout << (o.format == Format::csv ? "" : header.str()) << body.str();
  if (!o.output.empty()) std::ofstream(o.output) << (o.format == Format::csv ? "" : header.str()) << body.str();
  return failed ? 1 : 0;
}

}  // namespace
}  // namespace ffpa_bench

int main(int argc, char** argv) {
  ffpa_bench::Options options;
  try {
    options = ffpa_bench::parseOptions(std::vector<std::string>(argv + 1, argv + argc));
  } catch (const std::invalid_argument& error) {
    std::cerr << "ffpa-bench: " << error.what() << "\n";
    return 2;
  }
  if (options.help) {
    std::cout << ffpa_bench::kUsage;
    return 0;
  }
  try {
    return ffpa_bench::run(options);
  } catch (const std::invalid_argument& error) {
    std::cerr << "ffpa-bench: " << error.what() << "\n";
    return 2;
  } catch (const std::exception& error) {
    std::cerr << "ffpa-bench: " << error.what() << "\n";
    return 1;
  }
}
