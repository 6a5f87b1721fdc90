#include "runtime/kernels/gemm_small.h"

#include <cstring>

#include "runtime/kernels/compute_common.h"

// The helpers below pass 32-byte vectors by value; they are internal and inlined into the multiversioned loop, so
// the ABI of such calls (which GCC warns may differ between the baseline and AVX clones) never matters.
#pragma GCC diagnostic ignored "-Wpsabi"

namespace qtool::runtime::kernels::compute {
namespace {

// GCC/Clang vector extension: 8 floats, one AVX register in the x86-64-v3/v4 clones, two SSE registers in the
// baseline one (plain loops left the accumulators in memory and used 128-bit operations).
using v8 = float __attribute__((vector_size(32)));

inline v8 load8(const float* p) {
  v8 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

inline void store8(float* c, v8 acc, float alpha, float beta) {
  v8 r = alpha * acc;
  if (beta != 0.f) r += beta * load8(c);
  std::memcpy(c, &r, sizeof r);
}

// Columns [j0, j0 + 32) of one row: four accumulators updated together at each k (written out, so that the compiler
// keeps four independent multiply-add chains instead of running the columns one after another).
inline void row_block32(int64_t K, float alpha, const float* a, const float* B, int64_t ldb, float beta, float* c,
                        int64_t j0) {
  v8 c0 = {}, c1 = {}, c2 = {}, c3 = {};
  for (int64_t k = 0; k < K; ++k) {
    const float* b = B + k * ldb + j0;
    const float av = a[k];
    c0 += av * load8(b);
    c1 += av * load8(b + 8);
    c2 += av * load8(b + 16);
    c3 += av * load8(b + 24);
  }
  store8(c + j0, c0, alpha, beta);
  store8(c + j0 + 8, c1, alpha, beta);
  store8(c + j0 + 16, c2, alpha, beta);
  store8(c + j0 + 24, c3, alpha, beta);
}

// Columns [j0, j0 + 8) of rows i and i + 1 (when `two`): two chains.
inline void rows_block8(int64_t K, float alpha, const float* a, int64_t lda, bool two, const float* B, int64_t ldb,
                        float beta, float* c, int64_t ldc, int64_t j0) {
  v8 c0 = {}, c1 = {};
  for (int64_t k = 0; k < K; ++k) {
    const v8 b = load8(B + k * ldb + j0);
    c0 += a[k] * b;
    if (two) c1 += a[lda + k] * b;
  }
  store8(c + j0, c0, alpha, beta);
  if (two) store8(c + ldc + j0, c1, alpha, beta);
}

// One column j of one row (the tail past the last multiple of 8).
inline void row_column(int64_t K, float alpha, const float* a, const float* B, int64_t ldb, float beta, float* c,
                       int64_t j) {
  float acc = 0;
  for (int64_t k = 0; k < K; ++k) acc += a[k] * B[k * ldb + j];
  c[j] = beta == 0.f ? alpha * acc : alpha * acc + beta * c[j];
}

}  // namespace

QTOOL_HOT_LOOP
void sgemm_small(int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda, const float* B,
                 int64_t ldb, float beta, float* C, int64_t ldc) {
  for (int64_t i = 0; i < M; i += 2) {
    const bool two = i + 1 < M;
    const float* a = A + i * lda;
    float* c = C + i * ldc;
    int64_t j = 0;
    for (; j + 32 <= N; j += 32) {
      row_block32(K, alpha, a, B, ldb, beta, c, j);
      if (two) row_block32(K, alpha, a + lda, B, ldb, beta, c + ldc, j);
    }
    for (; j + 8 <= N; j += 8) rows_block8(K, alpha, a, lda, two, B, ldb, beta, c, ldc, j);
    for (; j < N; ++j) {
      row_column(K, alpha, a, B, ldb, beta, c, j);
      if (two) row_column(K, alpha, a + lda, B, ldb, beta, c + ldc, j);
    }
  }
}

}  // namespace qtool::runtime::kernels::compute
