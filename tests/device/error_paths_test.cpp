// Failures that need a real device to reach: argument checks at execution time, the sanity check
// of FFPA_POLICY_SANITY_CHECK, and the device description.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstring>
#include <limits>

#include "attention_checks.h"

using namespace ffpa_tools;
using namespace device_tests;

namespace {

// The pointers of one forward call, each replaceable by a test.
struct ForwardCall {
  explicit ForwardCall(DeviceProblem& problem)
      : problem(problem),
        q(problem.q.memory.get()),
        o(problem.o.memory.get()),
        lse(static_cast<float*>(problem.lse.memory.get())) {}

  ffpaStatus_t run(const Handle& handle) const {
    return ffpaAttentionForward(handle.get(), problem.attention.get(), problem.q.desc.get(), q,
                                problem.k.desc.get(), problem.k.memory.get(), problem.v.desc.get(),
                                problem.v.memory.get(), problem.o.desc.get(), o,
                                problem.lse.desc.get(), lse, workspace, workspace_bytes);
  }

  DeviceProblem& problem;
  const void* q;
  void* o;
  float* lse;
  void* workspace = nullptr;
  size_t workspace_bytes = 0;
};

// A small fp16 problem with bottom-right masking and Nq > Nkv, so query 0 sees no key.
ProblemConfig small_config() {
  return make_config(attention_shape(1, 2, 1, 40, 33, 64, 64, CausalMask::bottom_right),
                     DType::float16, LayoutKind::bhnd, 0.0);
}

// A handle that does not log the failures these tests provoke on purpose.
void quiet(Handle& handle) {
  handle.set_policy(FFPA_POLICY_LOG_LEVEL, FFPA_LOG_LEVEL_OFF);
}

}  // namespace

#define CHECK_STATUS(call, expected)                                                          \
  do {                                                                                        \
    const ffpaStatus_t status_ = (call);                                                      \
    CHECK_MESSAGE(status_ == (expected), #call " returned " << status_report(status_)         \
                                                            << "; expected "                  \
                                                            << ffpaGetErrorString(expected)); \
  } while (0)

TEST_SUITE_BEGIN("device");

TEST_CASE("a workspace smaller than the queried size is refused") {
  Handle handle;
  quiet(handle);
  handle.set_policy(FFPA_POLICY_REFERENCE_BACKEND, 1);  // which always needs scratch
  DeviceProblem problem(small_config());
  problem.fill_inputs(8001);
  const size_t forward_bytes = problem.forward_workspace_size(handle, true);
  const size_t backward_bytes = problem.backward_workspace_size(handle);
  REQUIRE(forward_bytes > 0);
  REQUIRE(backward_bytes > 0);
  Workspace workspace;
  void* const scratch = workspace.reserve(std::max(forward_bytes, backward_bytes));

  problem.poison_forward_outputs();
  CHECK_STATUS(problem.call_forward(handle, scratch, forward_bytes - 1, true),
               FFPA_STATUS_BAD_PARAM_SIZE_INSUFFICIENT);
  CHECK_FALSE(last_error_message().empty());
  problem.o.download();
  CHECK_MESSAGE(all_poison(problem.o.host), "a refused call must write nothing");
  CHECK_STATUS(problem.call_forward(handle, scratch, forward_bytes, true), FFPA_STATUS_SUCCESS);

  CHECK_STATUS(problem.call_backward(handle, scratch, backward_bytes - 1),
               FFPA_STATUS_BAD_PARAM_SIZE_INSUFFICIENT);
  CHECK_STATUS(problem.call_backward(handle, scratch, backward_bytes), FFPA_STATUS_SUCCESS);
  check_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
}

TEST_CASE("misaligned tensor and workspace pointers are refused") {
  Handle handle;
  quiet(handle);
  DeviceProblem problem(small_config());
  problem.fill_inputs(8002);
  Workspace workspace;
  const size_t bytes = problem.forward_workspace_size(handle, true);
  // Room to shift every pointer without leaving its allocation.
  DeviceBuffer spare(std::max(problem.q.memory.size(), problem.o.memory.size()) + 256);
  char* const spare_bytes = static_cast<char*>(spare.get());

  ForwardCall aligned(problem);
  aligned.workspace = workspace.reserve(bytes);
  aligned.workspace_bytes = bytes;
  CHECK_STATUS(aligned.run(handle), FFPA_STATUS_SUCCESS);

  ForwardCall shifted_q = aligned;
  shifted_q.q = spare_bytes + 8;  // fp16-aligned, not 16-byte aligned
  CHECK_STATUS(shifted_q.run(handle), FFPA_STATUS_BAD_PARAM_MISALIGNED_POINTER);
  CHECK_FALSE(last_error_message().empty());

  ForwardCall shifted_o = aligned;
  shifted_o.o = spare_bytes + 2;
  CHECK_STATUS(shifted_o.run(handle), FFPA_STATUS_BAD_PARAM_MISALIGNED_POINTER);

  ForwardCall shifted_lse = aligned;
  shifted_lse.lse = reinterpret_cast<float*>(spare_bytes + 4);
  CHECK_STATUS(shifted_lse.run(handle), FFPA_STATUS_BAD_PARAM_MISALIGNED_POINTER);

  // The fast kernels may need no workspace at all (then its pointer is not looked at): the
  // reference path always does.
  Handle reference;
  quiet(reference);
  reference.set_policy(FFPA_POLICY_REFERENCE_BACKEND, 1);
  const size_t reference_bytes = problem.forward_workspace_size(reference, true);
  REQUIRE(reference_bytes > 0);
  DeviceBuffer spare_workspace(reference_bytes + 256);
  ForwardCall shifted_workspace = aligned;
  shifted_workspace.workspace = static_cast<char*>(spare_workspace.get()) + 16;  // not 256
  shifted_workspace.workspace_bytes = reference_bytes;
  CHECK_STATUS(shifted_workspace.run(reference), FFPA_STATUS_BAD_PARAM_MISALIGNED_POINTER);
  check_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
}

TEST_CASE("the sanity check reports NaN and infinity, and accepts fully masked rows") {
  Handle handle;
  quiet(handle);
  handle.set_policy(FFPA_POLICY_SANITY_CHECK, 1);
  DeviceProblem problem(small_config());
  problem.fill_inputs(8003);
  const size_t forward_bytes = problem.forward_workspace_size(handle, true);
  const size_t backward_bytes = problem.backward_workspace_size(handle);
  Workspace workspace;
  void* const scratch = workspace.reserve(std::max(forward_bytes, backward_bytes));
  const auto forward = [&] { return problem.call_forward(handle, scratch, forward_bytes, true); };
  const auto backward = [&] { return problem.call_backward(handle, scratch, backward_bytes); };
  constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
  constexpr double kInfinity = std::numeric_limits<double>::infinity();

  // Clean inputs: query 0 sees no key, so LSE holds -inf and O a zero row, legitimately.
  CHECK_STATUS(forward(), FFPA_STATUS_SUCCESS);
  CHECK_STATUS(backward(), FFPA_STATUS_SUCCESS);

  const double q_value = problem.q.host.get(0, 1, 5, 7);
  problem.q.host.set(0, 1, 5, 7, kNaN);
  problem.q.upload();
  CHECK_STATUS(forward(), FFPA_STATUS_EXECUTION_FAILED_NON_FINITE);
  CHECK_FALSE(last_error_message().empty());
  problem.q.host.set(0, 1, 5, 7, q_value);
  problem.q.upload();

  const double v_value = problem.v.host.get(0, 0, 3, 2);
  problem.v.host.set(0, 0, 3, 2, kInfinity);
  problem.v.upload();
  CHECK_STATUS(forward(), FFPA_STATUS_EXECUTION_FAILED_NON_FINITE);
  problem.v.host.set(0, 0, 3, 2, v_value);
  problem.v.upload();

  CHECK_STATUS(forward(), FFPA_STATUS_SUCCESS);  // a finite O and LSE again
  problem.d_o.host.set(0, 0, 39, 0, kNaN);
  problem.d_o.upload();
  CHECK_STATUS(backward(), FFPA_STATUS_EXECUTION_FAILED_NON_FINITE);
}

TEST_CASE("the sanity check reads K and V within per-batch key lengths only, where NaN may lie past them") {
  Handle handle;
  quiet(handle);
  handle.set_policy(FFPA_POLICY_SANITY_CHECK, 1);
  ProblemConfig config = small_config();
  config.problem.key_lengths.assign(static_cast<size_t>(config.problem.batch), config.problem.seq_kv / 2);
  DeviceProblem problem(config);
  problem.fill_inputs(8004);
  const AttentionProblem& p = problem.config().problem;
  const int64_t past = p.keys_of(0);  // a key past entry 0's count
  problem.k.host.set(0, 0, past, 1, std::numeric_limits<double>::quiet_NaN());
  problem.v.host.set(0, 0, past, 2, std::numeric_limits<double>::quiet_NaN());
  problem.k.upload();
  problem.v.upload();
  const size_t forward_bytes = problem.forward_workspace_size(handle, true);
  const size_t backward_bytes = problem.backward_workspace_size(handle);
  Workspace workspace;
  void* const scratch = workspace.reserve(std::max(forward_bytes, backward_bytes));
  CHECK_STATUS(problem.call_forward(handle, scratch, forward_bytes, true), FFPA_STATUS_SUCCESS);
  CHECK_STATUS(problem.call_backward(handle, scratch, backward_bytes), FFPA_STATUS_SUCCESS);
  // Within the count, NaN is an input the check reports.
  problem.k.host.set(0, 0, past - 1, 1, std::numeric_limits<double>::quiet_NaN());
  problem.k.upload();
  CHECK_STATUS(problem.call_forward(handle, scratch, forward_bytes, true), FFPA_STATUS_EXECUTION_FAILED_NON_FINITE);
}

TEST_CASE("the device description matches the CUDA runtime") {
  Handle handle;
  ffpaDeviceDesc_t desc;
  std::memset(&desc, 0, sizeof desc);
  desc.structSize = sizeof desc;
  check(ffpaGetDeviceDesc(handle.get(), &desc), "ffpaGetDeviceDesc");

  int device = -1;
  check_cuda(cudaGetDevice(&device), "cudaGetDevice");
  cudaDeviceProp props;
  check_cuda(cudaGetDeviceProperties(&props, device), "cudaGetDeviceProperties");
  CHECK(desc.ordinal == device);
  CHECK(desc.smVersion >= 80);
  CHECK(desc.smVersion == props.major * 10 + props.minor);
  CHECK(desc.smCount == props.multiProcessorCount);
  CHECK(desc.sharedMemPerBlockOptin == static_cast<int64_t>(props.sharedMemPerBlockOptin));
  CHECK(desc.sharedMemPerSm == static_cast<int64_t>(props.sharedMemPerMultiprocessor));
  CHECK(desc.globalMemBytes == static_cast<int64_t>(props.totalGlobalMem));
  CHECK(std::strncmp(desc.name, props.name, sizeof desc.name) == 0);
}

TEST_SUITE_END();
