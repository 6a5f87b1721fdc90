// compare_models: a quantized model against its float original on the same samples, both run by qtool's
// interpreter (the accuracy guard's quantize::AccuracyEvaluator: same sample handling, recurrent state in closed
// loop). `qtool inspect QUANT --against FLOAT` is a thin shell over this call.
//
// Per float32 graph output: the metrics of analysis/metrics.h over all samples (recurrent state outputs: without
// argmax agreement and KL, which read the last axis as class scores).
// Sensitivity, per activation with its own Q/DQ in the quantized model (analysis/qdq_bypass.h): the quantized model
// is run again with only that activation kept float; its gain is the largest SQNR increase (dB) over the outputs,
//   gain_db = max over outputs o of ( SQNR_o(kept float) - SQNR_o(quantized) ),
// and activations are listed by decreasing gain (ties in node order). One run over the samples per activation.
#pragma once

#include <onnx/onnx_pb.h>

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "analysis/metrics.h"
#include "core/tensor.h"

namespace qtool::analysis {

struct OutputComparison {
  std::string output;
  bool state = false;  // recurrent state, fed back in closed loop (see quantize/accuracy_guard.h)
  TensorMetrics metrics;
};

struct TensorSensitivity {
  std::string tensor;
  double gain_db = 0;                      // see above
  std::string output;                      // the output that gains most
  std::vector<double> kept_float_sqnr_db;  // per compared output, in CompareReport::outputs order
};

struct CompareReport {
  int64_t samples = 0;
  std::vector<OutputComparison> outputs;     // float32 graph outputs, in graph order
  std::vector<std::string> skipped_outputs;  // graph outputs of other dtypes: not compared
  bool sensitivity_ran = false;
  std::vector<TensorSensitivity> sensitivity;  // most sensitive first
};

struct CompareOptions {
  int threads = 1;  // samples run in parallel, one interpreter thread each
  bool sensitivity = true;
  std::string quant_label = "the quantized model", float_label = "the float model";  // for messages
  std::function<void(const std::string&)> log;                                       // progress lines
};

// BadInputError naming the input or output when the two models' graph inputs or outputs differ in name or declared
// dtype/shape, or an output's dtype/shape as run differs.
CompareReport compare_models(const onnx::ModelProto& quant, const onnx::ModelProto& float_model,
                             std::vector<std::map<std::string, Tensor>> samples, const CompareOptions& options);

}  // namespace qtool::analysis
