#include "attention_checks.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <iterator>
#include <limits>
#include <sstream>

#include "common/random.h"

namespace device_tests {

using ffpa_tools::AttentionProblem;
using ffpa_tools::CausalMask;
using ffpa_tools::DeviceProblem;
using ffpa_tools::DType;
using ffpa_tools::HostTensor;
using ffpa_tools::LayoutKind;
using ffpa_tools::Pass;

std::string TestCase::to_string() const {
  std::ostringstream text;
  text << config.to_string() << (with_lse ? " with LSE" : " without LSE") << ", inputs from Random("
       << start << ")";
  return text.str();
}

std::vector<MatrixCase> head_dim_matrix(uint64_t start) {
  const struct {
    int64_t qk, v;
  } dims[] = {{32, 32},   {64, 64},   {128, 128}, {256, 256}, {320, 320},   {384, 384}, {448, 448},
              {512, 512}, {576, 576}, {640, 640}, {768, 768}, {1024, 1024}, {576, 512}};
  const CausalMask masks[] = {CausalMask::none, CausalMask::top_left, CausalMask::bottom_right};
  // (Nq, Nkv): tails of every tile size, fewer and more queries than keys.
  const int64_t lengths[][2] = {{100, 257}, {257, 100}, {193, 193}};
  // (B, Hq, Hkv): MHA, GQA, MQA with an odd group.
  const int64_t heads[][3] = {{2, 2, 2}, {1, 4, 2}, {2, 3, 1}};
  const LayoutKind layouts[] = {LayoutKind::bhnd, LayoutKind::bnhd, LayoutKind::padded_aligned};
  std::vector<MatrixCase> cases;
  for (size_t s = 0; s < std::size(dims); ++s) {
    for (size_t c = 0; c < 3; ++c) {
      const int64_t* n = lengths[(s + c) % 3];
      const int64_t* h = heads[(s + 2 * c) % 3];
      const DType dtype = (s + c) % 2 == 0 ? DType::float16 : DType::bfloat16;
      const AttentionProblem shape =
          ffpa_tools::attention_shape(h[0], h[1], h[2], n[0], n[1], dims[s].qk, dims[s].v, masks[c]);
      const double scale = masks[c] == CausalMask::top_left ? 1.5 * ffpa_tools::default_scale(dims[s].qk) : 0.0;
      cases.push_back({s, c, {ffpa_tools::make_config(shape, dtype, layouts[s % 3], scale), true, start + 3 * s + c}});
    }
  }
  return cases;
}

std::vector<TestCase> feature_matrix(Pass pass) {
  const DType dtypes[] = {DType::float16, DType::bfloat16, DType::float32};
  const CausalMask masks[] = {CausalMask::none, CausalMask::top_left, CausalMask::bottom_right};
  const LayoutKind layouts[] = {LayoutKind::bhnd, LayoutKind::bnhd, LayoutKind::padded};
  const int64_t base_lengths[] = {1, 7, 100, 257};
  const int64_t small_dims[] = {1, 16, 5, 33, 24, 8};
  std::vector<TestCase> cases;
  for (int i = 0; i < 27; ++i) {
    // Every (dtype, mask, relation) triple once; the other features rotate across them.
    const int dtype_at = i % 3;
    const int mask_at = (i / 3) % 3;
    const int relation = i / 9;  // 0: Nq == Nkv, 1: Nq < Nkv, 2: Nq > Nkv
    ffpa_tools::Random random(1000 + static_cast<uint64_t>(i));
    AttentionProblem p;
    p.causal = masks[mask_at];

    switch ((dtype_at + mask_at + relation) % 3) {
      case 0:
        p.heads_kv = random.range(1, 3);
        p.heads_q = p.heads_kv;
        break;  // MHA
      case 1:
        p.heads_kv = 2;
        p.heads_q = 2 * random.range(2, 3);
        break;  // GQA
      default:
        p.heads_kv = 1;
        p.heads_q = random.range(2, 4);
        break;  // MQA
    }
    p.batch = p.heads_q > 3 ? 1 : random.range(1, 2);

    int64_t max_length = 257;  // large head dims get short sequences to keep the CPU side quick
    switch (i % 5) {
      case 0: p.dim_qk = p.dim_v = small_dims[i / 5]; break;
      case 1:
        p.dim_qk = 40;
        p.dim_v = 24;
        break;
      case 2: p.dim_qk = p.dim_v = random.range(25, 256); break;
      case 3:
        p.dim_qk = 576;
        p.dim_v = 512;
        max_length = 64;
        break;
      default:
        p.dim_qk = p.dim_v = (i / 5) % 2 == 0 ? 1024 : random.range(700, 1023);
        max_length = 64;
        break;
    }

    int64_t base = base_lengths[i % 4];
    if (base > max_length) base = random.range(2, max_length);
    p.seq_q = p.seq_kv = base;
    if (relation == 1) p.seq_kv = base + random.range(1, 64);
    if (relation == 2) p.seq_q = base + random.range(1, 64);
    if (pass == Pass::backward) {
      // A query that sees a single key has a zero gradient for Q and K; keep one that sees two.
      p.seq_kv = std::max<int64_t>(p.seq_kv, 2);
      if (p.causal == CausalMask::top_left) p.seq_q = std::max<int64_t>(p.seq_q, 2);
    }

    const bool explicit_scale = (i + mask_at) % 2 == 1;
    const double scale =
        explicit_scale ? ffpa_tools::default_scale(p.dim_qk) * random.uniform(0.5, 2.0) : 0.0;
    TestCase test;
    const LayoutKind layout = layouts[(dtype_at + 2 * mask_at + relation) % 3];
    test.config = ffpa_tools::make_config(p, dtypes[dtype_at], layout, scale);
    test.with_lse = pass == Pass::backward || (i + relation) % 4 != 3;
    test.start = 2000 + static_cast<uint64_t>(i) + (pass == Pass::backward ? 100 : 0);
    cases.push_back(test);
  }
  return cases;
}

ffpa_tools::ProblemConfig ShapeRow::config() const {
  return ffpa_tools::make_config(ffpa_tools::attention_shape(b, hq, hkv, nq, nkv, dqk, dv, mask), dtype, layout, 0.0);
}

CpuForward cpu_forward(const DeviceProblem& problem) {
  CpuForward out;
  ffpa_tools::attention_forward(problem.config().problem, problem.q.host.to_dense(),
                                problem.k.host.to_dense(), problem.v.host.to_dense(), &out.o,
                                &out.lse);
  return out;
}

CpuBackward cpu_backward(const DeviceProblem& problem, const std::vector<double>* o) {
  CpuBackward out;
  ffpa_tools::attention_backward(problem.config().problem, problem.q.host.to_dense(),
                                 problem.k.host.to_dense(), problem.v.host.to_dense(),
                                 problem.d_o.host.to_dense(), o, &out.dq, &out.dk, &out.dv);
  return out;
}

void check_close(const std::string& context, const std::string& name, const HostTensor& actual,
                 const std::vector<double>& expected, Pass pass, double rounding_baseline) {
  const ffpa_tools::ErrorStats error = ffpa_tools::compare(actual.to_dense(), expected);
  const double allowed =
      ffpa_tools::allowed_relative_error(actual.dtype(), pass, rounding_baseline);
  CHECK_MESSAGE(error.rel_l2 <= allowed, context
                                             << ": " << name << " vs float64: " << error.to_string()
                                             << "; allowed rel L2 " << allowed
                                             << " (rounding alone: " << rounding_baseline << ")");
}

namespace {

// Elements that are not exactly 0 in the rows (third index) for which `selected(row)` holds, over
// every batch and head of a [B, H, N, D] tensor. NaN counts.
int64_t nonzero_in_rows(const HostTensor& tensor, const std::function<bool(int64_t, int64_t)>& selected) {
  const int64_t* d = tensor.layout().dims;
  int64_t count = 0;
  for (int64_t b = 0; b < d[0]; ++b)
    for (int64_t h = 0; h < d[1]; ++h)
      for (int64_t n = 0; n < d[2]; ++n)
        if (selected(b, n))
          for (int64_t x = 0; x < d[3]; ++x) count += tensor.get(b, h, n, x) != 0.0;
  return count;
}

// holds(i, b) for each batch entry b of `p` and i < n, b-major: per (batch entry, query row)
// whether the row sees no key at all, or per (batch entry, key) whether no query sees it (with
// per-batch key lengths, the entries differ).
std::vector<bool> per_batch_entry(const AttentionProblem& p, int64_t n,
                                  const std::function<bool(int64_t, int64_t)>& holds) {
  std::vector<bool> result(static_cast<size_t>(p.batch * n));
  for (int64_t b = 0; b < p.batch; ++b)
    for (int64_t i = 0; i < n; ++i) result[static_cast<size_t>(b * n + i)] = holds(i, b);
  return result;
}
std::vector<bool> masked_queries(const AttentionProblem& p) {
  return per_batch_entry(p, p.seq_q, [&](int64_t row, int64_t b) { return p.sees_no_key(row, b); });
}
std::vector<bool> unseen_keys(const AttentionProblem& p) {
  return per_batch_entry(p, p.seq_kv, [&](int64_t key, int64_t b) { return p.seen_by_no_query(key, b); });
}

void check_gaps(const std::string& context, const std::string& name, const HostTensor& tensor) {
  CHECK_MESSAGE(tensor.gaps_untouched(),
                context << ": " << name << " was written outside its elements (layout gaps)");
}

}  // namespace

void check_masked_rows(const std::string& context, const DeviceProblem& problem, bool with_lse) {
  const AttentionProblem& p = problem.config().problem;
  const std::vector<bool> masked = masked_queries(p);
  const auto masked_query = [&](int64_t b, int64_t row) { return masked[static_cast<size_t>(b * p.seq_q + row)]; };
  CHECK_MESSAGE(nonzero_in_rows(problem.o.host, masked_query) == 0,
                context << ": O of a query that sees no key must be exactly 0");
  if (!with_lse) return;
  // -inf, or with attention sinks the head's sink logit (exactly: the only term of the sum).
  int64_t masked_wrong = 0;
  for (int64_t b = 0; b < p.batch; ++b)
    for (int64_t h = 0; h < p.heads_q; ++h)
      for (int64_t i = 0; i < p.seq_q; ++i)
        if (masked_query(b, i)) masked_wrong += !(problem.lse.host.get(b, h, i) == p.sink_of(h));
  CHECK_MESSAGE(masked_wrong == 0,
                context << ": LSE of a query that sees no key must be -inf (or its head's sink)");
}

void check_forward_gaps(const std::string& context, const DeviceProblem& problem, bool with_lse) {
  check_gaps(context, "O", problem.o.host);
  if (with_lse) check_gaps(context, "LSE", problem.lse.host);
}

void check_forward_outputs(const std::string& context, const DeviceProblem& problem,
                           bool with_lse) {
  const CpuForward expected = cpu_forward(problem);
  check_close(context, "O", problem.o.host, expected.o, Pass::forward,
              ffpa_tools::rounding_error(expected.o, problem.o.host.dtype()).rel_l2);
  check_masked_rows(context, problem, with_lse);
  check_forward_gaps(context, problem, with_lse);
  if (!with_lse) return;

  // LSE is fp32 from fp32 scores: compared in absolute terms. Equal -inf count as exact.
  const ffpa_tools::ErrorStats error =
      ffpa_tools::compare(problem.lse.host.to_dense(), expected.lse);
  CHECK_MESSAGE(error.max_abs <= 1e-4, context << ": LSE vs float64: " << error.to_string());
}

void check_backward_outputs(const std::string& context, const DeviceProblem& problem) {
  const AttentionProblem& p = problem.config().problem;
  const DType dtype = problem.config().dtype;
  // What the backward is given as O: the exact O rounded to the output type.
  std::vector<double> given_o = cpu_forward(problem).o;
  for (double& value : given_o) value = ffpa_tools::round_to(dtype, value);
  const CpuBackward exact = cpu_backward(problem, nullptr);
  const CpuBackward from_given_o = cpu_backward(problem, &given_o);
  const struct {
    const char* name;
    const HostTensor& actual;
    const std::vector<double>& exact;
    const std::vector<double>& from_given_o;
  } gradients[] = {
      {"dQ", problem.dq.host, exact.dq, from_given_o.dq},
      {"dK", problem.dk.host, exact.dk, from_given_o.dk},
      {"dV", problem.dv.host, exact.dv, from_given_o.dv},
  };
  for (const auto& gradient : gradients) {
    const double baseline = ffpa_tools::rounding_error(gradient.exact, dtype).rel_l2 +
                            ffpa_tools::compare(gradient.from_given_o, gradient.exact).rel_l2;
    check_close(context, gradient.name, gradient.actual, gradient.exact, Pass::backward, baseline);
    check_gaps(context, gradient.name, gradient.actual);
  }

  const std::vector<bool> masked = masked_queries(p);
  const std::vector<bool> unseen = unseen_keys(p);
  const auto masked_query = [&](int64_t b, int64_t row) { return masked[static_cast<size_t>(b * p.seq_q + row)]; };
  const auto unseen_key = [&](int64_t b, int64_t key) { return unseen[static_cast<size_t>(b * p.seq_kv + key)]; };
  CHECK_MESSAGE(nonzero_in_rows(problem.dq.host, masked_query) == 0,
                context << ": dQ of a query that sees no key must be exactly 0");
  CHECK_MESSAGE(nonzero_in_rows(problem.dk.host, unseen_key) == 0,
                context << ": dK of a key no query sees must be exactly 0");
  CHECK_MESSAGE(nonzero_in_rows(problem.dv.host, unseen_key) == 0,
                context << ": dV of a key no query sees must be exactly 0");
}

void run_and_check(const ffpa_tools::Handle& handle, ffpa_tools::Workspace& workspace,
                   const TestCase& test, Checked checked) {
  const std::string context = test.to_string();
  INFO(context);
  DeviceProblem problem(test.config);
  problem.attach_slices(handle);
  problem.fill_inputs(test.start);
  // The backward needs the LSE of the forward.
  const bool with_lse = test.with_lse || checked != Checked::forward;
  problem.forward(handle, workspace, with_lse);
  if (checked != Checked::backward) check_forward_outputs(context, problem, with_lse);
  if (checked == Checked::forward) return;
  problem.backward(handle, workspace);
  check_backward_outputs(context, problem);
}

void nan_past_key_lengths(DeviceProblem& problem) {
  const AttentionProblem& p = problem.config().problem;
  if (p.key_lengths.empty()) return;
  constexpr double kNan = std::numeric_limits<double>::quiet_NaN();
  for (int64_t b = 0; b < p.batch; ++b) {
    for (int64_t h = 0; h < p.heads_kv; ++h) {
      for (int64_t key = p.keys_of(b); key < p.seq_kv; ++key) {
        for (int64_t d = 0; d < p.dim_qk; ++d) problem.k.host.set(b, h, key, d, kNan);
        for (int64_t d = 0; d < p.dim_v; ++d) problem.v.host.set(b, h, key, d, kNan);
      }
    }
  }
  problem.k.upload();
  problem.v.upload();
}

bool all_poison(const HostTensor& tensor) {
  const auto* bytes = static_cast<const unsigned char*>(tensor.data());
  return std::all_of(bytes, bytes + tensor.size_bytes(), [](unsigned char b) { return b == 0xff; });
}

void check_nearly_identical(const std::string& context, const std::string& name,
                            const HostTensor& actual, const HostTensor& expected) {
  const ffpa_tools::ErrorStats error = ffpa_tools::compare(actual, expected);
  // A different order of fp32 sums may move a 16-bit result by one unit in the last place in a
  // few elements; that stays far below a quarter of the unit roundoff in relative L2.
  const double allowed = std::max(0.25 * ffpa_tools::unit_roundoff(actual.dtype()), 1e-5);
  CHECK_MESSAGE(error.rel_l2 <= allowed, context << ": " << name
                                                 << " differs: " << error.to_string()
                                                 << "; allowed rel L2 " << allowed);
}

// The items of the list `key` of ffpaGetBuildInfo() ("...; head dims 128,256,320; ..."); empty
// when the text has no such list.
std::vector<std::string> build_info_list(const std::string& key) {
  const std::string info = ffpaGetBuildInfo();
  std::vector<std::string> items;
  const size_t start = info.find(key + " ");
  if (start == std::string::npos) return items;
  const size_t from = start + key.size() + 1;
  std::istringstream list(info.substr(from, info.find(';', start) - from));
  for (std::string item; std::getline(list, item, ',');) items.push_back(item);
  return items;
}

// Whether the current GPU has compute capability 9.0 (the sm_90a kernels' only target).
static bool hopper_device() {
  int device = 0;
  cudaDeviceProp props{};
  ffpa_tools::check_cuda(cudaGetDevice(&device), "cudaGetDevice");
  ffpa_tools::check_cuda(cudaGetDeviceProperties(&props, device), "cudaGetDeviceProperties");
  return props.major == 9 && props.minor == 0;
}

// Whether the build compiled sm_90a code.
static bool hopper_compiled() {
  const std::vector<std::string> archs = build_info_list("architectures");
  return std::find(archs.begin(), archs.end(), "90a") != archs.end();
}

// hopper_device() and hopper_compiled(), and a MESSAGE saying why not.
bool hopper_runs_here() {
  if (!hopper_compiled()) {
    MESSAGE("not run: this build compiles no sm_90a code");
    return false;
  }
  if (!hopper_device()) {
    MESSAGE("not run: the GPU is not of compute capability 9.0");
    return false;
  }
  return true;
}

}  // namespace device_tests
