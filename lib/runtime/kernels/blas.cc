#include "runtime/kernels/blas.h"

#include <cblas.h>

#include <algorithm>
#include <mutex>

namespace qtool::runtime::kernels::compute {
namespace {

void gemm_block(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
                const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  if (M <= 0 || N <= 0) return;
  if (K <= 0) {  // C = beta * C
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) C[i * ldc + j] = beta == 0.f ? 0.f : beta * C[i * ldc + j];
    return;
  }
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, static_cast<int>(M),
              static_cast<int>(N), static_cast<int>(K), alpha, A, static_cast<int>(lda), B, static_cast<int>(ldb), beta,
              C, static_cast<int>(ldc));
}

}  // namespace

void ensure_blas_single_threaded() {
  static std::once_flag once;
  std::call_once(once, [] { openblas_set_num_threads(1); });
}

void sgemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
           const float* B, int64_t ldb, float beta, float* C, int64_t ldc, int threads) {
  ensure_blas_single_threaded();
  const int64_t work = M * N * std::max<int64_t>(K, 1);
  int t = work < (1 << 17) ? 1 : threads;
  if (t <= 1) {
    gemm_block(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    return;
  }
  // Split the wider of M and N into `t` blocks (columns rounded to 16 for the vector kernels).
  const bool split_n = N >= 32 * t || N >= M;
  const int64_t len = split_n ? N : M;
  const int64_t align = split_n ? 16 : 4;
  int64_t block = (len + t - 1) / t;
  block = (block + align - 1) / align * align;
  const int64_t nblocks = (len + block - 1) / block;
#pragma omp parallel for num_threads(t) schedule(static)
  for (int64_t b = 0; b < nblocks; ++b) {
    const int64_t s = b * block, e = std::min(len, s + block);
    if (split_n) {
      const float* Bb = trans_b ? B + s * ldb : B + s;
      gemm_block(trans_a, trans_b, M, e - s, K, alpha, A, lda, Bb, ldb, beta, C + s, ldc);
    } else {
      const float* Ab = trans_a ? A + s : A + s * lda;
      gemm_block(trans_a, trans_b, e - s, N, K, alpha, Ab, lda, B, ldb, beta, C + s * ldc, ldc);
    }
  }
}

void sgemm_ref(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
               const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      double acc = 0;
      for (int64_t k = 0; k < K; ++k) {
        const float a = trans_a ? A[k * lda + i] : A[i * lda + k];
        const float b = trans_b ? B[j * ldb + k] : B[k * ldb + j];
        acc += static_cast<double>(a) * b;
      }
      const float prev = beta == 0.f ? 0.f : beta * C[i * ldc + j];
      C[i * ldc + j] = static_cast<float>(alpha * acc) + prev;
    }
}

}  // namespace qtool::runtime::kernels::compute
