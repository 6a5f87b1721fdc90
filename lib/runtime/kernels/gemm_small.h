// Direct GEMM for products too small for OpenBLAS's packing to pay: attention's per-head matrices (llama2c's
// QK^T is 16 products of [128,8]·[8,128] per layer, digits-vit's 256 of [17,16]·[16,17]). OpenBLAS packs both
// operands, zeroes or scales C in a pass of its own and pays a call overhead per product; here each row of C is
// accumulated in registers, 32 columns at a time, and written once.
//
// C[M,N] = alpha · A[M,K]·B[K,N] + beta · C, row-major, no transposes. Each element is
// alpha · (sum over k = 0..K-1, in that order, of A[i,k]·B[k,j]) + beta · C[i,j]; the summation order does not
// depend on M, N, the row or the column, so results do not depend on how the caller cuts C into blocks (or on
// the thread count). Reference twin: compute::sgemm_ref (double accumulation); tests/kernels/conv_test.cc
// compares them.
#pragma once

#include <cstdint>

namespace qtool::runtime::kernels::compute {

// Whether sgemm takes sgemm_small for this product: the inner dimension at most 16 (a head dimension), or
// fewer than 2^14 multiply-adds in all.
inline bool use_sgemm_small(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K) {
  return !trans_a && !trans_b && K > 0 && (K <= 16 || M * N * K < (int64_t{1} << 14));
}

void sgemm_small(int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda, const float* B,
                 int64_t ldb, float beta, float* C, int64_t ldc);

}  // namespace qtool::runtime::kernels::compute
