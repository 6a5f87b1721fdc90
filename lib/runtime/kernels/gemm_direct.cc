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
// baseline one (plain loops left the accumulators in memory and used 128-bit operations); 16 floats, one AVX-512
// register, in the AVX-512 variants below.
using v8 = float __attribute__((vector_size(32)));
using v16 = float __attribute__((vector_size(64)));

template <typename V>
constexpr int kLanes = sizeof(V) / sizeof(float);

template <typename V>
[[gnu::always_inline]] inline V load(const float* p) {
  V v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// c[0..n) = alpha · acc + beta · c, n <= the vector's lanes.
template <typename V>
[[gnu::always_inline]] inline void store(float* c, int n, V acc, float alpha, float beta) {
  V r = alpha * acc;
  if (n == kLanes<V>) {
    if (beta != 0.f) r += beta * load<V>(c);
    std::memcpy(c, &r, sizeof r);
    return;
  }
  float old[kLanes<V>] = {};
  if (beta != 0.f) {
    std::memcpy(old, c, sizeof(float) * n);
    r += beta * load<V>(old);
  }
  std::memcpy(c, &r, sizeof(float) * n);
}

// One tile of C: R rows by NV vectors of columns (the last vector `last` columns wide), R·NV accumulators in
// registers. B's rows are read in place (ldb apart; vector v of a row ldv floats after vector v - 1: next to it in
// B, or in the next panel of a PackedB), A's elements broadcast; every element is the multiply-add chain over
// k = 0..K-1 in order, so neither the tile's shape nor the vector width changes a result.
// With `init` (an Epilogue's terms), the accumulators start from them instead of 0 (alpha 1, beta 0).
struct Start {
  const float* addend = nullptr;  // at this tile's first element, rows ld apart
  int64_t ld = 0;
  const float* bias = nullptr;  // at this tile's first column
};

// A vector of p[0..n), zero past n.
template <typename V>
[[gnu::always_inline]] inline V load_part(const float* p, int n) {
  if (n == kLanes<V>) return load<V>(p);
  float t[kLanes<V>] = {};
  std::memcpy(t, p, sizeof(float) * n);
  return load<V>(t);
}

template <typename V, int R, int NV>
[[gnu::always_inline]] inline void tile(int64_t K, float alpha, const float* A, int64_t lda, const float* B,
                                        int64_t ldb, int64_t ldv, float beta, float* C, int64_t ldc, int last,
                                        const Start* init = nullptr) {
  constexpr int L = kLanes<V>;
  V acc[R][NV] = {};
  if (init) {
    V bias[NV] = {};
    if (init->bias)
      for (int v = 0; v < NV; ++v) bias[v] = load_part<V>(init->bias + L * v, v + 1 == NV ? last : L);
    for (int r = 0; r < R; ++r)
      for (int v = 0; v < NV; ++v)
        acc[r][v] = init->addend ? load_part<V>(init->addend + r * init->ld + L * v, v + 1 == NV ? last : L) + bias[v]
                                 : bias[v];
  }
  for (int64_t k = 0; k < K; ++k) {
    V b[NV];
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) b[v] = load<V>(B + k * ldb + v * ldv);
#pragma GCC unroll 12
    for (int r = 0; r < R; ++r) {
      const float a = A[r * lda + k];
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) acc[r][v] += a * b[v];
    }
  }
#pragma GCC unroll 12
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) store<V>(C + r * ldc + L * v, v + 1 == NV ? last : L, acc[r][v], alpha, beta);
}

// The tiles per vector width. 8 floats (AVX2, 16 registers): full row strips of 6 rows by 16 columns (12
// accumulators, two B vectors and a broadcast: 15 of the 16 registers); the last strip's 1-5 rows in groups of up to
// 3 by 32 columns (up to 12 accumulators again: one row by 16 columns would leave two multiply-add chains,
// latency-bound). 16 floats (AVX-512, 32 registers): strips of 12 rows by 32 columns (24 accumulators, two B vectors
// and a broadcast: 27 of 32; two FMA units of 4 cycles' latency need at least 8 chains), the last 1-11 rows in groups
// of up to 6 by 32 columns.
template <typename V>
struct Tiles;
template <>
struct Tiles<v8> {
  static constexpr int64_t kStripRows = 6, kTailRows = 3;
  static constexpr int kStripVectors = 2, kTailVectors = 4;
};
template <>
struct Tiles<v16> {
  static constexpr int64_t kStripRows = 12, kTailRows = 6;
  static constexpr int kStripVectors = 2, kTailVectors = 2;
};

// rows <= Tiles<V>::kTailRows rows by NV vectors.
template <typename V, int NV>
[[gnu::always_inline]] inline void tail_rows(int rows, int64_t K, float alpha, const float* A, int64_t lda,
                                             const float* B, int64_t ldb, int64_t ldv, float beta, float* C,
                                             int64_t ldc, int last, const Start* init = nullptr) {
  switch (rows) {
    case 6:
      if constexpr (Tiles<V>::kTailRows >= 6) return tile<V, 6, NV>(K, alpha, A, lda, B, ldb, ldv, beta, C, ldc, last, init);
      [[fallthrough]];
    case 5:
      if constexpr (Tiles<V>::kTailRows >= 5) return tile<V, 5, NV>(K, alpha, A, lda, B, ldb, ldv, beta, C, ldc, last, init);
      [[fallthrough]];
    case 4:
      if constexpr (Tiles<V>::kTailRows >= 4) return tile<V, 4, NV>(K, alpha, A, lda, B, ldb, ldv, beta, C, ldc, last, init);
      [[fallthrough]];
    case 3:
      return tile<V, 3, NV>(K, alpha, A, lda, B, ldb, ldv, beta, C, ldc, last, init);
    case 2:
      return tile<V, 2, NV>(K, alpha, A, lda, B, ldb, ldv, beta, C, ldc, last, init);
    default:
      return tile<V, 1, NV>(K, alpha, A, lda, B, ldb, ldv, beta, C, ldc, last, init);
  }
}

template <typename V>
[[gnu::always_inline]] inline void direct(int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
                                          const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  using T = Tiles<V>;
  constexpr int L = kLanes<V>, SV = T::kStripVectors, TV = T::kTailVectors;
  // The columns past the last multiple of L are read from a zero-padded copy of B's [K, N % L] tail.
  const int64_t full = N / L * L;
  const int tail = static_cast<int>(N - full);
  float* padded = nullptr;
  if (tail) {
    // Its own buffer, not scratch_floats: callers (the Conv tiles) hold that one while they call sgemm.
    thread_local std::vector<float> tail_copy;
    tail_copy.resize(std::max(tail_copy.size(), static_cast<size_t>(K) * L));
    padded = tail_copy.data();
    for (int64_t k = 0; k < K; ++k) {
      std::memset(padded + k * L, 0, L * sizeof(float));
      std::memcpy(padded + k * L, B + k * ldb + full, sizeof(float) * tail);
    }
  }
  int64_t i = 0;
  for (; i + T::kStripRows <= M; i += T::kStripRows) {
    const float* a = A + i * lda;
    float* c = C + i * ldc;
    int64_t j = 0;
    for (; j + SV * L <= N; j += SV * L) tile<V, T::kStripRows, SV>(K, alpha, a, lda, B + j, ldb, L, beta, c + j, ldc, L);
    for (; j < full; j += L) tile<V, T::kStripRows, 1>(K, alpha, a, lda, B + j, ldb, L, beta, c + j, ldc, L);
    if (tail) tile<V, T::kStripRows, 1>(K, alpha, a, lda, padded, L, L, beta, c + full, ldc, tail);
  }
  for (; i < M; i += T::kTailRows) {
    const int rows = static_cast<int>(std::min(T::kTailRows, M - i));
    const float* a = A + i * lda;
    float* c = C + i * ldc;
    int64_t j = 0;
    for (; j + TV * L <= N; j += TV * L) tail_rows<V, TV>(rows, K, alpha, a, lda, B + j, ldb, L, beta, c + j, ldc, L);
    for (; j < full; j += L) tail_rows<V, 1>(rows, K, alpha, a, lda, B + j, ldb, L, beta, c + j, ldc, L);
    if (tail) tail_rows<V, 1>(rows, K, alpha, a, lda, padded, L, L, beta, c + full, ldc, tail);
  }
}

// Panels are 16 columns: two 8-float vectors (ldv 8) or one 16-float vector, two panels side by side (ldv K·16).
template <typename V>
[[gnu::always_inline]] inline void direct_packed(int64_t M, float alpha, const float* A, int64_t lda,
                                                 const PackedB& B, float beta, float* C, int64_t ldc,
                                                 const Epilogue& epilogue) {
  using T = Tiles<V>;
  constexpr int L = kLanes<V>;
  const int64_t N = B.cols(), K = B.rows(), panels = (N + 15) / 16;
  const bool start = epilogue.addend || epilogue.bias;
  if (start) alpha = 1.f, beta = 0.f;
  auto init_at = [&](int64_t i, int64_t j) {
    return Start{epilogue.addend ? epilogue.addend + i * epilogue.ld_addend + j : nullptr, epilogue.ld_addend,
                 epilogue.bias ? epilogue.bias + j : nullptr};
  };
  for (int64_t i = 0; i < M;) {
    const int rows = static_cast<int>(M - i >= T::kStripRows ? T::kStripRows : std::min(T::kTailRows, M - i));
    const float* a = A + i * lda;
    float* c = C + i * ldc;
    for (int64_t p = 0; p < panels;) {
      const int64_t j = p * 16;
      const Start s = init_at(i, j);
      const Start* st = start ? &s : nullptr;
      const float* b = B.panel(p);
      if constexpr (L == 8) {  // one panel per tile: two vectors, or one for a last panel of at most 8 columns
        const int w = static_cast<int>(std::min<int64_t>(16, N - j));
        if (rows == T::kStripRows && w > 8)
          tile<V, T::kStripRows, 2>(K, alpha, a, lda, b, 16, 8, beta, c + j, ldc, w - 8, st);
        else if (rows == T::kStripRows)
          tile<V, T::kStripRows, 1>(K, alpha, a, lda, b, 16, 8, beta, c + j, ldc, w, st);
        else if (w > 8)
          tail_rows<V, 2>(rows, K, alpha, a, lda, b, 16, 8, beta, c + j, ldc, w - 8, st);
        else
          tail_rows<V, 1>(rows, K, alpha, a, lda, b, 16, 8, beta, c + j, ldc, w, st);
        ++p;
      } else {  // two panels per tile, or the last one alone
        const int64_t ldv = K * 16;
        if (p + 1 < panels) {
          const int w = static_cast<int>(std::min<int64_t>(16, N - j - 16));
          if (rows == T::kStripRows)
            tile<V, T::kStripRows, 2>(K, alpha, a, lda, b, 16, ldv, beta, c + j, ldc, w, st);
          else
            tail_rows<V, 2>(rows, K, alpha, a, lda, b, 16, ldv, beta, c + j, ldc, w, st);
          p += 2;
        } else {
          const int w = static_cast<int>(N - j);
          if (rows == T::kStripRows)
            tile<V, T::kStripRows, 1>(K, alpha, a, lda, b, 16, ldv, beta, c + j, ldc, w, st);
          else
            tail_rows<V, 1>(rows, K, alpha, a, lda, b, 16, ldv, beta, c + j, ldc, w, st);
          ++p;
        }
      }
    }
    i += rows;
  }
}

QTOOL_HOT_LOOP
void direct_v8(int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda, const float* B, int64_t ldb,
               float beta, float* C, int64_t ldc) {
  direct<v8>(M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

QTOOL_HOT_LOOP
void direct_packed_v8(int64_t M, float alpha, const float* A, int64_t lda, const PackedB& B, float beta, float* C,
                      int64_t ldc, const Epilogue& epilogue) {
  direct_packed<v8>(M, alpha, A, lda, B, beta, C, ldc, epilogue);
}

// The AVX-512 variants: 16-float vectors and tiles of twice the columns (x86-64-v4's 32 registers hold them). They
// compute every element with the same multiply-add chain as the 8-float x86-64-v4 code (fused multiply-adds in k
// order), so which one runs never changes a result on one CPU; on ORT's AVX-512 machines MLAS runs 16-float tiles.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(QTOOL_NO_CLONES)
#define QTOOL_AVX512 1
[[gnu::target("arch=x86-64-v4")]] void direct_v16(int64_t M, int64_t N, int64_t K, float alpha, const float* A,
                                                  int64_t lda, const float* B, int64_t ldb, float beta, float* C,
                                                  int64_t ldc) {
  direct<v16>(M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

[[gnu::target("arch=x86-64-v4")]] void direct_packed_v16(int64_t M, float alpha, const float* A, int64_t lda,
                                                         const PackedB& B, float beta, float* C, int64_t ldc,
                                                         const Epilogue& epilogue) {
  direct_packed<v16>(M, alpha, A, lda, B, beta, C, ldc, epilogue);
}

bool avx512() {
  static const bool yes = __builtin_cpu_supports("x86-64-v4");
  return yes;
}
#endif

}  // namespace

void sgemm_direct(int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda, const float* B,
                  int64_t ldb, float beta, float* C, int64_t ldc) {
#ifdef QTOOL_AVX512
  if (avx512()) return direct_v16(M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
#endif
  direct_v8(M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
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

void sgemm_direct_packed(int64_t M, float alpha, const float* A, int64_t lda, const PackedB& B, float beta, float* C,
                         int64_t ldc, const Epilogue& epilogue) {
#ifdef QTOOL_AVX512
  if (avx512()) return direct_packed_v16(M, alpha, A, lda, B, beta, C, ldc, epilogue);
#endif
  direct_packed_v8(M, alpha, A, lda, B, beta, C, ldc, epilogue);
}

}  // namespace qtool::runtime::kernels::compute
