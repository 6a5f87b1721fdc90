// qtool quantize as one library call: prepare the float model, insert Q/DQ, clean up, report.
#pragma once

#include <map>
#include <string>

#include "calib/calibration_table.h"
#include "quantize/passes/passes.h"
#include "quantize/qconfig.h"
#include "quantize/qdq.h"

namespace onnx {
class ModelProto;
}

namespace qtool::quantize {

struct QuantizeSummary {
  PrepareReport prepare;
  QdqReport qdq;
  int64_t weight_bytes_before = 0, weight_bytes_after = 0;  // all initializers
  int64_t opset = 0;
};

// Rewrites `model` in place into its QDQ int8 (or as configured) form.
QuantizeSummary quantize_model(onnx::ModelProto& model, const QConfig& config, const calib::CalibrationTable& ranges);

// What quantize_model would do to each node, without keeping the result (`inspect --explain`).
QdqReport explain_model(const onnx::ModelProto& model, const QConfig& config, const calib::CalibrationTable& ranges);
// One line per node (rules that applied, int/float, why), then one line per quantized tensor.
std::string explain_text(const QdqReport& report);

// Bytes held by initializers and Constant-node tensors (what the weights cost on disk).
int64_t initializer_bytes(const onnx::ModelProto& model);

}  // namespace qtool::quantize
