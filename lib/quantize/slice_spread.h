// Tensors whose slices (channels, or positions) span ranges orders of magnitude apart, so that one per-tensor
// grid leaves most of them a handful of levels: the residual stream of a network whose norms have a few outlier
// gains (ConvNeXt's channels-first LayerNorm, BERT's post-norm stream), a layer scale spanning decades, a few tokens
// with massive activations. A weightless elementwise op (Add, Mul, ...) on such a tensor stays float
// (docs/accuracy.md, "Placement"): its integer form would round every input and its output on that grid, for the
// cost of one elementwise pass it saves.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "quantize/graph.h"
#include "quantize/qconfig.h"

namespace qtool::quantize {

// A b-bit per-tensor grid gives a slice whose range is a share s of the tensor's range s * 2^b levels. Below
// 2^(b/2) (16 of 256 levels: the mixed-Concat rule's bound, docs/accuracy.md) the median slice is represented
// worse than a 4-bit grid of its own would: it is then a spread tensor.
inline constexpr double kMinSliceShare = 1.0 / 16;
// An axis with fewer slices has no median to speak of (an RGB image's 3 channels).
inline constexpr int64_t kMinSlices = 4;
// Ranges settle in a few samples; the statistics use at most this many.
inline constexpr size_t kSpreadSamples = 16;

struct SliceSpread {
  int64_t axis = -1;   // the axis (1 .. rank - 1) whose median slice has the least share
  int64_t slices = 0;  // its length
  // Median over its slices of the slice's range / the tensor's range, both widened to hold 0 (as a grid's is);
  // slices that are all zero (exact on any grid) are left out.
  double share = 1;
};

// The activation inputs and outputs of the main graph's weightless elementwise ops (Add, Sub, Mul, Div, Sum, Mean,
// Max, Min with at least one input that is not a constant) that `config` quantizes (their rule has activations),
// except Softmax inputs (their grid follows the rows' maxima: an attention mask's fill spreads the key slices and
// costs nothing there): what slice_spreads measures. Empty for a config that quantizes no such op (weight-only,
// Conv/MatMul inputs only): then no samples are run.
std::vector<std::string> elementwise_tensors(const Graph& g, const QConfig& config);

// Per tensor of `tensors` that the float model makes on the first kSpreadSamples samples (float32, rank >= 2): the
// axis whose median slice has the least share of the tensor's range, over those samples together. An axis whose
// length changes between samples (a sequence) is left out; the batch axis 0 is never used.
std::map<std::string, SliceSpread> slice_spreads(const onnx::ModelProto& model, const std::vector<std::string>& tensors,
                                                 const std::vector<std::map<std::string, Tensor>>& samples,
                                                 int threads);

}  // namespace qtool::quantize
