// Weight rounding algorithms behind one interface: a float weight, its resolved settings and what calibration saw
// of the layer's input go in; integer codes, their DequantizeLinear parameters and the error the algorithm
// minimised come out. One file per algorithm (rtn.cc, clip_search.cc, gptq.cc); each states its error above it.
//
// Shapes: `axis` is the quantization axis (per_channel: the output channel; per_block: the blocked reduction axis;
// -1 per tensor), as weight_params takes it. GPTQ also needs `k_axis`, the weight's reduction (input) axis: 0 for
// MatMul's [K, N], 1 for Gemm's transB [N, K].
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "quantize/qconfig.h"
#include "quantize/qparams.h"

namespace qtool::quantize {

// H = X^T X summed over every row x of a layer's calibration inputs (rows = all positions of all samples), K x K.
// The GPTQ paper's Hessian is 2 X^T X / rows; the constant factor changes neither the solution nor the dampening
// (a fraction of the mean diagonal).
struct LayerHessian {
  int64_t k = 0;
  int64_t rows = 0;
  std::vector<double> h;  // row-major K x K; a Conv's (conv_gptq.h): `groups` such blocks one after another
  int64_t groups = 1;
};
// Data input name of a layer -> its Hessian (q, k and v projections share theirs).
using LayerHessians = std::map<std::string, LayerHessian>;

struct WeightInput {
  const Tensor& w;  // float32
  const TensorSettings& settings;
  int64_t axis = -1;
  int64_t k_axis = -1;                      // reduction axis of a 2-D weight; -1 when unknown
  const LayerHessian* hessian = nullptr;    // GPTQ only
  std::optional<std::vector<double>> pair_sums;  // saturation_safe (qparams.h), RTN only
  int threads = 1;  // for the per-element passes (ranges, rounding, error); the result is the same for any count
};

struct WeightResult {
  QParams params;
  Tensor codes;         // the weight's integer initializer
  double error = 0;     // the algorithm's own error (see `metric`) of the result
  const char* metric = "weight_sse";  // "weight_sse": sum (w - dq)^2; "output_sse": sum over rows of X (W - DQ)^2
  // AWQ: codes are those of diag(1/input_scale) W; the layer's input must be multiplied by input_scale ([K] float).
  std::optional<Tensor> input_scale;
};

WeightResult quantize_rtn(const WeightInput& in);
WeightResult quantize_clip_search(const WeightInput& in);
// GPTQ core: runs on any Hessian (the test of its in-sample error calls it directly).
WeightResult quantize_gptq(const WeightInput& in);
WeightResult quantize_conv_gptq(const WeightInput& in);  // conv_gptq.h
WeightResult quantize_awq(const WeightInput& in);
// Dispatch on settings.algorithm (GPTQ: by the weight's rank, 2-D MatMul/Gemm or Conv). A 2-D weight whose
// Hessian has fewer rows than columns (gptq_has_rows) is rounded to nearest instead (metric "weight_sse").
WeightResult quantize_weight_values(const WeightInput& in);

// Whether a MatMul/Gemm Hessian pins every direction GPTQ moves weights in: rows >= K. H = X^T X has rank at most
// rows, so below K rows it has a null space of K - rows directions that no calibration input ever reached; GPTQ's
// error feedback then shifts weight along them freely (only the 1 % dampening holds them), lowering the error on the
// calibration rows and adding it on any other input (Marchenko-Pastur: the smallest eigenvalue of a sample
// covariance of n rows of K columns is (1 - sqrt(K / n))^2 of the true one, zero at n = K). mobilenetv2's classifier
// sees one row per calibration image, 3 for K = 1280. Convs ask more (kConvGptqRowsPerColumn, conv_gptq.h); that
// figure would also take GPTQ from digits-vit (2176 token rows for K = 64) and llama2c's down projection (4096 for
// K = 172), where GPTQ lowers held-out error (docs/fp8.md), so MatMul keeps the bare rank condition.
bool gptq_has_rows(const LayerHessian& h);

// Clip search for one group (clip_search.cc): the scale a * `scale`, a on the search grid, with the least
// sum (v - DQ(Q(v)))^2 over `values` for zero point `zp`.
float clip_search_scale(const std::vector<double>& values, float scale, double zp, int64_t qmin, int64_t qmax);

// Sum over elements of (w - DequantizeLinear(codes))^2, summed in the same order for any `threads`.
double weight_sse(const Tensor& w, const Tensor& codes, const QParams& p, int threads = 1);
// || X W - X DQ(codes) ||^2 = sum over outputs n of d_n^T H d_n, d_n = the weight's column n minus its
// dequantized value (along k_axis), from the layer's Hessian: the layer-output error GPTQ minimises.
double output_sse(const Tensor& w, const Tensor& codes, const QParams& p, int64_t k_axis, const LayerHessian& h);

// Element i of a tensor laid out as `L` -> index of its scale (shared by the algorithms that set scales per group).
struct ScaleIndex {
  int64_t outer_span, inner, axis_len, block, so, sa, si;
  int64_t operator()(int64_t i) const {
    const int64_t m = i / outer_span, k = (i / inner) % axis_len, j = i % inner;
    return m * so + (k / block) * sa + j * si;
  }
};
ScaleIndex scale_index(const Tensor& w, const QParams& p);

}  // namespace qtool::quantize
