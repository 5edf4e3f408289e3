// The reference path's chunking and GEMM shapes: pure host arithmetic.
#include "reference/chunking.h"
#include "reference/cublaslt_gemm.h"
#include "reference/reference_plans.h"

#include <doctest/doctest.h>

using namespace ffpa;
using namespace ffpa::reference;

namespace {

AttentionProblem problem(Direction direction, int64_t b, int64_t hq, int64_t hkv, int64_t nq, int64_t nkv,
                         int64_t dqk, int64_t dv) {
  AttentionProblem p;
  p.direction = direction;
  p.batch = b;
  p.headsQ = hq;
  p.headsKv = hkv;
  p.seqQ = nq;
  p.seqKv = nkv;
  p.headDimQk = dqk;
  p.headDimV = dv;
  return p;
}

}  // namespace

TEST_CASE("a generous budget takes whole units; a tight one splits rows; one row is the floor") {
  const AttentionProblem p = problem(Direction::Forward, 2, 16, 4, 1000, 1000, 512, 512);
  const ChunkPlan whole = chooseChunks(p, int64_t{1} << 40);
  CHECK(whole.units == 8);
  CHECK(whole.group == 4);
  CHECK(whole.unitsPerChunk == 8);
  CHECK(whole.rowsPerChunk == 1000);
  CHECK(whole.chunkCount(p.seqQ) == 1);

  const int64_t budget = int64_t{16} << 20;
  const ChunkPlan tight = chooseChunks(p, budget);
  CHECK(tight.unitsPerChunk == 1);
  CHECK(tight.rowsPerChunk > 1);
  CHECK(tight.rowsPerChunk < 1000);
  const ForwardBuffers buffers = forwardBuffers(p, tight);
  CHECK(buffers.total - kCublasLtWorkspaceBytes <= static_cast<size_t>(budget) + 6 * 256);

  const ChunkPlan floor = chooseChunks(p, 4096);
  CHECK(floor.unitsPerChunk == 1);
  CHECK(floor.rowsPerChunk == 1);
  CHECK(floor.chunkCount(p.seqQ) == 8 * 1000);
}

TEST_CASE("chunk shapes cover full and tail chunks in units and rows") {
  ChunkPlan c;
  c.units = 7;
  c.group = 2;
  c.unitsPerChunk = 3;
  c.rowsPerChunk = 40;
  const auto shapes = chunkShapes(c, 100);
  REQUIRE(shapes.size() == 4);
  CHECK(shapes[0].units == 3);
  CHECK(shapes[0].rows == 40);
  CHECK(shapes[1].rows == 20);
  CHECK(shapes[2].units == 1);
  c.unitsPerChunk = 7;
  c.rowsPerChunk = 100;
  CHECK(chunkShapes(c, 100).size() == 1);
}

TEST_CASE("backward buffers hold every fp32 operand, aligned and disjoint") {
  const AttentionProblem p = problem(Direction::Backward, 1, 8, 2, 64, 80, 576, 512);
  const ChunkPlan c = chooseChunks(p, int64_t{1} << 30);
  const BackwardBuffers b = backwardBuffers(p, c);
  const size_t offsets[] = {b.q, b.k, b.v, b.dOut, b.probs, b.dScores, b.dq, b.dk, b.dv, b.delta, b.lt};
  for (size_t i = 0; i < std::size(offsets); ++i) {
    CHECK(offsets[i] % 256 == 0);
    if (i > 0) CHECK(offsets[i] > offsets[i - 1]);
  }
  const size_t stacked = 4 * 64;  // group 4 x 64 rows per unit, 2 units
  CHECK(b.k - b.q >= 2 * stacked * 576 * 4);
  CHECK(b.total >= b.lt + kCublasLtWorkspaceBytes);
}

TEST_CASE("packed GEMM shapes: leading dimensions and batch strides of dense operands") {
  // dK[Nkv, D] += dS^T[Nkv, M] Q[M, D] with dS stored [M, Nkv].
  const RowMajorGemm g = packedGemm(true, false, 80, 576, 256, 2);
  CHECK(g.lda == 80);   // dS rows are Nkv long
  CHECK(g.ldb == 576);  // Q rows are D long
  CHECK(g.ldc == 576);
  CHECK(g.strideA == 80 * 256);
  CHECK(g.strideB == 256 * 576);
  CHECK(g.strideC == 80 * 576);
  CHECK(g.batch == 2);
  const RowMajorGemm s = packedGemm(false, true, 256, 80, 576, 1);  // S = Q K^T
  CHECK(s.lda == 576);
  CHECK(s.ldb == 576);
  CHECK(s.ldc == 80);
}

TEST_CASE("chunks stay within cuBLASLt's int32 extents however large the batch") {
  const AttentionProblem p = problem(Direction::Forward, (int64_t{1} << 30) + 1, 4, 4, 1, 1, 1, 1);
  const ChunkPlan c = chooseChunks(p, int64_t{1} << 37);
  CHECK(c.units == ((int64_t{1} << 30) + 1) * 4);
  CHECK(c.unitsPerChunk <= INT32_MAX);
  CHECK(c.unitsPerChunk >= 1);
  for (const ChunkShape& shape : chunkShapes(c, p.seqQ)) {
    const RowMajorGemm g = packedGemm(false, true, c.group * shape.rows, p.seqKv, p.headDimQk, shape.units);
    CHECK(g.batch == shape.units);
  }
  // A huge GQA group caps the rows so that group * rows fits int32 too.
  const AttentionProblem wide = problem(Direction::Forward, 1, INT32_MAX, 1, 1000, 4, 1, 1);
  const ChunkPlan w = chooseChunks(wide, int64_t{1} << 50);
  CHECK(w.group * w.rowsPerChunk <= INT32_MAX);
}
