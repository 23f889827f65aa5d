//===- Gemm.cpp - device GEMM through cuBLASLt ----------------------------===//
//
// cuBLASLt is column-major; a row-major C = op(A) op(B) is the column-major
// C^T = op(B)^T op(A)^T, so the operands swap places and each row-major
// buffer is read as its own transpose. fp32, bf16 and f16 operands all
// accumulate in fp32 (CUBLAS_COMPUTE_32F: no TF32 shortcut, so results match
// the host target's to rounding).
//
//===----------------------------------------------------------------------===//

#include "CudaCheck.h"
#include "colossal/runtime/Memory.h"
#include "colossal/runtime/kernels/Kernels.h"

#include <mutex>

namespace colossal::rt::cuda {

namespace {

constexpr size_t kWorkspaceBytes = 32u << 20;

struct LtContext {
  cublasLtHandle_t handle = nullptr;
  void *workspace = nullptr;
};

LtContext &context() {
  static LtContext ctx;
  static std::once_flag once;
  std::call_once(once, [] {
    check(cublasLtCreate(&ctx.handle), "cublasLtCreate");
    // Kept for the process: workspace from the first product on.
    ctx.workspace = allocateDeviceTracked(int64_t(kWorkspaceBytes), MemoryCategory::Workspace);
  });
  return ctx;
}

cudaDataType_t cudaType(DType dtype) {
  switch (dtype) {
  case DType::F32:
    return CUDA_R_32F;
  case DType::BF16:
    return CUDA_R_16BF;
  case DType::F16:
    return CUDA_R_16F;
  default:
    fail("gemm", std::string("unsupported element type ") + nameOf(dtype));
  }
}

/// A column-major layout of `rows` x `cols` with leading dimension `ld`.
struct Layout {
  cublasLtMatrixLayout_t layout = nullptr;
  Layout(cudaDataType_t type, int64_t rows, int64_t cols, int64_t ld, int64_t batch, int64_t stride) {
    check(cublasLtMatrixLayoutCreate(&layout, type, uint64_t(rows), uint64_t(cols), ld), "cublasLtMatrixLayoutCreate");
    if (batch > 1) {
      int32_t count = int32_t(batch);
      check(cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof count),
            "cublasLtMatrixLayoutSetAttribute (batch)");
      check(cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride,
                                             sizeof stride),
            "cublasLtMatrixLayoutSetAttribute (stride)");
    }
  }
  ~Layout() { cublasLtMatrixLayoutDestroy(layout); }
};

} // namespace

void gemm(Stream stream, const GemmShape &s, DType dtype, const void *a, const void *b, void *c, float alpha,
          float beta) {
  if (s.m < 0 || s.n < 0 || s.k < 0 || s.batch < 1)
    fail("gemm", "bad shape m=" + std::to_string(s.m) + " n=" + std::to_string(s.n) + " k=" + std::to_string(s.k));
  if (s.m == 0 || s.n == 0)
    return;
  LtContext &ctx = context();
  cudaDataType_t type = cudaType(dtype);
  cublasLtMatmulDesc_t desc;
  check(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F), "cublasLtMatmulDescCreate");
  // Column-major: C^T (n x m) = op(B)^T (n x k) * op(A)^T (k x m).
  cublasOperation_t opFirst = s.transB ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasOperation_t opSecond = s.transA ? CUBLAS_OP_T : CUBLAS_OP_N;
  check(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &opFirst, sizeof opFirst), "TRANSA");
  check(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &opSecond, sizeof opSecond), "TRANSB");
  // B row-major is k x n (or n x k when transposed): column-major n x k (k x n).
  Layout first(type, s.transB ? s.k : s.n, s.transB ? s.n : s.k, s.transB ? s.k : s.n, s.batch, s.strideB);
  Layout second(type, s.transA ? s.m : s.k, s.transA ? s.k : s.m, s.transA ? s.m : s.k, s.batch, s.strideA);
  Layout out(type, s.n, s.m, s.n, s.batch, s.strideC);

  cublasLtMatmulPreference_t preference;
  check(cublasLtMatmulPreferenceCreate(&preference), "cublasLtMatmulPreferenceCreate");
  size_t workspace = kWorkspaceBytes;
  check(cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace,
                                             sizeof workspace),
        "cublasLtMatmulPreferenceSetAttribute");
  cublasLtMatmulHeuristicResult_t heuristic;
  int found = 0;
  check(cublasLtMatmulAlgoGetHeuristic(ctx.handle, desc, first.layout, second.layout, out.layout, out.layout,
                                       preference, 1, &heuristic, &found),
        "cublasLtMatmulAlgoGetHeuristic");
  if (found < 1)
    fail("gemm", "cuBLASLt has no algorithm for m=" + std::to_string(s.m) + " n=" + std::to_string(s.n) +
                     " k=" + std::to_string(s.k) + " " + nameOf(dtype));
  check(cublasLtMatmul(ctx.handle, desc, &alpha, b, first.layout, a, second.layout, &beta, c, out.layout, c,
                       out.layout, &heuristic.algo, ctx.workspace, kWorkspaceBytes, asStream(stream.handle)),
        "cublasLtMatmul");
  cublasLtMatmulPreferenceDestroy(preference);
  cublasLtMatmulDescDestroy(desc);
}

} // namespace colossal::rt::cuda
