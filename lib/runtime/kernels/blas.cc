#include "runtime/kernels/blas.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <mutex>

#include "runtime/kernels/compute_common.h"
#include "runtime/kernels/gemm_direct.h"

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

// One row a of A times B for columns [j0, j1): c[j] = alpha · (a[0]·B[0,j] + ... + a[K-1]·B[K-1,j]) + beta · c[j], the
// multiply-adds fused and in k order, so a column's value does not depend on how the columns are cut. B is streamed
// row by row (a row's column range is contiguous), four rows per pass over sums kept in an L1 block.
QTOOL_HOT_LOOP
void gemv_row(int64_t j0, int64_t j1, int64_t K, float alpha, const float* a, const float* B, int64_t ldb, float beta,
              float* c) {
  constexpr int64_t kCols = 1024;
  float acc[kCols];
  for (int64_t s = j0; s < j1; s += kCols) {
    const int64_t n = std::min(kCols, j1 - s);
    std::fill_n(acc, n, 0.f);
    int64_t k = 0;
    for (; k + 4 <= K; k += 4) {
      const float a0 = a[k], a1 = a[k + 1], a2 = a[k + 2], a3 = a[k + 3];
      const float* b0 = B + k * ldb + s;
      const float* b1 = b0 + ldb;
      const float* b2 = b1 + ldb;
      const float* b3 = b2 + ldb;
      for (int64_t j = 0; j < n; ++j)
        acc[j] = std::fma(a3, b3[j], std::fma(a2, b2[j], std::fma(a1, b1[j], std::fma(a0, b0[j], acc[j]))));
    }
    for (; k < K; ++k) {
      const float ak = a[k];
      const float* b = B + k * ldb + s;
      for (int64_t j = 0; j < n; ++j) acc[j] = std::fma(ak, b[j], acc[j]);
    }
    for (int64_t j = 0; j < n; ++j) c[s + j] = beta == 0.f ? alpha * acc[j] : alpha * acc[j] + beta * c[s + j];
  }
}

}  // namespace

void ensure_blas_single_threaded() {
  static std::once_flag once;
  std::call_once(once, [] { openblas_set_num_threads(1); });
}

// Blocks are a function of the shape only (never of `threads`): OpenBLAS picks different micro-kernels
// (small-matrix paths, edge tiles) for different block shapes, so a thread-count-dependent split gave
// results that differed in the last bits between 1, 2, 3 and 8 threads. K is never split. Each block is its own
// OpenBLAS call, which packs the operand shared by all blocks again: A [M,K] when C is cut along N, B [K,N] when
// cut along M; so C is cut along the longer of M and N, and the smaller operand is the one re-packed (digits-vit's
// [1088,64]x[64,256] MLP was cut along N and re-packed its activations 8 times: sgemm_oncopy 8.8 -> 5.4 % of the
// 1-thread samples).
GemmBlocks gemm_blocks(int64_t M, int64_t N, int64_t K) {
  const int64_t work = M * N * std::max<int64_t>(K, 1);
  if (work < kGemmSplitWork) return {false, 1, M};
  const bool split_n = N >= M;
  const int64_t len = split_n ? N : M, other = split_n ? M : N;
  const int64_t align = split_n ? 16 : 4;
  auto round_up = [](int64_t v, int64_t a) { return (v + a - 1) / a * a; };
  // At most kGemmMaxBlocks blocks, each with at least about kGemmSplitWork / 4 multiply-adds.
  const int64_t min_len = std::max<int64_t>(1, (kGemmSplitWork / 4) / std::max<int64_t>(1, other * std::max<int64_t>(K, 1)));
  const int64_t block = std::min(len, round_up(std::max((len + kGemmMaxBlocks - 1) / kGemmMaxBlocks, min_len), align));
  return {split_n, (len + block - 1) / block, block};
}

void sgemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
           const float* B, int64_t ldb, float beta, float* C, int64_t ldc, int threads) {
  if (M > 0 && N > 0 && use_sgemm_direct(trans_a, trans_b, M, N, K)) {
    // Cut into one contiguous range of rows per thread (a multiple of the 6-row strip); sgemm_direct's results do not
    // depend on the cut.
    const int t = threads_for_direct_macs(M * N * K, threads);
    const int64_t rows = (M + t - 1) / t, per = (rows + 5) / 6 * 6;
    parallel_for((M + per - 1) / per, t, [&](int64_t c) {
      const int64_t r0 = c * per;
      sgemm_direct(std::min(per, M - r0), N, K, alpha, A + r0 * lda, lda, B, ldb, beta, C + r0 * ldc, ldc);
    });
    return;
  }
  if (M == 1 && N > 0 && K > 0 && !trans_a && !trans_b) {
    // One row (a classifier at batch 1, a decoder step) against a B too large for the direct GEMM: a matrix-vector
    // product that reads B once, in place. OpenBLAS's sgemm packs B first (mobilenetv2's [1280, 1000] classifier:
    // 0.46 ms at one thread, ONNX Runtime 0.23; docs/interpreter.md "NHWC between Convs on AVX-512"). Columns are
    // cut in runs of 64 per thread; each column's sum is the same whatever the cut.
    const int t = threads_for_macs(N * K, threads);
    const int64_t per = ((N + t - 1) / t + 63) / 64 * 64;
    parallel_for((N + per - 1) / per, t, [&](int64_t p) {
      gemv_row(p * per, std::min(N, (p + 1) * per), K, alpha, A, B, ldb, beta, C);
    });
    return;
  }
  ensure_blas_single_threaded();
  const GemmBlocks blocks = gemm_blocks(M, N, K);
  if (blocks.count <= 1) {
    gemm_block(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    return;
  }
  const int64_t len = blocks.split_n ? N : M;
  // The blocks are shared out by the kernels' work sharing (work_sharing.h), not an OpenMP region: a region waits at
  // its barrier for the woken worker, 44-94 us on a VM (docs/benchmarks.md, 2026-11-25), about what a block of
  // mobilenetv2's classifier takes; a late helper here costs nothing.
  const int t = static_cast<int>(
      std::clamp<int64_t>(threads_for_macs(M * N * std::max<int64_t>(K, 1), threads), 1, blocks.count));
  parallel_for(blocks.count, t, [&](int64_t b) {
    const int64_t s = b * blocks.size, e = std::min(len, s + blocks.size);
    if (blocks.split_n) {
      const float* Bb = trans_b ? B + s * ldb : B + s;
      gemm_block(trans_a, trans_b, M, e - s, K, alpha, A, lda, Bb, ldb, beta, C + s, ldc);
    } else {
      const float* Ab = trans_a ? A + s : A + s * lda;
      gemm_block(trans_a, trans_b, e - s, N, K, alpha, Ab, lda, B, ldb, beta, C + s * ldc, ldc);
    }
  });
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
