#include "sm90/key_gradient_call.h"

#include "core/error.h"
#include "core/launch_grid.h"
#include "sm90/row_maps.h"
#include "sm90/sliced_tiles.h"

namespace ffpa::sm90 {

std::string keyGradientRefusal(const AttentionProblem& p) {
  if (p.dtype != FFPA_DATA_TYPE_FLOAT16 && p.dtype != FFPA_DATA_TYPE_BFLOAT16) {
    return "the sm90 dK/dV kernel computes fp16 and bf16";
  }
  const int64_t larger = p.headDimQk > p.headDimV ? p.headDimQk : p.headDimV;
  if (larger < kMinKeyGradientDim || larger > kMaxKeyGradientDim) {
    return cat("max(d_qk, d_v) = ", larger, " is outside the sm90 dK/dV kernel's ", kMinKeyGradientDim, "..",
               kMaxKeyGradientDim);
  }
  if (p.headDimQk % 16 != 0 || p.headDimV % 16 != 0) return "the sm90 dK/dV kernel needs head dims in multiples of 16";
  return gradientOperandsRefusal(p);
}

KeyGradientShape keyGradientShape(const AttentionProblem& p) {
  const int qk = static_cast<int>(p.headDimQk), v = static_cast<int>(p.headDimV);
  return {keyGradientInstanceDim(qk, v), keyGradientClusterSize(qk, v)};
}

KeyGradientArguments keyGradientLayoutOf(const AttentionProblem& p) {
  KeyGradientArguments a{};
  a.headDimQk = static_cast<int32_t>(p.headDimQk);
  a.headDimV = static_cast<int32_t>(p.headDimV);
  const KeyGradientShape shape = keyGradientShape(p);
  keyGradientLayout(a, shape.headDim, shape.clusterSize);
  return a;
}

uint32_t keyGradientSharedBytes(const AttentionProblem& p) { return keyGradientLayoutOf(p).sharedBytes; }

KeyGradientCall describeKeyGradientCall(const AttentionProblem& p, const TensorArgs& tensors, const float* rowStats,
                                        bool gridDnhb) {
  KeyGradientCall call{};
  KeyGradientArguments& a = call.arguments;
  a.dk = tensors.dk;
  a.dv = tensors.dv;
  for (int i = 0; i < 3; ++i) {
    a.dkStrides[i] = p.dk[i];
    a.dvStrides[i] = p.dv[i];
  }
  copyGradientSizes(p, rowStats, gridDnhb, a);
  a.headsKv = static_cast<int32_t>(p.headsKv);
  call.shape = keyGradientShape(p);
  keyGradientLayout(a, call.shape.headDim, call.shape.clusterSize);
  call.maps = gradientMaps(p, tensors);
  const int64_t ctas = ctasAlong(p, tensors, OwnedAxis::keys, call.shape.clusterSize, a.sliced);
  gridExtents(ctas, p.batch, p.headsKv, gridDnhb, call.grid);
  return call;
}

}  // namespace ffpa::sm90
