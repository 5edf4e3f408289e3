// The arithmetic of merging partial attention results, one query row at a time (the formula of
// the `merge` group of ffpa/ffpa.h). Shared by the merge kernel and the host tests that hold it to
// float64, so both run the same code.
#pragma once

#include <cmath>

#if defined(__CUDACC__)
#define FFPA_HOST_DEVICE __host__ __device__
#else
#define FFPA_HOST_DEVICE
#endif

namespace ffpa::merge {

// A max that keeps NaN whichever side it is on (fmaxf drops it): a NaN log-sum-exp must make
// its row NaN, not be passed over.
FFPA_HOST_DEVICE inline float maxKeepingNaN(float a, float b) { return (a != a || a > b) ? a : b; }

// exp(LSE_i - m) of one part, m the row's largest LSE_i. A part no key of which the row sees
// (LSE_i = -infinity) scales by 0, also when m is -infinity too (where the formula gives NaN).
FFPA_HOST_DEVICE inline float partScale(float lse, float rowMax) {
  return lse == -INFINITY ? 0.0f : expf(lse - rowMax);
}

struct RowTotals {
  float max;       // m = max_i LSE_i (NaN if any is)
  float scaleSum;  // sum_i exp(LSE_i - m): at least 1 when m is finite, 0 when no part has keys
};

// `lseAt(i)` reads LSE_i of this row, i < count.
template <class LseAt>
FFPA_HOST_DEVICE RowTotals rowTotals(int count, LseAt lseAt) {
  float rowMax = -INFINITY;
  for (int i = 0; i < count; ++i) rowMax = maxKeepingNaN(rowMax, lseAt(i));
  float sum = 0.0f;
  for (int i = 0; i < count; ++i) sum += partScale(lseAt(i), rowMax);
  return {rowMax, sum};
}

// LSE = m + log(sum): the log of the whole softmax denominator; -infinity for a row no part sees.
FFPA_HOST_DEVICE inline float mergedLse(RowTotals totals) {
  return totals.max == -INFINITY ? -INFINITY : totals.max + logf(totals.scaleSum);
}

// exp(LSE_i - LSE), the weight of O_i in O: 0 exactly for a part without keys (whose O_i is not
// read), NaN whenever the totals are.
FFPA_HOST_DEVICE inline float partWeight(float lse, RowTotals totals) {
  const float scale = partScale(lse, totals.max);
  return scale == 0.0f ? 0.0f : scale / totals.scaleSum;
}

}  // namespace ffpa::merge
