// TensorRT calibration caches: the text file `trtexec --calib=FILE` and IInt8Calibrator::readCalibrationCache read,
// written from a qtool calibration table (`qtool calibrate ... --trt-cache FILE`) and read back into one
// (`qtool quantize --calib FILE`, recognised by its first line).
//
// Format (one line each, '\n'-separated):
//   TRT-<version>-<calibrator>          e.g. TRT-8601-EntropyCalibration2 (TensorRT 8.6.1)
//   <tensor name>: <hex>                the float32 scale's IEEE-754 bits as one hexadecimal number, most
//                                       significant digit first, no leading zeros (0.00787 -> 3c00f7e0)
// TensorRT quantizes a tensor symmetrically to int8 with that scale: amax = scale * 127.
// Export: amax = max(|lo|, |hi|) of the table's entropy range (header EntropyCalibration2) when the table recorded
// one, else of its minmax range (header MinMaxCalibration). Tensors with no finite value are left out.
// Import: every tensor gets the range [-scale * 127, scale * 127] for every range method, so the QConfig's method
// (entropy, mse, ...) picks the range TensorRT would use. The table records no model digest, shape or counts.
#pragma once

#include <string>

#include "calib/calibration_table.h"

namespace qtool::calib {

constexpr int kDefaultTrtVersion = 8601;  // TensorRT 8.6.1
constexpr float kTrtInt8Max = 127.0f;

// True when `text` starts like a TensorRT calibration cache ("TRT-").
bool is_trt_cache(const std::string& text);
std::string trt_cache_from_table(const CalibrationTable& table, int trt_version = kDefaultTrtVersion);
// BadInputError naming `origin` and the line at fault.
CalibrationTable table_from_trt_cache(const std::string& text, const std::string& origin);

}  // namespace qtool::calib
