// The plan payloads of the reference path: the chunking, the scratch layout and, on a real
// device, the prepared cuBLASLt GEMMs for each chunk shape (full and tail chunks differ).
#pragma once

#include "core/plan.h"
#include "reference/chunking.h"
#include "reference/cublaslt_gemm.h"

#include <memory>
#include <vector>

namespace ffpa::reference {

// The (at most four) chunk shapes of a problem: full or tail in units, full or tail in rows.
struct ChunkShape {
  int64_t units;
  int64_t rows;
};
std::vector<ChunkShape> chunkShapes(const ChunkPlan& chunks, int64_t seqQ);

class ForwardPlan final : public PlanPayload {
 public:
  ForwardPlan(const AttentionProblem& problem, const ChunkPlan& chunks, const DeviceRuntime* runtime);
  void launch(const LaunchArgs& args) const override;
  const ForwardBuffers& buffers() const { return buffers_; }

 private:
  struct Gemms {
    ChunkShape shape;
    StridedBatchedGemm scores;  // S = scale * Q K^T
    StridedBatchedGemm output;  // O = P V
  };
  const Gemms& gemmsFor(int64_t units, int64_t rows) const;

  ChunkPlan chunks_;
  ForwardBuffers buffers_;
  std::vector<Gemms> gemms_;
};

class BackwardPlan final : public PlanPayload {
 public:
  BackwardPlan(const AttentionProblem& problem, const ChunkPlan& chunks, const DeviceRuntime* runtime);
  void launch(const LaunchArgs& args) const override;
  const BackwardBuffers& buffers() const { return buffers_; }

 private:
  struct Gemms {
    ChunkShape shape;
    StridedBatchedGemm scores;  // S = scale * Q K^T
    StridedBatchedGemm dv;      // dV += P^T dO
    StridedBatchedGemm dp;      // dP = dO V^T
    StridedBatchedGemm dq;      // dQ = scale * dS K
    StridedBatchedGemm dk;      // dK += scale * dS^T Q
  };
  const Gemms& gemmsFor(int64_t units, int64_t rows) const;

  ChunkPlan chunks_;
  BackwardBuffers buffers_;
  std::vector<Gemms> gemms_;
};

}  // namespace ffpa::reference
