// QuantizeLinear / DequantizeLinear (opsets 10, 13, 19, 21): thin kernels over lib/numerics, which holds
// the contract (rounding, saturation, per-tensor / per-axis / blocked layouts) and its reference twin.
#include "numerics/qdq.h"

#include <algorithm>
#include <cmath>

#include "runtime/kernels/common.h"
#include "runtime/kernels/kernels.h"

namespace qtool::runtime::kernels {
namespace {

numerics::QdqAttrs qdq_attrs(const NodeInfo& n) {
  numerics::QdqAttrs a;
  a.axis = n.attrs.get_int("axis", 1);
  a.block_size = n.attrs.get_int("block_size", 0);
  a.saturate = n.attrs.get_int("saturate", 1) != 0;
  const int64_t out = n.attrs.get_int("output_dtype", 0);
  if (out != 0) {
    const DTypeInfo* info = dtype_info_or_null(static_cast<int32_t>(out));
    if (!info) throw BadInputError("attribute 'output_dtype' is not a known dtype (" + std::to_string(out) + ")");
    a.output_dtype = info->dtype;
  }
  return a;
}

class QuantizeKernel final : public Kernel {
 public:
  explicit QuantizeKernel(const NodeInfo& n) : attrs_(qdq_attrs(n)) {}
  void run(KernelContext& ctx) override {
    const Tensor* zp = ctx.has_input(2) ? &ctx.input(2) : nullptr;
    ctx.outputs[0] = numerics::quantize_linear(ctx.input(0), ctx.input(1), zp, attrs_, ctx.threads);
  }

 private:
  numerics::QdqAttrs attrs_;
};

class DequantizeKernel final : public Kernel {
 public:
  explicit DequantizeKernel(const NodeInfo& n) : attrs_(qdq_attrs(n)) {}
  void run(KernelContext& ctx) override {
    const Tensor* zp = ctx.has_input(2) ? &ctx.input(2) : nullptr;
    ctx.outputs[0] = numerics::dequantize_linear(ctx.input(0), ctx.input(1), zp, attrs_, ctx.threads);
  }

 private:
  numerics::QdqAttrs attrs_;
};

// DynamicQuantizeLinear (uint8): range = [min(0, min x), max(0, max x)], y_scale = range / 255,
// y_zero_point = saturate(round_half_even(-min / y_scale)), y = QuantizeLinear(x, y_scale, y_zero_point).
void dynamic_quantize_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  if (x.dtype() != DType::Float32) throw UnsupportedError(ctx.node.label() + ": x must be float32");
  float lo = 0, hi = 0;
  for (float v : x.span<float>()) {
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  const float scale = (hi - lo) / 255.0f;
  const float zp_f = scale == 0.0f ? 0.0f : std::nearbyint(std::clamp(0.0f - lo / scale, 0.0f, 255.0f));
  Tensor s = Tensor::scalar<float>(scale);
  Tensor zp = Tensor::scalar<uint8_t>(static_cast<uint8_t>(zp_f));
  // A zero range (all-zero input) quantizes everything to the zero point; avoid dividing by zero.
  const Tensor safe_scale = Tensor::scalar<float>(scale == 0.0f ? 1.0f : scale);
  ctx.outputs[0] = numerics::quantize_linear(x, safe_scale, &zp, numerics::QdqAttrs{}, ctx.threads);
  ctx.outputs[1] = s;
  ctx.outputs[2] = zp;
}

}  // namespace

std::unique_ptr<Kernel> make_dynamic_quantize_linear(const NodeInfo& n) {
  return make_function_kernel<dynamic_quantize_kernel>(n);
}
std::unique_ptr<Kernel> make_quantize_linear(const NodeInfo& n) { return std::make_unique<QuantizeKernel>(n); }
std::unique_ptr<Kernel> make_dequantize_linear(const NodeInfo& n) { return std::make_unique<DequantizeKernel>(n); }

}  // namespace qtool::runtime::kernels
