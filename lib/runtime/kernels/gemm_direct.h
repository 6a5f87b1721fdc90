// Direct GEMM: C accumulated in vector registers tile by tile, operands read in place (no packing), for the
// products whose B fits the L2 cache: every MatMul of the small transformers (llama2c's [256,64]·[64,N] projections,
// digits-vit's [1088,64]·[64,256] MLP, attention's per-head [128,8]·[8,128]) and the narrow Conv tiles. OpenBLAS packs
// both operands on every call (its copies and its separate pass zeroing C were 16 % of llama2c's 1-thread samples);
// on these shapes the register tiles run at 43-50 multiply-adds per ns against OpenBLAS's 34-40 (single thread,
// AVX2 EPYC, 2026-11-25; docs/interpreter.md, "Direct GEMM"). On CPUs with AVX-512 the tiles are 16-float vectors
// (12 rows by 32 columns), as MLAS's: digits-vit at 1 thread 8.49 -> 5.93 ms on a Sapphire Rapids VM. For products with a large B (wide N, or K·N above
// 2^16) OpenBLAS's cache blocking wins and sgemm keeps it.
//
// C[M,N] = alpha · A[M,K]·B[K,N] + beta · C, row-major, no transposes. Each element is
// alpha · (sum over k = 0..K-1, in that order, of A[i,k]·B[k,j]) + beta · C[i,j]; the summation order does not
// depend on M, N, the row or the column, so results do not depend on how the caller cuts C into blocks (or on
// the thread count). Reference twin: compute::sgemm_ref (double accumulation); tests/kernels/gemm_direct_test.cc
// compares them.
#pragma once

#include <cstdint>
#include <memory>

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

// A constant B[K,N] (a MatMul's weight) copied once per session into panels of 16 columns: panel p holds
// B[k, 16p .. 16p+16) for k = 0..K-1 contiguously, 64-byte aligned, the last panel's missing columns zero. The tiles
// then read one cache line per k from a stream instead of K lines ldb apart, which on B's power-of-two row lengths
// (256 or 512 floats) map to a few L1 sets and evict each other (digits-vit's fc1/fc2, llama2c's logits).
class PackedB {
 public:
  PackedB(int64_t K, int64_t N, const float* B, int64_t ldb);
  int64_t rows() const { return K_; }
  int64_t cols() const { return N_; }
  const float* panel(int64_t p) const { return data_ + p * K_ * 16; }

 private:
  int64_t K_, N_;
  std::unique_ptr<float[]> storage_;
  float* data_ = nullptr;
};

// Whether a constant B[K,N] is worth packing: sgemm takes sgemm_direct for it whatever M is.
inline bool use_packed_b(int64_t K, int64_t N) {
  return K > 0 && N > 0 && ((N <= 512 && K * N <= (int64_t{1} << 16)) || K <= 16);
}

// Terms a MatMul's fused epilogue adds to A·B (runtime/fuse_matmul_epilogue.h): addend[M,N] (rows ld_addend apart)
// and bias[N], either null.
struct Epilogue {
  const float* addend = nullptr;
  int64_t ld_addend = 0;
  const float* bias = nullptr;
};

// sgemm_direct with B packed: the same tiles and the same multiply-add chain per element, so the same bits as
// sgemm_direct on the unpacked B (tests/kernels/gemm_direct_test.cc pins it). With an epilogue term, alpha and beta
// are ignored and C[i,j] = (addend[i,j] + bias[j]) + A[i,0]·B[0,j] + ... + A[i,K-1]·B[K-1,j], the accumulators starting
// from the terms (read once per tile, no pass filling C with them: the fill was 6 % of digits-vit's samples) and the
// multiply-adds following in k order, so still the same bits however the rows are cut.
void sgemm_direct_packed(int64_t M, float alpha, const float* A, int64_t lda, const PackedB& B, float beta, float* C,
                         int64_t ldc, const Epilogue& epilogue = {});

}  // namespace qtool::runtime::kernels::compute
