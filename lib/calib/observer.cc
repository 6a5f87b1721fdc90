#include "calib/observer.h"

#include <array>
#include <string>

#include "calib/histogram_observer.h"
#include "calib/minmax_observer.h"
#include "calib/moving_average_observer.h"
#include "calib/torch_histogram_observer.h"
#include "core/error.h"

namespace qtool::calib {

namespace {
constexpr std::array<std::pair<ObserverKind, std::string_view>, 5> kNames = {{
    {ObserverKind::MinMax, "minmax"},
    {ObserverKind::PerChannelMinMax, "per_channel_minmax"},
    {ObserverKind::MovingAverageMinMax, "moving_average"},
    {ObserverKind::Histogram, "histogram"},
    {ObserverKind::TorchHistogram, "torch_histogram"},
}};
}  // namespace

std::string_view observer_kind_name(ObserverKind kind) {
  for (const auto& [k, name] : kNames)
    if (k == kind) return name;
  return "?";
}

std::optional<ObserverKind> observer_kind_from_name(std::string_view name) {
  for (const auto& [k, n] : kNames)
    if (n == name) return k;
  return std::nullopt;
}

template <class T>
const T& same_kind(const Observer& self, const Observer& other) {
  const T* o = dynamic_cast<const T*>(&other);
  if (!o)
    throw InternalError("cannot merge a " + std::string(observer_kind_name(other.kind())) + " observer into a " +
                        std::string(observer_kind_name(self.kind())) + " observer");
  return *o;
}

template const MinMaxObserver& same_kind<MinMaxObserver>(const Observer&, const Observer&);
template const PerChannelMinMaxObserver& same_kind<PerChannelMinMaxObserver>(const Observer&, const Observer&);
template const MovingAverageMinMaxObserver& same_kind<MovingAverageMinMaxObserver>(const Observer&, const Observer&);
template const HistogramObserver& same_kind<HistogramObserver>(const Observer&, const Observer&);
template const TorchHistogramObserver& same_kind<TorchHistogramObserver>(const Observer&, const Observer&);

}  // namespace qtool::calib
