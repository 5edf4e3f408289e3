#include "sm90/forward_call.h"

#include "core/error.h"
#include "core/launch_grid.h"

#include <cstdint>
#include <limits>

namespace ffpa::sm90 {
namespace {

constexpr int64_t kMaxLength = std::numeric_limits<int32_t>::max();

// The byte strides of rows, heads and batch; a dimension of extent 1 is never stepped over, and
// gets the stride a packed tensor would have (callers may give it any).
void byteStrides(const Strides& strides, const int64_t (&extents)[3], int elementBytes, int64_t dim,
                 uint64_t (&out)[4]) {
  int64_t packed = dim * elementBytes;
  for (int d = 1; d <= 3; ++d) {
    const int64_t given = strides[3 - d] * elementBytes;
    out[d] = uint64_t(extents[d - 1] == 1 ? packed : given);
    packed = int64_t(out[d]) * extents[d - 1];
  }
}

// A rank-4 map over [batch][head][row][d] (innermost first) of elements of `elementBytes`.
TensorMapSpec mapOf(const void* base, int elementBytes, int64_t dim, int64_t rows, int64_t heads,
                    int64_t batch, const Strides& strides) {
  TensorMapSpec spec;
  spec.base = base;
  spec.rank = 4;
  spec.elementBytes = elementBytes;
  spec.dims[0] = uint64_t(dim);
  spec.dims[1] = uint64_t(rows);
  spec.dims[2] = uint64_t(heads);
  spec.dims[3] = uint64_t(batch);
  byteStrides(strides, {rows, heads, batch}, elementBytes, dim, spec.strideBytes);
  spec.box[0] = kBlockColumns;
  spec.box[1] = kRows;
  spec.box[2] = 1;
  spec.box[3] = 1;
  return spec;
}

// TMA needs a unit stride on d and byte strides that are multiples of 16 below 2^40.
bool addressable(const Strides& strides, const int64_t (&extents)[3], int64_t dim) {
  uint64_t bytes[4];
  byteStrides(strides, extents, 2, dim, bytes);
  bool fine = strides[3] == 1;
  for (int d = 1; d <= 3; ++d) fine = fine && bytes[d] % 16 == 0 && bytes[d] > 0 && bytes[d] < (uint64_t{1} << 40);
  return fine;
}

}  // namespace

int instanceHeadDimV(int64_t headDimV) {
  const int64_t multiple = kBlockColumns * clusterSizeFor(static_cast<int>(headDimV));
  return static_cast<int>((headDimV + multiple - 1) / multiple * multiple);
}

int64_t gridBlocksX(const AttentionProblem& p) {
  return (p.seqQ + kRows - 1) / kRows * clusterSizeFor(static_cast<int>(p.headDimV));
}

std::string forwardRefusal(const AttentionProblem& p) {
  if (p.dtype != FFPA_DATA_TYPE_FLOAT16 && p.dtype != FFPA_DATA_TYPE_BFLOAT16) {
    return "the sm90 forward computes fp16 and bf16";
  }
  if (p.headDimV <= 256 || p.headDimV > 1024) return cat("d_v = ", p.headDimV, " is outside the sm90 forward's 257..1024");
  if (p.headDimV % 16 != 0) return cat("d_v = ", p.headDimV, " is not a multiple of 16");
  const int maxQk = maxHeadDimQk(clusterSizeFor(static_cast<int>(p.headDimV)));
  if (p.headDimQk % 16 != 0 || p.headDimQk > maxQk) {
    return cat("d_qk = ", p.headDimQk, " is not a multiple of 16 up to ", maxQk, " (with d_v = ", p.headDimV, ")");
  }
  if (p.seqQ > kMaxLength || p.seqKv > kMaxLength || p.batch > kMaxLength || p.headsQ > kMaxLength) {
    return "lengths, heads and batch must stay below 2^31";
  }
  if (!addressable(p.q, {p.seqQ, p.headsQ, p.batch}, p.headDimQk) ||
      !addressable(p.k, {p.seqKv, p.headsKv, p.batch}, p.headDimQk) ||
      !addressable(p.v, {p.seqKv, p.headsKv, p.batch}, p.headDimV)) {
    return "TMA needs Q, K and V strides (batch, head, row) that are positive multiples of 16 bytes";
  }
  return {};
}

ForwardCall describeForwardCall(const AttentionProblem& p, const TensorArgs& tensors, bool gridDnhb,
                                int exp2Emulated) {
  ForwardCall call{};
  ForwardArguments& a = call.arguments;
  a.o = tensors.out;
  a.lse = p.hasLse ? tensors.lseOut : nullptr;
  for (int i = 0; i < 3; ++i) {
    a.oStrides[i] = p.o[i];
    a.lseStrides[i] = p.lse[i];
  }
  copyProblemSizes(p, a);
  a.headDimQk = static_cast<int32_t>(p.headDimQk);
  a.headDimV = static_cast<int32_t>(p.headDimV);
  a.gridDnhb = gridDnhb;
  a.exp2Emulated = exp2Emulated;
  call.clusterSize = clusterSizeFor(a.headDimV);
  forwardLayout(a);
  call.q = mapOf(tensors.q, 2, p.headDimQk, p.seqQ, p.headsQ, p.batch, p.q);
  call.k = mapOf(tensors.k, 2, p.headDimQk, p.seqKv, p.headsKv, p.batch, p.k);
  call.v = mapOf(tensors.v, 2, p.headDimV, p.seqKv, p.headsKv, p.batch, p.v);
  gridExtents(gridBlocksX(p), p.batch, p.headsQ, gridDnhb, call.grid);
  return call;
}

}  // namespace ffpa::sm90
