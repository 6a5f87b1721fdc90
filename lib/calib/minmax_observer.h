// Min/max observers (torch.ao MinMaxObserver and PerChannelMinMaxObserver).
#pragma once

#include <limits>
#include <vector>

#include "calib/observer.h"

namespace qtool::calib {

// Running minimum and maximum of all finite values: range() = [min, max].
class MinMaxObserver final : public Observer {
 public:
  ObserverKind kind() const override { return ObserverKind::MinMax; }
  void observe(const Batch& batch, const ExecContext& ctx) override;
  void merge(const Observer& other) override;
  bool has_data() const override { return min_ <= max_; }
  std::unique_ptr<Observer> clone_empty() const override { return std::make_unique<MinMaxObserver>(); }

  Range range() const { return {min_, max_}; }
  // The observer whose range() is `r` (as a calibration file stores it).
  static MinMaxObserver restore(Range r) {
    MinMaxObserver o;
    o.min_ = r.lo;
    o.max_ = r.hi;
    return o;
  }

 private:
  float min_ = std::numeric_limits<float>::infinity();
  float max_ = -std::numeric_limits<float>::infinity();
};

// Running min/max per channel along `axis` (negative counts from the end). The channel count is fixed
// by the first batch; a later batch with another channel count is a BadInputError.
class PerChannelMinMaxObserver final : public Observer {
 public:
  explicit PerChannelMinMaxObserver(int64_t axis) : axis_(axis) {}
  ObserverKind kind() const override { return ObserverKind::PerChannelMinMax; }
  void observe(const Batch& batch, const ExecContext& ctx) override;
  void merge(const Observer& other) override;
  bool has_data() const override;
  std::unique_ptr<Observer> clone_empty() const override { return std::make_unique<PerChannelMinMaxObserver>(axis_); }

  int64_t axis() const { return axis_; }
  // One range per channel; a channel with no finite value has lo = +inf, hi = -inf.
  std::vector<Range> ranges() const;

 private:
  int64_t axis_;
  std::vector<float> mins_, maxs_;
};

}  // namespace qtool::calib
