// QuantizeLinear / DequantizeLinear (opsets 10, 13, 19, 21, 23-25): thin kernels over lib/numerics, which holds
// the contract (rounding, saturation, per-tensor / per-axis / blocked layouts) and its reference twin.
// Opset 23 added QuantizeLinear's `precision` (the dtype x / y_scale is computed in) and DequantizeLinear's
// `output_dtype` (y's dtype; default: x_scale's). qtool divides and multiplies in float32 and rounds the result
// to the output dtype; float32 promotion makes a float16/bfloat16/double `precision` float32, as it makes every
// float16 op compute in float32, and makes DequantizeLinear's float16/bfloat16/double `output_dtype` float.
#include "numerics/qdq.h"

#include <algorithm>
#include <cmath>

#include "runtime/kernels/common.h"
#include "runtime/kernels/kernels.h"
#include "runtime/kernels/quantized_ops.h"

namespace qtool::runtime::kernels {
namespace {

// The dtype a QuantizeLinear / DequantizeLinear attribute names (output_dtype, precision), range-checked before the
// narrowing to the ONNX enum: 2^32 + 2 must not pass as uint8 (2).
const DTypeInfo& dtype_attr(const NodeInfo& n, const char* name, int64_t code) {
  const std::string what = n.label() + ": attribute '" + name + "'";
  if (code <= 0 || code > INT32_MAX)
    throw BadInputError(what + " = " + std::to_string(code) + " is not an ONNX data type; the model is corrupt");
  const DTypeInfo* info = dtype_info_or_null(static_cast<int32_t>(code));
  if (!info) throw_unknown_dtype(static_cast<int32_t>(code), what);
  return *info;
}

numerics::QdqAttrs qdq_attrs(const NodeInfo& n) {
  numerics::QdqAttrs a;
  a.axis = n.attrs.get_int("axis", 1);
  a.block_size = n.attrs.get_int("block_size", 0);
  a.saturate = n.attrs.get_int("saturate", 1) != 0;
  const int64_t out = n.attrs.get_int("output_dtype", 0);
  if (out != 0) a.output_dtype = dtype_attr(n, "output_dtype", out).dtype;
  return a;
}

// QuantizeLinear-23's `precision` must name a float dtype. Float32 promotion (onnx/float32_promotion.h), which
// every Graph applies, turns float16, bfloat16 and double into float, so the kernel always divides in float32.
void check_precision_attr(const NodeInfo& n) {
  const int64_t p = n.attrs.get_int("precision", 0);
  if (p == 0) return;
  const DTypeInfo& info = dtype_attr(n, "precision", p);
  if (!is_float(info.dtype))
    throw BadInputError(n.label() + ": attribute 'precision' = " + std::string(info.name) +
                        " is not a float dtype; the model is corrupt");
}

class QuantizeKernel final : public Kernel {
 public:
  explicit QuantizeKernel(const NodeInfo& n) : attrs_(qdq_attrs(n)) { check_precision_attr(n); }
  void run(KernelContext& ctx) override {
    const Tensor* zp = ctx.has_input(2) ? &ctx.input(2) : nullptr;
    ctx.outputs[0] = numerics::quantize_linear(ctx.input(0), ctx.input(1), zp, attrs_, ctx.threads);
  }

 private:
  numerics::QdqAttrs attrs_;
};

class DequantizeKernel final : public Kernel {
 public:
  explicit DequantizeKernel(const NodeInfo& n) : attrs_(qdq_attrs(n)) {
    if (attrs_.output_dtype != DType::Undefined && !is_float(attrs_.output_dtype))
      throw BadInputError(n.label() + ": attribute 'output_dtype' = " + std::string(dtype_name(attrs_.output_dtype)) +
                          " is not a float dtype; the model is corrupt");
  }
  void run(KernelContext& ctx) override {
    const Tensor* zp = ctx.has_input(2) ? &ctx.input(2) : nullptr;
    Tensor y = numerics::dequantize_linear(ctx.input(0), ctx.input(1), zp, attrs_, ctx.threads);
    // DequantizeLinear-23 output_dtype: float32 promotion has made a float16/bfloat16/double one float, as it made
    // x_scale float, so y is float32 here; another dtype would be rounded from it.
    if (attrs_.output_dtype != DType::Undefined && attrs_.output_dtype != y.dtype())
      y = cast_tensor(y, attrs_.output_dtype, ctx.node, ctx.threads);
    ctx.outputs[0] = std::move(y);
  }

 private:
  numerics::QdqAttrs attrs_;
};

void dynamic_quantize_kernel(KernelContext& ctx) {
  DynamicQuantized q = dynamic_quantize_uint8(ctx.input(0), ctx.node, ctx.threads);
  ctx.outputs[0] = std::move(q.y);
  ctx.outputs[1] = Tensor::scalar<float>(q.scale);
  ctx.outputs[2] = Tensor::scalar<uint8_t>(q.zero_point);
}

}  // namespace

// DynamicQuantizeLinear (uint8): range = [min(0, min x), max(0, max x)], y_scale = range / 255,
// y_zero_point = saturate(round_half_even(-min / y_scale)), y = QuantizeLinear(x, y_scale, y_zero_point).
// DynamicQuantizeMatMul quantizes its A the same way (quantized_ops.h).
DynamicQuantized dynamic_quantize_uint8(const Tensor& x, const NodeInfo& node, int threads) {
  if (x.dtype() != DType::Float32) throw UnsupportedError(node.label() + ": x must be float32");
  float lo = 0, hi = 0;
  for (float v : x.span<float>()) {
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  const float scale = (hi - lo) / 255.0f;
  const float zp_f = scale == 0.0f ? 0.0f : std::nearbyint(std::clamp(0.0f - lo / scale, 0.0f, 255.0f));
  const Tensor zp = Tensor::scalar<uint8_t>(static_cast<uint8_t>(zp_f));
  // A zero range (all-zero input) quantizes everything to the zero point; avoid dividing by zero.
  const Tensor safe_scale = Tensor::scalar<float>(scale == 0.0f ? 1.0f : scale);
  return {numerics::quantize_linear(x, safe_scale, &zp, numerics::QdqAttrs{}, threads), scale,
          static_cast<uint8_t>(zp_f)};
}

std::unique_ptr<Kernel> make_dynamic_quantize_linear(const NodeInfo& n) {
  return make_function_kernel<dynamic_quantize_kernel>(n);
}
std::unique_ptr<Kernel> make_quantize_linear(const NodeInfo& n) { return std::make_unique<QuantizeKernel>(n); }
std::unique_ptr<Kernel> make_dequantize_linear(const NodeInfo& n) { return std::make_unique<DequantizeKernel>(n); }

}  // namespace qtool::runtime::kernels
