// Backward on the reference path. Per unit chunk: gather K and V, zero the fp32 dK/dV
// accumulators; per row chunk: recompute P from the forward's LSE, then
//   dV += P^T dO,  dP = dO V^T,  dS = P * (dP - rowsum(dO * O)),
//   dQ = scale * dS K (written out per row chunk),  dK += scale * dS^T Q;
// finally round dK/dV into the caller's tensors once. Stacking a unit's query heads makes the
// dK/dV GEMMs sum over the GQA group by themselves; nothing is accumulated in 16-bit memory and
// no atomics are used, so results are deterministic.
#include "reference/reference_plans.h"

#include "core/cuda_check.h"
#include "core/workspace_layout.h"
#include "reference/reference_kernels.h"

#include <algorithm>

namespace ffpa::reference {

BackwardPlan::BackwardPlan(const AttentionProblem& p, const ChunkPlan& chunks,
                           const DeviceRuntime* runtime)
    : chunks_(chunks), buffers_(backwardBuffers(p, chunks)) {
  if (runtime == nullptr) return;  // a described device: sizes only
  const auto gemm = [&](bool transA, bool transB, int64_t m, int64_t n, int64_t k, int64_t units) {
    return StridedBatchedGemm(runtime->lt, packedGemm(transA, transB, m, n, k, units), kCublasLtWorkspaceBytes);
  };
  for (const ChunkShape& s : chunkShapes(chunks, p.seqQ)) {
    const int64_t m = chunks.group * s.rows;  // stacked query rows of one unit
    gemms_.push_back({s,
                      gemm(false, true, m, p.seqKv, p.headDimQk, s.units),    // S = Q K^T
                      gemm(true, false, p.seqKv, p.headDimV, m, s.units),     // dV += P^T dO
                      gemm(false, true, m, p.seqKv, p.headDimV, s.units),     // dP = dO V^T
                      gemm(false, false, m, p.headDimQk, p.seqKv, s.units),   // dQ = dS K
                      gemm(true, false, p.seqKv, p.headDimQk, m, s.units)});  // dK += dS^T Q
  }
}

const BackwardPlan::Gemms& BackwardPlan::gemmsFor(int64_t units, int64_t rows) const {
  for (const Gemms& g : gemms_) {
    if (g.shape.units == units && g.shape.rows == rows) return g;
  }
  fail(FFPA_STATUS_INTERNAL_ERROR,
       cat("reference backward: no GEMMs prepared for ", units, " units x ", rows, " rows"));
}

void BackwardPlan::launch(const LaunchArgs& args) const {
  const AttentionProblem& p = args.problem;
  const TensorArgs& t = args.tensors;
  cudaStream_t stream = args.stream;
  cublasLtHandle_t lt = args.runtime.lt;
  void* ws = args.workspace;
  float* q = slice<float>(ws, buffers_.q);
  float* k = slice<float>(ws, buffers_.k);
  float* v = slice<float>(ws, buffers_.v);
  float* dOut = slice<float>(ws, buffers_.dOut);
  float* probs = slice<float>(ws, buffers_.probs);
  float* dScores = slice<float>(ws, buffers_.dScores);
  float* dq = slice<float>(ws, buffers_.dq);
  float* dk = slice<float>(ws, buffers_.dk);
  float* dv = slice<float>(ws, buffers_.dv);
  float* delta = slice<float>(ws, buffers_.delta);
  void* ltWs = slice<void>(ws, buffers_.lt);
  constexpr size_t ltBytes = kCublasLtWorkspaceBytes;
  const KeyMask mask{p.causal, p.causalOffset(), t.slices, p.keyLengths};

  for (int64_t u0 = 0; u0 < chunks_.units; u0 += chunks_.unitsPerChunk) {
    ChunkGeometry chunk{u0, std::min(chunks_.unitsPerChunk, chunks_.units - u0), p.headsKv,
                        chunks_.group, 0, 0};
    gatherUnitRows({t.k, p.dtype, p.k}, chunk, p.seqKv, p.headDimQk, p.keyLengths, k, stream);
    gatherUnitRows({t.v, p.dtype, p.v}, chunk, p.seqKv, p.headDimV, p.keyLengths, v, stream);
    const size_t kvElements = static_cast<size_t>(chunk.units * p.seqKv);
    checkCuda(cudaMemsetAsync(dk, 0, kvElements * p.headDimQk * sizeof(float), stream), "cudaMemsetAsync(dK)");
    checkCuda(cudaMemsetAsync(dv, 0, kvElements * p.headDimV * sizeof(float), stream), "cudaMemsetAsync(dV)");
    for (int64_t r0 = 0; r0 < p.seqQ; r0 += chunks_.rowsPerChunk) {
      chunk.firstRow = r0;
      chunk.rows = std::min(chunks_.rowsPerChunk, p.seqQ - r0);
      const Gemms& g = gemmsFor(chunk.units, chunk.rows);
      gatherQueryRows({t.q, p.dtype, p.q}, chunk, p.headDimQk, q, stream);
      gatherQueryRows({t.dO, p.dtype, p.dO}, chunk, p.headDimV, dOut, stream);
      rowDotProducts({t.o, p.dtype, p.o}, {t.dO, p.dtype, p.dO}, chunk, p.headDimV, delta, stream);
      g.scores.run(lt, p.scale, q, k, 0.0f, probs, ltWs, ltBytes, stream);
      probabilitiesFromLse(probs, chunk, p.seqKv, mask, t.lse, p.lse, stream);
      g.dv.run(lt, 1.0f, probs, dOut, 1.0f, dv, ltWs, ltBytes, stream);
      g.dp.run(lt, 1.0f, dOut, v, 0.0f, dScores, ltWs, ltBytes, stream);
      softmaxGradient(dScores, probs, delta, stackedRows(chunk), p.seqKv, stream);
      g.dq.run(lt, p.scale, dScores, k, 0.0f, dq, ltWs, ltBytes, stream);
      scatterQueryRows(dq, {t.dq, p.dtype, p.dq}, chunk, p.headDimQk, stream);
      g.dk.run(lt, p.scale, dScores, q, 1.0f, dk, ltWs, ltBytes, stream);
    }
    scatterUnitRows(dk, {t.dk, p.dtype, p.dk}, chunk, p.seqKv, p.headDimQk, stream);
    scatterUnitRows(dv, {t.dv, p.dtype, p.dv}, chunk, p.seqKv, p.headDimV, stream);
  }
}

}  // namespace ffpa::reference
