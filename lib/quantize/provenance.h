// What a model written by qtool says about how it was made, so that a quantized model found later can be traced
// to the tool, the config and the calibration that produced it:
//   producer_name     "qtool"
//   producer_version  the tool's version (QTOOL_VERSION)
//   metadata_props    qtool.config_sha256       sha256 of QConfig::canonical_json() (the config as applied)
//                     qtool.calibration_sha256  sha256 of calib::calibration_to_json(table): the bytes
//                                               `qtool calibrate` writes for that table, so for `--calib FILE`
//                                               it is `sha256sum FILE`; absent when no table was used
// No timestamp, path or host: the same inputs give the same bytes. The float model's other metadata_props stay.
#pragma once

#include <string_view>

#include "calib/calibration_table.h"
#include "quantize/qconfig.h"

namespace onnx {
class ModelProto;
}

namespace qtool::quantize {

inline constexpr std::string_view kProducerName = "qtool";
inline constexpr std::string_view kConfigDigestKey = "qtool.config_sha256";
inline constexpr std::string_view kCalibrationDigestKey = "qtool.calibration_sha256";

// Sets the fields above on `model`, replacing earlier values of the same keys. `ranges` null: no calibration
// was used (e.g. --prepare-only), and any earlier calibration digest is removed.
void stamp_provenance(onnx::ModelProto& model, const QConfig& config, const calib::CalibrationTable* ranges);

}  // namespace qtool::quantize
