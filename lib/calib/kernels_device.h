// The observer kernels as device code: the per-thread logic of each CUDA kernel, written once as QTOOL_HD
// functions (device/portable.h). kernels_cuda.cu wraps each phase in a __global__ kernel with a __syncthreads()
// between phases; kernels_emulated.cc runs the same phases through the launch-grid emulation (device/emulate.h),
// and tests compare that backend with the CPU one bit for bit. Contracts: calib/kernels.h.
//
// Every result is order-independent, so the device's scheduling cannot change it: min/max of the finite values
// (a zero extreme is made +0 at the end, as on the CPU), integer counts, and integer bin counts where each
// value's bin is a pure function of the value (the same IEEE operations as the reference twin, no fused
// multiply-add: the CUDA sources are built with --fmad=false).
#pragma once

#include <cmath>
#include <cstdint>
#include <span>
#include <vector>

#include "calib/kernels.h"
#include "device/portable.h"

namespace qtool::calib::device_kernels {

using qtool::device::ThreadCoord;

constexpr int64_t kBlockThreads = 256;
constexpr int64_t kMaxBlocks = 1024;     // grid-stride beyond that: the per-block partials stay few
constexpr int64_t kSharedBins = 8192;    // 32-bit shared counters per histogram pass: 32 KiB of shared memory
constexpr int64_t kMaxLaunchValues = int64_t{1} << 31;  // per launch, so no 32-bit shared counter can wrap

// Blocks for n values: one per kBlockThreads values, at most kMaxBlocks, at least 1.
inline int64_t blocks_for(int64_t n) {
  const int64_t b = (n + kBlockThreads - 1) / kBlockThreads;
  return b < 1 ? 1 : (b > kMaxBlocks ? kMaxBlocks : b);
}

QTOOL_HD inline bool is_finite(float v) { return v == v && v != INFINITY && v != -INFINITY; }

// ---- summarize: finite min/max, NaN and non-finite counts ---------------------------------------------------

struct SummaryPartial {
  float min;
  float max;
  uint64_t nonfinite;
  uint64_t nan;
};

QTOOL_HD inline SummaryPartial summary_empty() { return {INFINITY, -INFINITY, 0, 0}; }

QTOOL_HD inline void summary_fold(SummaryPartial& p, float v) {
  if (is_finite(v)) {
    p.min = v < p.min ? v : p.min;
    p.max = v > p.max ? v : p.max;
  } else {
    ++p.nonfinite;
    p.nan += v != v ? 1 : 0;
  }
}

QTOOL_HD inline void summary_combine(SummaryPartial& a, const SummaryPartial& b) {
  a.min = b.min < a.min ? b.min : a.min;
  a.max = b.max > a.max ? b.max : a.max;
  a.nonfinite += b.nonfinite;
  a.nan += b.nan;
}

// Phase 1: each thread folds its grid-stride share of x into shared[thread].
QTOOL_HD inline void summarize_fold(ThreadCoord t, const float* x, int64_t n, SummaryPartial* shared) {
  SummaryPartial p = summary_empty();
  for (int64_t i = t.first(); i < n; i += t.stride()) summary_fold(p, x[i]);
  shared[t.thread] = p;
}

// Phase 2: thread 0 combines the block's partials, in thread order, into partials[block].
QTOOL_HD inline void summarize_block(ThreadCoord t, const SummaryPartial* shared, SummaryPartial* partials) {
  if (t.thread != 0) return;
  SummaryPartial p = summary_empty();
  for (int64_t i = 0; i < t.block_threads; ++i) summary_combine(p, shared[i]);
  partials[t.block] = p;
}

// The host's last step: the blocks' partials into the BatchSummary of n values.
inline BatchSummary summary_of(std::span<const SummaryPartial> partials, int64_t n) {
  SummaryPartial p = summary_empty();
  for (const SummaryPartial& b : partials) summary_combine(p, b);
  BatchSummary s;
  s.count = n;
  s.nan_count = static_cast<int64_t>(p.nan);
  s.inf_count = static_cast<int64_t>(p.nonfinite - p.nan);
  s.min = unsigned_zero(p.min);
  s.max = unsigned_zero(p.max);
  return s;
}

// ---- bin counting: the power-of-two grid window and torch.histc ---------------------------------------------

// The window bin of v, or -1 for NaN, ±inf and values outside the window. v·2^-e is exact in double (scale is a
// power of two and a float times it neither overflows nor underflows a double), so floor() is the true floor.
struct GridBin {
  double scale;  // 2^-exponent
  double first;
  double bins;
  QTOOL_HD int64_t operator()(float v) const {
    const double i = floor(static_cast<double>(v) * scale) - first;
    return i >= 0 && i < bins ? static_cast<int64_t>(i) : -1;
  }
};

inline GridBin grid_bin(const GridWindow& g) {
  return {std::ldexp(1.0, -g.exponent), static_cast<double>(g.first), static_cast<double>(g.bins)};
}

// torch.histc's bin (float arithmetic, last edge inclusive), or -1 outside [lo, hi] and for NaN.
struct HistcBin {
  float lo;
  float hi;
  int64_t bins;
  QTOOL_HD int64_t operator()(float v) const {
    if (!(v >= lo && v <= hi)) return -1;
    int64_t pos = static_cast<int64_t>((v - lo) * static_cast<float>(bins) / (hi - lo));
    return pos == bins ? bins - 1 : pos;
  }
};

// One counting pass covers bins [base, base + span) (span <= kSharedBins) with 32-bit counters in shared memory.
// The passes that count n values into `bins` bins: f(offset, count, base, span) for each launch, over values
// [offset, offset + count) and bins [base, base + span).
template <class F>
void for_each_count_pass(int64_t n, int64_t bins, F f) {
  for (int64_t offset = 0; offset < n; offset += kMaxLaunchValues)
    for (int64_t base = 0; base < bins; base += kSharedBins)
      f(offset, n - offset < kMaxLaunchValues ? n - offset : kMaxLaunchValues, base,
        bins - base < kSharedBins ? bins - base : kSharedBins);
}

// torch.histc's contract on top of a backend's count(x, bin, bins, counts): integer counts added to hist.
template <class Count>
void histc_add_counted(Count count, std::span<const float> x, float lo, float hi, std::span<double> hist) {
  const auto bins = static_cast<int64_t>(hist.size());
  std::vector<uint64_t> counts(hist.size(), 0);
  count(x, HistcBin{lo, hi, bins}, bins, counts.data());
  for (size_t i = 0; i < hist.size(); ++i) hist[i] += static_cast<double>(counts[i]);
}

// Phase 1: zero the shared counters.
QTOOL_HD inline void bins_zero(ThreadCoord t, int64_t span, uint32_t* shared) {
  for (int64_t j = t.thread; j < span; j += t.block_threads) shared[j] = 0;
}

// Phase 2: count this thread's grid-stride share of x into the shared counters.
template <class Bin>
QTOOL_HD void bins_count(ThreadCoord t, const float* x, int64_t n, Bin bin, int64_t base, int64_t span,
                         uint32_t* shared) {
  for (int64_t i = t.first(); i < n; i += t.stride()) {
    const int64_t k = bin(x[i]) - base;
    if (k >= 0 && k < span) qtool::device::atomic_add(&shared[k], 1u);
  }
}

// Phase 3: add the block's non-zero counters to the global 64-bit counts (counts[base + j]).
QTOOL_HD inline void bins_flush(ThreadCoord t, int64_t base, int64_t span, const uint32_t* shared, uint64_t* counts) {
  for (int64_t j = t.thread; j < span; j += t.block_threads)
    if (shared[j] != 0) qtool::device::atomic_add(&counts[base + j], uint64_t{shared[j]});
}

// ---- per-channel min/max: one block per channel ------------------------------------------------------------

struct MinMax {
  float min;
  float max;
};

// Phase 1: thread folds its share of channel c = block of x ([outer, channels, inner]) into shared[thread].
QTOOL_HD inline void channel_fold(ThreadCoord t, const float* x, int64_t outer, int64_t channels, int64_t inner,
                                  MinMax* shared) {
  const int64_t c = t.block;
  MinMax m{INFINITY, -INFINITY};
  for (int64_t j = t.thread; j < outer * inner; j += t.block_threads) {
    const float v = x[((j / inner) * channels + c) * inner + j % inner];
    if (!is_finite(v)) continue;
    m.min = v < m.min ? v : m.min;
    m.max = v > m.max ? v : m.max;
  }
  shared[t.thread] = m;
}

// Phase 2: thread 0 folds the block's partials into the running mins[c]/maxs[c]; a zero extreme becomes +0.
QTOOL_HD inline void channel_update(ThreadCoord t, const MinMax* shared, float* mins, float* maxs) {
  if (t.thread != 0) return;
  float lo = mins[t.block], hi = maxs[t.block];
  for (int64_t i = 0; i < t.block_threads; ++i) {
    lo = shared[i].min < lo ? shared[i].min : lo;
    hi = shared[i].max > hi ? shared[i].max : hi;
  }
  mins[t.block] = unsigned_zero(lo);
  maxs[t.block] = unsigned_zero(hi);
}

}  // namespace qtool::calib::device_kernels
