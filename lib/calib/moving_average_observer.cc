#include "calib/moving_average_observer.h"

#include "core/error.h"

namespace qtool::calib {

void MovingAverageMinMaxObserver::fold(float lo, float hi) {
  if (!seen_) {
    min_ = lo;
    max_ = hi;
    seen_ = true;
    return;
  }
  min_ = min_ + c_ * (lo - min_);
  max_ = max_ + c_ * (hi - max_);
}

void MovingAverageMinMaxObserver::observe(const Batch& batch, const ExecContext&) {
  if (batch.summary.has_finite()) fold(batch.summary.min, batch.summary.max);
}

void MovingAverageMinMaxObserver::merge(const Observer& other) {
  const auto& o = same_kind<MovingAverageMinMaxObserver>(*this, other);
  if (o.c_ != c_) throw InternalError("moving-average observer: merging observers of different constants");
  if (o.seen_) fold(o.min_, o.max_);
}

}  // namespace qtool::calib
