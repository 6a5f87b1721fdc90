// Direct GEMM: C accumulated in vector registers tile by tile, operands read in place (no packing), for the
// products whose B fits the L2 cache: every MatMul of the small transformers (llama2c's [256,64]·[64,N] projections,
// digits-vit's [1088,64]·[64,256] MLP, attention's per-head [128,8]·[8,128]) and the narrow Conv tiles. OpenBLAS packs
// both operands on every call (its copies and its separate pass zeroing C were 16 % of llama2c's 1-thread samples);
// on these shapes the register tiles run at 43-50 multiply-adds per ns against OpenBLAS's 34-40 (single thread,
// AVX2 EPYC, 2026-11-25; docs/interpreter.md, "Direct GEMM"). For products with a large B (wide N, or K·N above
// 2^16) OpenBLAS's cache blocking wins and sgemm keeps it.
//
// C[M,N] = alpha · A[M,K]·B[K,N] + beta · C, row-major, no transposes. Each element is
// alpha · (sum over k = 0..K-1, in that order, of A[i,k]·B[k,j]) + beta · C[i,j]; the summation order does not
// depend on M, N, the row or the column, so results do not depend on how the caller cuts C into blocks (or on
// the thread count). Reference twin: compute::sgemm_ref (double accumulation); tests/kernels/gemm_direct_test.cc
// compares them.
#pragma once

#include <cstdint>

namespace qtool::runtime::kernels::compute {

// Whether sgemm takes sgemm_direct for this product: no transposes and B at most 2^16 values with N at most 512
// (B stays in L2 while every row strip of C sweeps it), or an inner dimension of at most 16 (a head dimension),
// or fewer than 2^14 multiply-adds in all.
inline bool use_sgemm_direct(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K) {
  if (trans_a || trans_b || K <= 0) return false;
  return (N <= 512 && K * N <= (int64_t{1} << 16)) || K <= 16 || M * N * K < (int64_t{1} << 14);
}

void sgemm_direct(int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda, const float* B,
                  int64_t ldb, float beta, float* C, int64_t ldc);

}  // namespace qtool::runtime::kernels::compute
