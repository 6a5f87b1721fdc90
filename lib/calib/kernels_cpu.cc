// OpenMP versions of the observer kernels (contracts in calib/kernels.h, reference twins in
// kernels_ref.cc). Each splits the input into contiguous chunks, one per thread, and combines the
// per-thread partial results in thread order, so results do not depend on scheduling.
#include <omp.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <atomic>
#include <cfloat>
#include <cmath>
#include <limits>
#include <vector>

#include "calib/kernels.h"

namespace qtool::calib {
namespace {

// The index loops are compiled for AVX-512, AVX2 and baseline x86-64 and picked at load time (function
// multiversioning). They are branch-free (out-of-window values are replaced by the dump slot before the
// conversion to int), so every clone vectorises; the arithmetic is the same IEEE operations in every clone.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#if defined(QTOOL_NO_CLONES)
#define QTOOL_CALIB_CLONES
#else
#define QTOOL_CALIB_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#endif
#define QTOOL_CALIB_X86 1
#else
#define QTOOL_CALIB_X86 0
#define QTOOL_CALIB_CLONES
#endif

CpuIsa detected_isa() {
#if QTOOL_CALIB_X86
  if (__builtin_cpu_supports("avx512f")) return CpuIsa::Avx512;
  if (__builtin_cpu_supports("avx2")) return CpuIsa::Avx2;
#endif
  return CpuIsa::Baseline;
}

std::atomic<CpuIsa> g_isa{detected_isa()};

CpuIsa isa() { return g_isa.load(std::memory_order_relaxed); }

constexpr int64_t kMinPerThread = 1 << 15;  // below this, threading costs more than it saves

int threads_for(size_t n, int threads) {
  const int64_t useful = std::max<int64_t>(1, static_cast<int64_t>(n) / kMinPerThread);
  return static_cast<int>(std::clamp<int64_t>(useful, 1, std::max(threads, 1)));
}

// [begin, end) of chunk t of n split into `parts`.
std::pair<size_t, size_t> chunk(size_t n, int parts, int t) {
  const size_t per = n / static_cast<size_t>(parts), rem = n % static_cast<size_t>(parts);
  const size_t b = static_cast<size_t>(t) * per + std::min<size_t>(static_cast<size_t>(t), rem);
  return {b, b + per + (static_cast<size_t>(t) < rem ? 1 : 0)};
}

struct Partial {
  int64_t nonfinite = 0, nan = 0;
  float min = std::numeric_limits<float>::infinity(), max = -std::numeric_limits<float>::infinity();
};

// Branch-free loop the compiler vectorises: non-finite values are replaced by ±inf sentinels that
// cannot win the min/max, and counted (in 32-bit lanes per block of 2^20 values).
#if QTOOL_CALIB_X86
// summarize_range with AVX2 intrinsics (the loop below compiles to SSE2 only: this file targets baseline
// x86-64). Same result: min/max are order-independent and the counts are exact.
__attribute__((target("avx2"))) Partial summarize_range_avx2(const float* x, size_t n) {
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff)), fmax = _mm256_set1_ps(FLT_MAX);
  const __m256 pinf = _mm256_set1_ps(std::numeric_limits<float>::infinity()),
               ninf = _mm256_sub_ps(_mm256_setzero_ps(), pinf);
  __m256 lo = pinf, hi = ninf;
  Partial p;
  size_t i = 0;
  while (i + 8 <= n) {
    // Lane counters (0 or -1 added per value) stay far from overflow within a block of 2^20 values.
    __m256i nonfinite = _mm256_setzero_si256(), nan = _mm256_setzero_si256();
    const size_t end = std::min(n, i + (size_t{1} << 20)) & ~size_t{7};
    for (; i + 8 <= end; i += 8) {
      const __m256 v = _mm256_loadu_ps(x + i);
      const __m256 finite = _mm256_cmp_ps(_mm256_and_ps(v, abs_mask), fmax, _CMP_LE_OQ);
      lo = _mm256_min_ps(lo, _mm256_blendv_ps(pinf, v, finite));
      hi = _mm256_max_ps(hi, _mm256_blendv_ps(ninf, v, finite));
      nonfinite = _mm256_sub_epi32(
          nonfinite, _mm256_castps_si256(_mm256_xor_ps(finite, _mm256_castsi256_ps(_mm256_set1_epi32(-1)))));
      nan = _mm256_sub_epi32(nan, _mm256_castps_si256(_mm256_cmp_ps(v, v, _CMP_UNORD_Q)));
    }
    alignas(32) int32_t a[8], b[8];
    _mm256_store_si256(reinterpret_cast<__m256i*>(a), nonfinite);
    _mm256_store_si256(reinterpret_cast<__m256i*>(b), nan);
    for (int j = 0; j < 8; ++j) {
      p.nonfinite += a[j];
      p.nan += b[j];
    }
  }
  alignas(32) float l[8], h[8];
  _mm256_store_ps(l, lo);
  _mm256_store_ps(h, hi);
  for (int j = 0; j < 8; ++j) {
    p.min = std::min(p.min, l[j]);
    p.max = std::max(p.max, h[j]);
  }
  for (; i < n; ++i) {
    const float v = x[i];
    if (std::fabs(v) <= FLT_MAX) {
      p.min = std::min(p.min, v);
      p.max = std::max(p.max, v);
    } else {
      ++p.nonfinite;
      p.nan += v != v ? 1 : 0;
    }
  }
  return p;
}

// GCC 12's AVX-512 headers build their "undefined" vectors from themselves, which its own -Wuninitialized then
// reports (a false positive inside the intrinsics): silenced around the AVX-512 loops only.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
// The same with AVX-512 (16 lanes, comparison masks): non-finite values are rare, so they are counted in a
// branch the predictor learns.
__attribute__((target("avx512f"))) Partial summarize_range_avx512(const float* x, size_t n) {
  const __m512 fmax = _mm512_set1_ps(FLT_MAX);
  __m512 lo = _mm512_set1_ps(std::numeric_limits<float>::infinity()), hi = _mm512_sub_ps(_mm512_setzero_ps(), lo);
  Partial p;
  for (size_t i = 0; i < n; i += 16) {
    const auto live = static_cast<__mmask16>(n - i >= 16 ? 0xFFFF : (1u << (n - i)) - 1);
    const __m512 v = _mm512_maskz_loadu_ps(live, x + i);
    const __mmask16 finite = _mm512_mask_cmp_ps_mask(live, _mm512_abs_ps(v), fmax, _CMP_LE_OQ);
    lo = _mm512_mask_min_ps(lo, finite, lo, v);
    hi = _mm512_mask_max_ps(hi, finite, hi, v);
    if (finite != live) {
      p.nonfinite += __builtin_popcount(static_cast<unsigned>(live & ~finite));
      p.nan += __builtin_popcount(static_cast<unsigned>(_mm512_mask_cmp_ps_mask(live, v, v, _CMP_UNORD_Q)));
    }
  }
  p.min = _mm512_reduce_min_ps(lo);
  p.max = _mm512_reduce_max_ps(hi);
  return p;
}
#pragma GCC diagnostic pop
#endif

Partial summarize_range(const float* x, size_t n) {
#if QTOOL_CALIB_X86
  if (isa() == CpuIsa::Avx512) return summarize_range_avx512(x, n);
  if (isa() == CpuIsa::Avx2) return summarize_range_avx2(x, n);
#endif
  Partial p;
  float lo = p.min, hi = p.max;
  constexpr float kInf = std::numeric_limits<float>::infinity();
  for (size_t b = 0; b < n; b += size_t{1} << 20) {
    const size_t e = std::min(n, b + (size_t{1} << 20));
    int32_t nonfinite = 0, nan = 0;
#pragma omp simd reduction(min : lo) reduction(max : hi) reduction(+ : nonfinite, nan)
    for (size_t i = b; i < e; ++i) {
      const float v = x[i];
      const bool finite = std::fabs(v) <= FLT_MAX;
      nonfinite += finite ? 0 : 1;
      nan += v != v ? 1 : 0;
      const float a = finite ? v : kInf;
      const float c = finite ? v : -kInf;
      lo = std::min(lo, a);
      hi = std::max(hi, c);
    }
    p.nonfinite += nonfinite;
    p.nan += nan;
  }
  p.min = lo;
  p.max = hi;
  return p;
}

BatchSummary summarize(std::span<const float> x, int threads) {
  const int parts = threads_for(x.size(), threads);
  std::vector<Partial> partial(static_cast<size_t>(parts));
#pragma omp parallel for num_threads(parts) schedule(static, 1)
  for (int t = 0; t < parts; ++t) {
    const auto [b, e] = chunk(x.size(), parts, t);
    partial[static_cast<size_t>(t)] = summarize_range(x.data() + b, e - b);
  }
  BatchSummary s;
  s.count = static_cast<int64_t>(x.size());
  s.min = std::numeric_limits<float>::infinity();
  s.max = -std::numeric_limits<float>::infinity();
  for (const Partial& p : partial) {
    s.nan_count += p.nan;
    s.inf_count += p.nonfinite - p.nan;
    s.min = std::min(s.min, p.min);
    s.max = std::max(s.max, p.max);
  }
  s.min = unsigned_zero(s.min);
  s.max = unsigned_zero(s.max);
  return s;
}

// idx[i] = floor(x[i]·scale - first) when that lies in [0, bins), else bins (NaN, ±inf, outside the window).
// y = v·2^-e - first is exact in double for every value inside the window (v·2^-e is exact, and |y| < bins),
// so for y >= 0 the truncating conversion is the floor.
// Both index loops also widen [lo, hi] to the range of the indices they wrote.
QTOOL_CALIB_CLONES void grid_indices(const float* x, size_t m, double scale, double first, double bins, int32_t* idx,
                                     int32_t& lo, int32_t& hi) {
  int32_t a = lo, b = hi;
#pragma omp simd reduction(min : a) reduction(max : b)
  for (size_t i = 0; i < m; ++i) {
    const double y = static_cast<double>(x[i]) * scale - first;
    const auto k = static_cast<int32_t>(y >= 0.0 && y < bins ? y : bins);
    idx[i] = k;
    a = std::min(a, k);
    b = std::max(b, k);
  }
  lo = a;
  hi = b;
}

// The same indices in float arithmetic, for windows where that is exact: the caller guarantees
// (grid_float_exact) that t = v·2^-e never underflows (e <= 0, so the product only scales up and is exact)
// and that every index of the window, first included, fits int32. floor(t) is then exact, and
// k = floor(t) - first in wrapping 32-bit arithmetic; NaN and ±inf are sent to `bins` explicitly.
// Written with AVX2 intrinsics (GCC does not vectorise this float -> int conversion under a mask), and as a
// scalar loop doing the same IEEE operations for the tail and for CPUs without AVX2.
int32_t grid_index_f32(float v, float scale, int32_t first, int32_t bins) {
  if (!(std::fabs(v) <= FLT_MAX)) return bins;
  const auto u = static_cast<uint32_t>(static_cast<int32_t>(std::floor(v * scale))) - static_cast<uint32_t>(first);
  return u < static_cast<uint32_t>(bins) ? static_cast<int32_t>(u) : bins;
}

void grid_indices_f32_scalar(const float* x, size_t m, float scale, int32_t first, int32_t bins, int32_t* idx,
                             int32_t& lo, int32_t& hi) {
  for (size_t i = 0; i < m; ++i) {
    const int32_t k = grid_index_f32(x[i], scale, first, bins);
    idx[i] = k;
    lo = std::min(lo, k);
    hi = std::max(hi, k);
  }
}

#if QTOOL_CALIB_X86
__attribute__((target("avx2"))) void grid_indices_f32_avx2(const float* x, size_t m, float scale, int32_t first,
                                                           int32_t bins, int32_t* idx, int32_t& lo, int32_t& hi) {
  const __m256 vscale = _mm256_set1_ps(scale), abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  const __m256 fmax = _mm256_set1_ps(FLT_MAX);
  const __m256i vfirst = _mm256_set1_epi32(first), vbins = _mm256_set1_epi32(bins);
  const __m256i vlast = _mm256_set1_epi32(bins - 1);
  __m256i vlo = _mm256_set1_epi32(lo), vhi = _mm256_set1_epi32(hi);
  size_t i = 0;
  for (; i + 8 <= m; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    const __m256i f = _mm256_cvttps_epi32(_mm256_floor_ps(_mm256_mul_ps(v, vscale)));
    const __m256i u = _mm256_sub_epi32(f, vfirst);
    const __m256i in_window = _mm256_cmpeq_epi32(_mm256_min_epu32(u, vlast), u);  // u < bins, unsigned
    const __m256 finite = _mm256_cmp_ps(_mm256_and_ps(v, abs_mask), fmax, _CMP_LE_OQ);
    const __m256i keep = _mm256_and_si256(in_window, _mm256_castps_si256(finite));
    const __m256i k = _mm256_blendv_epi8(vbins, u, keep);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(idx + i), k);
    vlo = _mm256_min_epi32(vlo, k);
    vhi = _mm256_max_epi32(vhi, k);
  }
  alignas(32) int32_t l[8], h[8];
  _mm256_store_si256(reinterpret_cast<__m256i*>(l), vlo);
  _mm256_store_si256(reinterpret_cast<__m256i*>(h), vhi);
  for (int j = 0; j < 8; ++j) {
    lo = std::min(lo, l[j]);
    hi = std::max(hi, h[j]);
  }
  grid_indices_f32_scalar(x + i, m - i, scale, first, bins, idx + i, lo, hi);
}

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
// With AVX-512 (see summarize_range_avx512 for the pragmas): the conversion rounds down itself (floor and convert in
// one instruction), masks select.
__attribute__((target("avx512f"))) void grid_indices_f32_avx512(const float* x, size_t m, float scale, int32_t first,
                                                                int32_t bins, int32_t* idx, int32_t& lo, int32_t& hi) {
  const __m512 vscale = _mm512_set1_ps(scale), fmax = _mm512_set1_ps(FLT_MAX);
  const __m512i vfirst = _mm512_set1_epi32(first), vbins = _mm512_set1_epi32(bins);
  __m512i vlo = _mm512_set1_epi32(lo), vhi = _mm512_set1_epi32(hi);
  for (size_t i = 0; i < m; i += 16) {
    const auto live = static_cast<__mmask16>(m - i >= 16 ? 0xFFFF : (1u << (m - i)) - 1);
    const __m512 v = _mm512_maskz_loadu_ps(live, x + i);
    const __m512i f = _mm512_cvt_roundps_epi32(_mm512_mul_ps(v, vscale), _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
    const __m512i u = _mm512_sub_epi32(f, vfirst);
    const __mmask16 finite = _mm512_cmp_ps_mask(_mm512_abs_ps(v), fmax, _CMP_LE_OQ);
    const __mmask16 keep = _mm512_mask_cmplt_epu32_mask(finite, u, vbins);  // u < bins, unsigned
    const __m512i k = _mm512_mask_blend_epi32(keep, vbins, u);
    _mm512_mask_storeu_epi32(idx + i, live, k);
    vlo = _mm512_mask_min_epi32(vlo, live, vlo, k);
    vhi = _mm512_mask_max_epi32(vhi, live, vhi, k);
  }
  lo = _mm512_reduce_min_epi32(vlo);
  hi = _mm512_reduce_max_epi32(vhi);
}
#pragma GCC diagnostic pop
#endif

void grid_indices_f32(const float* x, size_t m, float scale, int32_t first, int32_t bins, int32_t* idx, int32_t& lo,
                      int32_t& hi) {
#if QTOOL_CALIB_X86
  if (isa() == CpuIsa::Avx512) return grid_indices_f32_avx512(x, m, scale, first, bins, idx, lo, hi);
  if (isa() == CpuIsa::Avx2) return grid_indices_f32_avx2(x, m, scale, first, bins, idx, lo, hi);
#endif
  grid_indices_f32_scalar(x, m, scale, first, bins, idx, lo, hi);
}

// True when grid_indices_f32 computes exactly what grid_indices does for this window: e <= 0 (no underflow,
// no rounding of v·2^-e) and every index of the window, as float truncation, fits int32 (|t| < 2^31).
bool grid_float_exact(const GridWindow& g) {
  constexpr int64_t kLimit = int64_t{1} << 30;
  return g.exponent <= 0 && g.exponent >= -120 && g.first > -kLimit && g.first + g.bins < kLimit;
}

// idx[i] = torch.histc's bin of x[i] (float arithmetic, last edge inclusive), or bins when x[i] is outside
// [lo, hi] or NaN. For v in [lo, hi], (v - lo)·bins/width lies in [0, bins], so the conversion is in range.
QTOOL_CALIB_CLONES void histc_indices(const float* x, size_t m, float lo, float hi, float bins, int32_t* idx,
                                      int32_t& kmin, int32_t& kmax) {
  const float width = hi - lo, last = bins - 1;
  int32_t a = kmin, b = kmax;
#pragma omp simd reduction(min : a) reduction(max : b)
  for (size_t i = 0; i < m; ++i) {
    const float v = x[i];
    const float pos = (v - lo) * bins / width;
    const auto k = static_cast<int32_t>(v >= lo && v <= hi ? std::min(pos, last) : bins);
    idx[i] = k;
    a = std::min(a, k);
    b = std::max(b, k);
  }
  kmin = a;
  kmax = b;
}

// Per-thread 16-bit sub-histograms, all zero between uses (count_bins re-zeroes only what it touched).
std::vector<uint16_t>& scratch(size_t size) {
  thread_local std::vector<uint16_t> sub;
  if (sub.size() < size) sub.assign(size, 0);
  return sub;
}

// Counting values into bins. Indices are computed a block at a time by index(x, m, idx, lo, hi) (one of the
// loops above), then counted into kSub interleaved 16-bit sub-histograms: runs of equal bins (a ReLU's zeros)
// do not serialise on one counter. kSub = 2 measured fastest on ppocrv4-det (observer overhead 70 % against
// 80 % with 4, 100 % with 1 and 115 % with 8): with an 8192-bin window, more copies fall out of L1. Index `bins` is the
// slot for rejected values (NaN, ±inf, out of range). Only the range of bins the data touched is flushed and re-zeroed,
// so a small tensor does not pay for a wide window.
template <class Index, class Out>
void count_bins(const float* x, size_t n, size_t bins, Index index, Out* out) {
  // Sub-counters are 16-bit (half the cache footprint of 32-bit ones). Sub-histogram r only counts values at
  // positions = r mod kSub of a block (the tail of the last block goes to r = 0: < kSub more), so one flush
  // chunk of kFlush values adds at most kFlush/kSub + kSub <= 65535 to any sub-counter: they cannot wrap.
  constexpr size_t kSub = 2, kBlock = 512, kFlush = kSub * 65535 / kBlock * kBlock - kBlock;
  int32_t idx[kBlock];
  int32_t lo = static_cast<int32_t>(bins), hi = 0;
  if (n < 4 * kBlock) {  // small tensors: no sub-histograms
    for (size_t b = 0; b < n; b += kBlock) {
      const size_t m = std::min(kBlock, n - b);
      index(x + b, m, idx, lo, hi);
      for (size_t i = 0; i < m; ++i)
        if (static_cast<size_t>(idx[i]) < bins) out[idx[i]] += 1;
    }
    return;
  }
  const size_t stride = bins + 1;
  std::vector<uint16_t>& sub = scratch(kSub * stride);
  uint16_t* h = sub.data();
  for (size_t done = 0; done < n;) {
    const size_t end = std::min(n, done + kFlush);
    lo = static_cast<int32_t>(bins);
    hi = 0;
    for (size_t b = done; b < end; b += kBlock) {
      const size_t m = std::min(kBlock, end - b);
      index(x + b, m, idx, lo, hi);
      size_t i = 0;
      for (; i + kSub <= m; i += kSub)
        for (size_t r = 0; r < kSub; ++r) ++h[r * stride + static_cast<size_t>(idx[i + r])];
      for (; i < m; ++i) ++h[static_cast<size_t>(idx[i])];
    }
    const auto a = static_cast<size_t>(lo), z = static_cast<size_t>(hi) + 1;  // touched: [a, z), dump included
    for (size_t k = a; k < std::min(z, bins); ++k) {
      uint64_t c = 0;
      for (size_t r = 0; r < kSub; ++r) c += h[r * stride + k];
      out[k] += static_cast<Out>(c);
    }
    for (size_t r = 0; r < kSub; ++r) std::fill(h + r * stride + a, h + r * stride + z, uint16_t{0});
    done = end;
  }
}

// Splits x across threads, each counting into its own bins, summed in thread order.
template <class Index, class Out>
void count_bins_parallel(std::span<const float> x, size_t bins, Index index, Out* out, int threads) {
  const int parts = threads_for(x.size(), threads);
  if (parts == 1) return count_bins(x.data(), x.size(), bins, index, out);
  std::vector<Out> local(bins * static_cast<size_t>(parts), Out{0});
#pragma omp parallel for num_threads(parts) schedule(static, 1)
  for (int t = 0; t < parts; ++t) {
    const auto [b, e] = chunk(x.size(), parts, t);
    count_bins(x.data() + b, e - b, bins, index, local.data() + bins * static_cast<size_t>(t));
  }
  for (int t = 0; t < parts; ++t)
    for (size_t i = 0; i < bins; ++i) out[i] += local[bins * static_cast<size_t>(t) + i];
}

void histogram_add(std::span<const float> x, const GridWindow& grid, std::span<uint64_t> counts, int threads) {
  if (grid_float_exact(grid)) {
    const float scale = std::ldexp(1.0f, -grid.exponent);
    const auto first = static_cast<int32_t>(grid.first), bins = static_cast<int32_t>(grid.bins);
    auto index = [=](const float* v, size_t m, int32_t* idx, int32_t& lo, int32_t& hi) {
      grid_indices_f32(v, m, scale, first, bins, idx, lo, hi);
    };
    return count_bins_parallel(x, static_cast<size_t>(grid.bins), index, counts.data(), threads);
  }
  const double scale = std::ldexp(1.0, -grid.exponent), first = static_cast<double>(grid.first);
  const double bins = static_cast<double>(grid.bins);
  auto index = [=](const float* v, size_t m, int32_t* idx, int32_t& lo, int32_t& hi) {
    grid_indices(v, m, scale, first, bins, idx, lo, hi);
  };
  count_bins_parallel(x, static_cast<size_t>(grid.bins), index, counts.data(), threads);
}

void channel_minmax(std::span<const float> x, int64_t outer, int64_t channels, int64_t inner, std::span<float> mins,
                    std::span<float> maxs, int threads) {
  const int parts = static_cast<int>(std::min<int64_t>(threads_for(x.size(), threads), channels));
#pragma omp parallel for num_threads(std::max(parts, 1)) schedule(static)
  for (int64_t c = 0; c < channels; ++c) {
    float lo = mins[static_cast<size_t>(c)], hi = maxs[static_cast<size_t>(c)];
    for (int64_t o = 0; o < outer; ++o) {
      const float* p = x.data() + (o * channels + c) * inner;
#pragma omp simd reduction(min : lo) reduction(max : hi)
      for (int64_t i = 0; i < inner; ++i) {
        const float v = p[i];
        const bool finite = std::fabs(v) <= FLT_MAX;
        const float a = finite ? v : std::numeric_limits<float>::infinity();
        const float b = finite ? v : -std::numeric_limits<float>::infinity();
        lo = std::min(lo, a);
        hi = std::max(hi, b);
      }
    }
    mins[static_cast<size_t>(c)] = unsigned_zero(lo);
    maxs[static_cast<size_t>(c)] = unsigned_zero(hi);
  }
}

// torch.histc's CPU arithmetic (float): bin = (int64)((v - lo) · bins / (hi - lo)), last edge inclusive.
void histc_add(std::span<const float> x, float lo, float hi, std::span<double> hist, int threads) {
  const float bins = static_cast<float>(hist.size());
  auto index = [=](const float* v, size_t m, int32_t* idx, int32_t& kmin, int32_t& kmax) {
    histc_indices(v, m, lo, hi, bins, idx, kmin, kmax);
  };
  count_bins_parallel(x, hist.size(), index, hist.data(), threads);
}

}  // namespace

CpuIsa cpu_isa() { return isa(); }

CpuIsa set_cpu_isa_limit(CpuIsa max) {
  g_isa.store(std::min(max, detected_isa()), std::memory_order_relaxed);
  return isa();
}

namespace {
constexpr std::string_view kIsaNames[] = {"baseline", "avx2", "avx512"};  // in CpuIsa order
}  // namespace

std::string_view cpu_isa_name(CpuIsa isa) { return kIsaNames[static_cast<int>(isa)]; }

std::optional<CpuIsa> cpu_isa_from_name(std::string_view name) {
  for (int i = 0; i < 3; ++i)
    if (kIsaNames[i] == name) return static_cast<CpuIsa>(i);
  return std::nullopt;
}

ObserverBackend cpu_observer_backend() {
  return {BackendKind::Cpu, "cpu", summarize, histogram_add, channel_minmax, histc_add};
}

}  // namespace qtool::calib
