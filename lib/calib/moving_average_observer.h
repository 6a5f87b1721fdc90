// Moving-average min/max (torch.ao MovingAverageMinMaxObserver):
//   first batch:   min = batch_min, max = batch_max
//   later batches: min = min + c·(batch_min - min), max = max + c·(batch_max - max)   (float arithmetic)
// with c the averaging constant (default 0.01). Batches without a finite value are skipped.
// merge(other) treats the other observer's averaged min/max as one more batch (the result depends on
// the order of batches by definition).
#pragma once

#include "calib/observer.h"

namespace qtool::calib {

class MovingAverageMinMaxObserver final : public Observer {
 public:
  explicit MovingAverageMinMaxObserver(float averaging_constant = 0.01f) : c_(averaging_constant) {}
  ObserverKind kind() const override { return ObserverKind::MovingAverageMinMax; }
  void observe(const Batch& batch, const ExecContext& ctx) override;
  void merge(const Observer& other) override;
  bool has_data() const override { return seen_; }
  std::unique_ptr<Observer> clone_empty() const override { return std::make_unique<MovingAverageMinMaxObserver>(c_); }

  float averaging_constant() const { return c_; }
  Range range() const { return {min_, max_}; }

 private:
  void fold(float lo, float hi);

  float c_;
  bool seen_ = false;
  float min_ = 0, max_ = 0;
};

}  // namespace qtool::calib
