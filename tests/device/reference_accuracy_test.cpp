// libffpa's forward and backward against float64 attention on the same rounded inputs, across
// every feature: dtypes, masks, sequence relations, head grouping, head dims, layouts, LSE, scale.
#include <doctest/doctest.h>

#include "attention_checks.h"

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

TEST_SUITE_END();
