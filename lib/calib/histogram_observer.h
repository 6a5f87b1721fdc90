// The order-independent streaming histogram.
//
// Bins lie on a fixed grid anchored at 0 with power-of-two widths: at exponent e, grid bin k covers
// [k·2^e, (k+1)·2^e). The observer keeps a window of `bins` consecutive grid bins starting at the bin of
// the smallest value seen. When the values seen no longer fit, e grows by one (pairs of bins merge, which is
// exact because the grids nest) until they do. The exponent is always the smallest e >= E(|x|max) for which
// [min, max] fits in the window, where E(m) = ilogb(m) - 40 keeps bin indices small, so the final counts are a
// pure function of the multiset of finite values: batching, order, threads and merges do not change them.
// At that e the occupied span is more than bins/4 bins (else e-1 would fit), so the default 8192-bin window
// resolves any range into at least 2048 bins. Memory: `bins` 64-bit counters, whatever the sample count.
#pragma once

#include <optional>
#include <vector>

#include "calib/histogram.h"
#include "calib/observer.h"

namespace qtool::calib {

constexpr int64_t kDefaultHistogramBins = 8192;

class HistogramObserver final : public Observer {
 public:
  explicit HistogramObserver(int64_t bins = kDefaultHistogramBins);
  ObserverKind kind() const override { return ObserverKind::Histogram; }
  void observe(const Batch& batch, const ExecContext& ctx) override;
  void merge(const Observer& other) override;
  bool has_data() const override { return count_ > 0; }
  std::unique_ptr<Observer> clone_empty() const override { return std::make_unique<HistogramObserver>(bins_); }

  int64_t window_bins() const { return bins_; }
  int exponent() const { return exponent_; }
  // Finite values counted.
  int64_t count() const { return count_; }
  // The occupied bins only (first to last non-empty), with the exact data min/max. Empty when no data.
  Histogram histogram() const;
  // The observer whose histogram() is `h` (as a calibration file stores it), to merge it with others: nullopt when
  // `h` is not what an observer of `bins` bins reports (bins off the grid, a width that is not the exponent
  // histogram_exponent picks for [data_min, data_max], more bins than the window), or has no counts.
  static std::optional<HistogramObserver> restore(const Histogram& h, int64_t bins);

 private:
  // Widens/coarsens the window so that [lo, hi] and everything seen so far fit.
  void cover(float lo, float hi, int min_exponent);
  GridWindow window() const { return {exponent_, first_, bins_}; }

  int64_t bins_;
  int exponent_ = 0;
  int64_t first_ = 0;
  std::vector<uint64_t> counts_;
  int64_t count_ = 0;
  float min_ = 0, max_ = 0;
};

// The exponent the grid uses for finite values spanning [lo, hi] in a window of `bins` (see above).
int histogram_exponent(float lo, float hi, int64_t bins);

}  // namespace qtool::calib
