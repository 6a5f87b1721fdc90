// What the weight algorithms need from calibration: which layers ask for GPTQ, and their inputs' Hessians.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "quantize/qconfig.h"
#include "quantize/weights/weight_quantizer.h"

namespace onnx {
class ModelProto;
}

namespace qtool::quantize {

// Data inputs of the MatMul / Gemm nodes whose weight the config quantizes with "algorithm": "gptq".
std::vector<std::string> gptq_layer_inputs(const onnx::ModelProto& model, const QConfig& config);

// Runs the float model on `samples` (one input map per run) and sums X^T X of each named tensor, read as rows of
// its last dimension (Gemm with transA: of its first). Memory: one K x K matrix per name, whatever the sample count.
LayerHessians collect_hessians(const onnx::ModelProto& model, const std::vector<std::string>& inputs,
                               const std::vector<std::map<std::string, Tensor>>& samples, int threads);

}  // namespace qtool::quantize
