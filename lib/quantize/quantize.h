// qtool quantize as one library call: prepare the float model, insert Q/DQ, clean up, report.
#pragma once

#include <map>
#include <optional>
#include <string>

#include "calib/calibration_table.h"
#include "quantize/accuracy_guard.h"
#include "quantize/passes/passes.h"
#include "quantize/qconfig.h"
#include "quantize/qdq.h"
#include "quantize/weights/smooth_quant.h"

namespace onnx {
class ModelProto;
}

namespace qtool::quantize {

struct QuantizeSummary {
  PrepareReport prepare;
  QdqReport qdq;
  // Bytes of every initializer and Constant (initializer_bytes): before as stored in the input file
  // (QuantizeOptions::stored_weight_bytes), after as the rewritten model holds them, and so as it is written.
  int64_t weight_bytes_before = 0, weight_bytes_after = 0;
  int64_t opset = 0;
  int bias_corrected = 0;  // layers whose bias absorbed its weights' rounding shift (weight_algorithms)
  GuardReport guard;  // guard.ran is false when it is off or there were no samples (guard.note says which)
};

struct QuantizeOptions {
  // Calibration samples for the accuracy guard (quantize/accuracy_guard.h), GPTQ's layer inputs and bias
  // correction; none: the guard and bias correction do not run and GPTQ rules are a UsageError.
  std::vector<Sample> samples;
  int threads = 1;
  std::function<void(const std::string&)> log;  // progress lines of the guard
  // The guard's budget: its decisions use the first guard_samples samples (0: all; a model with recurrent state
  // keeps the whole stream, whose error builds up over it), and its search stops after guard_budget.seconds.
  int64_t guard_samples = 0;
  GuardBudget guard_budget;
  // GPTQ / AWQ: the most bytes of layer-input Hessians held at once (weights/layer_inputs.h: more groups, each one
  // segment of the graph; the Hessians, and so the result, stay the same).
  int64_t hessian_budget_bytes = int64_t{256} << 20;
  // initializer_bytes of the model as stored in its file, when the caller prepared it before quantize_model
  // (equalize_for_calibration and smooth_for_calibration do, which widens float16 weights to float32); unset:
  // measured on the model given, before quantize_model prepares it.
  std::optional<int64_t> stored_weight_bytes;
};

// Rewrites `model` in place into its QDQ int8 (or as configured) form; then, when the config's accuracy guard is on
// and samples are given, keeps float the tensors the guard finds too costly.
QuantizeSummary quantize_model(onnx::ModelProto& model, const QConfig& config, const calib::CalibrationTable& ranges,
                               const QuantizeOptions& options = {});

// The preparation options a config asks for (its weight_algorithms' graph folds).
PrepareOptions prepare_options(const QConfig& config);

// Whether any node the config quantizes has activation Q/DQ (and so needs calibrated ranges); weight-only configs
// need none.
bool needs_activation_ranges(const onnx::ModelProto& model, const QConfig& config);
// Whether a weight rule asks for GPTQ on some MatMul/Gemm (quantize_model then needs options.samples).
bool needs_layer_inputs(const onnx::ModelProto& model, const QConfig& config);
// When the config turns on cross-layer equalization (weight_algorithms): runs the preparation passes, then
// equalizes per-channel clamps (weights/clamp_equalization.h) and convolution pairs in `model` in place and
// returns the chains and pairs equalized (0 when off). The tensors between equalized
// convolutions change range, so the caller calibrates the result, not the original model.
int equalize_for_calibration(onnx::ModelProto& model, const QConfig& config);
// When the config sets weight_algorithms.smooth_quant_alpha: runs the preparation passes, measures the per-channel
// max |x| of every smoothable MatMul / Gemm input on `samples` and migrates it to the weights
// (weights/smooth_quant.h); returns what it did (nothing when off). Exact in float; the smoothed tensors change
// range, so the caller calibrates the result.
SmoothingReport smooth_for_calibration(onnx::ModelProto& model, const QConfig& config, const std::vector<Sample>& samples,
                           int threads);

// The first node quantize_model would quantize, decided before calibration: `model` (not changed) is prepared on a
// copy as quantize_model prepares it, then planned (qdq.h, plan_qdq). nullopt: the config quantizes nothing in it
// whatever calibration finds (a model already quantized, or a config that matches none of its ops).
std::optional<NodeExplain> first_node_to_quantize(const onnx::ModelProto& model, const QConfig& config);

// What quantize_model would do to each node, without keeping the result (`inspect --explain`).
QdqReport explain_model(const onnx::ModelProto& model, const QConfig& config, const calib::CalibrationTable& ranges);
// One line per node (rules that applied, int/float, why), then one line per quantized tensor.
std::string explain_text(const QdqReport& report);

// Bytes held by initializers and Constant-node tensors of every graph, bodies included (what the weights cost on disk).
int64_t initializer_bytes(const onnx::ModelProto& model);

}  // namespace qtool::quantize
