// Reference twins of the observer kernels: plain, single-threaded loops that state the contract
// (calib/kernels.h) as directly as possible. Tests compare the OpenMP versions against these.
#include <cfloat>
#include <cmath>
#include <limits>

#include "calib/kernels.h"

namespace qtool::calib {
namespace {

BatchSummary summarize(std::span<const float> x, int /*threads*/) {
  BatchSummary s;
  s.count = static_cast<int64_t>(x.size());
  s.min = std::numeric_limits<float>::infinity();
  s.max = -std::numeric_limits<float>::infinity();
  for (float v : x) {
    if (std::isnan(v)) {
      ++s.nan_count;
    } else if (std::isinf(v)) {
      ++s.inf_count;
    } else {
      s.min = std::min(s.min, v);
      s.max = std::max(s.max, v);
    }
  }
  s.min = unsigned_zero(s.min);
  s.max = unsigned_zero(s.max);
  return s;
}

// The window bin of finite v, or -1 when v lies outside the window (compared in double: no integer overflow).
int64_t window_bin(float v, const GridWindow& grid) {
  const double i = std::floor(std::ldexp(static_cast<double>(v), -grid.exponent)) - static_cast<double>(grid.first);
  return i >= 0 && i < static_cast<double>(grid.bins) ? static_cast<int64_t>(i) : -1;
}

void histogram_add(std::span<const float> x, const GridWindow& grid, std::span<uint64_t> counts, int /*threads*/) {
  for (float v : x) {
    if (!std::isfinite(v)) continue;
    if (const int64_t i = window_bin(v, grid); i >= 0) ++counts[static_cast<size_t>(i)];
  }
}

void channel_minmax(std::span<const float> x, int64_t outer, int64_t channels, int64_t inner, std::span<float> mins,
                    std::span<float> maxs, int /*threads*/) {
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t c = 0; c < channels; ++c)
      for (int64_t i = 0; i < inner; ++i) {
        const float v = x[static_cast<size_t>((o * channels + c) * inner + i)];
        if (!std::isfinite(v)) continue;
        mins[static_cast<size_t>(c)] = unsigned_zero(std::min(mins[static_cast<size_t>(c)], v));
        maxs[static_cast<size_t>(c)] = unsigned_zero(std::max(maxs[static_cast<size_t>(c)], v));
      }
}

void histc_add(std::span<const float> x, float lo, float hi, std::span<double> hist, int /*threads*/) {
  const int64_t bins = static_cast<int64_t>(hist.size());
  for (float v : x) {
    if (!(v >= lo && v <= hi)) continue;
    int64_t pos = static_cast<int64_t>((v - lo) * static_cast<float>(bins) / (hi - lo));
    if (pos == bins) pos -= 1;
    hist[static_cast<size_t>(pos)] += 1.0;
  }
}

}  // namespace

ObserverBackend reference_observer_backend() {
  return {BackendKind::Reference, "reference", summarize, histogram_add, channel_minmax, histc_add};
}

}  // namespace qtool::calib
