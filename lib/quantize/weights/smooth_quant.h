// Activation-to-weight scale migration (Xiao et al. 2023, "SmoothQuant: Accurate and Efficient Post-Training
// Quantization for Large Language Models", section 4). Reads per-channel activation ranges from the calibration
// samples; exact in float.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "quantize/graph.h"

namespace qtool::quantize {

// The tensors X of the main graph that smoothing can rescale: every reader is a MatMul (X as its first input) or
// a Gemm (transA = 0) with a constant float weight only it reads, and channel j of X's last axis can be divided by
// any s_j > 0 by editing constants of X's producers alone: a norm's scale (and bias), written out as Mul / Add by
// constants or fused (LayerNormalization, RMSNormalization, ORT's [Skip]SimplifiedLayerNormalization and
// SkipLayerNormalization), or the output columns of a constant-weight MatMul reached through an elementwise
// product (SwiGLU's up projection: silu(x W1) * (x W3) scales with W3's columns).
std::vector<std::string> smoothable_inputs(const Graph& g);

// Per-channel max |x| along the last axis of each of `tensors`, over `samples` run through `model`.
std::map<std::string, std::vector<double>> channel_abs_max(const onnx::ModelProto& model,
                                                           const std::vector<std::string>& tensors,
                                                           const std::vector<std::map<std::string, Tensor>>& samples,
                                                           int threads);

// Divides channel j of every tensor of `abs_max` that smoothable_inputs finds by
// s_j = max|X_j|^alpha / max|W_j|^(1 - alpha) (max |W_j| over row j of every reader's weight) and multiplies row j
// of the weights by s_j; channels with max |X_j| = 0 or max |W_j| = 0 keep s_j = 1. Returns how many tensors it
// rescaled. alpha in (0, 1].
int smooth_activations(Graph& g, const std::map<std::string, std::vector<double>>& abs_max, double alpha);

}  // namespace qtool::quantize
