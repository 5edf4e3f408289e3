// libffpa's forward and backward against float64 attention on the same rounded inputs, across
// every feature: dtypes, masks, sequence relations, head grouping, head dims, layouts, LSE, scale.
#include <doctest/doctest.h>

#include "attention_checks.h"

#include <vector>

using namespace ffpa_tools;
using namespace device_tests;

TEST_SUITE_BEGIN("device");

TEST_CASE("forward matches float64 attention across the feature matrix") {
  Handle handle;
  Workspace workspace;
  for (const TestCase& test : feature_matrix(Pass::forward)) {
    run_and_check(handle, workspace, test, Checked::forward);
  }
}

TEST_CASE("backward matches float64 attention across the feature matrix") {
  Handle handle;
  Workspace workspace;
  for (const TestCase& test : feature_matrix(Pass::backward)) {
    run_and_check(handle, workspace, test, Checked::backward);
  }
}

TEST_CASE("forward and backward match float64 attention at large head dims (large)") {
  // The largest head dim with a longer sequence, MQA and masked rows; then Dqk != Dv as in
  // multi-head latent attention, with GQA.
  const AttentionProblem wide =
      attention_shape(1, 2, 1, 512, 480, 1024, 1024, CausalMask::bottom_right);
  const AttentionProblem latent =
      attention_shape(1, 4, 2, 384, 512, 576, 512, CausalMask::top_left);
  Handle handle;
  Workspace workspace;
  run_and_check(handle, workspace,
                {make_config(wide, DType::bfloat16, LayoutKind::bhnd, 0.0), true, 3001},
                Checked::both);
  run_and_check(handle, workspace,
                {make_config(latent, DType::float16, LayoutKind::bnhd, 0.05), true, 3002},
                Checked::both);
}

TEST_CASE("forward and backward with per-batch key lengths match float64 attention") {
  // FFPA_ATTENTION_KEY_LENGTHS: entries of no key, a partial tile and all keys, a count out of
  // range; the forward and the backward as planned (the fast kernels), each against float64 (dK
  // and dV of the keys past an entry's count exactly 0).
  struct LengthCase {
    AttentionProblem shape;
    std::vector<int64_t> lengths;
    DType dtype;
  };
  const LengthCase cases[] = {
      {attention_shape(4, 4, 2, 40, 200, 128, 128, CausalMask::bottom_right), {0, 77, 200, 500}, DType::bfloat16},
      {attention_shape(3, 2, 1, 1, 900, 512, 512, CausalMask::none), {900, 1, 333}, DType::float16},
  };
  Handle handle;
  Workspace workspace;
  uint64_t start = 3010;
  for (const LengthCase& c : cases) {
    TestCase test{make_config(c.shape, c.dtype, LayoutKind::bhnd, 0.0), true, start++};
    test.config.problem.key_lengths = c.lengths;
    run_and_check(handle, workspace, test, Checked::both);
  }
}

TEST_SUITE_END();
