// The calibration file: what `qtool calibrate` writes and `qtool quantize --calib` reads.
//
// JSON, keys sorted, floats written with %.9g (histogram edges with %.17g), counts as integers:
// {
//   "format": "qtool-calibration", "version": 1,
//   "model": "file name", "model_sha256": "hex", "samples": 6, "batch_size": 1,
//   "settings": {"histogram_bins": 8192, "methods": ["minmax", "percentile", "entropy", "mse"],
//                "percentile": 99.999, "target_dtype": "uint8"[, "target_symmetric": true]},
//   "tensors": {
//     "<tensor name>": {
//       "dtype": "float", "shape": [1,32,112,112], "count": 2408448, "nan_count": 0, "inf_count": 0,
//       "min": -1.0, "max": 2.0,
//       "histogram": {"min": -1.0, "max": 2.0, "counts": [ ... ]},
//       "ranges": {"minmax": [lo, hi], "percentile": [lo, hi], "entropy": [lo, hi], "mse": [lo, hi]},
//       "softmax_rows": {"min_row_max": -3.5, "row_length": 128}
//     }
//   }
// }
// count = finite values seen; min/max over them (absent, with "histogram" and "ranges", when a tensor never
// had a finite value). shape = the tensor's shape in the last run (batch dim included).
// histogram = uniform bins between its min and max edges (see calib/histogram.h), present when a recorded
// method needs it (percentile, entropy, mse); ranges = one [lo, hi] per recorded method (settings.methods;
// "torch_histogram" only when asked for). softmax_rows: only for tensors that feed a Softmax / LogSoftmax (see
// SoftmaxRows).
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>

#include "calib/histogram.h"
#include "calib/observer.h"
#include "calib/range_select.h"
#include "core/dtype.h"
#include "core/tensor.h"

namespace qtool::calib {

struct CalibrationSettings {
  // The range methods recorded for every tensor with data. Absent from files of earlier qtool versions,
  // which recorded all five: read as all five.
  RangeMethods methods = kDefaultRangeMethods;
  int64_t histogram_bins = 8192;
  double percentile = kDefaultPercentile;
  DType target_dtype = DType::UInt8;
  // The entropy and mse ranges were chosen for a symmetric target. Written only when true ("target_symmetric":
  // true), so tables of asymmetric targets keep the bytes of earlier versions.
  bool target_symmetric = false;
};

// A tensor read only by Softmax / LogSoftmax (directly or through Cast / Identity): the smallest row maximum seen
// (over every row the Softmax normalises, finite values only) and the row length. A value more than W below its
// row's maximum changes the Softmax output by less than e^-W relative to the largest term, so a quantization
// range need not reach below min_row_max - W (quantize/qdq.cc: softmax_floor).
struct SoftmaxRows {
  float min_row_max = 0;
  int64_t row_length = 0;
};

struct TensorCalibration {
  DType dtype = DType::Float32;
  Shape shape;
  int64_t count = 0;  // finite values
  int64_t nan_count = 0;
  int64_t inf_count = 0;
  std::optional<Range> minmax;  // absent when no finite value was seen
  Histogram histogram;          // empty when no finite value was seen
  std::map<RangeMethod, Range> ranges;
  std::optional<SoftmaxRows> softmax_rows;
};

struct CalibrationTable {
  std::string model;         // file name of the model
  std::string model_sha256;  // hex
  int64_t samples = 0;
  int64_t batch_size = 1;
  CalibrationSettings settings;
  std::map<std::string, TensorCalibration> tensors;

  // BadInputError naming the tensor when absent.
  const TensorCalibration& at(const std::string& tensor) const;
  const TensorCalibration* find(const std::string& tensor) const;
};

constexpr std::string_view kCalibrationFormat = "qtool-calibration";
constexpr int kCalibrationVersion = 1;

// The file's bytes (deterministic: same table, same bytes).
std::string calibration_to_json(const CalibrationTable& table);
CalibrationTable calibration_from_json(const std::string& text, const std::string& origin = "calibration file");
// Writes atomically (temporary file + rename). BadInputError when the path cannot be written.
void write_calibration(const CalibrationTable& table, const std::filesystem::path& path);
// Reads and validates a calibration file, or a TensorRT calibration cache (first line "TRT-...", calib/trt_cache.h);
// BadInputError naming the file and the JSON path at fault
// (e.g. "calib.json: tensors.conv1.ranges.mse: expected [lo, hi] with lo <= hi").
CalibrationTable read_calibration(const std::filesystem::path& path);
// BadInputError when `table` records a model_sha256 that differs from the bytes of `model` (the table was made
// for another model, or an earlier version of it). `table_name` names the file in the message.
void check_calibration_model(const CalibrationTable& table, const std::filesystem::path& model,
                             const std::string& table_name);

}  // namespace qtool::calib
