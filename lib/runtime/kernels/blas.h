// Shared numeric helpers of the compute kernels: GEMM on OpenBLAS, its reference twin, and the
// loop helper every compute kernel parallelises with.
//
// Threading: OpenBLAS is pinned to one thread once (openblas_set_num_threads(1)); parallelism comes
// only from the kernels' loops (parallel_for, work_sharing.h; OpenMP regions for the own Conv tiles and oneDNN)
// sized by KernelContext::threads, so the framework's thread count is the only one in play. The programs set
// OPENBLAS_NUM_THREADS=1 before OpenBLAS loads (core/omp_wait.h), so its pthread build starts no workers at all.
#pragma once

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "runtime/kernels/threading.h"
#include "runtime/kernels/work_sharing.h"

namespace qtool::runtime::kernels::compute {

// C[M,N] = alpha * op(A)[M,K] * op(B)[K,N] + beta * C, row-major with leading dimensions.
// Runs on `threads` OpenMP threads over the blocks of gemm_blocks(M, N, K); each block is one
// single-threaded OpenBLAS call and the blocks depend on the shape only, so the result is bitwise the
// same for every thread count.
void sgemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
           const float* B, int64_t ldb, float beta, float* C, int64_t ldc, int threads);

// How sgemm cuts C: `count` blocks of `size` rows (split_n false) or columns (split_n true), a
// function of the shape alone. One block below kGemmSplitWork multiply-adds.
inline constexpr int64_t kGemmSplitWork = int64_t{1} << 17;
inline constexpr int64_t kGemmMaxBlocks = 8;
struct GemmBlocks {
  bool split_n;
  int64_t count;
  int64_t size;
};
GemmBlocks gemm_blocks(int64_t M, int64_t N, int64_t K);

// Pins OpenBLAS to one thread (idempotent); call before any direct cblas_* call.
void ensure_blas_single_threaded();

// Reference twin of sgemm: plain loops, double accumulation.
void sgemm_ref(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
               const float* B, int64_t ldb, float beta, float* C, int64_t ldc);

// Runs fn(i) for i in [0, n) on the calling thread and up to threads - 1 helpers (work_sharing.h), in up to 8
// contiguous chunks per thread. Callers size `threads` with threads_for / threads_for_macs (threading.h); fn(i) must
// not depend on which thread runs it, nor throw.
template <class F>
void parallel_for(int64_t n, int threads, F&& fn) {
  if (threads <= 1 || n <= 1) {
    for (int64_t i = 0; i < n; ++i) fn(i);
    return;
  }
  struct Loop {
    std::remove_reference_t<F>* fn;
    int64_t n, chunks;
  } loop{&fn, n, std::min<int64_t>(n, int64_t{8} * threads)};
  share_chunks(
      loop.chunks, threads,
      [](void* p, int64_t c) noexcept {  // a throw ends the program, as it did out of an OpenMP region
        const Loop& l = *static_cast<const Loop*>(p);
        for (int64_t i = l.n * c / l.chunks, e = l.n * (c + 1) / l.chunks; i < e; ++i) (*l.fn)(i);
      },
      &loop);
}

}  // namespace qtool::runtime::kernels::compute
