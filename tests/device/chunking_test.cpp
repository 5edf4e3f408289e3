// FFPA_POLICY_REFERENCE_CHUNK_BYTES only bounds the reference path's scratch: at its minimum
// (4096 bytes, many small chunks of heads and rows) every output must stay what it was. At that
// size a chunk holds a single query row, so the shapes stay small: every chunk is several launches.
#include <doctest/doctest.h>

#include "attention_checks.h"

using namespace ffpa_tools;
using namespace device_tests;

namespace {

struct Outputs {
  HostTensor o, lse, dq, dk, dv;
};

Outputs run_forward_and_backward(const Handle& handle, DeviceProblem& problem,
                                 Workspace& workspace) {
  problem.forward(handle, workspace, true);
  problem.backward(handle, workspace);
  return {problem.o.host, problem.lse.host, problem.dq.host, problem.dk.host, problem.dv.host};
}

}  // namespace

TEST_SUITE_BEGIN("device");

TEST_CASE("reference chunking at 4096 bytes changes no result") {
  const TestCase tests[] = {
      {make_config(attention_shape(1, 4, 2, 130, 200, 96, 64, CausalMask::top_left),
                   DType::bfloat16, LayoutKind::padded, 0.0),
       true, 5001},
      {make_config(attention_shape(1, 3, 1, 150, 70, 48, 48, CausalMask::bottom_right),
                   DType::float32, LayoutKind::bnhd, 0.2),
       true, 5002},
      {make_config(attention_shape(1, 2, 2, 100, 100, 128, 128, CausalMask::none), DType::float16,
                   LayoutKind::bhnd, 0.0),
       true, 5003},
  };
  Handle whole;
  Handle chunked;
  for (Handle* handle : {&whole, &chunked}) handle->set_policy(FFPA_POLICY_REFERENCE_BACKEND, 1);
  chunked.set_policy_int64(FFPA_POLICY_REFERENCE_CHUNK_BYTES, 4096);
  Workspace workspace;

  for (const TestCase& test : tests) {
    const std::string context = test.to_string();
    INFO(context);
    DeviceProblem problem(test.config);
    problem.fill_inputs(test.start);

    // Smaller chunks give a smaller workspace: proof that the policy took effect.
    CHECK(problem.forward_workspace_size(chunked, true) <
          problem.forward_workspace_size(whole, true));
    CHECK(problem.backward_workspace_size(chunked) < problem.backward_workspace_size(whole));

    const Outputs reference = run_forward_and_backward(whole, problem, workspace);
    const Outputs small = run_forward_and_backward(chunked, problem, workspace);
    check_nearly_identical(context, "O", small.o, reference.o);
    check_nearly_identical(context, "LSE", small.lse, reference.lse);
    check_nearly_identical(context, "dQ", small.dq, reference.dq);
    check_nearly_identical(context, "dK", small.dk, reference.dk);
    check_nearly_identical(context, "dV", small.dv, reference.dv);

    // And both are right (the problem's host tensors hold the chunked results now).
    check_forward_outputs(context + " (chunked)", problem, true);
    check_backward_outputs(context + " (chunked)", problem);
  }
}

TEST_SUITE_END();
