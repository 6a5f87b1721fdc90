// OpenMP versions of the observer kernels (contracts in calib/kernels.h, reference twins in
// kernels_ref.cc). Each splits the input into contiguous chunks, one per thread, and combines the
// per-thread partial results in thread order, so results do not depend on scheduling.
#include <omp.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <limits>
#include <vector>

#include "calib/kernels.h"

namespace qtool::calib {
namespace {

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
Partial summarize_range(const float* x, size_t n) {
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
  return s;
}

// y = v·2^-e - first is exact in double for every value inside the window (v·2^-e is exact, and |y| < bins),
// so for y >= 0 the truncating cast is the floor. The comparison rejects NaN and ±inf.
void histogram_range(const float* x, size_t n, const GridWindow& grid, uint64_t* h) {
  const double scale = std::ldexp(1.0, -grid.exponent), first = static_cast<double>(grid.first);
  const double nb = static_cast<double>(grid.bins);
  for (size_t i = 0; i < n; ++i) {
    const double y = static_cast<double>(x[i]) * scale - first;
    if (y >= 0.0 && y < nb) ++h[static_cast<size_t>(y)];
  }
}

void histogram_add(std::span<const float> x, const GridWindow& grid, std::span<uint64_t> counts, int threads) {
  const int parts = threads_for(x.size(), threads);
  if (parts == 1) return histogram_range(x.data(), x.size(), grid, counts.data());
  const size_t bins = static_cast<size_t>(grid.bins);
  std::vector<uint64_t> local(bins * static_cast<size_t>(parts), 0);
#pragma omp parallel for num_threads(parts) schedule(static, 1)
  for (int t = 0; t < parts; ++t) {
    const auto [b, e] = chunk(x.size(), parts, t);
    histogram_range(x.data() + b, e - b, grid, local.data() + bins * static_cast<size_t>(t));
  }
  for (int t = 0; t < parts; ++t) {
    const uint64_t* h = local.data() + bins * static_cast<size_t>(t);
    for (size_t i = 0; i < bins; ++i) counts[i] += h[i];
  }
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
    mins[static_cast<size_t>(c)] = lo;
    maxs[static_cast<size_t>(c)] = hi;
  }
}

// torch.histc's arithmetic is the reference loop's; this version only splits the input across threads.
void histc_add(std::span<const float> x, float lo, float hi, std::span<double> hist, int threads) {
  static const ObserverBackend reference = reference_observer_backend();
  const int parts = threads_for(x.size(), threads);
  if (parts == 1) return reference.histc_add(x, lo, hi, hist, 1);
  std::vector<double> local(hist.size() * static_cast<size_t>(parts), 0.0);
#pragma omp parallel for num_threads(parts) schedule(static, 1)
  for (int t = 0; t < parts; ++t) {
    const auto [b, e] = chunk(x.size(), parts, t);
    reference.histc_add(x.subspan(b, e - b), lo, hi,
                        std::span<double>(local.data() + hist.size() * static_cast<size_t>(t), hist.size()), 1);
  }
  for (int t = 0; t < parts; ++t)
    for (size_t i = 0; i < hist.size(); ++i) hist[i] += local[hist.size() * static_cast<size_t>(t) + i];
}

}  // namespace

ObserverBackend cpu_observer_backend() {
  return {BackendKind::Cpu, "cpu", summarize, histogram_add, channel_minmax, histc_add};
}

}  // namespace qtool::calib
