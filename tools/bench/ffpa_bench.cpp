// ffpa-bench: times libffpa's forward (and backward) through the public C API on this GPU, over a
// sweep of head dims, dtypes and accumulator modes; optionally against the cuBLASLt reference
// path of the same library, with a check of every output; or (--merge) ffpaAttentionMerge against
// cudaMemcpy of as many bytes. See kUsage for the options.
#include <cuda_runtime.h>
#include <ffpa/ffpa.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <functional>
#include <iostream>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "bench_device.h"
#include "bench_options.h"
#include "bench_table.h"
#include "device_compare.h"
#include "common/device_attention.h"
#include "common/plan_text.h"

namespace ffpa_bench {
namespace {

constexpr int kExitNoGpu = 77;
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

struct Timing {
  double medianMs = kNaN, minMs = kNaN;
};

// Median and minimum of `iters` timed calls after `warmup` untimed ones; call(i) uses input set i.
Timing timeCalls(const Options& o, cudaStream_t stream, const std::function<void(int)>& call) {
  const ffpa_tools::CallTiming t = ffpa_tools::time_calls(
      stream, o.warmup, o.iters, [&](int64_t i) { call(static_cast<int>(i)); });
  return {t.median_ms, t.min_ms};
}

// Everything that does not change within a sweep: the stream, the handles, the workspaces.
struct Session {
  explicit Session(const Options& o) : fast(stream.get()) {
    for (const PolicySetting& setting : o.policies) check(applyPolicy(fast.get(), setting), "ffpaSetPolicy");
    if (o.reference || o.check) {
      reference = std::make_unique<Handle>(stream.get());
      reference->setInt32(FFPA_POLICY_REFERENCE_BACKEND, 1);
    }
  }
  Stream stream;
  Handle fast;
  std::unique_ptr<Handle> reference;
  Workspace fastWorkspace, referenceWorkspace;
};

// The tensors of one (head dim, dtype): inputs in rotated sets, outputs likewise so that a timed
// call never finds its output in L2 either.
struct Problem {
  // `handle` makes the slices of a --varlen batch (on its device, which the other handles share).
  Problem(const Options& o, int64_t dQk, ffpaDataType_t type, ffpaHandle_t handle, cudaStream_t stream)
      : d(dQk),
        dv(o.headDimV ? o.headDimV : dQk),
        dtype(type),
        slices(o.varlen.empty() ? nullptr
                                : std::make_unique<AttentionSlices>(handle, o.varlen,
                                                                    o.causal == FFPA_CAUSAL_NONE ? FFPA_SLICE_MASK_FULL
                                                                                                 : FFPA_SLICE_MASK_CAUSAL)),
        attn(slices ? FFPA_CAUSAL_NONE : o.causal, slices.get()) {
    // The forward's FLOPs: over the pairs the mask lets attend (half the square under a causal
    // mask, as the FFPA tables count it).
    double pairs = 0;  // summed over the batch
    if (slices) {
      pairs = double(slices->visiblePairs()) * double(o.batch);
    } else {
      for (int64_t b = 0; b < o.batch; ++b) pairs += visiblePairs(o, b);
    }
    forwardFlops = 2.0 * o.heads * pairs * double(d + dv);
    q = Tensor::attention(dtype, o.batch, o.heads, o.seqQ, d, o.bnhd, o.rotate);
    k = Tensor::attention(dtype, o.batch, o.headsKv, o.seqKv, d, o.bnhd, o.rotate);
    v = Tensor::attention(dtype, o.batch, o.headsKv, o.seqKv, dv, o.bnhd, o.rotate);
    out = Tensor::attention(dtype, o.batch, o.heads, o.seqQ, dv, o.bnhd, o.rotate);
    lse = Tensor::lse(o.batch, o.heads, o.seqQ, o.rotate);
    // Q and K in [-2, 2) give a peaked softmax, as real attention has; V in [-1, 1).
    q->fillUniform(11, 2.0f, stream);
    k->fillUniform(23, 2.0f, stream);
    v->fillUniform(37, 1.0f, stream);
    if (!o.keyLengths.empty()) {
      // The counts on the device, attached; NaN in K and V past them, which no kernel may read.
      const std::vector<int32_t> counts(o.keyLengths.begin(), o.keyLengths.end());
      keyLengths = std::make_unique<DeviceMemory>(counts.size() * sizeof(int32_t));
      checkCuda(cudaMemcpy(keyLengths->get(), counts.data(), counts.size() * sizeof(int32_t), cudaMemcpyHostToDevice),
                "cudaMemcpy");
      const int32_t* device = static_cast<const int32_t*>(keyLengths->get());
      check(ffpaSetAttentionAttribute(attn.get(), FFPA_ATTENTION_KEY_LENGTHS, &device, sizeof device),
            "ffpaSetAttentionAttribute(FFPA_ATTENTION_KEY_LENGTHS)");
      k->poisonRowsFrom(o.keyLengths, stream);
      v->poisonRowsFrom(o.keyLengths, stream);
    }
    if (o.check) expected = Tensor::attention(dtype, o.batch, o.heads, o.seqQ, dv, o.bnhd, 1);
    if (o.backward) {
      dO = Tensor::attention(dtype, o.batch, o.heads, o.seqQ, dv, o.bnhd, o.rotate);
      dq = Tensor::attention(dtype, o.batch, o.heads, o.seqQ, d, o.bnhd, 1);
      dk = Tensor::attention(dtype, o.batch, o.headsKv, o.seqKv, d, o.bnhd, 1);
      dvGrad = Tensor::attention(dtype, o.batch, o.headsKv, o.seqKv, dv, o.bnhd, 1);
      dO->fillUniform(51, 1.0f, stream);
    }
  }

  // The forward of input set i into output set i (or into `o` when given).
  void forward(ffpaHandle_t h, void* ws, size_t wsBytes, int i, void* o = nullptr) const {
    check(ffpaAttentionForward(h, attn.get(), q->desc(), q->data(i), k->desc(), k->data(i), v->desc(), v->data(i),
                               out->desc(), o ? o : out->data(i), lse->desc(), static_cast<float*>(lse->data(i)),
                               ws, wsBytes),
          "ffpaAttentionForward");
  }
  size_t forwardWorkspace(ffpaHandle_t h) const {
    size_t bytes = 0;
    check(ffpaGetAttentionForwardWorkspaceSize(h, attn.get(), q->desc(), k->desc(), v->desc(), out->desc(),
                                               lse->desc(), &bytes),
          "ffpaGetAttentionForwardWorkspaceSize");
    return bytes;
  }
  ffpa_tools::PlanText forwardPlan(ffpaHandle_t h) const {
    size_t length = 0;
    check(ffpaDescribeAttentionForwardPlan(h, attn.get(), q->desc(), k->desc(), v->desc(), out->desc(), lse->desc(),
                                           nullptr, 0, &length),
          "ffpaDescribeAttentionForwardPlan");
    std::string text(length, '\0');
    check(ffpaDescribeAttentionForwardPlan(h, attn.get(), q->desc(), k->desc(), v->desc(), out->desc(), lse->desc(),
                                           text.data(), length + 1, nullptr),
          "ffpaDescribeAttentionForwardPlan");
    return ffpa_tools::parsePlanText(text);
  }

  // The backward of set i; it reads the O and LSE that the forward of set i wrote.
  void backward(ffpaHandle_t h, void* ws, size_t wsBytes, int i) const {
    check(ffpaAttentionBackward(h, attn.get(), q->desc(), q->data(i), k->desc(), k->data(i), v->desc(), v->data(i),
                                out->desc(), out->data(i), dO->desc(), dO->data(i), lse->desc(),
                                static_cast<const float*>(lse->data(i)), dq->desc(), dq->data(), dk->desc(),
                                dk->data(), dvGrad->desc(), dvGrad->data(), ws, wsBytes),
          "ffpaAttentionBackward");
  }
  size_t backwardWorkspace(ffpaHandle_t h) const {
    size_t bytes = 0;
    check(ffpaGetAttentionBackwardWorkspaceSize(h, attn.get(), q->desc(), k->desc(), v->desc(), out->desc(),
                                                dO->desc(), lse->desc(), dq->desc(), dk->desc(), dvGrad->desc(),
                                                &bytes),
          "ffpaGetAttentionBackwardWorkspaceSize");
    return bytes;
  }
  std::string backwardKernel(ffpaHandle_t h) const {
    size_t length = 0;
    check(ffpaDescribeAttentionBackwardPlan(h, attn.get(), q->desc(), k->desc(), v->desc(), out->desc(), dO->desc(),
                                            lse->desc(), dq->desc(), dk->desc(), dvGrad->desc(), nullptr, 0, &length),
          "ffpaDescribeAttentionBackwardPlan");
    std::string text(length, '\0');
    check(ffpaDescribeAttentionBackwardPlan(h, attn.get(), q->desc(), k->desc(), v->desc(), out->desc(), dO->desc(),
                                            lse->desc(), dq->desc(), dk->desc(), dvGrad->desc(), text.data(),
                                            length + 1, nullptr),
          "ffpaDescribeAttentionBackwardPlan");
    return ffpa_tools::parsePlanText(text).kernel;
  }

  int64_t d, dv;
  ffpaDataType_t dtype;
  std::unique_ptr<AttentionSlices> slices;  // --varlen only
  AttentionDescriptor attn;
  std::unique_ptr<DeviceMemory> keyLengths;  // --key-lengths only: the counts the calls read
  double forwardFlops = 0;
  std::unique_ptr<Tensor> q, k, v, out, lse, expected, dO, dq, dk, dvGrad;
};

struct Row {
  int64_t d = 0, dv = 0;
  Variant variant{};
  double flops = 0;
  ffpa_tools::PlanText plan;
  std::string backwardKernel, error;
  Timing fwd, ref, bwd;
  Difference difference{kNaN, kNaN};
  bool failed = false;
};

// The relative error the check allows: fp16 accumulation rounds every partial sum to 11 bits.
double tolerance(ffpaAccumulator_t mode) { return mode == FFPA_ACCUMULATOR_F32 ? 2e-2 : 5e-2; }

void measure(const Options& o, Session& s, const Problem& p, Row& row) {
  const cudaStream_t stream = s.stream.get();
  ffpaHandle_t fast = s.fast.get();
  s.fast.setInt32(FFPA_POLICY_ACCUMULATOR, row.variant.accumulator);
  row.plan = p.forwardPlan(fast);
  const size_t bytes = p.forwardWorkspace(fast);
  void* ws = s.fastWorkspace.reserve(bytes);
  p.out->poison(stream);
  p.lse->poison(stream);
  row.fwd = timeCalls(o, stream, [&](int i) { p.forward(fast, ws, bytes, i); });

  if (s.reference) {
    ffpaHandle_t reference = s.reference->get();
    const size_t refBytes = p.forwardWorkspace(reference);
    void* refWs = s.referenceWorkspace.reserve(refBytes);
    if (o.reference) row.ref = timeCalls(o, stream, [&](int i) { p.forward(reference, refWs, refBytes, i); });
    if (o.check) {
      p.out->poison(stream);
      p.expected->poison(stream);
      p.forward(fast, ws, bytes, 0);
      p.forward(reference, refWs, refBytes, 0, p.expected->data());
      checkCuda(compareOnDevice(p.out->data(0), p.expected->data(), p.dtype, p.out->elements(), stream,
                                &row.difference),
                "compare with the reference");
      row.failed = !(row.difference.relative <= tolerance(row.variant.accumulator));
    }
  }

  if (o.backward) {
    row.backwardKernel = p.backwardKernel(fast);
    for (int i = 0; i < o.rotate; ++i) p.forward(fast, ws, bytes, i);
    const size_t backBytes = p.backwardWorkspace(fast);
    // The forward's workspace is not needed any more: one block serves both passes.
    void* backWs = s.fastWorkspace.reserve(backBytes);
    p.dq->poison(stream);
    p.dk->poison(stream);
    p.dvGrad->poison(stream);
    row.bwd = timeCalls(o, stream, [&](int i) { p.backward(fast, backWs, backBytes, i); });
  }
}

// --merge: P partial results of [B, H, N, D] with their LSE merged into one, against a device copy
// moving as many bytes, in the same run.
struct MergeRow {
  int64_t d = 0;
  ffpaDataType_t dtype = FFPA_DATA_TYPE_FLOAT16;
  double bytes = 0;  // read and written by one merge
  Timing merge, copy;
  Difference output{kNaN, kNaN};  // the merged output against itself: inf when a NaN is left
  std::string error;

  bool failed() const { return !error.empty() || !(output.relative == 0.0); }
};

void measureMerge(const Options& o, Session& s, MergeRow& row) {
  const cudaStream_t stream = s.stream.get();
  const int p = o.merge;
  const auto partials = Tensor::attention(row.dtype, o.batch, o.heads, o.seqQ, row.d, o.bnhd, p * o.rotate);
  const auto partialLse = Tensor::lse(o.batch, o.heads, o.seqQ, p * o.rotate);
  const auto out = Tensor::attention(row.dtype, o.batch, o.heads, o.seqQ, row.d, o.bnhd, o.rotate);
  const auto lse = Tensor::lse(o.batch, o.heads, o.seqQ, o.rotate);
  partials->fillUniform(61, 1.0f, stream);
  partialLse->fillUniform(67, 4.0f, stream);  // log-sum-exps in [-4, 4): weights far from equal
  out->poison(stream);
  lse->poison(stream);
  row.bytes = double(p + 1) * double(out->bytes() + lse->bytes());

  std::vector<const void*> parts(static_cast<size_t>(p));
  std::vector<const float*> partLse(static_cast<size_t>(p));
  ffpaHandle_t h = s.fast.get();
  row.merge = timeCalls(o, stream, [&](int i) {
    for (int j = 0; j < p; ++j) {
      parts[j] = partials->data(i * p + j);
      partLse[j] = static_cast<const float*>(partialLse->data(i * p + j));
    }
    check(ffpaAttentionMerge(h, p, partials->desc(), parts.data(), partialLse->desc(), partLse.data(), out->desc(),
                             out->data(i), lse->desc(), static_cast<float*>(lse->data(i))),
          "ffpaAttentionMerge");
  });
  checkCuda(compareOnDevice(out->data(0), out->data(0), row.dtype, out->elements(), stream, &row.output),
            "check the merged output");

  // The copy reads and writes each byte: half the merge's bytes move as many. Rotated like the
  // merge's sets so that neither finds its data in L2.
  const size_t copyBytes = static_cast<size_t>(row.bytes / 2);
  std::vector<std::unique_ptr<DeviceMemory>> from, to;
  for (int i = 0; i < o.rotate; ++i) {
    from.push_back(std::make_unique<DeviceMemory>(copyBytes));
    to.push_back(std::make_unique<DeviceMemory>(copyBytes));
  }
  row.copy = timeCalls(o, stream, [&](int i) {
    checkCuda(cudaMemcpyAsync(to[i % o.rotate]->get(), from[i % o.rotate]->get(), copyBytes, cudaMemcpyDeviceToDevice,
                              stream),
              "cudaMemcpyAsync");
  });
}

Table makeMergeTable(const Options& o, const std::vector<MergeRow>& rows) {
  Table table;
  table.header = {"d", "dtype", "P", "MB", "ms", "min ms", "GB/s", "memcpy ms", "memcpy GB/s", "of memcpy", "check"};
  auto gbs = [](double bytes, const Timing& t) { return bytes / (t.medianMs * 1e6); };
  for (const MergeRow& r : rows) {
    table.rows.push_back({std::to_string(r.d), dtypeName(r.dtype), std::to_string(o.merge), fixed(r.bytes / 1e6, 1),
                          fixed(r.merge.medianMs, 3), fixed(r.merge.minMs, 3), fixed(gbs(r.bytes, r.merge), 0),
                          fixed(r.copy.medianMs, 3), fixed(gbs(r.bytes, r.copy), 0),
                          fixed(100.0 * r.copy.medianMs / r.merge.medianMs, 1) + "%",
                          !r.error.empty() ? "ERROR: " + r.error : r.failed() ? "FAIL (NaN left)" : "ok"});
  }
  return table;
}

// A status line on stderr: rewritten in place on a terminal, one line per row in a log file.
class Progress {
 public:
  explicit Progress(size_t total) : total_(total), tty_(isatty(STDERR_FILENO) != 0) {}
  ~Progress() {
    if (tty_ && started_) std::cerr << "\n";
  }
  void start(const std::string& what) {
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin_).count();
    std::ostringstream line;
    line << "[" << started_ + 1 << "/" << total_ << "] " << what << "  elapsed " << fixed(elapsed, 0) << " s";
    if (started_ > 0) line << ", ETA " << fixed(elapsed / started_ * (total_ - started_), 0) << " s";
    std::cerr << (tty_ ? "\r" : "") << line.str() << (tty_ ? "\x1b[K" : "\n") << std::flush;
    ++started_;
  }

 private:
  size_t total_, started_ = 0;
  bool tty_;
  std::chrono::steady_clock::time_point begin_ = std::chrono::steady_clock::now();
};

Table makeTable(const Options& o, const std::vector<Row>& rows) {
  Table table;
  table.header = {"d", "dtype", "acc", "ms", "min ms", "TFLOPS"};
  if (o.reference) table.header.insert(table.header.end(), {"ref ms", "ref TFLOPS", "speedup"});
  if (o.check) table.header.insert(table.header.end(), {"rel err", "max abs", "check"});
  if (o.backward) table.header.insert(table.header.end(), {"bwd ms", "bwd min ms", "bwd TFLOPS", "bwd kernel"});
  table.header.insert(table.header.end(), {"kernel", "config"});
  auto tflops = [](double flops, const Timing& t) { return fixed(flops / (t.medianMs * 1e9), 1); };
  for (const Row& r : rows) {
    std::vector<std::string> cells = {
        r.dv == r.d ? std::to_string(r.d) : std::to_string(r.d) + "/" + std::to_string(r.dv),
        dtypeName(r.variant.dtype), accumulatorName(r.variant.accumulator), fixed(r.fwd.medianMs, 3),
        fixed(r.fwd.minMs, 3), tflops(r.flops, r.fwd)};
    if (o.reference) {
      const double speedup = r.ref.medianMs / r.fwd.medianMs;
      cells.insert(cells.end(), {fixed(r.ref.medianMs, 3), tflops(r.flops, r.ref),
                                 std::isnan(speedup) ? "-" : fixed(speedup, 2) + "x"});
    }
    if (o.check) {
      cells.insert(cells.end(), {fixed(r.difference.relative, 5), fixed(r.difference.maxAbs, 5),
                                 !r.error.empty() ? "ERROR" : r.failed ? "FAIL" : "ok"});
    }
    if (o.backward) {
      cells.insert(cells.end(), {fixed(r.bwd.medianMs, 3), fixed(r.bwd.minMs, 3), tflops(2.5 * r.flops, r.bwd),
                                 r.backwardKernel});
    }
    cells.insert(cells.end(), {r.error.empty() ? r.plan.kernel : "ERROR", r.error.empty() ? r.plan.config : r.error});
    table.rows.push_back(cells);
  }
  return table;
}

// Two lines above the table: the device and library, then the problem and the method.
std::string describeRun(const Options& o) {
  int device = 0;
  cudaDeviceProp prop{};
  cudaGetDevice(&device);
  cudaGetDeviceProperties(&prop, device);
  const char* const end = o.format == Format::markdown ? "\n\n" : "\n";  // Markdown: two paragraphs
  std::ostringstream text;
  text << "ffpa-bench: " << prop.name << " (sm_" << prop.major << prop.minor << ", " << prop.multiProcessorCount
       << " SMs), " << ffpaGetBuildInfo() << end;
  if (o.merge > 0) {
    text << "ffpaAttentionMerge of P=" << o.merge << " partial results [B=" << o.batch << ", H=" << o.heads
         << ", N=" << o.seqQ << ", D] with fp32 LSE, vs cudaMemcpyAsync moving as many bytes";
  } else {
    text << "B=" << o.batch << " Hq=" << o.heads << " Hkv=" << o.headsKv << " Nq=" << o.seqQ << " Nkv=" << o.seqKv
         << " causal=" << causalName(o.causal);
  }
  if (!o.varlen.empty()) text << " varlen=" << o.varlen.size() << " sequences (one slice each)";
  if (!o.keyLengths.empty()) {
    text << " key_lengths=";
    for (size_t b = 0; b < o.keyLengths.size(); ++b) text << (b ? "," : "") << o.keyLengths[b];
  }
  text << " layout=" << (o.bnhd ? "bnhd" : "bhnd") << "; median and min of "
       << o.iters << " calls after " << o.warmup << " warm-up, " << o.rotate << " input sets in turn\n\n";
  return text.str();
}

// Prints the run's description and its table, and writes them to --output; false when that fails.
bool printTable(const Options& o, const Table& table) {
  const std::string text = (o.format == Format::csv ? "" : describeRun(o)) + renderTable(table, o.format);
  std::cout << text;
  if (o.output.empty()) return true;
  std::ofstream file(o.output);
  file << text;
  if (!file) std::cerr << "ffpa-bench: --output: cannot write " << o.output << "\n";
  return static_cast<bool>(file);
}

int runMerge(const Options& o, Session& session) {
  Progress progress(o.headDims.size() * o.dtypes.size());
  std::vector<MergeRow> rows;
  bool failed = false;
  for (const int64_t d : o.headDims) {
    for (const ffpaDataType_t dtype : o.dtypes) {
      MergeRow row;
      row.d = d;
      row.dtype = dtype;
      progress.start("merge d=" + std::to_string(d) + " " + dtypeName(dtype));
      try {
        measureMerge(o, session, row);
      } catch (const Failure& error) {
        row.error = error.what();
        std::cerr << "ffpa-bench: merge d=" << d << " " << dtypeName(dtype) << ": " << row.error << "\n";
      }
      failed = failed || row.failed();
      rows.push_back(row);
    }
  }
  return printTable(o, makeMergeTable(o, rows)) && !failed ? 0 : 1;
}

int run(const Options& o) {
  int devices = 0;
  const cudaError_t found = cudaGetDeviceCount(&devices);
  if (found != cudaSuccess || devices == 0) {
    std::cerr << "ffpa-bench: no CUDA GPU is visible ("
              << (found != cudaSuccess ? cudaGetErrorString(found) : "0 devices") << "); nothing to time\n";
    return kExitNoGpu;
  }
  Session session(o);
  if (o.merge > 0) return runMerge(o, session);
  const std::vector<Variant> variants = sweepVariants(o);
  Progress progress(variants.size() * o.headDims.size());
  std::vector<Row> rows;
  bool failed = false;
  for (const int64_t d : o.headDims) {
    for (const ffpaDataType_t dtype : o.dtypes) {
      std::unique_ptr<Problem> problem;
      std::string problemError;
      try {
        problem = std::make_unique<Problem>(o, d, dtype, session.fast.get(), session.stream.get());
      } catch (const Failure& error) {
        problemError = error.what();
      }
      for (const Variant& variant : variants) {
        if (variant.dtype != dtype) continue;
        Row row;
        row.d = d;
        row.dv = o.headDimV ? o.headDimV : d;
        row.variant = variant;
        row.flops = problem ? problem->forwardFlops : 0.0;
        progress.start("d=" + std::to_string(d) + " " + dtypeName(dtype) + " acc=" + accumulatorName(variant.accumulator));
        try {
          if (!problem) throw Failure(problemError);
          measure(o, session, *problem, row);
        } catch (const Failure& error) {
          row.error = error.what();
          std::cerr << "ffpa-bench: d=" << d << " " << dtypeName(dtype) << " acc=" << accumulatorName(variant.accumulator)
                    << ": " << row.error << "\n";
        }
        failed = failed || row.failed || !row.error.empty();
        rows.push_back(row);
      }
    }
  }
  return printTable(o, makeTable(o, rows)) && !failed ? 0 : 1;
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
  } catch (const ffpa_bench::NoGpu& error) {
    std::cerr << "ffpa-bench: no usable GPU: " << error.what() << "\n";
    return ffpa_bench::kExitNoGpu;
  } catch (const std::exception& error) {
    std::cerr << "ffpa-bench: " << error.what() << "\n";
    return 1;
  }
}
