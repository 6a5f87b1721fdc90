#include "runtime/kernels/gemm_direct.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "runtime/kernels/compute_common.h"

// The helpers below pass 32-byte vectors by value; they are internal and inlined into the multiversioned loop, so
// the ABI of such calls (which GCC warns may differ between the baseline and AVX clones) never matters.
#pragma GCC diagnostic ignored "-Wpsabi"

namespace qtool::runtime::kernels::compute {
namespace {

// GCC/Clang vector extension: 8 floats, one AVX register in the x86-64-v3/v4 clones, two SSE registers in the
// baseline one (plain loops left the accumulators in memory and used 128-bit operations).
using v8 = float __attribute__((vector_size(32)));

[[gnu::always_inline]] inline v8 load8(const float* p) {
  v8 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// c[0..n) = alpha · acc + beta · c, n <= 8.
[[gnu::always_inline]] inline void store(float* c, int n, v8 acc, float alpha, float beta) {
  v8 r = alpha * acc;
  if (n == 8) {
    if (beta != 0.f) r += beta * load8(c);
    std::memcpy(c, &r, sizeof r);
    return;
  }
  float old[8] = {};
  if (beta != 0.f) {
    std::memcpy(old, c, sizeof(float) * n);
    r += beta * load8(old);
  }
  std::memcpy(c, &r, sizeof(float) * n);
}

// One tile of C: R rows by V·8 columns (the last vector `last` columns wide), R·V accumulators in registers. B's
// rows are read in place (ldb apart), A's elements broadcast; every element is the multiply-add chain over k = 0..K-1
// in order, so the tile's shape never changes a result.
// With `init` (an Epilogue's terms), the accumulators start from them instead of 0 (alpha 1, beta 0).
struct Start {
  const float* addend = nullptr;  // at this tile's first element, rows ld apart
  int64_t ld = 0;
  const float* bias = nullptr;  // at this tile's first column
};

// v8 of p[0..n), zero past n.
[[gnu::always_inline]] inline v8 load_part(const float* p, int n) {
  if (n == 8) return load8(p);
  float t[8] = {};
  std::memcpy(t, p, sizeof(float) * n);
  return load8(t);
}

template <int R, int V>
[[gnu::always_inline]] inline void tile(int64_t K, float alpha, const float* A, int64_t lda, const float* B,
                                        int64_t ldb, float beta, float* C, int64_t ldc, int last,
                                        const Start* init = nullptr) {
  v8 acc[R][V] = {};
  if (init) {
    v8 bias[V] = {};
    if (init->bias)
      for (int v = 0; v < V; ++v) bias[v] = load_part(init->bias + 8 * v, v + 1 == V ? last : 8);
    for (int r = 0; r < R; ++r)
      for (int v = 0; v < V; ++v)
        acc[r][v] = init->addend ? load_part(init->addend + r * init->ld + 8 * v, v + 1 == V ? last : 8) + bias[v]
                                 : bias[v];
  }
  for (int64_t k = 0; k < K; ++k) {
    v8 b[V];
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) b[v] = load8(B + k * ldb + 8 * v);
#pragma GCC unroll 6
    for (int r = 0; r < R; ++r) {
      const float a = A[r * lda + k];
#pragma GCC unroll 4
      for (int v = 0; v < V; ++v) acc[r][v] += a * b[v];
    }
  }
#pragma GCC unroll 6
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) store(C + r * ldc + 8 * v, v + 1 == V ? last : 8, acc[r][v], alpha, beta);
}

// Full row strips: 6 rows by 16 columns (12 accumulators, two B vectors and a broadcast: 15 of the 16 AVX
// registers). The last strip's 1-5 rows go in groups of up to 3 by 32 columns (up to 12 accumulators again: one row
// by 16 columns would leave two multiply-add chains, latency-bound).
constexpr int64_t kStripRows = 6;
constexpr int64_t kTailRows = 3;

template <int V>
[[gnu::always_inline]] inline void tail_rows(int rows, int64_t K, float alpha, const float* A, int64_t lda,
                                             const float* B, int64_t ldb, float beta, float* C, int64_t ldc, int last,
                                             const Start* init = nullptr) {
  switch (rows) {
    case 3:
      return tile<3, V>(K, alpha, A, lda, B, ldb, beta, C, ldc, last, init);
    case 2:
      return tile<2, V>(K, alpha, A, lda, B, ldb, beta, C, ldc, last, init);
    default:
      return tile<1, V>(K, alpha, A, lda, B, ldb, beta, C, ldc, last, init);
  }
}

}  // namespace

QTOOL_HOT_LOOP
void sgemm_direct(int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda, const float* B,
                  int64_t ldb, float beta, float* C, int64_t ldc) {
  // The columns past the last multiple of 8 are read from a zero-padded copy of B's [K, N % 8] tail.
  const int64_t full = N / 8 * 8;
  const int tail = static_cast<int>(N - full);
  float* padded = nullptr;
  if (tail) {
    // Its own buffer, not scratch_floats: callers (the Conv tiles) hold that one while they call sgemm.
    thread_local std::vector<float> tail_copy;
    tail_copy.resize(std::max(tail_copy.size(), static_cast<size_t>(K) * 8));
    padded = tail_copy.data();
    for (int64_t k = 0; k < K; ++k) {
      std::memset(padded + k * 8, 0, 8 * sizeof(float));
      std::memcpy(padded + k * 8, B + k * ldb + full, sizeof(float) * tail);
    }
  }
  int64_t i = 0;
  for (; i + kStripRows <= M; i += kStripRows) {
    const float* a = A + i * lda;
    float* c = C + i * ldc;
    int64_t j = 0;
    for (; j + 16 <= N; j += 16) tile<6, 2>(K, alpha, a, lda, B + j, ldb, beta, c + j, ldc, 8);
    if (j < full) tile<6, 1>(K, alpha, a, lda, B + j, ldb, beta, c + j, ldc, 8);
    if (tail) tile<6, 1>(K, alpha, a, lda, padded, 8, beta, c + full, ldc, tail);
  }
  for (; i < M; i += kTailRows) {
    const int rows = static_cast<int>(std::min(kTailRows, M - i));
    const float* a = A + i * lda;
    float* c = C + i * ldc;
    int64_t j = 0;
    for (; j + 32 <= N; j += 32) tail_rows<4>(rows, K, alpha, a, lda, B + j, ldb, beta, c + j, ldc, 8);
    for (; j < full; j += 8) tail_rows<1>(rows, K, alpha, a, lda, B + j, ldb, beta, c + j, ldc, 8);
    if (tail) tail_rows<1>(rows, K, alpha, a, lda, padded, 8, beta, c + full, ldc, tail);
  }
}

PackedB::PackedB(int64_t K, int64_t N, const float* B, int64_t ldb) : K_(K), N_(N) {
  const int64_t panels = (N + 15) / 16;
  storage_ = std::make_unique<float[]>(static_cast<size_t>(panels * K * 16 + 16));
  const auto address = reinterpret_cast<uintptr_t>(storage_.get());
  data_ = storage_.get() + ((64 - address % 64) % 64) / sizeof(float);
  for (int64_t p = 0; p < panels; ++p) {
    const int64_t j = p * 16, w = std::min<int64_t>(16, N - j);
    float* dst = data_ + p * K * 16;
    for (int64_t k = 0; k < K; ++k) {
      std::memcpy(dst + k * 16, B + k * ldb + j, sizeof(float) * w);
      std::memset(dst + k * 16 + w, 0, sizeof(float) * (16 - w));
    }
  }
}

QTOOL_HOT_LOOP
void sgemm_direct_packed(int64_t M, float alpha, const float* A, int64_t lda, const PackedB& B, float beta, float* C,
                         int64_t ldc, const Epilogue& epilogue) {
  const int64_t N = B.cols(), K = B.rows(), panels = (N + 15) / 16;
  const bool start = epilogue.addend || epilogue.bias;
  if (start) alpha = 1.f, beta = 0.f;
  auto init_at = [&](int64_t i, int64_t j) {
    return Start{epilogue.addend ? epilogue.addend + i * epilogue.ld_addend + j : nullptr, epilogue.ld_addend,
                 epilogue.bias ? epilogue.bias + j : nullptr};
  };
  // Strips of 6 rows, then groups of up to 3 (sgemm_direct's cut); one 16-column panel (two vectors) or a last one of
  // at most 8 columns (one vector) per tile.
  for (int64_t i = 0; i < M;) {
    const int rows = static_cast<int>(M - i >= kStripRows ? kStripRows : std::min(kTailRows, M - i));
    const float* a = A + i * lda;
    float* c = C + i * ldc;
    for (int64_t p = 0; p < panels; ++p) {
      const int w = static_cast<int>(std::min<int64_t>(16, N - p * 16));
      const Start s = init_at(i, p * 16);
      const Start* st = start ? &s : nullptr;
      if (rows == kStripRows && w > 8)
        tile<6, 2>(K, alpha, a, lda, B.panel(p), 16, beta, c + p * 16, ldc, w - 8, st);
      else if (rows == kStripRows)
        tile<6, 1>(K, alpha, a, lda, B.panel(p), 16, beta, c + p * 16, ldc, w, st);
      else if (w > 8)
        tail_rows<2>(rows, K, alpha, a, lda, B.panel(p), 16, beta, c + p * 16, ldc, w - 8, st);
      else
        tail_rows<1>(rows, K, alpha, a, lda, B.panel(p), 16, beta, c + p * 16, ldc, w, st);
    }
    i += rows;
  }
}

}  // namespace qtool::runtime::kernels::compute
