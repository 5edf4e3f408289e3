// The TMA maps of the sm90 forward as the driver receives them: what describeForwardCall derives
// from the caller's tensors (dims innermost first, byte strides, 64 x 64 boxes) and the checks
// tiledEncoding makes before cuTensorMapEncodeTiled (which needs a GPU driver) sees them.
#include "core/error.h"
#include "sm90/forward_call.h"
#include "sm90/tensor_map_encoding.h"

#include <doctest/doctest.h>

#include <string>

using namespace ffpa;
using namespace ffpa::sm90;

namespace {

// B=3, Hq=8, Hkv=2, Nq=300, Nkv=200, d_qk=576, d_v=512, fp16. Q and K are BNHD with rows padded
// to 640 elements; V is BHND packed.
AttentionProblem mlaProblem() {
  AttentionProblem p;
  p.batch = 3;
  p.headsQ = 8;
  p.headsKv = 2;
  p.seqQ = 300;
  p.seqKv = 200;
  p.headDimQk = 576;
  p.headDimV = 512;
  p.scale = 0.04f;
  p.q = {300 * 8 * 640, 640, 8 * 640, 1};  // [batch, head, row, d]
  p.k = {200 * 2 * 640, 640, 2 * 640, 1};
  p.v = {2 * 200 * 512, 200 * 512, 512, 1};
  p.o = {8 * 300 * 512, 300 * 512, 512, 1};
  return p;
}

void checkThrows(const TensorMapSpec& spec, const std::string& fragment) {
  try {
    tiledEncoding(spec);
    FAIL("no error for a map that breaks: ", fragment);
  } catch (const Error& e) {
    CHECK(e.status() == FFPA_STATUS_INTERNAL_ERROR);
    CHECK_MESSAGE(std::string(e.what()).find(fragment) != std::string::npos, e.what());
  }
}

}  // namespace

TEST_CASE("sm90 forward maps: dims innermost first, byte strides, 64 x 64 boxes, 128-byte swizzle") {
  alignas(16) static char tensors[3][64];
  TensorArgs args;
  args.q = tensors[0];
  args.k = tensors[1];
  args.v = tensors[2];
  const ForwardCall call = describeForwardCall(mlaProblem(), args, false);

  const TiledEncoding q = tiledEncoding(call.q);
  CHECK(q.base == tensors[0]);
  CHECK(q.rank == 4);
  CHECK(q.dataType == CU_TENSOR_MAP_DATA_TYPE_UINT16);
  const cuuint64_t qDims[] = {576, 300, 8, 3};
  const cuuint64_t qStrides[] = {8 * 640 * 2, 640 * 2, 300 * 8 * 640 * 2};  // row, head, batch (bytes)
  for (int d = 0; d < 4; ++d) CHECK(q.dims[d] == qDims[d]);
  for (int d = 0; d < 3; ++d) CHECK(q.strides[d] == qStrides[d]);
  const cuuint32_t box[] = {64, 64, 1, 1};
  for (int d = 0; d < 4; ++d) {
    CHECK(q.box[d] == box[d]);
    CHECK(q.elementStrides[d] == 1);
  }
  CHECK(q.swizzle == CU_TENSOR_MAP_SWIZZLE_128B);
  CHECK(q.interleave == CU_TENSOR_MAP_INTERLEAVE_NONE);
  CHECK(q.oobFill == CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);  // zeros past the tails

  const TiledEncoding k = tiledEncoding(call.k);  // GQA: the key/value heads
  CHECK(k.dims[2] == 2);
  CHECK(k.dims[1] == 200);
  const TiledEncoding v = tiledEncoding(call.v);
  CHECK(v.dims[0] == 512);
  CHECK(v.strides[0] == 512 * 2);
  CHECK(v.strides[1] == 200 * 512 * 2);
  CHECK(v.strides[2] == 2 * 200 * 512 * 2);

  // Grids: (tiles, B*H) and (tiles, H, B).
  CHECK(call.grid[0] == 5);
  CHECK(call.grid[1] == 24);
  CHECK(call.grid[2] == 1);
  const ForwardCall dnhb = describeForwardCall(mlaProblem(), args, true);
  CHECK(dnhb.grid[1] == 8);
  CHECK(dnhb.grid[2] == 3);
}

TEST_CASE("sm90 forward maps: a dimension of extent 1 gets a packed stride, whatever the caller gave") {
  AttentionProblem p = mlaProblem();
  p.batch = 1;
  p.q[0] = 7;  // never stepped over; TMA would refuse 14 bytes
  alignas(16) static char tensor[16];
  TensorArgs args;
  args.q = args.k = args.v = tensor;
  const TiledEncoding q = tiledEncoding(describeForwardCall(p, args, false).q);
  CHECK(q.strides[2] == 8 * 640 * 2);  // 8 heads of 1280 bytes: packed after the head dim
  CHECK(forwardRefusal(p).empty());
}

TEST_CASE("sm90 forward maps: what the driver would refuse is caught first, by name") {
  alignas(16) static char tensor[64];
  TensorArgs args;
  args.q = args.k = args.v = tensor;
  const TensorMapSpec good = describeForwardCall(mlaProblem(), args, false).q;
  CHECK_NOTHROW(tiledEncoding(good));

  TensorMapSpec misaligned = good;
  misaligned.base = tensor + 8;
  checkThrows(misaligned, "the base is not 16-byte aligned");
  TensorMapSpec oddStride = good;
  oddStride.strideBytes[1] = 1288;
  checkThrows(oddStride, "the stride of dim 1 is 1288 bytes");
  TensorMapSpec hugeStride = good;
  hugeStride.strideBytes[3] = uint64_t{1} << 40;
  checkThrows(hugeStride, "not a positive multiple of 16 below 2^40");
  TensorMapSpec narrowBox = good;
  narrowBox.box[0] = 32;
  checkThrows(narrowBox, "not the 128 of the swizzle");
  TensorMapSpec tallBox = good;
  tallBox.box[1] = 512;
  checkThrows(tallBox, "box 1 is 512");
  TensorMapSpec empty = good;
  empty.dims[2] = 0;
  checkThrows(empty, "dim 2 is 0");
  TensorMapSpec rank5 = good;
  rank5.rank = 5;
  checkThrows(rank5, "rank 5");
  TensorMapSpec wide = good;
  wide.elementBytes = 8;
  wide.box[0] = 16;
  checkThrows(wide, "element size 8");
}

TEST_CASE("sm90 forward: strides TMA cannot step are refused at planning time") {
  AttentionProblem p = mlaProblem();
  p.k[2] = 2 * 644;  // 2576-byte rows: fine
  CHECK(forwardRefusal(p).empty());
  p.k[2] = 2 * 644 + 4;  // 2584 bytes: not a multiple of 16
  CHECK(forwardRefusal(p).find("multiples of 16 bytes") != std::string::npos);
  p = mlaProblem();
  p.v[3] = 2;  // d not contiguous
  CHECK_FALSE(forwardRefusal(p).empty());
  p = mlaProblem();
  p.headDimV = 504;
  CHECK(forwardRefusal(p) == "d_v = 504 is not a multiple of 16");
}

TEST_CASE("sm90 forward: d_v above 512 runs in clusters of two CTAs, each with half of the head dims") {
  AttentionProblem p = mlaProblem();
  p.headDimQk = 1024;
  p.headDimV = 1024;
  p.q = {300 * 8 * 1024, 1024, 8 * 1024, 1};
  p.k = {200 * 2 * 1024, 1024, 2 * 1024, 1};
  p.v = {2 * 200 * 1024, 200 * 1024, 1024, 1};
  p.o = {8 * 300 * 1024, 300 * 1024, 1024, 1};
  CHECK(forwardRefusal(p).empty());
  CHECK(instanceHeadDimV(p.headDimV) == 1024);
  alignas(16) static char tensor[16];
  TensorArgs args;
  args.q = args.k = args.v = tensor;
  const ForwardCall call = describeForwardCall(p, args, false);
  CHECK(call.clusterSize == 2);
  CHECK(call.grid[0] == 2 * 5);  // two CTAs per 64 rows
  // Each CTA keeps 8 of the 16 blocks of Q, K and V, two P slots and the received partial S:
  // the largest layout, within the 227 KiB an H100 block may opt in to.
  const ForwardArguments& a = call.arguments;
  CHECK(a.kOffset - a.qOffset == 8 * kBlockBytes);
  CHECK(a.pOffset - a.vOffset == 8 * kBlockBytes);
  CHECK(a.statsOffset - a.exchangeOffset == kExchangeBytes);
  CHECK(a.sharedBytes <= 227u * 1024);
  // The maps cover the whole head dims; each CTA addresses its share by column.
  CHECK(tiledEncoding(call.q).dims[0] == 1024);

  // Uneven shares: rank 0 holds ceil(blocks / 2) blocks, rank 1 the rest, maybe none.
  CHECK(blockShare(9, 2, 0).first == 0);
  CHECK(blockShare(9, 2, 0).count == 5);
  CHECK(blockShare(9, 2, 1).first == 5);
  CHECK(blockShare(9, 2, 1).count == 4);
  CHECK(blockShare(1, 2, 1).count == 0);
  CHECK(blockShare(9, 1, 0).count == 9);
  // d_v 513..1024 rounds up to whole blocks per CTA (a multiple of 128); up to 512, of 64.
  CHECK(instanceHeadDimV(528) == 640);
  CHECK(instanceHeadDimV(656) == 768);
  CHECK(instanceHeadDimV(272) == 320);
  p.headDimV = 1040;
  CHECK(forwardRefusal(p) == "d_v = 1040 is outside the sm90 forward's 65..1024");
}
