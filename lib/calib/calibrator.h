// Calibrator: the per-tensor observers of a calibration run, and the table they produce.
//
// For every float tensor it is shown (by name, batch after batch) it keeps a min/max, and, when the recorded
// methods need them, the order-independent histogram (calib/histogram_observer.h) and PyTorch's histogram
// (calib/torch_histogram_observer.h); it counts NaN and ±inf values (excluded from all of them). finish()
// selects the ranges of options.methods (calib/range_select.h).
// State per tensor is fixed (about 80 KB with default settings), whatever the number of samples.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "calib/calibration_table.h"
#include "calib/histogram_observer.h"
#include "calib/minmax_observer.h"
#include "calib/torch_histogram_observer.h"
#include "core/tensor.h"

namespace qtool::calib {

// How a Softmax / LogSoftmax groups a tensor into rows: along `axis` (opset >= 13), or, when coerce_2d (opset < 13),
// every dimension from `axis` on forms one row.
struct SoftmaxAxis {
  int64_t axis = -1;
  bool coerce_2d = false;
};

struct CalibratorOptions {
  // The ranges to record; each observer runs only when a method needs it (minmax: always; the order-independent
  // histogram: percentile, entropy, mse; PyTorch's histogram: torch_histogram).
  RangeMethods methods = kDefaultRangeMethods;
  int64_t histogram_bins = kDefaultHistogramBins;
  double percentile = kDefaultPercentile;
  QuantTarget target;
  ExecContext exec;
  // Tensors read only by Softmax / LogSoftmax: their smallest row maximum is recorded too (SoftmaxRows).
  std::map<std::string, SoftmaxAxis> softmax_inputs;
};

// A tensor that held NaN or ±inf values (reported by name).
struct NonFiniteReport {
  std::string tensor;
  int64_t nan_count = 0;
  int64_t inf_count = 0;
};

class Calibrator {
 public:
  explicit Calibrator(CalibratorOptions options);

  struct TensorState;

  // Observes one value of `name`. Tensors of every float dtype are observed (converted to float32 first);
  // other dtypes are ignored.
  // Not thread-safe: the hot loops inside use options.exec.threads.
  void observe(const std::string& name, const Tensor& value);

  // observe() in two steps, for observing on other threads (calib/observation_pipeline.h). slot() finds or
  // makes the state of `name` and records the value's dtype and shape; call it from one thread at a time, in
  // the order the values come. nullptr when observe() would ignore the value. observe_slot() then folds the
  // value into that state and touches nothing else, so different slots may be observed concurrently (one
  // slot by one thread at a time, each value after its slot() call). `exec` sets the hot loops' threads.
  TensorState* slot(const std::string& name, const Tensor& value);
  void observe_slot(TensorState& slot, const Tensor& value, const ExecContext& exec);
  // Folds another calibrator (a shard of the same samples) into this one.
  void merge(const Calibrator& other);
  // Sets the state of every tensor of `table` to what produced it, as if this calibrator (with the table's settings)
  // had observed the table's samples; finish() then gives the table back, and merge() adds other tables' samples
  // (calib/table_merge.h). BadInputError naming `origin` and the tensor when the table's histogram is not one this
  // calibrator's histogram observer reports, or the table records torch_histogram (its observer is order-dependent
  // and the table keeps only its range).
  void load(const CalibrationTable& table, const std::string& origin);

  const CalibratorOptions& options() const { return options_; }
  bool observed(const std::string& name) const { return tensors_.count(name) != 0; }
  size_t tensor_count() const { return tensors_.size(); }
  std::vector<NonFiniteReport> non_finite() const;

  // The tensors part of the table (and its settings); the caller fills model, sha256, samples, batch_size.
  CalibrationTable finish() const;

 struct TensorState {
    DType dtype = DType::Float32;
    Shape shape;
    int64_t count = 0, nan_count = 0, inf_count = 0;  // finite, NaN, ±inf values
    MinMaxObserver minmax;
    std::optional<HistogramObserver> histogram;
    std::optional<TorchHistogramObserver> torch_histogram;
    std::optional<SoftmaxAxis> softmax_axis;  // set: the tensor feeds a Softmax, rows are tracked
    std::optional<SoftmaxRows> softmax_rows;
  };

 private:
  TensorState& state(const std::string& name, DType dtype);
  void select_ranges(const TensorState& s, TensorCalibration& t, int dst_bits) const;

  CalibratorOptions options_;
  std::map<std::string, std::unique_ptr<TensorState>> tensors_;
};

}  // namespace qtool::calib
