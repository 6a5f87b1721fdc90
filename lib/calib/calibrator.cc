#include "calib/calibrator.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <exception>
#include <vector>

#include "core/error.h"

namespace qtool::calib {

namespace {

// The smallest over rows of the largest finite value in the row (rows with no finite value are skipped), and the row
// length; nullopt when no row has a finite value.
std::optional<SoftmaxRows> min_row_max(std::span<const float> v, const Shape& shape, const SoftmaxAxis& spec) {
  const int64_t rank = static_cast<int64_t>(shape.size());
  const int64_t axis = spec.axis < 0 ? spec.axis + rank : spec.axis;
  if (rank == 0 || axis < 0 || axis >= rank) return std::nullopt;
  int64_t outer = 1, n = 1, inner = 1;
  for (int64_t k = 0; k < rank; ++k) {
    const int64_t d = shape[static_cast<size_t>(k)];
    if (k < axis)
      outer *= d;
    else if (k == axis || spec.coerce_2d)
      n *= d;
    else
      inner *= d;
  }
  std::optional<SoftmaxRows> out;
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      float m = -std::numeric_limits<float>::infinity();
      for (int64_t k = 0; k < n; ++k) {
        const float x = v[static_cast<size_t>((o * n + k) * inner + i)];
        if (std::isfinite(x) && x > m) m = x;
      }
      if (!std::isfinite(m)) continue;
      if (!out) out = SoftmaxRows{m, n};
      out->min_row_max = std::min(out->min_row_max, m);
    }
  return out;
}

void fold_rows(std::optional<SoftmaxRows>& into, const std::optional<SoftmaxRows>& r) {
  if (!r) return;
  if (!into) into = r;
  into->min_row_max = std::min(into->min_row_max, r->min_row_max);
  into->row_length = std::max(into->row_length, r->row_length);
}

}  // namespace

Calibrator::Calibrator(CalibratorOptions options) : options_(options) {
  options_.methods.insert(RangeMethod::MinMax);
  if (options_.histogram_bins < 16) throw UsageError("--histogram-bins must be at least 16");
  if (!(options_.percentile > 0 && options_.percentile <= 100)) throw UsageError("--percentile must be in (0, 100]");
}

Calibrator::TensorState& Calibrator::state(const std::string& name, DType dtype) {
  auto it = tensors_.find(name);
  if (it == tensors_.end()) {
    auto s = std::make_unique<TensorState>();
    if (records_histogram(options_.methods))
      s->histogram.emplace(options_.histogram_bins);
    if (options_.methods.count(RangeMethod::TorchHistogram)) s->torch_histogram.emplace();
    if (auto sm = options_.softmax_inputs.find(name); sm != options_.softmax_inputs.end()) s->softmax_axis = sm->second;
    it = tensors_.emplace(name, std::move(s)).first;
  }
  it->second->dtype = dtype;
  return *it->second;
}

void Calibrator::observe(const std::string& name, const Tensor& value) {
  if (TensorState* s = slot(name, value)) observe_slot(*s, value, options_.exec);
}

Calibrator::TensorState* Calibrator::slot(const std::string& name, const Tensor& value) {
  if (value.empty() || !is_float(value.dtype())) return nullptr;
  TensorState& s = state(name, value.dtype());
  s.shape = value.shape();
  return &s;
}

void Calibrator::observe_slot(TensorState& s, const Tensor& value, const ExecContext& exec) {
  std::vector<float> converted;
  std::span<const float> values;
  if (value.dtype() == DType::Float32) {
    values = value.span<float>();
  } else {  // float16, bfloat16, float64, FP8: widened (or narrowed) to float through the dtype table
    const auto load = dtype_info(value.dtype()).load;
    converted.resize(static_cast<size_t>(value.numel()));
    for (int64_t i = 0; i < value.numel(); ++i) converted[static_cast<size_t>(i)] = load(value.raw(), i);
    values = converted;
  }
  const Batch batch = Batch::make(values, value.shape(), exec);
  s.count += batch.summary.count - batch.summary.nan_count - batch.summary.inf_count;
  s.nan_count += batch.summary.nan_count;
  s.inf_count += batch.summary.inf_count;
  s.minmax.observe(batch, exec);
  if (s.histogram) s.histogram->observe(batch, exec);
  if (s.torch_histogram) s.torch_histogram->observe(batch, exec);
  if (s.softmax_axis) fold_rows(s.softmax_rows, min_row_max(values, value.shape(), *s.softmax_axis));
}

void Calibrator::merge(const Calibrator& other) {
  for (const auto& [name, o] : other.tensors_) {
    TensorState& s = state(name, o->dtype);
    s.shape = o->shape;
    if (s.histogram.has_value() != o->histogram.has_value() ||
        s.torch_histogram.has_value() != o->torch_histogram.has_value())
      throw InternalError("calibrator: merging shards that recorded different range methods");
    s.count += o->count;
    s.nan_count += o->nan_count;
    s.inf_count += o->inf_count;
    s.minmax.merge(o->minmax);
    if (s.histogram) s.histogram->merge(*o->histogram);
    if (s.torch_histogram) s.torch_histogram->merge(*o->torch_histogram);
    fold_rows(s.softmax_rows, o->softmax_rows);
  }
}

void Calibrator::load(const CalibrationTable& table, const std::string& origin) {
  if (options_.methods.count(RangeMethod::TorchHistogram))
    throw UnsupportedError(origin +
                           ": the torch_histogram range cannot be merged (PyTorch's HistogramObserver "
                           "depends on the order of the values and the table keeps only its range): "
                           "calibrate without torch_histogram in --methods to merge tables");
  for (const auto& [name, t] : table.tensors) {
    TensorState& s = state(name, t.dtype);
    s.shape = t.shape;
    s.count = t.count;
    s.nan_count = t.nan_count;
    s.inf_count = t.inf_count;
    s.softmax_rows = t.softmax_rows;
    if (!t.minmax) continue;
    s.minmax = MinMaxObserver::restore(*t.minmax);
    if (s.histogram) {
      auto h = HistogramObserver::restore(t.histogram, options_.histogram_bins);
      if (!h)
        throw BadInputError(origin + ": tensors[\"" + name +
                            "\"].histogram: not the histogram qtool calibrate records " + "with " +
                            std::to_string(options_.histogram_bins) +
                            " bins (edited, or from another tool): calibrate again to merge it");
      s.histogram = std::move(*h);
    }
  }
}

std::vector<NonFiniteReport> Calibrator::non_finite() const {
  std::vector<NonFiniteReport> out;
  for (const auto& [name, s] : tensors_)
    if (s->nan_count || s->inf_count) out.push_back({name, s->nan_count, s->inf_count});
  return out;
}

void Calibrator::select_ranges(const TensorState& s, TensorCalibration& t, int dst_bits) const {
  t.dtype = s.dtype;
  t.shape = s.shape;
  t.count = s.count;
  t.nan_count = s.nan_count;
  t.inf_count = s.inf_count;
  if (!s.minmax.has_data()) return;
  t.softmax_rows = s.softmax_rows;
  t.minmax = s.minmax.range();
  t.ranges[RangeMethod::MinMax] = *t.minmax;
  if (s.histogram) t.histogram = s.histogram->histogram();
  const auto& m = options_.methods;
  if (m.count(RangeMethod::Percentile))
    t.ranges[RangeMethod::Percentile] = select_percentile(t.histogram, options_.percentile);
  if (m.count(RangeMethod::Entropy)) t.ranges[RangeMethod::Entropy] = select_entropy(t.histogram, options_.target, 1);
  if (m.count(RangeMethod::Mse)) t.ranges[RangeMethod::Mse] = select_mse(t.histogram, options_.target);
  if (s.torch_histogram) t.ranges[RangeMethod::TorchHistogram] = s.torch_histogram->range(dst_bits);
}

CalibrationTable Calibrator::finish() const {
  CalibrationTable table;
  table.settings.methods = options_.methods;
  table.settings.histogram_bins = options_.histogram_bins;
  table.settings.percentile = options_.percentile;
  table.settings.target_dtype = options_.target.dtype;
  table.settings.target_symmetric = options_.target.symmetric;
  const DTypeInfo& target = dtype_info(options_.target.dtype);
  const int dst_bits = target.cls == DTypeClass::Integer ? target.bits : 8;
  // Tensors are independent: select their ranges in parallel (each selection is single-threaded and
  // deterministic, so the table does not depend on the thread count).
  std::vector<std::pair<const std::string*, const TensorState*>> todo;
  for (const auto& [name, s] : tensors_) todo.emplace_back(&name, s.get());
  std::vector<TensorCalibration> done(todo.size());
  std::exception_ptr error;  // an exception must not leave the parallel region
#pragma omp parallel for num_threads(std::max(options_.exec.threads, 1)) schedule(dynamic, 1)
  for (size_t i = 0; i < todo.size(); ++i) {
    try {
      select_ranges(*todo[i].second, done[i], dst_bits);
    } catch (...) {
#pragma omp critical(calib_finish_error)
      if (!error) error = std::current_exception();
    }
  }
  if (error) std::rethrow_exception(error);
  for (size_t i = 0; i < todo.size(); ++i) table.tensors.emplace(*todo[i].first, std::move(done[i]));
  return table;
}

}  // namespace qtool::calib
