// The sm80 forward kernels on a GPU: the shape matrix of head dims (with d_qk != d_v), tails,
// both causal alignments, MHA/GQA/MQA, both layouts, both dtypes and every accumulator mode, each
// against float64 attention and against the cuBLASLt reference on the same inputs; every knob
// setting the planner accepts; repeatability.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "attention_checks.h"

using namespace ffpa_tools;
using namespace device_tests;

namespace {

// The "kernel: ..." line of the forward plan of `problem` on `handle`.
std::string planned_kernel(const Handle& handle, const DeviceProblem& problem) {
  size_t length = 0;
  check(ffpaDescribeAttentionForwardPlan(handle.get(), problem.attention.get(), problem.q.desc.get(),
                                         problem.k.desc.get(), problem.v.desc.get(), problem.o.desc.get(),
                                         problem.lse.desc.get(), nullptr, 0, &length),
        "ffpaDescribeAttentionForwardPlan");
  std::string text(length, '\0');
  check(ffpaDescribeAttentionForwardPlan(handle.get(), problem.attention.get(), problem.q.desc.get(),
                                         problem.k.desc.get(), problem.v.desc.get(), problem.o.desc.get(),
                                         problem.lse.desc.get(), text.data(), length + 1, nullptr),
        "ffpaDescribeAttentionForwardPlan");
  const size_t start = text.find("\nkernel: ") + 9;
  return text.substr(start, text.find('\n', start) - start);
}

// fp16 accumulators round every partial sum to 11 bits: Q K^T sums of d_qk products and the
// unnormalized O. Their own bound (relative L2 against float64), and for LSE an absolute one.
constexpr double kHalfAccumulatorBound = 2e-2;
constexpr double kHalfAccumulatorLseBound = 2e-2;

// The fast kernel's O against the reference path's O on the same inputs: both are within their
// float64 bound already; this catches a kernel that is wrong in a way float64 cannot see (e.g.
// both wrong the same way is impossible: the reference has its own tests).
void check_against_reference(const std::string& context, const HostTensor& fast, const HostTensor& reference,
                             double bound) {
  const ErrorStats error = compare(fast, reference);
  CHECK_MESSAGE(error.rel_l2 <= bound, context << ": fast vs reference path: " << error.to_string());
}

// Runs the problem on `fast` (which must plan an sm80.forward instance), checks it against
// float64 (with the standard criterion for fp32 accumulation, the fp16-accumulator bound
// otherwise), and against the reference path's O on the same inputs.
void check_case(const Handle& fast, const Handle& reference, Workspace& workspace, const TestCase& test,
                bool halfAccumulator) {
  const std::string context = test.to_string() + (halfAccumulator ? " [fp16 accumulator]" : "");
  INFO(context);
  DeviceProblem problem(test.config);
  problem.fill_inputs(test.start);
  const std::string kernel = planned_kernel(fast, problem);
  CHECK_MESSAGE(kernel.rfind("sm80.forward.", 0) == 0, context << ": planned " << kernel);

  problem.forward(reference, workspace, test.with_lse);
  const HostTensor reference_o = problem.o.host;
  problem.forward(fast, workspace, test.with_lse);  // poisons O and LSE first
  if (!halfAccumulator) {
    check_forward_outputs(context + " " + kernel, problem, test.with_lse);
    check_against_reference(context, problem.o.host, reference_o,
                            allowed_relative_error(test.config.dtype, Pass::forward, 0.0) + 2e-2);
    return;
  }
  const CpuForward expected = cpu_forward(problem);
  const ErrorStats error = compare(problem.o.host.to_dense(), expected.o);
  CHECK_MESSAGE(error.rel_l2 <= kHalfAccumulatorBound, context << " " << kernel << ": O vs float64: "
                                                               << error.to_string());
  CHECK_MESSAGE(!std::isnan(error.rel_l2), context << ": NaN in O");
  if (test.with_lse) {
    const ErrorStats lse = compare(problem.lse.host.to_dense(), expected.lse);
    CHECK_MESSAGE(lse.max_abs <= kHalfAccumulatorLseBound, context << ": LSE vs float64: " << lse.to_string());
  }
}

struct Shape {
  int64_t dqk, dv;
};

// The head dims of the matrix, (576, 512) included.
const std::vector<Shape>& head_dims() {
  static const std::vector<Shape> dims = {{32, 32},   {64, 64},   {128, 128}, {256, 256}, {320, 320},
                                          {384, 384}, {448, 448}, {512, 512}, {576, 576}, {640, 640},
                                          {768, 768}, {1024, 1024}, {576, 512}};
  return dims;
}

}  // namespace

TEST_SUITE_BEGIN("device");

TEST_CASE("sm80 forward: every head dim, tails, masks, head groupings, layouts and dtypes") {
  Handle fast;
  Handle reference;
  reference.set_policy(FFPA_POLICY_REFERENCE_BACKEND, 1);
  Workspace workspace;
  const CausalMask masks[] = {CausalMask::none, CausalMask::top_left, CausalMask::bottom_right};
  const DType dtypes[] = {DType::float16, DType::bfloat16};
  const LayoutKind layouts[] = {LayoutKind::bhnd, LayoutKind::bnhd};
  // (Hq, Hkv): MHA, GQA, MQA. (Nq, Nkv): tails, fewer and more queries than keys.
  const int64_t heads[][2] = {{2, 2}, {4, 2}, {3, 1}};
  const int64_t lengths[][2] = {{100, 257}, {257, 100}, {130, 130}};
  uint64_t start = 41000;
  int index = 0;
  for (const Shape& d : head_dims()) {
    // A covering design: each dim sees every mask and both dtypes (every dtype x mask pair over
    // the dims), and the other factors rotate.
    for (int variant = 0; variant < 2; ++variant, ++index) {
      const CausalMask mask = masks[(index + variant) % 3];
      const DType dtype = dtypes[(index / 3 + variant) % 2];
      const LayoutKind layout = layouts[index % 2];
      const auto& h = heads[index % 3];
      const auto& n = lengths[(index / 2) % 3];
      const TestCase test{
          make_config(attention_shape(1 + variant, h[0], h[1], n[0], n[1], d.dqk, d.dv, mask), dtype, layout,
                      variant ? 0.07 : 0.0),
          index % 4 != 3, start++};
      check_case(fast, reference, workspace, test, false);
    }
  }
}

TEST_CASE("sm80 forward: each fp16 accumulator mode") {
  Handle reference;
  reference.set_policy(FFPA_POLICY_REFERENCE_BACKEND, 1);
  Workspace workspace;
  const ffpaAccumulator_t modes[] = {FFPA_ACCUMULATOR_QK_F16, FFPA_ACCUMULATOR_PV_F16, FFPA_ACCUMULATOR_F16};
  uint64_t start = 42000;
  for (const ffpaAccumulator_t mode : modes) {
    Handle fast;
    fast.set_policy(FFPA_POLICY_ACCUMULATOR, mode);
    for (const Shape d : {Shape{64, 64}, Shape{128, 128}, Shape{320, 320}, Shape{512, 512}, Shape{576, 512},
                          Shape{1024, 1024}}) {
      const TestCase test{make_config(attention_shape(1, 4, 2, 200, 333, d.dqk, d.dv, CausalMask::bottom_right),
                                      DType::float16, LayoutKind::bhnd, 0.0),
                          true, start++};
      check_case(fast, reference, workspace, test, true);
    }
  }
}

TEST_CASE("sm80 forward: every knob setting the planner accepts computes the same attention") {
  Handle reference;
  reference.set_policy(FFPA_POLICY_REFERENCE_BACKEND, 1);
  Workspace workspace;
  struct Setting {
    ffpaPolicyKnob_t knob;
    int32_t value;
  };
  const Setting settings[] = {
      {FFPA_POLICY_STAGES, 1},           {FFPA_POLICY_STAGES, 2},           {FFPA_POLICY_STAGES, 3},
      {FFPA_POLICY_STAGES, 4},           {FFPA_POLICY_PREFETCH_QKV, 0},     {FFPA_POLICY_QKV_SMEM_SHARE, 1},
      {FFPA_POLICY_SMEM_SWIZZLE_Q, 0},   {FFPA_POLICY_SMEM_SWIZZLE_K, 0},   {FFPA_POLICY_SMEM_SWIZZLE_V, 0},
      {FFPA_POLICY_PERSIST_Q_G2S, 0},    {FFPA_POLICY_PERSIST_KV_G2S, 0},   {FFPA_POLICY_PERSIST_Q_S2R, 1},
      {FFPA_POLICY_PERSIST_V_S2R, 0},    {FFPA_POLICY_REGISTERS_PIPE_KV, 1}, {FFPA_POLICY_LAUNCH_GRID_DNHB, 1},
  };
  uint64_t start = 43000;
  for (const Setting& setting : settings) {
    for (const Shape d : {Shape{128, 128}, Shape{320, 320}, Shape{576, 512}}) {
      Handle fast;
      fast.set_policy(setting.knob, setting.value);
      // Stages 1 with prefetch off too: the pipeline's slowest path.
      if (setting.knob == FFPA_POLICY_STAGES && setting.value == 1) fast.set_policy(FFPA_POLICY_PREFETCH_QKV, 0);
      const TestCase test{make_config(attention_shape(2, 4, 1, 190, 321, d.dqk, d.dv, CausalMask::top_left),
                                      DType::float16, LayoutKind::bnhd, 0.0),
                          true, start++};
      DeviceProblem probe(test.config);
      size_t bytes = 0;
      const ffpaStatus_t status = ffpaGetAttentionForwardWorkspaceSize(
          fast.get(), probe.attention.get(), probe.q.desc.get(), probe.k.desc.get(), probe.v.desc.get(),
          probe.o.desc.get(), probe.lse.desc.get(), &bytes);
      if (status != FFPA_STATUS_SUCCESS) {
        // Refused settings must say which knob and why, with the documented status.
        CHECK(status == FFPA_STATUS_NOT_SUPPORTED_KNOB_COMBINATION);
        CHECK_MESSAGE(last_error_message().find("FFPA_POLICY_") != std::string::npos, last_error_message());
        continue;
      }
      check_case(fast, reference, workspace, test, false);
    }
  }
}

TEST_CASE("sm80 forward: the same call twice gives the same bits") {
  Handle fast;
  Workspace workspace;
  const TestCase test{make_config(attention_shape(1, 8, 2, 333, 517, 512, 512, CausalMask::none),
                                  DType::bfloat16, LayoutKind::bhnd, 0.0),
                      true, 44000};
  DeviceProblem problem(test.config);
  problem.fill_inputs(test.start);
  problem.forward(fast, workspace, true);
  const HostTensor first = problem.o.host;
  check_forward_outputs(test.to_string(), problem, true);
  problem.forward(fast, workspace, true);
  CHECK_MESSAGE(std::memcmp(first.data(), problem.o.host.data(), first.size_bytes()) == 0,
                test.to_string() << ": O differs between two runs");
}

TEST_SUITE_END();
