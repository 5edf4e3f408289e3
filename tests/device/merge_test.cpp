// ffpaAttentionMerge on a GPU: random partials against a float64 merge (every type pair, the
// vector and scalar paths, parts and rows without keys, in-place updates, padded outputs, a CUDA
// graph), and attention split over disjoint key ranges, each part a forward call, merged back and
// checked against float64 attention over all the keys. Attention sinks: forward, backward and the
// sinks' gradient against float64 attention with sinks.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <sstream>
#include <vector>

#include "attention_checks.h"
#include "common/random.h"

using namespace ffpa_tools;
using namespace device_tests;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// `count` partial results as slices of one buffer: [count * B, H, N, D] outputs and
// [count * B, H, N] log-sum-exps, slice i holding batches [i * B, (i + 1) * B).
struct Partials {
  Partials(int count, DType type, int64_t b, int64_t h, int64_t n, int64_t d)
      : count(count),
        slice(attention_layout(LayoutKind::bhnd, b, h, n, d)),
        lseSlice(lse_layout(LayoutKind::bhnd, b, h, n)),
        o(type, attention_layout(LayoutKind::bhnd, count * b, h, n, d)),
        lse(DType::float32, lse_layout(LayoutKind::bhnd, count * b, h, n)),
        oDesc(type, slice),
        lseDesc(DType::float32, lseSlice) {}

  const void* oAt(int i) const {
    return static_cast<const char*>(o.memory.get()) + i * slice.span() * dtype_bytes(o.host.dtype());
  }
  const float* lseAt(int i) const {
    return static_cast<const float*>(lse.memory.get()) + i * lseSlice.span();
  }
  std::vector<const void*> oPointers() const {
    std::vector<const void*> p;
    for (int i = 0; i < count; ++i) p.push_back(oAt(i));
    return p;
  }
  std::vector<const float*> lsePointers() const {
    std::vector<const float*> p;
    for (int i = 0; i < count; ++i) p.push_back(lseAt(i));
    return p;
  }

  int count;
  TensorLayout slice, lseSlice;
  DeviceTensor o, lse;
  TensorDescriptor oDesc, lseDesc;
};

struct Expected {
  std::vector<double> o, lse;  // dense [B, H, N, D] and [B, H, N]
};

// The float64 merge of the partials' values as stored.
Expected merge_in_float64(const Partials& parts, int64_t b, int64_t h, int64_t n, int64_t d) {
  Expected e;
  for (int64_t ib = 0; ib < b; ++ib)
    for (int64_t ih = 0; ih < h; ++ih)
      for (int64_t in = 0; in < n; ++in) {
        double m = -kInf;
        for (int i = 0; i < parts.count; ++i) m = std::max(m, parts.lse.host.get(i * b + ib, ih, in));
        double sum = 0.0;
        for (int i = 0; i < parts.count; ++i) {
          const double l = parts.lse.host.get(i * b + ib, ih, in);
          if (l != -kInf) sum += std::exp(l - m);
        }
        const double lse = m == -kInf ? -kInf : m + std::log(sum);
        e.lse.push_back(lse);
        for (int64_t x = 0; x < d; ++x) {
          double value = 0.0;
          for (int i = 0; i < parts.count; ++i) {
            const double l = parts.lse.host.get(i * b + ib, ih, in);
            if (l != -kInf) value += std::exp(l - lse) * parts.o.host.get(i * b + ib, ih, in, x);
          }
          e.o.push_back(value);
        }
      }
  return e;
}

// Random partials: O in [-1, 1), LSE in [-10, 10); about one part in five of a row has no keys
// (LSE -inf, O left NaN: it must not be read), and rows 16, 33, 50, ... have none at all.
void fill_partials(Partials& parts, uint64_t start) {
  Random random(start);
  parts.o.host.fill_uniform(random, -1.0, 1.0);
  const TensorLayout& l = parts.lse.host.layout();
  const int64_t rows = l.dims[0] / parts.count;
  for (int i = 0; i < parts.count; ++i)
    for (int64_t ib = 0; ib < rows; ++ib)
      for (int64_t ih = 0; ih < l.dims[1]; ++ih)
        for (int64_t in = 0; in < l.dims[2]; ++in) {
          const bool keyless = in % 17 == 16 || random.next() % 5 == 0;
          parts.lse.host.set(i * rows + ib, ih, in, 0, keyless ? -kInf : random.uniform(-10.0, 10.0));
          if (!keyless) continue;
          for (int64_t x = 0; x < parts.slice.dims[3]; ++x)
            parts.o.host.set(i * rows + ib, ih, in, x, std::numeric_limits<double>::quiet_NaN());
        }
  parts.o.upload();
  parts.lse.upload();
}

// Each element within the output type's rounding of float64, plus 5e-6 for the fp32 sums of up to
// 32 weighted parts (|O_i| < 1, weights summing to 1); rows without keys exactly 0 with LSE -inf;
// NaN never passes.
void check_merged(const std::string& context, const HostTensor& o, const HostTensor* lse,
                  const Expected& e) {
  const std::vector<double> got = o.to_dense();
  const double roundoff = unit_roundoff(o.dtype());
  int64_t bad = 0, first = -1;
  for (size_t i = 0; i < got.size(); ++i) {
    const bool ok = std::abs(got[i] - e.o[i]) <= roundoff * std::abs(e.o[i]) + 5e-6;
    if (!ok && first < 0) first = static_cast<int64_t>(i);
    bad += !ok;
  }
  CHECK_MESSAGE(bad == 0, context << ": " << bad << " elements of O off, the first at dense index "
                                  << first << ": " << (first < 0 ? 0.0 : got[first]) << " vs "
                                  << (first < 0 ? 0.0 : e.o[first]));
  if (lse == nullptr) return;
  const std::vector<double> gotLse = lse->to_dense();
  int64_t badLse = 0;
  for (size_t i = 0; i < gotLse.size(); ++i) {
    const bool ok = e.lse[i] == -kInf ? gotLse[i] == -kInf
                                      : std::abs(gotLse[i] - e.lse[i]) <= 2e-6 * (1.0 + std::abs(e.lse[i]));
    badLse += !ok;
  }
  CHECK_MESSAGE(badLse == 0, context << ": " << badLse << " LSE values off");
}

struct MergeCase {
  DType partialType, outType;
  int count;
  int64_t b, h, n, d;
  LayoutKind outLayout;
  bool withLse;
};

std::string describe(const MergeCase& c) {
  std::ostringstream text;
  text << c.count << " x " << dtype_name(c.partialType) << " -> " << dtype_name(c.outType) << " [" << c.b
       << ", " << c.h << ", " << c.n << ", " << c.d << "] out " << layout_name(c.outLayout)
       << (c.withLse ? " with LSE" : "");
  return text.str();
}

}  // namespace

TEST_SUITE_BEGIN("device");

TEST_CASE("merge: random partials against a float64 merge, every type pair and both paths") {
  const MergeCase cases[] = {
      {DType::bfloat16, DType::bfloat16, 3, 2, 4, 100, 512, LayoutKind::bhnd, true},
      {DType::float16, DType::float32, 7, 1, 3, 77, 102, LayoutKind::padded, true},   // scalar: D % 4
      {DType::float32, DType::bfloat16, 32, 1, 2, 64, 1024, LayoutKind::bnhd, true},
      {DType::float32, DType::float32, 1, 2, 2, 33, 1, LayoutKind::bhnd, true},       // a copy
      {DType::bfloat16, DType::float16, 5, 3, 1, 129, 576, LayoutKind::padded, false},  // scalar: odd strides
      {DType::float16, DType::float16, 2, 1, 8, 300, 64, LayoutKind::padded_aligned, true},
      {DType::bfloat16, DType::float32, 16, 1, 1, 1, 40, LayoutKind::bhnd, true},
      {DType::float32, DType::float16, 4, 2, 2, 50, 256, LayoutKind::bnhd, false},
      {DType::float16, DType::bfloat16, 9, 1, 2, 31, 8, LayoutKind::bhnd, true},
  };
  Handle handle;
  uint64_t start = 7100;
  for (const MergeCase& c : cases) {
    const std::string context = describe(c);
    INFO(context);
    Partials parts(c.count, c.partialType, c.b, c.h, c.n, c.d);
    fill_partials(parts, ++start);
    DeviceTensor o(c.outType, attention_layout(c.outLayout, c.b, c.h, c.n, c.d));
    DeviceTensor lse(DType::float32, lse_layout(c.outLayout, c.b, c.h, c.n));
    o.poison();
    lse.poison();
    const auto oPointers = parts.oPointers();
    const auto lsePointers = parts.lsePointers();
    check(ffpaAttentionMerge(handle.get(), c.count, parts.oDesc.get(), oPointers.data(), parts.lseDesc.get(),
                             lsePointers.data(), o.desc.get(), o.memory.get(),
                             c.withLse ? lse.desc.get() : nullptr,
                             c.withLse ? static_cast<float*>(lse.memory.get()) : nullptr),
          "ffpaAttentionMerge");
    o.download();
    lse.download();
    check_merged(context, o.host, c.withLse ? &lse.host : nullptr,
                 merge_in_float64(parts, c.b, c.h, c.n, c.d));
    CHECK_MESSAGE(o.host.gaps_untouched(), context << ": O written outside its elements");
    CHECK_MESSAGE(lse.host.gaps_untouched(), context << ": LSE written outside its elements");
    if (!c.withLse) {
      CHECK_MESSAGE(std::isnan(lse.host.get(0, 0, 0)), context << ": LSE written although not asked for");
    }
  }
}

TEST_CASE("merge: a running result updated in place, and the merge in a CUDA graph") {
  Handle handle;
  const int64_t b = 2, h = 3, n = 90, d = 192;
  Partials parts(6, DType::float32, b, h, n, d);  // fp32: the high-precision running result
  fill_partials(parts, 7200);
  const Expected expected = merge_in_float64(parts, b, h, n, d);

  // Result into slice 2 (O and LSE) from all six, the way a ring step folds a block in.
  auto oPointers = parts.oPointers();
  auto lsePointers = parts.lsePointers();
  void* o = const_cast<void*>(parts.oAt(2));
  float* lse = const_cast<float*>(parts.lseAt(2));

  cudaStream_t stream = nullptr;
  check_cuda(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
  handle.set_stream(stream);
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  check_cuda(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture");
  const ffpaStatus_t status = ffpaAttentionMerge(handle.get(), 6, parts.oDesc.get(), oPointers.data(),
                                                 parts.lseDesc.get(), lsePointers.data(), parts.oDesc.get(),
                                                 o, parts.lseDesc.get(), lse);
  check_cuda(cudaStreamEndCapture(stream, &graph), "cudaStreamEndCapture");
  check(status, "ffpaAttentionMerge (captured)");
  check_cuda(cudaGraphInstantiate(&exec, graph, 0), "cudaGraphInstantiate");
  check_cuda(cudaGraphLaunch(exec, stream), "cudaGraphLaunch");
  check_cuda(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  parts.o.download();
  parts.lse.download();

  // Slice 2 of the downloaded buffer, as its own host tensors.
  HostTensor merged(DType::float32, parts.slice);
  HostTensor mergedLse(DType::float32, parts.lseSlice);
  for (int64_t ib = 0; ib < b; ++ib)
    for (int64_t ih = 0; ih < h; ++ih)
      for (int64_t in = 0; in < n; ++in) {
        mergedLse.set(ib, ih, in, 0, parts.lse.host.get(2 * b + ib, ih, in));
        for (int64_t x = 0; x < d; ++x) merged.set(ib, ih, in, x, parts.o.host.get(2 * b + ib, ih, in, x));
      }
  check_merged("in place, replayed from a graph", merged, &mergedLse, expected);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  handle.set_stream(nullptr);
  cudaStreamDestroy(stream);
}

namespace {

// A range of keys [begin, end) attended with its own mask.
struct KeyRange {
  int64_t begin, end;
  CausalMask mask;
};

// A view of keys [begin, end) of a [B, H, N, D] tensor: same strides, fewer rows.
struct KeySlice {
  KeySlice(const DeviceTensor& t, const KeyRange& r)
      : layout(t.host.layout()),
        data(static_cast<const char*>(t.memory.get()) +
             r.begin * layout.strides[2] * dtype_bytes(t.host.dtype())) {
    layout.dims[2] = r.end - r.begin;
  }
  TensorLayout layout;
  const void* data;
};

// Attention of `problem` computed part by part over `ranges` (a partition of its keys), each part a
// forward call into its slice of `parts`, then merged into problem.o and problem.lse.
void split_and_merge(DeviceProblem& problem, const std::vector<KeyRange>& ranges, Partials& parts,
                     const Handle& handle, Workspace& workspace) {
  const DType type = problem.config().dtype;
  for (size_t i = 0; i < ranges.size(); ++i) {
    const KeySlice k(problem.k, ranges[i]), v(problem.v, ranges[i]);
    const TensorDescriptor kDesc(type, k.layout), vDesc(type, v.layout);
    const AttentionDescriptor attn(ranges[i].mask, problem.config().set_scale, problem.config().problem.scale);
    size_t bytes = 0;
    check(ffpaGetAttentionForwardWorkspaceSize(handle.get(), attn.get(), problem.q.desc.get(), kDesc.get(),
                                               vDesc.get(), parts.oDesc.get(), parts.lseDesc.get(), &bytes),
          "ffpaGetAttentionForwardWorkspaceSize");
    void* scratch = workspace.reserve(bytes);
    check(ffpaAttentionForward(handle.get(), attn.get(), problem.q.desc.get(), problem.q.memory.get(),
                               kDesc.get(), k.data, vDesc.get(), v.data, parts.oDesc.get(),
                               const_cast<void*>(parts.oAt(static_cast<int>(i))), parts.lseDesc.get(),
                               const_cast<float*>(parts.lseAt(static_cast<int>(i))), scratch, bytes),
          "ffpaAttentionForward");
  }
  problem.poison_forward_outputs();
  const auto oPointers = parts.oPointers();
  const auto lsePointers = parts.lsePointers();
  check(ffpaAttentionMerge(handle.get(), parts.count, parts.oDesc.get(), oPointers.data(), parts.lseDesc.get(),
                           lsePointers.data(), problem.o.desc.get(), problem.o.memory.get(),
                           problem.lse.desc.get(), static_cast<float*>(problem.lse.memory.get())),
        "ffpaAttentionMerge");
  check_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  problem.o.download();
  problem.lse.download();
}

}  // namespace

TEST_CASE("merge: attention split over key ranges and merged equals attention over all keys") {
  struct SplitCase {
    AttentionProblem shape;
    DType dtype;
    LayoutKind layout;
    std::vector<KeyRange> ranges;
  };
  const CausalMask none = CausalMask::none, causal = CausalMask::bottom_right;
  const std::vector<SplitCase> cases = {
      // Uneven chunks, GQA, the FFPA kernels' large head dim.
      {attention_shape(1, 4, 2, 100, 300, 512, 512, none), DType::bfloat16, LayoutKind::bhnd,
       {{0, 7, none}, {7, 128, none}, {128, 129, none}, {129, 300, none}}},
      // fp32 partials from the reference path (the high-precision reduction), padded output.
      // (Aligned gaps: each key range must start on a 16-byte boundary, as every tensor does.)
      {attention_shape(2, 2, 1, 64, 200, 96, 80, none), DType::float32, LayoutKind::padded_aligned,
       {{0, 100, none}, {100, 200, none}}},
      // A shared prefix every query sees, then the causal suffix: with bottom-right alignment the
      // suffix keeps the whole problem's diagonal, and its first query sees none of it (LSE -inf).
      {attention_shape(1, 2, 2, 120, 250, 576, 512, causal), DType::float16, LayoutKind::bnhd,
       {{0, 60, none}, {60, 131, none}, {131, 250, causal}}},
      // Small head dim, MQA, one part per 32 keys.
      {attention_shape(2, 4, 1, 33, 96, 64, 64, none), DType::bfloat16, LayoutKind::bhnd,
       {{0, 32, none}, {32, 64, none}, {64, 96, none}}},
  };
  Handle handle;
  Workspace workspace;
  uint64_t start = 7300;
  for (const SplitCase& c : cases) {
    const ProblemConfig config = make_config(c.shape, c.dtype, c.layout, 0.0);
    std::ostringstream context;
    context << config.to_string() << ", " << c.ranges.size() << " key ranges";
    INFO(context.str());
    DeviceProblem problem(config);
    problem.fill_inputs(++start);
    Partials parts(static_cast<int>(c.ranges.size()), c.dtype, c.shape.batch, c.shape.heads_q, c.shape.seq_q,
                   c.shape.dim_v);
    parts.o.poison();
    parts.lse.poison();
    split_and_merge(problem, c.ranges, parts, handle, workspace);
    check_forward_outputs(context.str(), problem, true);
  }
}


namespace {

// Uploads `values` as fp32 device memory.
DeviceBuffer device_floats(const std::vector<double>& values) {
  std::vector<float> floats(values.begin(), values.end());
  DeviceBuffer buffer(floats.size() * sizeof(float));
  buffer.upload(floats.data(), buffer.size());
  return buffer;
}

std::vector<float> host_floats(const DeviceBuffer& buffer, size_t count) {
  std::vector<float> values(count);
  buffer.download(values.data(), count * sizeof(float));
  return values;
}

}  // namespace

TEST_CASE("sinks: forward + ffpaAttentionApplySinks, backward and ffpaAttentionSinksBackward vs float64") {
  struct SinkCase {
    AttentionProblem shape;
    DType dtype;
    LayoutKind layout;
  };
  const std::vector<SinkCase> cases = {
      {attention_shape(2, 4, 2, 96, 96, 512, 512, CausalMask::none), DType::bfloat16, LayoutKind::bhnd},
      // Queries that see no key: O' = 0 and LSE' = the sink.
      {attention_shape(1, 3, 1, 80, 50, 128, 128, CausalMask::bottom_right), DType::float16, LayoutKind::bnhd},
      {attention_shape(1, 2, 2, 40, 70, 72, 48, CausalMask::top_left), DType::float32, LayoutKind::padded},
  };
  Handle handle;
  Workspace workspace;
  uint64_t start = 7400;
  for (const SinkCase& c : cases) {
    ProblemConfig config = make_config(c.shape, c.dtype, c.layout, 0.0);
    Random random(++start);
    for (int64_t h = 0; h < c.shape.heads_q; ++h) {
      // Logits a float holds exactly, from well below to above the rows' log-sum-exps.
      config.problem.sinks.push_back(static_cast<float>(random.uniform(-2.0, 5.0)));
    }
    const std::string context = config.to_string() + " with sinks";
    INFO(context);
    DeviceProblem problem(config);
    problem.fill_inputs(start);
    const DeviceBuffer sinks = device_floats(config.problem.sinks);

    problem.forward(handle, workspace, true);
    check(ffpaAttentionApplySinks(handle.get(), static_cast<const float*>(sinks.get()), problem.o.desc.get(),
                                  problem.o.memory.get(), problem.lse.desc.get(),
                                  static_cast<float*>(problem.lse.memory.get())),
          "ffpaAttentionApplySinks");
    problem.o.download();
    problem.lse.download();
    check_forward_outputs(context, problem, true);

    // dQ, dK, dV from O' and LSE' alone.
    problem.backward(handle, workspace);
    check_backward_outputs(context, problem);

    // The sinks' gradient, against float64 from the O' the device holds (as the backward's delta).
    DeviceBuffer d_sinks(c.shape.heads_q * sizeof(float));
    std::vector<float> runs[2];
    for (std::vector<float>& run : runs) {
      check_cuda(cudaMemset(d_sinks.get(), 0xff, d_sinks.size()), "cudaMemset");
      check(ffpaAttentionSinksBackward(handle.get(), static_cast<const float*>(sinks.get()), problem.o.desc.get(),
                                       problem.o.memory.get(), problem.d_o.desc.get(), problem.d_o.memory.get(),
                                       problem.lse.desc.get(), static_cast<const float*>(problem.lse.memory.get()),
                                       static_cast<float*>(d_sinks.get())),
            "ffpaAttentionSinksBackward");
      run = host_floats(d_sinks, static_cast<size_t>(c.shape.heads_q));
    }
    const std::vector<double> given_o = problem.o.host.to_dense();
    std::vector<double> dq, dk, dv, expected;
    attention_backward(config.problem, problem.q.host.to_dense(), problem.k.host.to_dense(),
                       problem.v.host.to_dense(), problem.d_o.host.to_dense(), &given_o, &dq, &dk, &dv,
                       &expected);
    for (int64_t h = 0; h < c.shape.heads_q; ++h) {
      CAPTURE(h);
      REQUIRE(std::isfinite(runs[0][h]));
      CHECK(std::abs(runs[0][h] - expected[h]) <= 1e-4 * std::abs(expected[h]) + 1e-5);
      CHECK(std::memcmp(&runs[0][h], &runs[1][h], sizeof(float)) == 0);  // the same bits twice
    }
  }
}

TEST_SUITE_END();
