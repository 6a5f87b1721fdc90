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

// What smoothing_statistics must observe: the smoothable inputs and the quantized activations between them and the
// constants smoothing edits (SwiGLU's up projection output and its partner), whose rounding it also changes.
std::vector<std::string> smoothing_tensors(const Graph& g);

// What smoothing reads of one tensor X (channels on its last axis): each channel's max |x| over the samples, and
// up to `max_rows` of X's rows spread over them (to estimate the layer's rounding error with and without it).
struct SmoothingStats {
  std::vector<double> abs_max;
  std::vector<float> rows;  // [rows.size() / abs_max.size(), K]
};
std::map<std::string, SmoothingStats> smoothing_statistics(const onnx::ModelProto& model,
                                                           const std::vector<std::string>& tensors,
                                                           const std::vector<std::map<std::string, Tensor>>& samples,
                                                           int threads, int64_t max_rows = 2048);

// For every tensor of `stats` that smoothable_inputs finds: s_j = max|X_j|^alpha / max|W_j|^(1 - alpha) (max |W_j|
// over row j of every reader's weight; s_j = 1 where either is 0). It is applied (channel j of X divided by s_j,
// row j of the weights multiplied by it) only when it lowers the readers' output error on the sampled rows, with X
// and the factor that produces it (smoothing_tensors) each on one per-tensor uint8 grid (its min/max) and each
// weight column on its own symmetric int8 grid: the error smoothing is for, measured rather than assumed (on
// transformers whose channels are already even it can rise). `stats` holds smoothing_tensors' statistics.
// Returns how many tensors it rescaled. alpha in (0, 1].
int smooth_activations(Graph& g, const std::map<std::string, SmoothingStats>& stats, double alpha);

}  // namespace qtool::quantize
