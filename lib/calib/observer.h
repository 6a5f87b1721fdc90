// The observer interface. An observer watches batches of float values streaming past and keeps a
// fixed-size state whatever the number of samples; `merge` folds in another observer of the same kind
// and settings (per-thread or per-shard observers combine into one).
//
// Observers share nothing but this interface: each algorithm is its own class with its own result
// accessors (calib/minmax_observer.h, moving_average_observer.h, histogram_observer.h,
// torch_histogram_observer.h). The data loops live in an ObserverBackend (calib/kernels.h).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string_view>

#include "calib/kernels.h"

namespace qtool::calib {

enum class ObserverKind : uint8_t { MinMax, PerChannelMinMax, MovingAverageMinMax, Histogram, TorchHistogram };

std::string_view observer_kind_name(ObserverKind kind);  // "minmax", "per_channel_minmax", ...
std::optional<ObserverKind> observer_kind_from_name(std::string_view name);

// Where and how wide the hot loops run. The framework (the calibrator, a test) owns this.
struct ExecContext {
  const ObserverBackend* backend = &observer_backend(BackendKind::Cpu);
  int threads = 1;
};

// One batch as observers see it: the values (C order), their shape, and the summary (finite min/max,
// NaN/inf counts) computed once by the framework for all observers of the tensor.
struct Batch {
  std::span<const float> values;
  std::span<const int64_t> shape;
  BatchSummary summary;

  static Batch make(std::span<const float> values, std::span<const int64_t> shape, const ExecContext& ctx) {
    return Batch{values, shape, ctx.backend->summarize(values, ctx.threads)};
  }
};

// The closed range [lo, hi] an observer or a range selection method picks.
struct Range {
  float lo = 0;
  float hi = 0;
  bool operator==(const Range&) const = default;
};

class Observer {
 public:
  virtual ~Observer() = default;
  virtual ObserverKind kind() const = 0;
  // Folds one batch into the state. NaN and ±inf never reach the state.
  virtual void observe(const Batch& batch, const ExecContext& ctx) = 0;
  // Folds `other` (same kind and settings, else InternalError) into this observer.
  virtual void merge(const Observer& other) = 0;
  // True once a finite value has been seen.
  virtual bool has_data() const = 0;
  // A fresh observer with the same settings and no data.
  virtual std::unique_ptr<Observer> clone_empty() const = 0;
};

// The downcast merge() needs; InternalError naming both kinds on mismatch.
template <class T>
const T& same_kind(const Observer& self, const Observer& other);

}  // namespace qtool::calib
