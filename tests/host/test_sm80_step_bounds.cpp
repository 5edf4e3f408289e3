// The sm80 kernels unroll the copies of a pipeline step for the most panels a step may hold
// (maxScoreStepPanels and maxValueStepPanels of forward_params.h, kMaxScoreStepPanels and
// kMaxOutputStepPanels of backward_params.h), and the layouts cap the steps there. Every step
// size the launch parameters accept (what a tuned config or the autotuner may ask for) must lay
// out as asked, so that the cap never silently changes a tuned choice.
#include "sm80/backward_resolve.h"
#include "sm80/forward_resolve.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <string>
#include <vector>

using namespace ffpa;
using namespace ffpa::sm80;

namespace {

const LaunchParameter& parameter(const std::vector<LaunchParameter>& parameters, const std::string& name) {
  const auto found = std::find_if(parameters.begin(), parameters.end(),
                                  [&](const LaunchParameter& p) { return name == p.name; });
  REQUIRE(found != parameters.end());
  return *found;
}

// The launch parameters' ranges depend on the head dims alone.
AttentionProblem headDims(int headDim) {
  AttentionProblem p;
  p.headDimQk = p.headDimV = headDim;
  return p;
}

constexpr int kHeadDims[] = {32, 64, 96, 128, 192, 256, 320, 384, 512, 576, 768, 1024};

}  // namespace

TEST_CASE("forward: the largest steps the launch parameters accept lay out as asked") {
  for (int headDim : kHeadDims) {
    CAPTURE(headDim);
    const ForwardShape shape = forwardShape(headDim);
    PipelineChoice choice;
    const std::vector<LaunchParameter> parameters = forwardLaunchParameters(choice, headDims(headDim), shape, false);
    const int qkPanels = int(parameter(parameters, "qk_step").high / 16);
    const int vPanels = int(parameter(parameters, "v_step").high / 16);
    choice.qkPanelsPerStep = qkPanels;
    choice.vPanelsPerStep = vPanels;
    ForwardParams p{};
    p.headDimQk = p.headDimV = headDim;
    forwardLayout(shape, choice, p);
    CHECK(p.qkPanelsPerStep == std::min(qkPanels, headDim / 16));
    CHECK(p.vPanelsPerStep == std::min(vPanels, shape.warpColumns / 16));
    CHECK(p.qkPanelsPerStep <= maxScoreStepPanels(shape));
    CHECK(p.vPanelsPerStep <= maxValueStepPanels(shape));
    if (coarseTiling(shape, headDim, headDim)) {
      // Persisted K and V: a step is a whole tile.
      choice.persistKv = true;
      forwardLayout(shape, choice, p);
      CHECK(p.qkPanelsPerStep == headDim / 16);
      CHECK(p.vPanelsPerStep == shape.warpColumns / 16);
      CHECK(p.qkPanelsPerStep <= maxScoreStepPanels(shape));
      CHECK(p.vPanelsPerStep <= maxValueStepPanels(shape));
    }
  }
}

TEST_CASE("forward: the P V steps cover the output panels below d_v, those of column warp 0") {
  struct Case {
    int instance, headDimV;
    bool persistKv;
    int vPanels, vPanelsPerStep, vSteps;
  };
  const Case cases[] = {
      {128, 128, false, 8, 4, 2}, {128, 80, false, 5, 4, 2}, {128, 48, false, 3, 3, 1},
      {128, 80, true, 5, 5, 1},   {128, 16, true, 1, 1, 1},  {256, 192, true, 12, 12, 1},
      // Column warps own interleaved panels (warp c: c, c + colWarps, ...). Two of 16 panels
      // each: d_v 272 (17 panels) leaves column warp 0 nine of them and column warp 1 eight, d_v
      // 384 twelve each, d_v 48 two and one.
      {512, 272, false, 9, 4, 3}, {512, 384, false, 12, 4, 3}, {512, 48, false, 2, 2, 1},
      // Four of 16 panels each: d_v 640 leaves each of them 10, d_v 768 12, d_v 1024 all 16.
      {1024, 640, false, 10, 4, 3}, {1024, 768, false, 12, 4, 3}, {1024, 1024, false, 16, 4, 4},
  };
  for (const Case& c : cases) {
    CAPTURE(c.instance);
    CAPTURE(c.headDimV);
    CAPTURE(c.persistKv);
    PipelineChoice choice;
    choice.persistKv = c.persistKv;
    ForwardParams p{};
    p.headDimQk = 128;
    p.headDimV = c.headDimV;
    forwardLayout(forwardShape(c.instance), choice, p);
    CHECK(p.vPanels == c.vPanels);
    CHECK(p.vPanelsPerStep == c.vPanelsPerStep);
    CHECK(p.vSteps == c.vSteps);
  }
}

TEST_CASE("forward: a build without an instance of 256 columns or fewer serves d <= 256 with fine-grained steps") {
  // Coarse tiling (whole K and V tiles per step) is for instances of one column warp: on a wider
  // one persist_kv does not apply, as for d > 256, instead of steps past what its copies unroll.
  const ForwardShape wide = forwardShape(512);
  CHECK_FALSE(coarseTiling(wide, 128, 128));
  CHECK(coarseTiling(forwardShape(256), 128, 128));
  CHECK_FALSE(coarseTiling(forwardShape(256), 320, 128));
  PipelineChoice choice;
  const std::vector<LaunchParameter> parameters = forwardLaunchParameters(choice, headDims(128), wide, false);
  parameter(parameters, "persist_kv").set(1);
  CHECK_FALSE(choice.persistKv);
}

TEST_CASE("backward: the largest steps the launch parameters accept lay out as asked") {
  GradientChoice choice;
  const std::vector<LaunchParameter> parameters = backwardLaunchParameters(choice);
  const int scorePanels = int(parameter(parameters, "score_step").high / 16);
  const int outputPanels = int(parameter(parameters, "output_step").high / 16);
  CHECK(scorePanels <= kMaxScoreStepPanels);
  CHECK(outputPanels <= kMaxOutputStepPanels);
  choice.scorePanelsPerStep = scorePanels;
  choice.outputPanelsPerStep = outputPanels;
  for (int headDim : kHeadDims) {
    CAPTURE(headDim);
    GradientLayout query{}, key{};
    const ForwardShape queryShape = queryGradientShape(headDim);
    const KeyShape keyShape = keyGradientShape(headDim);
    queryGradientLayout(queryShape, choice, headDim, headDim, query);
    keyGradientLayout(keyShape, choice, headDim, headDim, key);
    CHECK(query.scorePanelsPerStep == std::min(scorePanels, headDim / 16));
    CHECK(key.scorePanelsPerStep == std::min(scorePanels, headDim / 16));
    CHECK(query.outputPanelsPerStep == std::min(outputPanels, queryShape.warpColumns / 16));
    CHECK(key.outputPanelsPerStep == std::min(outputPanels, keyShape.warpColumns / 16));
  }
}
