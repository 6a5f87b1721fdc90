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

// One layer's corrected bias: applies while its weight is quantized (a weight kept float has no rounding shift).
struct BiasCorrection {
  std::string weight, bias;
  Tensor corrected;    // both parts
  Tensor weight_only;  // the weight part alone (the original bias when only the activation part ran)
};

// For every Conv and Gemm of the float model `prepared` with a float bias only it reads, whose weight the QDQ
// rewrite `quantized` (same tensor names for node outputs) replaced by DequantizeLinear of an initializer:
// b + (W - Wq) E[x], E[x] the per-channel mean of the node's input over `samples` run through `prepared`.
std::vector<BiasCorrection> bias_corrections(const onnx::ModelProto& prepared, const onnx::ModelProto& quantized,
                                             const std::vector<std::map<std::string, Tensor>>& samples, int threads);

// The activation part: for the same layers, the mean shift of each output channel that the whole quantized model
// (`quantized`: `prepared` rewritten with `corrections` already applied) leaves against `prepared`, measured layer by
// layer in graph order on `samples`, so that each layer sees the layers before it corrected. Per channel, only the
// part of the shift the samples agree on is added (see the .cc); fewer than kMinActivationSamples samples, a graph
// with If/Loop/Scan bodies or one out of topological order: nothing changes. Layers without an entry in
// `corrections` get one. Returns how many layers it measured.
//
// Three samples at least. With two, the spread across samples is one difference (the t statistic has Cauchy tails,
// 12.7 its 95 % point), and thousands of channels are tested at once: enough pairs agree by chance. Measured on
// ppocrv4-det calibrated on its two photos: the wide held-out set improved (mean mask IoU 0.9376 -> 0.9418), but its
// acceptance image fell to 0.9503 / 0.946 with AVX-512 / AVX2 kernels measuring the shifts (docs/weight-algorithms.md).
inline constexpr size_t kMinActivationSamples = 3;
int add_activation_shifts(const onnx::ModelProto& prepared, const onnx::ModelProto& quantized,
                          const std::vector<std::map<std::string, Tensor>>& samples, int threads,
                          std::vector<BiasCorrection>& corrections);

// Writes the corrected biases into `model` (the prepared float model), except for weights in `float_tensors` (the
// tensors the accuracy guard keeps float); returns how many it wrote. A layer downstream of a tensor in
// `float_tensors` gets its weight part only: its activation part was measured with that tensor rounded, and would
// now correct a shift that is no longer there.
int apply_bias_corrections(onnx::ModelProto& model, const std::vector<BiasCorrection>& corrections,
                           const std::vector<std::string>& float_tensors = {});

}  // namespace qtool::quantize
