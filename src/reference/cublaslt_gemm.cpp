#include "reference/cublaslt_gemm.h"

#include "core/cuda_check.h"

namespace ffpa::reference {

struct StridedBatchedGemm::Descriptors {
  cublasLtMatmulDesc_t matmul = nullptr;
  cublasLtMatrixLayout_t b = nullptr;  // cuBLASLt's "A": the row-major B
  cublasLtMatrixLayout_t a = nullptr;  // cuBLASLt's "B": the row-major A
  cublasLtMatrixLayout_t c = nullptr;
  cublasLtMatmulAlgo_t algo{};

  ~Descriptors() {
    if (c) cublasLtMatrixLayoutDestroy(c);
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (matmul) cublasLtMatmulDescDestroy(matmul);
  }
};

namespace {

// Stores the layout in `*layout` as soon as it exists, so the owner destroys it on any failure.
void makeLayout(cublasLtMatrixLayout_t* out, uint64_t rows, uint64_t cols, int64_t ld,
                int32_t batch, int64_t stride) {
  checkCublas(cublasLtMatrixLayoutCreate(out, CUDA_R_32F, rows, cols, ld), "cublasLtMatrixLayoutCreate");
  cublasLtMatrixLayout_t layout = *out;
  checkCublas(cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch, sizeof batch),
              "cublasLtMatrixLayoutSetAttribute(BATCH_COUNT)");
  checkCublas(cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                               &stride, sizeof stride),
              "cublasLtMatrixLayoutSetAttribute(STRIDED_BATCH_OFFSET)");
}

}  // namespace

StridedBatchedGemm::StridedBatchedGemm(cublasLtHandle_t lt, const RowMajorGemm& g,
                                       size_t workspaceBytes) {
  auto d = std::make_shared<Descriptors>();
  checkCublas(cublasLtMatmulDescCreate(&d->matmul, CUBLAS_COMPUTE_32F, CUDA_R_32F), "cublasLtMatmulDescCreate");
  const cublasOperation_t opB = g.transB ? CUBLAS_OP_T : CUBLAS_OP_N;  // on the row-major B
  const cublasOperation_t opA = g.transA ? CUBLAS_OP_T : CUBLAS_OP_N;  // on the row-major A
  checkCublas(cublasLtMatmulDescSetAttribute(d->matmul, CUBLASLT_MATMUL_DESC_TRANSA, &opB, sizeof opB),
              "cublasLtMatmulDescSetAttribute(TRANSA)");
  checkCublas(cublasLtMatmulDescSetAttribute(d->matmul, CUBLASLT_MATMUL_DESC_TRANSB, &opA, sizeof opA),
              "cublasLtMatmulDescSetAttribute(TRANSB)");

  // Column-major views: row-major B (k x n, or n x k when transposed) is its own transpose.
  makeLayout(&d->b, g.transB ? g.k : g.n, g.transB ? g.n : g.k, g.ldb, g.batch, g.strideB);
  makeLayout(&d->a, g.transA ? g.m : g.k, g.transA ? g.k : g.m, g.lda, g.batch, g.strideA);
  makeLayout(&d->c, g.n, g.m, g.ldc, g.batch, g.strideC);

  cublasLtMatmulPreference_t preference = nullptr;
  checkCublas(cublasLtMatmulPreferenceCreate(&preference), "cublasLtMatmulPreferenceCreate");
  const uint64_t limit = workspaceBytes;
  cublasStatus_t status = cublasLtMatmulPreferenceSetAttribute(
      preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &limit, sizeof limit);
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  if (status == CUBLAS_STATUS_SUCCESS) {
    status = cublasLtMatmulAlgoGetHeuristic(lt, d->matmul, d->b, d->a, d->c, d->c, preference, 1,
                                            &result, &found);
  }
  cublasLtMatmulPreferenceDestroy(preference);
  // No algorithm for these extents is a limit of the problem's shape, not a failure.
  require(status != CUBLAS_STATUS_NOT_SUPPORTED && (status != CUBLAS_STATUS_SUCCESS || found > 0),
          FFPA_STATUS_NOT_SUPPORTED_SHAPE, "cuBLASLt offers no fp32 algorithm for a ", g.m, " x ",
          g.n, " x ", g.k, " GEMM batch of ", g.batch, " (the reference path's products)");
  checkCublas(status, "cublasLtMatmulAlgoGetHeuristic");
  d->algo = result.algo;
  descriptors_ = std::move(d);
}

void StridedBatchedGemm::run(cublasLtHandle_t lt, float alpha, const float* a, const float* b,
                             float beta, float* c, void* workspace, size_t workspaceBytes,
                             cudaStream_t stream) const {
  const Descriptors& d = *descriptors_;
  checkCublas(cublasLtMatmul(lt, d.matmul, &alpha, b, d.b, a, d.a, &beta, c, d.c, c, d.c, &d.algo,
                             workspace, workspaceBytes, stream),
              "cublasLtMatmul");
}

}  // namespace ffpa::reference
