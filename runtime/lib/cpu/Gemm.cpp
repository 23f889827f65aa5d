//===- Gemm.cpp - host GEMM through the system's CBLAS --------------------===//
//
// fp32 goes straight to cblas_sgemm. bf16 and f16 operands are widened to
// fp32, multiplied with fp32 accumulation and rounded back, which is what the
// device path computes too (cuBLASLt with an fp32 compute type).
//
//===----------------------------------------------------------------------===//

#include "colossal/runtime/Error.h"
#include "colossal/runtime/kernels/Kernels.h"
#include "colossal/runtime/TrackedAllocator.h"

#include <cblas.h>

#include <vector>

namespace colossal::rt::cpu {

namespace {

void sgemmBatch(const GemmShape &s, const float *a, const float *b, float *c, float alpha, float beta) {
  int64_t lda = s.transA ? s.m : s.k;
  int64_t ldb = s.transB ? s.k : s.n;
  for (int64_t i = 0; i < s.batch; ++i)
    cblas_sgemm(CblasRowMajor, s.transA ? CblasTrans : CblasNoTrans, s.transB ? CblasTrans : CblasNoTrans,
                int(s.m), int(s.n), int(s.k), alpha, a + i * s.strideA, int(lda), b + i * s.strideB,
                int(ldb), beta, c + i * s.strideC, int(s.n));
}

Floats widen(const void *data, DType dtype, int64_t n) {
  Floats out = scratch<float>(static_cast<size_t>(n));
  cast(Stream{}, data, dtype, out.data(), DType::F32, n);
  return out;
}

int64_t extent(int64_t batch, int64_t stride, int64_t size) { return (batch - 1) * stride + size; }

} // namespace

void gemm(Stream, const GemmShape &s, DType dtype, const void *a, const void *b, void *c, float alpha,
          float beta) {
  if (s.m < 0 || s.n < 0 || s.k < 0 || s.batch < 1)
    fail("gemm", "bad shape m=" + std::to_string(s.m) + " n=" + std::to_string(s.n) +
                     " k=" + std::to_string(s.k) + " batch=" + std::to_string(s.batch));
  if (s.m > INT32_MAX || s.n > INT32_MAX || s.k > INT32_MAX)
    fail("gemm", "a dimension exceeds the BLAS integer range");
  if (s.m == 0 || s.n == 0)
    return;
  if (dtype == DType::F32) {
    sgemmBatch(s, static_cast<const float *>(a), static_cast<const float *>(b), static_cast<float *>(c),
               alpha, beta);
    return;
  }
  if (dtype != DType::BF16 && dtype != DType::F16)
    fail("gemm", std::string("unsupported element type ") + nameOf(dtype));
  int64_t sizeC = extent(s.batch, s.strideC, s.m * s.n);
  Floats wa = widen(a, dtype, extent(s.batch, s.strideA, s.m * s.k));
  Floats wb = widen(b, dtype, extent(s.batch, s.strideB, s.k * s.n));
  Floats wc = beta != 0 ? widen(c, dtype, sizeC) : scratch<float>(size_t(sizeC));
  sgemmBatch(s, wa.data(), wb.data(), wc.data(), alpha, beta);
  cast(Stream{}, wc.data(), DType::F32, c, dtype, sizeC);
}

} // namespace colossal::rt::cpu
