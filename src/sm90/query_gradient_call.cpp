#include "sm90/query_gradient_call.h"

#include "core/error.h"
#include "core/launch_grid.h"
#include "sm90/row_maps.h"
#include "sm90/sliced_tiles.h"

namespace ffpa::sm90 {

std::string queryGradientRefusal(const AttentionProblem& p) {
  if (p.dtype != FFPA_DATA_TYPE_FLOAT16 && p.dtype != FFPA_DATA_TYPE_BFLOAT16) {
    return "the sm90 dQ kernel computes fp16 and bf16";
  }
  if (p.headDimQk < kMinGradientDimQk || p.headDimQk > kMaxGradientDim) {
    return cat("d_qk = ", p.headDimQk, " is outside the sm90 dQ kernel's ", kMinGradientDimQk, "..",
               kMaxGradientDim);
  }
  if (p.headDimV > kMaxGradientDim) {
    return cat("d_v = ", p.headDimV, " is above the sm90 dQ kernel's ", kMaxGradientDim);
  }
  if (p.headDimQk % 16 != 0 || p.headDimV % 16 != 0) return "the sm90 dQ kernel needs head dims in multiples of 16";
  return gradientOperandsRefusal(p);
}

QueryGradientShape queryGradientShape(const AttentionProblem& p) {
  const int cluster = gradientClusterSize(static_cast<int>(p.headDimQk), static_cast<int>(p.headDimV));
  return {gradientInstanceDimQk(static_cast<int>(p.headDimQk), cluster), cluster};
}

QueryGradientArguments queryGradientLayoutOf(const AttentionProblem& p) {
  QueryGradientArguments a{};
  a.headDimQk = static_cast<int32_t>(p.headDimQk);
  a.headDimV = static_cast<int32_t>(p.headDimV);
  const QueryGradientShape shape = queryGradientShape(p);
  queryGradientLayout(a, shape.headDimQk, shape.clusterSize);
  return a;
}

uint32_t queryGradientSharedBytes(const AttentionProblem& p) { return queryGradientLayoutOf(p).sharedBytes; }

QueryGradientCall describeQueryGradientCall(const AttentionProblem& p, const TensorArgs& tensors,
                                            const float* rowStats, bool gridDnhb) {
  QueryGradientCall call{};
  QueryGradientArguments& a = call.arguments;
  a.dq = tensors.dq;
  for (int i = 0; i < 3; ++i) a.dqStrides[i] = p.dq[i];
  copyGradientSizes(p, rowStats, gridDnhb, a);
  const QueryGradientShape shape = queryGradientShape(p);
  queryGradientLayout(a, shape.headDimQk, shape.clusterSize);
  call.maps = gradientMaps(p, tensors);
  const int64_t ctas = ctasAlong(p, tensors, OwnedAxis::queries, shape.clusterSize, a.sliced);
  gridExtents(ctas, p.batch, p.headsQ, gridDnhb, call.grid);
  return call;
}

}  // namespace ffpa::sm90
