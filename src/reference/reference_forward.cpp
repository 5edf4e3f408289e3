// Forward on the reference path, per chunk: gather K, V (once per unit chunk) and Q rows to fp32;
// S = scale * Q K^T; softmax with mask and LSE; O = P V; round O into the caller's tensor.
#include "reference/reference_plans.h"

#include "core/error.h"
#include "core/workspace_layout.h"
#include "reference/reference_kernels.h"

#include <algorithm>

namespace ffpa::reference {

std::vector<ChunkShape> chunkShapes(const ChunkPlan& c, int64_t seqQ) {
  std::vector<ChunkShape> shapes;
  const int64_t unitTail = c.units % c.unitsPerChunk;
  const int64_t rowTail = seqQ % c.rowsPerChunk;
  for (const int64_t units : {std::min(c.unitsPerChunk, c.units), unitTail}) {
    for (const int64_t rows : {c.rowsPerChunk, rowTail}) {
      if (units > 0 && rows > 0) shapes.push_back({units, rows});
    }
  }
  return shapes;
}

ForwardPlan::ForwardPlan(const AttentionProblem& p, const ChunkPlan& chunks,
                         const DeviceRuntime* runtime)
    : chunks_(chunks), buffers_(forwardBuffers(p, chunks)) {
  if (runtime == nullptr) return;  // a described device: sizes only
  for (const ChunkShape& shape : chunkShapes(chunks, p.seqQ)) {
    const int64_t m = chunks.group * shape.rows;  // stacked query rows of one unit
    gemms_.push_back(
        {shape,
         StridedBatchedGemm(runtime->lt, packedGemm(false, true, m, p.seqKv, p.headDimQk, shape.units),
                            kCublasLtWorkspaceBytes),
         StridedBatchedGemm(runtime->lt, packedGemm(false, false, m, p.headDimV, p.seqKv, shape.units),
                            kCublasLtWorkspaceBytes)});
  }
}

const ForwardPlan::Gemms& ForwardPlan::gemmsFor(int64_t units, int64_t rows) const {
  for (const Gemms& g : gemms_) {
    if (g.shape.units == units && g.shape.rows == rows) return g;
  }
  fail(FFPA_STATUS_INTERNAL_ERROR,
       cat("reference forward: no GEMMs prepared for ", units, " units x ", rows, " rows"));
}

void ForwardPlan::launch(const LaunchArgs& args) const {
  const AttentionProblem& p = args.problem;
  const TensorArgs& t = args.tensors;
  cudaStream_t stream = args.stream;
  cublasLtHandle_t lt = args.runtime.lt;
  void* ws = args.workspace;
  float* q = slice<float>(ws, buffers_.q);
  float* k = slice<float>(ws, buffers_.k);
  float* v = slice<float>(ws, buffers_.v);
  float* scores = slice<float>(ws, buffers_.scores);
  float* out = slice<float>(ws, buffers_.out);
  void* ltWorkspace = slice<void>(ws, buffers_.lt);
  const KeyMask mask{p.causal, p.causalOffset(), t.slices, p.keyLengths};

  for (int64_t u0 = 0; u0 < chunks_.units; u0 += chunks_.unitsPerChunk) {
    ChunkGeometry chunk{u0, std::min(chunks_.unitsPerChunk, chunks_.units - u0), p.headsKv,
                        chunks_.group, 0, 0};
    gatherUnitRows({t.k, p.dtype, p.k}, chunk, p.seqKv, p.headDimQk, p.keyLengths, k, stream);
    gatherUnitRows({t.v, p.dtype, p.v}, chunk, p.seqKv, p.headDimV, p.keyLengths, v, stream);
    for (int64_t r0 = 0; r0 < p.seqQ; r0 += chunks_.rowsPerChunk) {
      chunk.firstRow = r0;
      chunk.rows = std::min(chunks_.rowsPerChunk, p.seqQ - r0);
      const Gemms& gemms = gemmsFor(chunk.units, chunk.rows);
      gatherQueryRows({t.q, p.dtype, p.q}, chunk, p.headDimQk, q, stream);
      gemms.scores.run(lt, p.scale, q, k, 0.0f, scores, ltWorkspace, kCublasLtWorkspaceBytes, stream);
      softmaxRows(scores, chunk, p.seqKv, mask, t.lseOut, p.lse, stream);
      gemms.output.run(lt, 1.0f, scores, v, 0.0f, out, ltWorkspace, kCublasLtWorkspaceBytes, stream);
      scatterQueryRows(out, {t.out, p.dtype, p.o}, chunk, p.headDimV, stream);
    }
  }
}

}  // namespace ffpa::reference
