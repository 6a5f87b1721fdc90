#include "calib/minmax_observer.h"

#include <algorithm>
#include <string>

#include "core/error.h"
#include "core/tensor.h"

namespace qtool::calib {

void MinMaxObserver::observe(const Batch& batch, const ExecContext&) {
  if (!batch.summary.has_finite()) return;
  min_ = std::min(min_, batch.summary.min);
  max_ = std::max(max_, batch.summary.max);
}

void MinMaxObserver::merge(const Observer& other) {
  const auto& o = same_kind<MinMaxObserver>(*this, other);
  min_ = std::min(min_, o.min_);
  max_ = std::max(max_, o.max_);
}

void PerChannelMinMaxObserver::observe(const Batch& batch, const ExecContext& ctx) {
  const int64_t rank = static_cast<int64_t>(batch.shape.size());
  const int64_t axis = axis_ < 0 ? axis_ + rank : axis_;
  if (axis < 0 || axis >= rank)
    throw BadInputError("per-channel observer: axis " + std::to_string(axis_) + " is out of range for shape " +
                        shape_str(Shape(batch.shape.begin(), batch.shape.end())));
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < axis; ++i) outer *= batch.shape[static_cast<size_t>(i)];
  for (int64_t i = axis + 1; i < rank; ++i) inner *= batch.shape[static_cast<size_t>(i)];
  const int64_t channels = batch.shape[static_cast<size_t>(axis)];
  if (mins_.empty()) {
    mins_.assign(static_cast<size_t>(channels), std::numeric_limits<float>::infinity());
    maxs_.assign(static_cast<size_t>(channels), -std::numeric_limits<float>::infinity());
  } else if (static_cast<int64_t>(mins_.size()) != channels) {
    throw BadInputError("per-channel observer: a batch has " + std::to_string(channels) + " channels on axis " +
                        std::to_string(axis_) + ", earlier batches had " + std::to_string(mins_.size()));
  }
  ctx.backend->channel_minmax(batch.values, outer, channels, inner, mins_, maxs_, ctx.threads);
}

void PerChannelMinMaxObserver::merge(const Observer& other) {
  const auto& o = same_kind<PerChannelMinMaxObserver>(*this, other);
  if (o.axis_ != axis_) throw InternalError("per-channel observer: merging observers of different axes");
  if (o.mins_.empty()) return;
  if (mins_.empty()) {
    mins_ = o.mins_;
    maxs_ = o.maxs_;
    return;
  }
  if (o.mins_.size() != mins_.size())
    throw BadInputError("per-channel observer: merging " + std::to_string(o.mins_.size()) + " channels into " +
                        std::to_string(mins_.size()));
  for (size_t c = 0; c < mins_.size(); ++c) {
    mins_[c] = std::min(mins_[c], o.mins_[c]);
    maxs_[c] = std::max(maxs_[c], o.maxs_[c]);
  }
}

bool PerChannelMinMaxObserver::has_data() const {
  for (size_t c = 0; c < mins_.size(); ++c)
    if (mins_[c] <= maxs_[c]) return true;
  return false;
}

std::vector<Range> PerChannelMinMaxObserver::ranges() const {
  std::vector<Range> r(mins_.size());
  for (size_t c = 0; c < mins_.size(); ++c) r[c] = {mins_[c], maxs_[c]};
  return r;
}

}  // namespace qtool::calib
