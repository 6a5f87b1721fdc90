// GPTQ for Conv weights (conv_gptq.cc): the Hessians of each conv's im2col patches, one per group, and the
// rounding that shares gptq.cc's core group by group.
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

// Weights of the 2-D Conv nodes whose weight the config quantizes with "algorithm": "gptq".
std::vector<std::string> conv_gptq_weights(const onnx::ModelProto& model, const QConfig& config);

// Runs the float model on `samples` and sums, per named conv weight and group, p p^T over every im2col patch p
// its conv reads (zero padding included, as the conv sees it): K = C/group * kernel taps, in the weight's own
// order [C/group, kh, kw]; LayerHessian.groups blocks of K x K, keyed by the weight's name (a MatMul's Hessian is
// keyed by its data input: the names cannot clash). Memory: group x K x K doubles per conv.
LayerHessians collect_conv_hessians(const onnx::ModelProto& model, const std::vector<std::string>& weights,
                                    const std::vector<std::map<std::string, Tensor>>& samples, int threads);

// Rows per weight column a patch Hessian needs before GPTQ may use it: with n rows of K columns, the sample
// covariance's eigenvalues spread by (1 +- sqrt(K / n))^2 around the true ones (Marchenko-Pastur), +-25 % at 64;
// below that GPTQ fits the calibration inputs (directions they never pinned) and loses out of sample.
constexpr int64_t kConvGptqRowsPerColumn = 64;

// `in.w` a Conv weight [O, C/group, kh, kw], per_channel on axis 0; `in.hessian` its conv's (one block per group).
// Each group's [O/group, K] slice goes through quantize_gptq with its own Hessian; the scales are per output
// channel as RTN sets them. A conv whose Hessian has fewer than kConvGptqRowsPerColumn rows per column is rounded
// to nearest (metric "weight_sse" tells which).
WeightResult quantize_conv_gptq(const WeightInput& in);

}  // namespace qtool::quantize
