// One strided-batched fp32 GEMM through cuBLASLt, described in row-major terms.
//
// cuBLASLt is column-major. A row-major matrix viewed column-major is its transpose, so the
// row-major C = op(A) * op(B) is computed as the column-major C^T = op(B)^T * op(A)^T: the
// operands swap places and m and n swap roles; no data moves.
#pragma once

#include "core/error.h"

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <climits>
#include <cstdint>
#include <memory>

namespace ffpa::reference {

// C (m x n) = alpha * op(A) (m x k) * op(B) (k x n) + beta * C, for `batch` matrices at fixed
// element strides. lda/ldb/ldc are the row strides of the matrices as stored (A is stored k x m
// when transA, m x k otherwise; likewise B).
struct RowMajorGemm {
  bool transA = false;
  bool transB = false;
  int64_t m = 0, n = 0, k = 0;
  int64_t lda = 0, ldb = 0, ldc = 0;
  int64_t strideA = 0, strideB = 0, strideC = 0;
  int32_t batch = 1;
};

// The shape of a batch of packed matrices: each operand stored densely, row after row, one
// matrix after the other; only the transpositions and m, n, k vary.
inline RowMajorGemm packedGemm(bool transA, bool transB, int64_t m, int64_t n, int64_t k,
                               int64_t batch) {
  // The chunking keeps these within int32 (cuBLASLt's batch count type); past it is a bug.
  require(batch >= 1 && batch <= INT32_MAX && m <= INT32_MAX && n <= INT32_MAX && k <= INT32_MAX,
          FFPA_STATUS_INTERNAL_ERROR, "GEMM extents out of range: ", m, " x ", n, " x ", k,
          ", batch ", batch);
  RowMajorGemm g;
  g.transA = transA;
  g.transB = transB;
  g.m = m, g.n = n, g.k = k;
  g.lda = transA ? m : k, g.ldb = transB ? k : n, g.ldc = n;
  g.strideA = m * k, g.strideB = k * n, g.strideC = m * n;
  g.batch = static_cast<int32_t>(batch);
  return g;
}

class StridedBatchedGemm {
 public:
  // Creates the descriptors and picks an algorithm for at most `workspaceBytes` of scratch.
  // Computes in full fp32 (CUBLAS_COMPUTE_32F: no TF32), as a reference must.
  StridedBatchedGemm(cublasLtHandle_t lt, const RowMajorGemm& shape, size_t workspaceBytes);

  // Enqueues the product; allocates nothing, synchronizes nothing.
  void run(cublasLtHandle_t lt, float alpha, const float* a, const float* b, float beta, float* c,
           void* workspace, size_t workspaceBytes, cudaStream_t stream) const;

 private:
  struct Descriptors;
  std::shared_ptr<const Descriptors> descriptors_;
};

}  // namespace ffpa::reference
