#include "sm90/row_maps.h"

#include "sm90/forward_params.h"

#include <limits>

namespace ffpa::sm90 {
namespace {

// The byte strides of rows, heads and batch; a dimension of extent 1 is never stepped over, and
// gets the stride a packed tensor would have (callers may give it any).
void byteStrides(const Strides& strides, const int64_t (&extents)[3], int64_t dim, uint64_t (&out)[4]) {
  constexpr int kElementBytes = 2;
  int64_t packed = dim * kElementBytes;
  for (int d = 1; d <= 3; ++d) {
    const int64_t given = strides[3 - d] * kElementBytes;
    out[d] = uint64_t(extents[d - 1] == 1 ? packed : given);
    packed = int64_t(out[d]) * extents[d - 1];
  }
}

}  // namespace

TensorMapSpec rowMap(const void* base, int64_t dim, int64_t rows, int64_t heads, int64_t batch,
                     const Strides& strides) {
  TensorMapSpec spec;
  spec.base = base;
  spec.rank = 4;
  spec.elementBytes = 2;
  spec.dims[0] = uint64_t(dim);
  spec.dims[1] = uint64_t(rows);
  spec.dims[2] = uint64_t(heads);
  spec.dims[3] = uint64_t(batch);
  byteStrides(strides, {rows, heads, batch}, dim, spec.strideBytes);
  spec.box[0] = kBlockColumns;
  spec.box[1] = kRows;
  spec.box[2] = 1;
  spec.box[3] = 1;
  return spec;
}

GradientMaps gradientMaps(const AttentionProblem& p, const TensorArgs& tensors) {
  return {rowMap(tensors.q, p.headDimQk, p.seqQ, p.headsQ, p.batch, p.q),
          rowMap(tensors.k, p.headDimQk, p.seqKv, p.headsKv, p.batch, p.k),
          rowMap(tensors.v, p.headDimV, p.seqKv, p.headsKv, p.batch, p.v),
          rowMap(tensors.dO, p.headDimV, p.seqQ, p.headsQ, p.batch, p.dO)};
}

bool rowMapAddressable(const Strides& strides, int64_t dim, int64_t rows, int64_t heads, int64_t batch) {
  uint64_t bytes[4];
  byteStrides(strides, {rows, heads, batch}, dim, bytes);
  bool fine = strides[3] == 1;
  for (int d = 1; d <= 3; ++d) fine = fine && bytes[d] % 16 == 0 && bytes[d] > 0 && bytes[d] < (uint64_t{1} << 40);
  return fine;
}

std::string sizeRefusal(const AttentionProblem& p) {
  constexpr int64_t kMaxLength = std::numeric_limits<int32_t>::max();
  if (p.seqQ > kMaxLength || p.seqKv > kMaxLength || p.batch > kMaxLength || p.headsQ > kMaxLength) {
    return "lengths, heads and batch must stay below 2^31";
  }
  return {};
}

std::string gradientOperandsRefusal(const AttentionProblem& p) {
  if (std::string why = sizeRefusal(p); !why.empty()) return why;
  if (!rowMapAddressable(p.q, p.headDimQk, p.seqQ, p.headsQ, p.batch) ||
      !rowMapAddressable(p.k, p.headDimQk, p.seqKv, p.headsKv, p.batch) ||
      !rowMapAddressable(p.v, p.headDimV, p.seqKv, p.headsKv, p.batch) ||
      !rowMapAddressable(p.dO, p.headDimV, p.seqQ, p.headsQ, p.batch)) {
    return "TMA needs Q, K, V and dO strides (batch, head, row) that are positive multiples of 16 bytes";
  }
  return {};
}

}  // namespace ffpa::sm90
