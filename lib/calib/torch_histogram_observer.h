// PyTorch's HistogramObserver (torch.ao.quantization, version 1.13), step for step, so that a PyTorch user
// gets PyTorch's range: a 2048-bin histogram over [min, max] of the data seen so far; each new batch is
// histogrammed with torch.histc over the combined range (1.13 truncates that range to integers with int(),
// dropping values outside [int(min), int(max)] unless both truncate to the same integer, in which case histc
// uses the batch's own min/max), the old histogram is upsampled by `upsample_rate`, shifted and summed into
// the new grid (_adjust_min_max / _combine_histograms), and range() runs _non_linear_param_search: the L2
// quantization-error search of caffe2's NormMinimization over 2^bits destination bins.
// Unlike calib/histogram_observer.h its result depends on how the values were batched and ordered, as in
// PyTorch. merge(other) (which PyTorch does not have) resamples the other histogram's piecewise-constant
// density onto the combined grid. NaN and ±inf are excluded (PyTorch would propagate them).
#pragma once

#include <vector>

#include "calib/observer.h"

namespace qtool::calib {

class TorchHistogramObserver final : public Observer {
 public:
  explicit TorchHistogramObserver(int64_t bins = 2048, int64_t upsample_rate = 128);
  ObserverKind kind() const override { return ObserverKind::TorchHistogram; }
  void observe(const Batch& batch, const ExecContext& ctx) override;
  void merge(const Observer& other) override;
  bool has_data() const override { return initialized_; }
  std::unique_ptr<Observer> clone_empty() const override {
    return std::make_unique<TorchHistogramObserver>(bins_, upsample_);
  }

  float min_val() const { return min_; }
  float max_val() const { return max_; }
  const std::vector<double>& histogram() const { return hist_; }
  // _non_linear_param_search() with dst_nbins = 2^dst_bits (PyTorch: 256 for quint8 and qint8).
  Range range(int dst_bits = 8) const;

 private:
  int64_t bins_, upsample_;
  bool initialized_ = false;
  float min_ = 0, max_ = 0;
  std::vector<double> hist_;
};

}  // namespace qtool::calib
