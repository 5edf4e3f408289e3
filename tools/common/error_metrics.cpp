#include "common/error_metrics.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <stdexcept>

namespace ffpa_tools {

std::string ErrorStats::to_string() const {
  char text[128];
  std::snprintf(text, sizeof text, "rel L2 %.3e, max abs %.3e over %lld elements", rel_l2, max_abs,
                static_cast<long long>(count));
  return text;
}

void ErrorAccumulator::add(double actual, double expected) {
  ++count_;
  if (std::isnan(actual) || std::isnan(expected)) {
    broken_ = true;
  } else if (std::isinf(actual) || std::isinf(expected)) {
    broken_ = broken_ || actual != expected;
  } else {
    const double diff = actual - expected;
    diff_squares_ += diff * diff;
    expected_squares_ += expected * expected;
    max_abs_ = std::max(max_abs_, std::fabs(diff));
  }
}

ErrorStats ErrorAccumulator::result() const {
  constexpr double kInfinity = std::numeric_limits<double>::infinity();
  ErrorStats stats;
  stats.count = count_;
  if (broken_) {
    stats.rel_l2 = kInfinity;
    stats.max_abs = kInfinity;
    return stats;
  }
  stats.max_abs = max_abs_;
  if (expected_squares_ > 0.0) {
    stats.rel_l2 = std::sqrt(diff_squares_ / expected_squares_);
  } else {
    stats.rel_l2 = diff_squares_ > 0.0 ? kInfinity : 0.0;
  }
  return stats;
}

ErrorStats compare(const std::vector<double>& actual, const std::vector<double>& expected) {
  if (actual.size() != expected.size()) throw std::invalid_argument("compare: sizes differ");
  ErrorAccumulator error;
  for (size_t i = 0; i < actual.size(); ++i) error.add(actual[i], expected[i]);
  return error.result();
}

ErrorStats compare(const HostTensor& actual, const HostTensor& expected) {
  const int64_t* d = actual.layout().dims;
  if (!std::equal(d, d + 4, expected.layout().dims)) {
    throw std::invalid_argument("compare: tensor extents differ");
  }
  ErrorAccumulator error;
  for (int64_t i0 = 0; i0 < d[0]; ++i0)
    for (int64_t i1 = 0; i1 < d[1]; ++i1)
      for (int64_t i2 = 0; i2 < d[2]; ++i2)
        for (int64_t i3 = 0; i3 < d[3]; ++i3)
          error.add(actual.get(i0, i1, i2, i3), expected.get(i0, i1, i2, i3));
  return error.result();
}

ErrorStats rounding_error(const std::vector<double>& exact, DType type) {
  ErrorAccumulator error;
  for (double value : exact) error.add(round_to(type, value), value);
  return error.result();
}

double allowed_relative_error(DType type, Pass pass, double rounding_baseline) {
  // fp32 sums over up to a few thousand terms stay near 1e-6 relative; the backward's
  // dP - delta can cancel, so it gets more room.
  const double floor = pass == Pass::backward ? 1e-4 : type == DType::float32 ? 2e-5 : 5e-5;
  return 2.0 * rounding_baseline + floor;
}

}  // namespace ffpa_tools
