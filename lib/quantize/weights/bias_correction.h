// Empirical bias correction (Nagel et al. 2019, "Data-Free Quantization Through Weight Equalization and Bias
// Correction", section 4.2; AIMET's empirical variant): reads the calibration samples and the quantized weights.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace onnx {
class ModelProto;
}

namespace qtool::quantize {

struct BiasCorrectionReport {
  int layers = 0;  // Conv / Gemm biases changed
};

// For every Conv and Gemm of the float model `prepared` with a float bias only it reads, whose weight the QDQ
// rewrite `quantized` (same tensor names for node outputs) replaced by DequantizeLinear of an initializer:
// b += (W - Wq) E[x], E[x] the per-channel mean of the node's input over `samples` run through `prepared`.
BiasCorrectionReport correct_biases(onnx::ModelProto& prepared, const onnx::ModelProto& quantized,
                                    const std::vector<std::map<std::string, Tensor>>& samples, int threads);

}  // namespace qtool::quantize
