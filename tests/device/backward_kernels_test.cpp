// The sm80 backward kernels on a GPU, through the public API. The default policy must plan an
// "sm80.backward" kernel wherever one applies; its gradients are measured against float64
// attention (FlashAttention's criterion: within twice what rounding costs, plus a floor) on fresh
// random inputs with gradients poisoned, and against the cuBLASLt reference path's exact zeros:
//   - a covering design over head dims 32-1024 (and d_qk != d_v), tails, both causal
//     alignments, MHA/GQA/MQA, packed and padded layouts, both dtypes;
//   - the worst case of upstream's issue tracker, causal + bf16 + d = 320, explicitly;
//   - five runs of the same call, bit-identical (with and without FFPA_POLICY_DETERMINISTIC:
//     the kernels use no atomics);
//   - each value of the pipeline knobs the backward follows;
//   - per-batch key lengths, with NaN in K and V past each count;
//   (those with FFPA_POLICY_HOPPER_KERNELS off, so that Hopper GPUs run them too);
//   - with FFPA_POLICY_HOPPER_KERNELS (the default) on a compute capability 9.0 GPU, the "sm90.backward" plans
//     (the wgmma dQ and dK/dV kernels, one CTA or clusters of two or four, over head dims up to
//     1024), their repeatability, and per-batch key lengths.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include "attention_checks.h"
#include "tuned_config_directory.h"

using namespace ffpa_tools;
using namespace device_tests;

namespace {

constexpr const char* kFastBackwardPrefix = "sm80.backward";

// The kernel the backward plan of `problem` on `handle` uses.
std::string planned_backward(const Handle& handle, const DeviceProblem& problem) {
  size_t length = 0;
  const auto describe = [&](char* text, size_t size, size_t* written) {
    return ffpaDescribeAttentionBackwardPlan(
        handle.get(), problem.attention.get(), problem.q.desc.get(), problem.k.desc.get(),
        problem.v.desc.get(), problem.o.desc.get(), problem.d_o.desc.get(), problem.lse.desc.get(),
        problem.dq.desc.get(), problem.dk.desc.get(), problem.dv.desc.get(), text, size, written);
  };
  check(describe(nullptr, 0, &length), "ffpaDescribeAttentionBackwardPlan");
  std::vector<char> text(length + 1);
  check(describe(text.data(), text.size(), nullptr), "ffpaDescribeAttentionBackwardPlan");
  const std::string all = text.data();
  const size_t start = all.find("\nkernel: ");
  if (start == std::string::npos) return "";
  return all.substr(start + 9, all.find('\n', start + 9) - start - 9);
}

// The largest head dim this build compiles (ffpaGetBuildInfo: "...; head dims 128,256; ...").
int64_t largest_head_dim() {
  const std::string info = ffpaGetBuildInfo();
  const size_t start = info.find("head dims ");
  if (start == std::string::npos) return 1024;
  int64_t largest = 0;
  std::string list = info.substr(start + 10, info.find(';', start) - start - 10);
  std::replace(list.begin(), list.end(), ',', ' ');
  std::istringstream numbers(list);
  for (int64_t d = 0; numbers >> d;) largest = std::max(largest, d);
  return largest;
}

bool same_bytes(const HostTensor& a, const HostTensor& b) {
  return a.size_bytes() == b.size_bytes() && std::memcmp(a.data(), b.data(), a.size_bytes()) == 0;
}

// Forward (which writes the O and LSE the backward takes), then the backward on `handle`; CHECKs
// that the backward plan is a fast one and the gradients. `edit`, if given, changes the inputs
// after they are filled (and uploads them again).
void run_fast_backward(const Handle& handle, Workspace& workspace, const TestCase& test,
                       const char* prefix = kFastBackwardPrefix,
                       const std::function<void(DeviceProblem&)>& edit = {}) {
  const std::string context = test.to_string();
  INFO(context);
  const AttentionProblem& p = test.config.problem;
  if (std::max(p.dim_qk, p.dim_v) > largest_head_dim()) {
    MESSAGE(context << ": not run, this build compiles no backward kernel for it");
    return;
  }
  DeviceProblem problem(test.config);
  problem.fill_inputs(test.start);
  if (edit) edit(problem);
  const std::string kernel = planned_backward(handle, problem);
  CHECK_MESSAGE(kernel.rfind(prefix, 0) == 0, context << ": planned " << kernel << ", not an " << prefix << " kernel");
  problem.forward(handle, workspace, true);
  problem.backward(handle, workspace);
  check_backward_outputs(context + " [" + kernel + "]", problem);
}

// The head-dim matrix of the forward's tests (head_dim_matrix), every case with the LSE the
// backward takes.
std::vector<TestCase> backward_matrix() {
  std::vector<TestCase> cases;
  for (const MatrixCase& point : head_dim_matrix(52000)) cases.push_back(point.test);
  return cases;
}

// FFPA_ATTENTION_KEY_LENGTHS cases: entries of no key, one, a partial tile and all keys, counts
// out of range (clamped), both causal alignments, GQA, layouts, head dims from one CTA to the
// Hopper kernels' clusters of four.
struct KeyLengthsCase {
  AttentionProblem shape;
  std::vector<int64_t> lengths;
  DType dtype;
  LayoutKind layout;
};

std::vector<KeyLengthsCase> key_lengths_cases() {
  return {
      {attention_shape(4, 4, 2, 100, 300, 128, 128, CausalMask::none), {0, 1, 130, 300}, DType::float16,
       LayoutKind::bhnd},
      {attention_shape(3, 8, 2, 200, 500, 320, 320, CausalMask::bottom_right), {500, 129, 20}, DType::bfloat16,
       LayoutKind::bnhd},
      {attention_shape(2, 4, 4, 150, 400, 512, 512, CausalMask::top_left), {-3, 999}, DType::bfloat16,
       LayoutKind::padded_aligned},
      {attention_shape(2, 4, 1, 64, 700, 1024, 1024, CausalMask::bottom_right), {333, 700}, DType::float16,
       LayoutKind::bhnd},
  };
}

// Runs the key-lengths cases on `handle`, each planned on a kernel named from `prefix`: dK and dV
// of keys past a count exactly 0, NaN in K and V there reaching no gradient.
void run_key_lengths_cases(const Handle& handle, const char* prefix, uint64_t start) {
  Workspace workspace;
  for (const KeyLengthsCase& c : key_lengths_cases()) {
    TestCase test{make_config(c.shape, c.dtype, c.layout, 0.0), true, start++};
    test.config.problem.key_lengths = c.lengths;
    run_fast_backward(handle, workspace, test, prefix, nan_past_key_lengths);
  }
}

}  // namespace

TEST_SUITE_BEGIN("device");

TEST_CASE("sm80 backward: gradients over the head-dim matrix match float64") {
  Handle handle;
  handle.set_policy(FFPA_POLICY_HOPPER_KERNELS, 0);  // the mma.sync kernels on Hopper GPUs too
  Workspace workspace;
  for (const TestCase& test : backward_matrix()) run_fast_backward(handle, workspace, test);
}

TEST_CASE("sm80 backward: causal + bf16 + d = 320, the worst case of fp16 read-modify-write") {
  Handle handle;
  handle.set_policy(FFPA_POLICY_HOPPER_KERNELS, 0);
  Workspace workspace;
  for (const CausalMask mask : {CausalMask::top_left, CausalMask::bottom_right}) {
    const AttentionProblem shape = attention_shape(2, 8, 2, 1024, 1024, 320, 320, mask);
    run_fast_backward(handle, workspace, {make_config(shape, DType::bfloat16, LayoutKind::bhnd, 0.0), true, 7320});
  }
}

TEST_CASE("sm80 backward: per-batch key lengths, NaN in K and V past them, on every GPU") {
  Handle handle;
  handle.set_policy(FFPA_POLICY_HOPPER_KERNELS, 0);  // the mma.sync kernels on Hopper GPUs too
  run_key_lengths_cases(handle, kFastBackwardPrefix, 7400);
}

TEST_CASE("sm90 backward: per-batch key lengths, NaN in K and V past them") {
  if (!hopper_runs_here()) return;
  // The default handle plans both Hopper gradient kernels, which zero the K and V rows past a
  // count that their TMA loads bring in.
  Handle handle;
  run_key_lengths_cases(handle, "sm90.backward", 7410);
}

TEST_CASE("sm80 backward: five runs of the same call are bit-identical") {
  const TestCase test{make_config(attention_shape(1, 8, 2, 700, 600, 512, 512, CausalMask::bottom_right),
                                  DType::bfloat16, LayoutKind::bhnd, 0.0),
                      true, 7401};
  for (const int deterministic : {0, 1}) {
    const std::string context = test.to_string() + ", FFPA_POLICY_DETERMINISTIC=" + std::to_string(deterministic);
    INFO(context);
    Handle handle;
    handle.set_policy(FFPA_POLICY_HOPPER_KERNELS, 0);
    handle.set_policy(FFPA_POLICY_DETERMINISTIC, deterministic);
    Workspace workspace;
    DeviceProblem problem(test.config);
    problem.fill_inputs(test.start);
    problem.forward(handle, workspace, true);
    problem.backward(handle, workspace);
    check_backward_outputs(context, problem);  // identical NaNs would be bit-identical too
    const HostTensor dq = problem.dq.host, dk = problem.dk.host, dv = problem.dv.host;
    for (int run = 1; run < 5; ++run) {
      problem.backward(handle, workspace);  // poisons the gradients first
      CHECK_MESSAGE(same_bytes(problem.dq.host, dq), context << ": dQ of run " << run + 1 << " differs");
      CHECK_MESSAGE(same_bytes(problem.dk.host, dk), context << ": dK of run " << run + 1 << " differs");
      CHECK_MESSAGE(same_bytes(problem.dv.host, dv), context << ": dV of run " << run + 1 << " differs");
    }
  }
}

TEST_CASE("sm80 backward: every value of the pipeline knobs it follows") {
  const struct {
    ffpaPolicyKnob_t knob;
    int32_t value;
  } settings[] = {{FFPA_POLICY_STAGES, 1},          {FFPA_POLICY_STAGES, 2},
                  {FFPA_POLICY_PREFETCH_QKV, 0},    {FFPA_POLICY_QKV_SMEM_SHARE, 1},
                  {FFPA_POLICY_PERSIST_Q_G2S, 0},   {FFPA_POLICY_LAUNCH_GRID_DNHB, 1}};
  Workspace workspace;
  int index = 0;
  for (const auto& setting : settings) {
    for (const int64_t d : {128, 512, 1024}) {
      Handle handle;
      handle.set_policy(FFPA_POLICY_HOPPER_KERNELS, 0);
      handle.set_policy(setting.knob, setting.value);
      const AttentionProblem shape = attention_shape(1, 4, 2, 200, 150, d, d, CausalMask::bottom_right);
      run_fast_backward(handle, workspace,
                        {make_config(shape, index % 2 ? DType::bfloat16 : DType::float16,
                                     LayoutKind::bnhd, 0.0),
                         true, 7500 + static_cast<uint64_t>(index)});
      ++index;
    }
  }
}

TEST_CASE("sm90 backward: the Hopper dQ and dK/dV kernels, tails, masks, head groups, layouts, dtypes") {
  if (!hopper_runs_here()) return;
  Handle handle;
  handle.set_policy(FFPA_POLICY_HOPPER_KERNELS, 1);
  Workspace workspace;
  // dQ: one CTA up to d = 384 (d_qk 64, 128, 192, 256, 320 and 384 instances), clusters of two
  // above (384, 512 and 640), of four above 640 (768, 1024); dK/dV: one CTA up to 256 (64, 128,
  // 192, 256), clusters of two up to 512 (384, 512), of four above (576 / 512, 640, 1024):
  // partial last blocks, d_qk != d_v both ways, a rank with no dO / V block (d_v 64), one query,
  // more queries than keys; 128 / 512 runs dQ on the cluster's 384 instance; 64 / 128 and
  // 32 / 48 the 64 instances, where consumer 1 holds all the columns.
  const ShapeRow cases[] = {
      {2, 4, 2, 333, 517, 128, 128, CausalMask::none, DType::bfloat16, LayoutKind::bhnd},
      {1, 4, 1, 700, 600, 256, 256, CausalMask::bottom_right, DType::float16, LayoutKind::bnhd},
      {1, 2, 2, 129, 200, 176, 208, CausalMask::top_left, DType::bfloat16, LayoutKind::padded_aligned},
      {1, 8, 2, 1024, 1024, 192, 192, CausalMask::bottom_right, DType::float16, LayoutKind::bhnd},
      {1, 2, 1, 300, 70, 96, 80, CausalMask::bottom_right, DType::float16, LayoutKind::bhnd},
      {1, 2, 2, 200, 450, 64, 128, CausalMask::none, DType::bfloat16, LayoutKind::bnhd},
      {2, 4, 1, 500, 300, 32, 48, CausalMask::bottom_right, DType::float16, LayoutKind::padded_aligned},
      {1, 8, 8, 1024, 1024, 64, 64, CausalMask::top_left, DType::bfloat16, LayoutKind::bhnd},
      {2, 4, 2, 333, 517, 320, 320, CausalMask::none, DType::bfloat16, LayoutKind::bhnd},
      {1, 4, 1, 700, 600, 384, 384, CausalMask::bottom_right, DType::float16, LayoutKind::bnhd},
      {1, 2, 2, 129, 200, 272, 304, CausalMask::top_left, DType::bfloat16, LayoutKind::padded_aligned},
      {1, 8, 2, 1024, 1024, 512, 512, CausalMask::bottom_right, DType::bfloat16, LayoutKind::bhnd},
      {1, 4, 1, 600, 600, 576, 512, CausalMask::top_left, DType::float16, LayoutKind::bnhd},
      {2, 2, 2, 257, 300, 640, 640, CausalMask::none, DType::float16, LayoutKind::bhnd},
      {1, 3, 3, 1, 777, 320, 640, CausalMask::bottom_right, DType::bfloat16, LayoutKind::padded_aligned},
      {1, 2, 1, 300, 70, 448, 64, CausalMask::bottom_right, DType::float16, LayoutKind::bhnd},
      {1, 2, 2, 200, 450, 400, 416, CausalMask::none, DType::bfloat16, LayoutKind::bnhd},
      {1, 4, 2, 500, 300, 128, 512, CausalMask::top_left, DType::bfloat16, LayoutKind::bhnd},
      {1, 4, 2, 300, 400, 1024, 1024, CausalMask::none, DType::bfloat16, LayoutKind::bhnd},
      {1, 2, 1, 257, 333, 768, 704, CausalMask::top_left, DType::float16, LayoutKind::bnhd},
      {1, 2, 2, 200, 150, 320, 1024, CausalMask::bottom_right, DType::bfloat16, LayoutKind::padded_aligned},
      {1, 2, 1, 130, 190, 1024, 64, CausalMask::none, DType::float16, LayoutKind::bhnd},
  };
  uint64_t start = 53000;
  for (const auto& c : cases) {
    run_fast_backward(handle, workspace, {c.config(), true, start++}, "sm90.backward");
  }
}

TEST_CASE("sm90 backward: either gradient kernel's mma.sync version beside the other's sm90 one") {
  if (!hopper_runs_here()) return;
  // Tuned configs that hand one gradient kernel back to mma.sync (sm90_dq / sm90_dkdv = 0): the
  // two kinds of kernel share the row statistics and must agree on every layout; both 0 leaves
  // the sm80 backward.
  const TunedConfigDirectory dir(
      "gradients", tuned_entries("backward", "sm90.backward", "bf16", 128, R"({"sm90_dq": 0})") + "," +
                       tuned_entries("backward", "sm90.backward", "fp16", 256, R"({"sm90_dkdv": 0})") + "," +
                       tuned_entries("backward", "sm90.backward", "bf16", 512, R"({"sm90_dkdv": 0})") + "," +
                       tuned_entries("backward", "sm90.backward", "fp16", 64, R"({"sm90_dq": 0, "sm90_dkdv": 0})"));
  Handle handle;
  handle.set_policy(FFPA_POLICY_HOPPER_KERNELS, 1);
  dir.use(handle);
  Workspace workspace;
  struct Case {
    ShapeRow shape;
    const char* kernel;
  };
  const Case cases[] = {
      {{1, 4, 2, 333, 517, 128, 128, CausalMask::bottom_right, DType::bfloat16, LayoutKind::bhnd},
       "sm90.backward.bf16.dkdv128"},
      {{2, 2, 2, 200, 300, 256, 208, CausalMask::top_left, DType::float16, LayoutKind::bnhd},
       "sm90.backward.f16.dq256"},
      {{1, 4, 1, 300, 400, 512, 512, CausalMask::none, DType::bfloat16, LayoutKind::padded_aligned},
       "sm90.backward.bf16.dq512x2"},
      {{1, 2, 2, 129, 200, 64, 64, CausalMask::none, DType::float16, LayoutKind::bhnd}, "sm80.backward.f16."},
  };
  uint64_t start = 53200;
  for (const Case& c : cases) {
    const TestCase test{c.shape.config(), true, start++};
    const std::string context = test.to_string();
    INFO(context);
    DeviceProblem problem(test.config);
    problem.fill_inputs(test.start);
    const std::string planned = planned_backward(handle, problem);
    const bool expected = planned.rfind(c.kernel, 0) == 0;
    CHECK_MESSAGE(expected, "planned " << planned);
    if (!expected) continue;
    problem.forward(handle, workspace, true);
    problem.backward(handle, workspace);
    check_backward_outputs(context + " [" + planned + "]", problem);
  }
}

TEST_CASE("sm90 backward: the same call twice gives the same bits") {
  if (!hopper_runs_here()) return;
  for (const int64_t dim : {int64_t{64}, int64_t{128}, int64_t{384}, int64_t{512}, int64_t{1024}}) {
    const TestCase test{make_config(attention_shape(1, 8, 2, 700, 600, dim, dim, CausalMask::bottom_right),
                                    DType::bfloat16, LayoutKind::bhnd, 0.0),
                        true, 53100 + static_cast<uint64_t>(dim)};
    const std::string context = test.to_string();
    INFO(context);
    Handle handle;
    handle.set_policy(FFPA_POLICY_HOPPER_KERNELS, 1);
    Workspace workspace;
    DeviceProblem problem(test.config);
    problem.fill_inputs(test.start);
    REQUIRE_MESSAGE(planned_backward(handle, problem).rfind("sm90.backward", 0) == 0, context);
    problem.forward(handle, workspace, true);
    problem.backward(handle, workspace);
    check_backward_outputs(context, problem);
    const HostTensor dq = problem.dq.host, dk = problem.dk.host, dv = problem.dv.host;
    problem.backward(handle, workspace);  // poisons the gradients first
    CHECK_MESSAGE(same_bytes(problem.dq.host, dq), context << ": dQ of the second run differs");
    CHECK_MESSAGE(same_bytes(problem.dk.host, dk), context << ": dK of the second run differs");
    CHECK_MESSAGE(same_bytes(problem.dv.host, dv), context << ": dV of the second run differs");
  }
}
