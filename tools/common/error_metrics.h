// How far a result is from its expected value, and how far it may be. A NaN never passes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/host_tensor.h"

namespace ffpa_tools {

struct ErrorStats {
  double rel_l2 = 0.0;   // ||actual - expected|| / ||expected||
  double max_abs = 0.0;  // max |actual - expected|
  int64_t count = 0;     // elements compared

  std::string to_string() const;  // "rel L2 1.2e-03, max abs 4.5e-03 over 1024 elements"
};

// Adds up the error of `actual` against `expected`, one element pair at a time. A NaN on either
// side, or an infinity the other side does not match exactly, makes both errors infinite. Equal
// infinities (the -inf log-sum-exp of a fully masked row) count as exact. When `expected` is all
// zeros, any difference is an infinite relative error.
class ErrorAccumulator {
 public:
  void add(double actual, double expected);
  ErrorStats result() const;

 private:
  double diff_squares_ = 0.0;
  double expected_squares_ = 0.0;
  double max_abs_ = 0.0;
  int64_t count_ = 0;
  bool broken_ = false;
};

ErrorStats compare(const std::vector<double>& actual, const std::vector<double>& expected);
// Element by element over the dimensions of two tensors of the same extents; their types and
// layouts may differ.
ErrorStats compare(const HostTensor& actual, const HostTensor& expected);
// What rounding `exact` to `type` costs on its own: the error any output in `type` carries.
ErrorStats rounding_error(const std::vector<double>& exact, DType type);

enum class Pass { forward, backward };

// The relative L2 error a result in `type` may have against float64 attention on the same (already
// rounded) inputs: twice `rounding_baseline`, what rounding alone costs (the FlashAttention
// criterion), plus a floor for fp32 accumulation. For the forward pass the baseline is the error
// of the exact O rounded to `type`; for the backward pass add the effect of computing
// delta = dO . O from the rounded O the backward is given.
double allowed_relative_error(DType type, Pass pass, double rounding_baseline);

}  // namespace ffpa_tools
