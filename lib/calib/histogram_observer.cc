#include "calib/histogram_observer.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>

#include "core/error.h"

namespace qtool::calib {

uint64_t Histogram::total() const { return std::accumulate(counts.begin(), counts.end(), uint64_t{0}); }

namespace {

int64_t grid_index(double v, int e) { return static_cast<int64_t>(std::floor(std::ldexp(v, -e))); }

bool fits(float lo, float hi, int e, int64_t bins) { return grid_index(hi, e) - grid_index(lo, e) < bins; }

// floor(k / 2^shift) for shift >= 0: the bin of the coarser grid that grid bin k falls in. The exponent can jump
// by far more than 63 (a tensor that was all zeros, exponent ~-200, then sees real values), where `>>` would be
// undefined; every bin then lands in bin 0 or -1.
int64_t coarser_bin(int64_t k, int shift) {
  if (shift >= 63) return k < 0 ? -1 : 0;
  return k >> shift;  // arithmetic shift: floor for negative k too
}

}  // namespace

int histogram_exponent(float lo, float hi, int64_t bins) {
  const double m = std::max(std::fabs(static_cast<double>(lo)), std::fabs(static_cast<double>(hi)));
  const int e_mag = m == 0 ? -200 : std::ilogb(m) - 40;
  // A lower bound of the smallest fitting exponent: below it, (hi - lo) / 2^e > bins + 1 bins are needed.
  const double span = static_cast<double>(hi) - static_cast<double>(lo);
  int e = e_mag;
  if (span > 0) e = std::max(e, std::ilogb(span / static_cast<double>(bins + 1)) - 1);
  while (!fits(lo, hi, e, bins)) ++e;
  return e;
}

HistogramObserver::HistogramObserver(int64_t bins) : bins_(bins) {
  if (bins < 16) throw UsageError("histogram observer: " + std::to_string(bins) + " bins is too few (at least 16)");
}

void HistogramObserver::cover(float lo, float hi, int min_exponent) {
  if (count_ == 0) {
    min_ = lo;
    max_ = hi;
    exponent_ = std::max(histogram_exponent(lo, hi, bins_), min_exponent);
    first_ = grid_index(lo, exponent_);
    counts_.assign(static_cast<size_t>(bins_), 0);
    return;
  }
  const float new_min = std::min(min_, lo), new_max = std::max(max_, hi);
  const int e = std::max({exponent_, min_exponent, histogram_exponent(new_min, new_max, bins_)});
  const int64_t first = grid_index(new_min, e);
  if (e != exponent_ || first != first_) {
    // Re-bin: old grid bin k lands in new grid bin floor(k / 2^(e - exponent_)) (arithmetic shift = floor).
    std::vector<uint64_t> moved(static_cast<size_t>(bins_), 0);
    const int shift = e - exponent_;
    for (int64_t i = 0; i < bins_; ++i) {
      const uint64_t c = counts_[static_cast<size_t>(i)];
      if (c == 0) continue;
      const int64_t k = coarser_bin(first_ + i, shift);
      moved[static_cast<size_t>(k - first)] += c;
    }
    counts_ = std::move(moved);
    exponent_ = e;
    first_ = first;
  }
  min_ = new_min;
  max_ = new_max;
}

void HistogramObserver::observe(const Batch& batch, const ExecContext& ctx) {
  const BatchSummary& s = batch.summary;
  if (!s.has_finite()) return;
  cover(s.min, s.max, -1000);
  ctx.backend->histogram_add(batch.values, window(), counts_, ctx.threads);
  count_ += s.count - s.nan_count - s.inf_count;
}

void HistogramObserver::merge(const Observer& other) {
  const auto& o = same_kind<HistogramObserver>(*this, other);
  if (o.bins_ != bins_) throw InternalError("histogram observer: merging windows of different sizes");
  if (o.count_ == 0) return;
  const int64_t count = count_;
  cover(o.min_, o.max_, o.exponent_);
  const int shift = exponent_ - o.exponent_;
  for (int64_t i = 0; i < bins_; ++i) {
    const uint64_t c = o.counts_[static_cast<size_t>(i)];
    if (c == 0) continue;
    counts_[static_cast<size_t>(coarser_bin(o.first_ + i, shift) - first_)] += c;
  }
  count_ = count + o.count_;
}

Histogram HistogramObserver::histogram() const {
  Histogram h;
  if (count_ == 0) return h;
  int64_t a = 0, b = bins_ - 1;
  while (a < b && counts_[static_cast<size_t>(a)] == 0) ++a;
  while (b > a && counts_[static_cast<size_t>(b)] == 0) --b;
  h.width = std::ldexp(1.0, exponent_);
  h.lo = std::ldexp(static_cast<double>(first_ + a), exponent_);
  h.counts.assign(counts_.begin() + a, counts_.begin() + b + 1);
  h.data_min = min_;
  h.data_max = max_;
  return h;
}

std::optional<HistogramObserver> HistogramObserver::restore(const Histogram& h, int64_t bins) {
  if (h.empty() || static_cast<int64_t>(h.counts.size()) > bins || !(h.width > 0)) return std::nullopt;
  int e = 0;
  if (std::frexp(h.width, &e) != 0.5) return std::nullopt;  // not a power of two
  --e;                                                      // width = 2^e
  const double first = std::ldexp(h.lo, -e);
  if (first != std::floor(first) || std::fabs(first) > 0x1p62) return std::nullopt;
  if (e != histogram_exponent(h.data_min, h.data_max, bins) || grid_index(h.data_min, e) != int64_t(first) ||
      grid_index(h.data_max, e) != int64_t(first) + static_cast<int64_t>(h.counts.size()) - 1)
    return std::nullopt;
  HistogramObserver o(bins);
  o.exponent_ = e;
  o.first_ = static_cast<int64_t>(first);
  o.counts_.assign(static_cast<size_t>(bins), 0);
  std::copy(h.counts.begin(), h.counts.end(), o.counts_.begin());
  o.count_ = static_cast<int64_t>(h.total());
  o.min_ = h.data_min;
  o.max_ = h.data_max;
  return o;
}

}  // namespace qtool::calib
