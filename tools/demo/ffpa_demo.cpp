// ffpa-demo: libffpa's attention forward and backward on one problem, checked and timed.
//
// Checks: every output against a second handle forced onto the cuBLASLt reference backend
// (FFPA_POLICY_REFERENCE_BACKEND), and O and dQ of a few sampled query rows against float64 CPU
// attention (each row costs O(Nkv * D) on the CPU, so any size stays cheap). Timing: CUDA events
// around each call on the handle's stream, warm-up runs first, then the median of --repeat runs.
// Exit status: 0 every check passed, 1 a check failed, 2 bad options, 77 no usable GPU.
#include <cuda_runtime.h>
#include <ffpa/ffpa.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <vector>

#include "common/cpu_attention.h"
#include "common/device_attention.h"
#include "common/error_metrics.h"
#include "common/random.h"
#include "demo_options.h"

using namespace ffpa_tools;

namespace {

constexpr uint64_t kInputStart = 1;  // the inputs are the same in every run of the demo
constexpr int kSampledRows = 8;

// Owners of the CUDA objects the demo creates.
struct Stream {
  Stream() { check_cuda(cudaStreamCreate(&stream), "cudaStreamCreate"); }
  ~Stream() { cudaStreamDestroy(stream); }
  cudaStream_t stream = nullptr;
};

// The standard count: 2 * B * Hq * Nq * Nkv * (Dqk + Dv), halved with a causal mask.
double forward_flops(const AttentionProblem& p) {
  const double flops = 2.0 * p.batch * p.heads_q * p.seq_q * p.seq_kv * (p.dim_qk + p.dim_v);
  return p.causal == CausalMask::none ? flops : flops / 2.0;
}

struct Outputs {
  HostTensor o, lse, dq, dk, dv;
};

Outputs run_both_passes(const Handle& handle, DeviceProblem& problem, Workspace& workspace) {
  problem.forward(handle, workspace, true);
  problem.backward(handle, workspace);
  return {problem.o.host, problem.lse.host, problem.dq.host, problem.dk.host, problem.dv.host};
}

// Relative L2 errors of O and dQ on sampled query rows against float64 attention, with what
// rounding alone costs: rounding the exact rows to the output type, and for dQ also computing
// delta = dO . O from the rounded O the backward is given.
struct SampledRowErrors {
  ErrorStats o, dq;
  double o_rounding = 0.0, dq_rounding = 0.0;
};

SampledRowErrors check_sampled_rows(const DeviceProblem& problem, const Outputs& tested) {
  const AttentionProblem& p = problem.config().problem;
  const DType dtype = problem.config().dtype;
  Random random(kInputStart + 1);
  ErrorAccumulator o_error, dq_error, o_rounding, dq_rounding, dq_given_o;
  std::vector<double> q_row(p.dim_qk), do_row(p.dim_v), o_row(p.dim_v), given_o_row(p.dim_v);
  std::vector<double> dq_row(p.dim_qk), dq_from_given_o(p.dim_qk);
  for (int sample = 0; sample < kSampledRows; ++sample) {
    // The first and last rows (a fully masked one, with bottom-right and Nq > Nkv), then any.
    const int64_t row = sample == 0 ? 0 : sample == 1 ? p.seq_q - 1 : random.range(0, p.seq_q - 1);
    const int64_t b = random.range(0, p.batch - 1);
    const int64_t h = random.range(0, p.heads_q - 1);
    const std::vector<double> k_head = problem.k.host.head_matrix(b, p.kv_head_of(h));
    const std::vector<double> v_head = problem.v.host.head_matrix(b, p.kv_head_of(h));
    for (int64_t d = 0; d < p.dim_qk; ++d) q_row[d] = problem.q.host.get(b, h, row, d);
    for (int64_t d = 0; d < p.dim_v; ++d) do_row[d] = problem.d_o.host.get(b, h, row, d);
    attention_row(p, row, q_row.data(), k_head.data(), v_head.data(), o_row.data());
    for (int64_t d = 0; d < p.dim_v; ++d) given_o_row[d] = round_to(dtype, o_row[d]);
    attention_row_backward(p, row, q_row.data(), k_head.data(), v_head.data(), do_row.data(),
                           nullptr, dq_row.data(), nullptr, nullptr);
    attention_row_backward(p, row, q_row.data(), k_head.data(), v_head.data(), do_row.data(),
                           given_o_row.data(), dq_from_given_o.data(), nullptr, nullptr);
    for (int64_t d = 0; d < p.dim_v; ++d) {
      o_error.add(tested.o.get(b, h, row, d), o_row[d]);
      o_rounding.add(given_o_row[d], o_row[d]);
    }
    for (int64_t d = 0; d < p.dim_qk; ++d) {
      dq_error.add(tested.dq.get(b, h, row, d), dq_row[d]);
      dq_rounding.add(round_to(dtype, dq_row[d]), dq_row[d]);
      dq_given_o.add(dq_from_given_o[d], dq_row[d]);
    }
  }
  return {o_error.result(), dq_error.result(), o_rounding.result().rel_l2,
          dq_rounding.result().rel_l2 + dq_given_o.result().rel_l2};
}

struct PassReport {
  const char* name;
  double milliseconds;
  double flops;
  double vs_reference, allowed_vs_reference;
  double vs_cpu, allowed_vs_cpu;

  bool ok() const { return vs_reference <= allowed_vs_reference && vs_cpu <= allowed_vs_cpu; }
};

void print_table(const PassReport (&passes)[2]) {
  std::printf("\n%-9s %10s %9s %18s %18s  %s\n", "pass", "time (ms)", "TFLOPS", "err vs reference",
              "err vs CPU (rows)", "verdict");
  for (const PassReport& pass : passes) {
    std::printf("%-9s %10.3f %9.2f %18.3e %18.3e  %s\n", pass.name, pass.milliseconds,
                pass.flops / (pass.milliseconds * 1e-3) / 1e12, pass.vs_reference, pass.vs_cpu,
                pass.ok() ? "ok" : "FAILED");
  }
  std::printf("(errors are relative L2; allowed: forward %.2e / %.2e, backward %.2e / %.2e)\n",
              passes[0].allowed_vs_reference, passes[0].allowed_vs_cpu,
              passes[1].allowed_vs_reference, passes[1].allowed_vs_cpu);
}

void print_header(const Handle& handle, const ProblemConfig& config) {
  ffpaDeviceDesc_t device;
  std::memset(&device, 0, sizeof device);
  device.structSize = sizeof device;
  check(ffpaGetDeviceDesc(handle.get(), &device), "ffpaGetDeviceDesc");
  std::printf("ffpa-demo: %s\n", ffpaGetBuildInfo());
  std::printf("device:    %s (sm_%d, %d SMs)\n", device.name, device.smVersion, device.smCount);
  std::printf("problem:   %s\n", config.to_string().c_str());
}

int run_demo(const ffpa_demo::DemoOptions& options, Handle& handle) {
  const ProblemConfig config = make_config(options.problem(), options.dtype, LayoutKind::bhnd, 0.0);
  print_header(handle, config);
  Stream stream;
  handle.set_stream(stream.stream);
  Handle reference;
  reference.set_policy(FFPA_POLICY_REFERENCE_BACKEND, 1);
  reference.set_stream(stream.stream);

  DeviceProblem problem(config);
  problem.fill_inputs(kInputStart);
  Workspace workspace;
  const Outputs tested = run_both_passes(handle, problem, workspace);
  const Outputs expected = run_both_passes(reference, problem, workspace);
  const SampledRowErrors rows = check_sampled_rows(problem, tested);

  const double o_vs_reference = compare(tested.o, expected.o).rel_l2;
  const double dq_vs_reference = compare(tested.dq, expected.dq).rel_l2;
  const double dk_vs_reference = compare(tested.dk, expected.dk).rel_l2;
  const double dv_vs_reference = compare(tested.dv, expected.dv).rel_l2;
  const double lse_vs_reference = compare(tested.lse, expected.lse).max_abs;
  std::printf("vs reference: O %.3e, LSE max abs %.3e, dQ %.3e, dK %.3e, dV %.3e\n", o_vs_reference,
              lse_vs_reference, dq_vs_reference, dk_vs_reference, dv_vs_reference);
  std::printf("vs CPU (%d sampled rows): O %s; dQ %s\n", kSampledRows, rows.o.to_string().c_str(),
              rows.dq.to_string().c_str());

  // Timing: the forward leaves O and LSE in place for the backward.
  const size_t forward_bytes = problem.forward_workspace_size(handle, true);
  const size_t backward_bytes = problem.backward_workspace_size(handle);
  void* const scratch = workspace.reserve(std::max(forward_bytes, backward_bytes));
  const double forward_ms =
      time_calls(stream.stream, options.warmup, options.repeat, [&](int64_t) {
        problem.enqueue_forward(handle, scratch, forward_bytes, true);
      }).median_ms;
  const double backward_ms =
      time_calls(stream.stream, options.warmup, options.repeat, [&](int64_t) {
        problem.enqueue_backward(handle, scratch, backward_bytes);
      }).median_ms;

  // Against float64, allowed_relative_error() uses what rounding costs on the sampled rows. Two
  // results in the same type differ by about a unit roundoff, plus in the backward what the
  // rounded O costs (each backward uses the O of its own forward).
  const double unit = unit_roundoff(config.dtype);
  const double flops = forward_flops(config.problem);
  // LSE is fp32 whatever the dtype: a difference above 1e-4 makes the forward fail too.
  const double forward_vs_reference =
      lse_vs_reference <= 1e-4 ? o_vs_reference : std::numeric_limits<double>::infinity();
  const PassReport passes[2] = {
      {"forward", forward_ms, flops, forward_vs_reference,
       allowed_relative_error(config.dtype, Pass::forward, unit), rows.o.rel_l2,
       allowed_relative_error(config.dtype, Pass::forward, rows.o_rounding)},
      {"backward", backward_ms, 2.5 * flops,
       std::max({dq_vs_reference, dk_vs_reference, dv_vs_reference}),
       allowed_relative_error(config.dtype, Pass::backward, unit + rows.dq_rounding),
       rows.dq.rel_l2,
       allowed_relative_error(config.dtype, Pass::backward, rows.dq_rounding)},
  };
  print_table(passes);
  const bool ok = passes[0].ok() && passes[1].ok();
  std::printf("%s\n", ok ? "ffpa-demo: all checks passed" : "ffpa-demo: a check FAILED");
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  ffpa_demo::DemoOptions options;
  int exit_code = 0;
  if (!ffpa_demo::parse_demo_options(argc, argv, &options, &exit_code)) return exit_code;

  std::unique_ptr<Handle> handle;
  try {
    handle = std::make_unique<Handle>();
  } catch (const CallFailed& failure) {
    if (failure.status() == FFPA_STATUS_NOT_INITIALIZED_NO_DEVICE) {
      std::printf("ffpa-demo: no usable CUDA GPU: %s\n", last_error_message().c_str());
      return 77;
    }
    std::fprintf(stderr, "ffpa-demo: %s\n", failure.what());
    return 1;
  }
  try {
    return run_demo(options, *handle);
  } catch (const std::exception& failure) {
    std::fprintf(stderr, "ffpa-demo: %s\n", failure.what());
    return 1;
  }
}
