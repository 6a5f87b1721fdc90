// QuantizeLinear / DequantizeLinear on Tensors, exactly as ONNX defines them (opsets 10, 13, 19, 21) and as
// ONNX Runtime 1.30 computes them on CPU (bit-exact; tests/numerics/tests.cmake compares every output dtype).
//
// Contract, integer outputs (int8, uint8, int16, uint16, int4, uint4):
//   y = clamp(round_half_even(x / y_scale), qmin - zp, qmax - zp) + zp
//   computed in float32: the division is an IEEE float division (not a multiply by 1/scale), the clamp
//   happens before rounding as in ORT's MLAS kernel, NaN clamps to qmin (what MLAS's MAXPS does), +-inf to
//   the range ends.
// FP8 outputs (E4M3FN, E4M3FNUZ, E5M2, E5M2FNUZ): y = float8(x / y_scale (+ zp when zp != 0)) with the rounding,
//   saturation and NaN rules of core/float_formats.h (`saturate` attribute, default true).
// Dequantize: y = (x - zp) * x_scale in float32 (integer x: int32 subtraction, then one float multiply),
//   then rounded to the scale's dtype (float32, float16 or bfloat16), which is the output dtype.
// Granularity comes from the scale's shape: scalar or [1] -> per-tensor; 1-D [x.dim(axis)] -> per-axis;
//   same rank as x with dim(axis) = ceil(x.dim(axis) / block_size) -> blocked (opset 21, block_size > 0).
//   All three run through one loop over (outer, axis, block, inner) counts; see QdqLayout.
// Scales may be float32, float16 or bfloat16; the zero point's dtype is the output dtype (Q) / x's dtype (DQ).
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace qtool::numerics {

// How x is divided by the scale. ONNX (and ORT) divide; PyTorch/FBGEMM multiply by the float32 reciprocal
// (quantize_per_tensor, quantize_per_channel), which differs from division in the last bit near ties.
enum class ScaleApply : uint8_t { Divide, MultiplyReciprocal };

// Node attributes of QuantizeLinear / DequantizeLinear.
struct QdqAttrs {
  int64_t axis = 1;                       // per-axis and blocked: the quantized axis (negative counts from the end)
  int64_t block_size = 0;                 // opset 21 blocked quantization; 0 = per-tensor or per-axis
  bool saturate = true;                   // FP8 outputs only (opset 19+)
  DType output_dtype = DType::Undefined;  // QuantizeLinear-21 output_dtype; Undefined: zero point's dtype or uint8
  ScaleApply scale_apply = ScaleApply::Divide;  // Divide for ONNX; MultiplyReciprocal to match PyTorch
};

// x viewed as [outer, axis_len, inner]. Element (m, k, n) uses scale element
//   m * scale_stride_outer + (k / block) * scale_stride_axis + n * scale_stride_inner.
// per-tensor: all strides 0; per-axis: block 1, stride_axis 1; blocked: strides of the scale's own layout.
struct QdqLayout {
  int64_t outer = 1, axis_len = 1, inner = 1, block = 1;
  int64_t scale_stride_outer = 0, scale_stride_axis = 0, scale_stride_inner = 0;
};

// Validates scale/zero point shapes against x and returns the layout. `scale_name` / `zp_name` are the ONNX
// input names used in errors ("y_scale", "y_zero_point" for Q; "x_scale", "x_zero_point" for DQ).
QdqLayout qdq_layout(const Shape& x, const Tensor& scale, const Tensor* zero_point, int64_t axis, int64_t block_size,
                     const char* scale_name, const char* zp_name);

// The output dtype QuantizeLinear produces for these inputs (validates zero point vs output_dtype).
DType quantize_output_dtype(const Tensor* zero_point, const QdqAttrs& attrs);

// QuantizeLinear. x: float32, float16, bfloat16 or int32. Parallel over `threads` OpenMP threads for large
// tensors (threads <= 1: serial). Throws BadInputError naming y_scale / y_zero_point on shape errors and
// UnsupportedError for dtypes ONNX does not allow.
Tensor quantize_linear(const Tensor& x, const Tensor& scale, const Tensor* zero_point, const QdqAttrs& attrs,
                       int threads = 1);
// DequantizeLinear. x: int8, uint8, int16, uint16, int32, int4, uint4 or an FP8 type. Output dtype = scale's.
Tensor dequantize_linear(const Tensor& x, const Tensor& scale, const Tensor* zero_point, const QdqAttrs& attrs,
                         int threads = 1);

// Reference twins: one element at a time, index arithmetic per element, dtype table load/store. Same results
// bit for bit; tests compare the fast paths against them.
Tensor quantize_linear_ref(const Tensor& x, const Tensor& scale, const Tensor* zero_point, const QdqAttrs& attrs);
Tensor dequantize_linear_ref(const Tensor& x, const Tensor& scale, const Tensor* zero_point, const QdqAttrs& attrs);

}  // namespace qtool::numerics
