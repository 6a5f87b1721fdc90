// Quantization parameters of the tensors the QDQ rewrite creates, built on lib/numerics (choose_qparams,
// compute_minmax, quantize_linear: ONNX / ONNX Runtime exact arithmetic). What this file adds: the mapping from
// QConfig settings to a numerics::QSpec, weights that keep an existing grid, kernel-sum rounding and int32 biases.
#pragma once

#include <optional>
#include <vector>

#include "core/tensor.h"
#include "numerics/qparams.h"
#include "quantize/qconfig.h"

namespace qtool::quantize {

// Scale / zero point tensors exactly as QuantizeLinear / DequantizeLinear take them, with their attributes.
struct QParams {
  Tensor scale;            // float32: scalar (per tensor), [C] (per axis) or blocked shape (opset 21)
  Tensor zero_point;       // the quantized dtype, same shape
  int64_t axis = -1;       // per-axis and blocked
  int64_t block_size = 0;  // blocked
  DType dtype() const { return zero_point.dtype(); }
  std::vector<float> scales() const;
  std::vector<int64_t> zero_points() const;
};

numerics::QSpec spec_for(const TensorSettings& s);
// Per-tensor parameters for the observed range [lo, hi].
QParams params_from_range(double lo, double hi, const TensorSettings& s);
// Fixed parameters (e.g. Sigmoid output: uint8, scale 1/256, zero point 0).
QParams fixed_params(double scale, int64_t zero_point, DType dtype);

// Weights whose values are already integer multiples of one step that fits the target range (a model
// exported from a quantized one, such as the vendor mobilenetv2) keep that step: re-quantizing on a new
// grid would add error where none is needed. Returns the step, or nullopt (symmetric signed settings only).
std::optional<float> existing_grid(const Tensor& w, const TensorSettings& s);
// Weight parameters per tensor, per channel (along `axis`) or per block, from the data's min/max.
// saturation_safe (int8 symmetric): x86 CPUs with AVX2 but no VNNI multiply uint8 activations by int8 weights with
// VPMADDUBSW, which adds two neighbouring products in int16 and saturates at 32767 (ONNX Runtime's MLAS u8s8 GEMM,
// so QLinearConv / QLinearMatMul / MatMulInteger). 255 · (|q_a| + |q_b|) <= 32767 holds for every pair of one output
// channel's pairs that the kernel forms have same-sign |q| sums <= 128: the scale is raised to (pair sum) / 126 where
// needed (two codes of 127 would reach 64770: a 2x overflow). At worst that is reduce_range's 7 bits; most channels
// keep 8.
// `pair_sums` (quantize/saturation.h, per scale): the kernel's largest same-sign pair sums; without them
// saturation_safe assumes the worst pairing (the two largest magnitudes). `threads`: for the range pass (the same
// parameters for any count).
QParams weight_params(const Tensor& w, const TensorSettings& s, int64_t axis,
                      const std::optional<std::vector<double>>& pair_sums = std::nullopt, int threads = 1);
// Float -> quantized with ONNX QuantizeLinear arithmetic. Rounding::KernelSum (tensors of rank >= 3, integer
// dtypes) then re-rounds each (output, input) channel's taps so their rounding errors sum to at most 1/2.
Tensor quantize_tensor(const Tensor& x, const QParams& p, Rounding rounding = Rounding::Nearest, int threads = 1);
// Widens weight scales (per tensor or per channel of a bias of the same length) where the int32 bias code
// b[c] / (s_input * s_weight[c]) would not fit int32, as ONNX Runtime's quantizer does: with 16-bit activations
// and weights s_input * s_weight can be ~1e-9, and ORT saturates even a bias left float when it fuses the node.
void widen_for_bias(QParams& weight, const Tensor& bias, float input_scale);
// Bias: int32, scale = s_input * s_weight[c], zero point 0 (ONNX Runtime's QLinearConv convention).
QParams bias_params(float input_scale, const std::vector<float>& weight_scales, int64_t channels);
// nullopt when a code does not fit int32 (tiny s_input * s_weight, e.g. 16-bit activations and weights):
// saturating would silently change the bias, so the caller keeps it float.
std::optional<Tensor> quantize_bias(const Tensor& b, const QParams& p);

}  // namespace qtool::quantize
