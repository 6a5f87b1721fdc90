// Activation ranges for the QDQ rewrite, per tensor and range-selection method.
// TEMPORARY reader of the calibration JSON written by `qtool calibrate` ("qtool-calibration" v1):
// lib/calib (helper "calib") provides read_calibration(); this file switches to it once merged.
#pragma once

#include <array>
#include <filesystem>
#include <map>
#include <optional>
#include <string>

#include "quantize/qconfig.h"

namespace qtool::quantize {

struct TensorRanges {
  double min = 0, max = 0;
  std::array<std::optional<std::pair<double, double>>, 5> by_method;  // indexed by RangeMethod
};

struct ActivationRanges {
  std::string model_sha256;
  std::map<std::string, TensorRanges> tensors;
  // The range for `method`, falling back to min/max when the file has no such method.
  std::optional<std::pair<double, double>> get(const std::string& tensor, RangeMethod method) const;
};

ActivationRanges read_activation_ranges(const std::filesystem::path& path);

}  // namespace qtool::quantize
