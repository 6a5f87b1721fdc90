// Quantization parameters from a range, and weight/bias quantization for the QDQ rewrite.
// TEMPORARY private helpers: lib/quant (helper "quant") provides the shared versions; once merged,
// these are replaced by calls into lib/quant.
//
// Contract (as ONNX QuantizeLinear): q = saturate(round_half_even(x / scale) + zero_point).
//   asymmetric: [lo, hi] widened to include 0; scale = (hi - lo) / (qmax - qmin); zp = qmin - round(lo / scale)
//   symmetric:  amax = max(|lo|, |hi|); scale = amax / ((qmax - qmin) / 2) with qmax - qmin even on the narrow
//               range; zp = 0 for signed types, (qmin + qmax + 1) / 2 for unsigned.
//   float8 e4m3fn: scale = amax / 448, zp = 0.
// A zero range gives scale 1 (any scale represents all-zero data exactly).
#pragma once

#include <optional>
#include <vector>

#include "core/tensor.h"
#include "quantize/qconfig.h"

namespace qtool::quantize {

struct QParams {
  std::vector<float> scale;  // 1 value per tensor, or one per channel
  std::vector<int64_t> zero_point;
  DType dtype = DType::UInt8;
};

// Integer range the settings allow (narrow/reduce range applied).
std::pair<int64_t, int64_t> qrange(const TensorSettings& s);
QParams params_from_range(double lo, double hi, const TensorSettings& s);
// Weights whose values are already integer multiples of one step that fits the target range (a model
// exported from a quantized one, such as the vendor mobilenetv2) keep that step: re-quantizing on a new
// grid would add error where none is needed. Returns the step, or nullopt (symmetric settings only).
std::optional<float> existing_grid(const Tensor& w, const TensorSettings& s);
// Weight along `axis` (per channel) or whole (per tensor), from the data's min/max (or existing_grid).
QParams weight_params(const Tensor& w, const TensorSettings& s, int64_t axis);
// Quantizes float data with per-tensor or per-axis parameters (axis ignored when p has one scale).
// Rounding::KernelSum applies to tensors of rank >= 3 (conv kernels): see qparams.cc.
Tensor quantize_tensor(const Tensor& x, const QParams& p, int64_t axis, Rounding rounding = Rounding::Nearest);
// Bias: int32, scale = s_input * s_weight[c], zero point 0.
Tensor quantize_bias(const Tensor& b, float input_scale, const std::vector<float>& weight_scales,
                     std::vector<float>& bias_scales);
// Scale / zero-point tensors as DequantizeLinear takes them (scalar when per-tensor).
Tensor scale_tensor(const QParams& p);
Tensor zero_point_tensor(const QParams& p);

}  // namespace qtool::quantize
