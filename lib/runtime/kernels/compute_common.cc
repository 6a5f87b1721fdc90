#include "runtime/kernels/compute_common.h"

#include <algorithm>

#include "core/checked.h"

namespace qtool::runtime::kernels::compute {

QTOOL_HOT_LOOP
void scale_shift(const float* x, float a, float b, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = a * x[i] + b;
}

QTOOL_HOT_LOOP
void axpy(float a, const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += a * x[i];
}

QTOOL_HOT_LOOP
float sum_of(const float* x, int64_t n) { return sum_of_inline(x, n); }

float* scratch_floats(size_t n) {
  thread_local std::vector<float> buf;
  if (buf.size() < n) buf.resize(n);
  return buf.data();
}

const Tensor& float_input(const KernelContext& ctx, size_t i) {
  const Tensor& t = ctx.input(i);
  if (t.dtype() != DType::Float32)
    throw UnsupportedError(ctx.node.label() + ": input " + std::to_string(i) + " ('" +
                           (i < ctx.node.inputs.size() ? ctx.node.inputs[i] : std::string()) + "') has dtype " +
                           std::string(dtype_name(t.dtype())) +
                           "; this op runs on float only (float16, bfloat16 and float64 models run in float32): check the "
                           "types the model feeds it");
  return t;
}

ConvOperands conv_operands(const KernelContext& ctx) {
  const Tensor& X = float_input(ctx, 0);
  const Tensor& W = float_input(ctx, 1);
  const Tensor* B = ctx.has_input(2) ? &float_input(ctx, 2) : nullptr;
  if (X.rank() < 3 || W.rank() != X.rank())
    throw BadInputError(ctx.node.label() + ": X " + shape_str(X.shape()) + " and W " + shape_str(W.shape()) +
                        " must have the same rank >= 3");
  return {X, W, B, static_cast<size_t>(X.rank() - 2)};
}

AutoPad parse_auto_pad(const NodeInfo& node) {
  const std::string s = node.attrs.get_string("auto_pad", "NOTSET");
  if (s == "NOTSET") return AutoPad::NotSet;
  if (s == "SAME_UPPER") return AutoPad::SameUpper;
  if (s == "SAME_LOWER") return AutoPad::SameLower;
  if (s == "VALID") return AutoPad::Valid;
  throw BadInputError(node.label() + ": auto_pad '" + s + "' is not NOTSET, SAME_UPPER, SAME_LOWER or VALID");
}

Window Window::parse(const NodeInfo& node, size_t nd, const std::vector<int64_t>& kernel_from_weight) {
  Window w;
  w.kernel = node.attrs.get_ints("kernel_shape", kernel_from_weight);
  auto check_len = [&](const std::vector<int64_t>& v, size_t n, const char* name) {
    if (v.size() != n)
      throw BadInputError(node.label() + ": attribute '" + name + "' has " + std::to_string(v.size()) +
                          " values, expected " + std::to_string(n));
  };
  check_len(w.kernel, nd, "kernel_shape");
  if (!kernel_from_weight.empty() && w.kernel != kernel_from_weight)
    throw BadInputError(node.label() + ": kernel_shape does not match the weight's spatial shape");
  w.strides = node.attrs.get_ints("strides", std::vector<int64_t>(nd, 1));
  w.dilations = node.attrs.get_ints("dilations", std::vector<int64_t>(nd, 1));
  w.pads = node.attrs.get_ints("pads", std::vector<int64_t>(2 * nd, 0));
  check_len(w.strides, nd, "strides");
  check_len(w.dilations, nd, "dilations");
  check_len(w.pads, 2 * nd, "pads");
  for (size_t i = 0; i < nd; ++i)
    if (w.kernel[i] < 1 || w.strides[i] < 1 || w.dilations[i] < 1)
      throw BadInputError(node.label() + ": kernel_shape, strides and dilations must be positive");
  for (int64_t p : w.pads)
    if (p < 0) throw BadInputError(node.label() + ": pads must not be negative");
  w.auto_pad = parse_auto_pad(node);
  w.ceil_mode = node.attrs.get_int("ceil_mode", 0) != 0;
  return w;
}

std::vector<int64_t> Window::output_dims(const NodeInfo& node, const std::vector<int64_t>& in,
                                         std::vector<int64_t>& pads_out) const {
  // Checked arithmetic throughout: kernel, dilation, pads and strides come from the model.
  constexpr std::string_view what = "window size arithmetic (kernel_shape, dilations, pads, strides)";
  const size_t nd = kernel.size();
  std::vector<int64_t> out(nd);
  pads_out = pads;
  for (size_t i = 0; i < nd; ++i) {
    const int64_t ext = checked_add(checked_mul(kernel[i] - 1, dilations[i], what), 1, what);
    if (auto_pad == AutoPad::SameUpper || auto_pad == AutoPad::SameLower) {
      out[i] = checked_ceil_div(in[i], strides[i], what);
      const int64_t total =
          std::max<int64_t>(0, checked_sub(checked_add(checked_mul(out[i] - 1, strides[i], what), ext, what), in[i], what));
      const int64_t small = total / 2, big = total - total / 2;
      pads_out[i] = auto_pad == AutoPad::SameUpper ? small : big;
      pads_out[i + nd] = auto_pad == AutoPad::SameUpper ? big : small;
      continue;
    }
    if (auto_pad == AutoPad::Valid) pads_out[i] = pads_out[i + nd] = 0;
    const int64_t span =
        checked_sub(checked_add(checked_add(in[i], pads_out[i], what), pads_out[i + nd], what), ext, what);
    if (span < 0)
      throw BadInputError(node.label() + ": window of " + std::to_string(ext) + " does not fit spatial axis " +
                          std::to_string(i) + " of size " + std::to_string(in[i]) + " plus pads");
    if (ceil_mode) {
      out[i] = checked_ceil_div(span, strides[i], what) + 1;
      // The last window must start inside the input or the begin padding.
      if (checked_mul(out[i] - 1, strides[i], what) >= in[i] + pads_out[i]) --out[i];
    } else {
      out[i] = span / strides[i] + 1;
    }
  }
  return out;
}

bool gemm_fill_c(const Tensor& C, float beta, int64_t M, int64_t N, float* y) {
  int64_t cm = 1, cn = 1;
  if (C.rank() == 1) cn = C.dim(0);
  if (C.rank() == 2) cm = C.dim(0), cn = C.dim(1);
  if (C.rank() > 2 || (cm != 1 && cm != M) || (cn != 1 && cn != N)) return false;
  const float* c = C.data<float>();
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) y[i * N + j] = beta * c[(cm == 1 ? 0 : i) * cn + (cn == 1 ? 0 : j)];
  return true;
}

}  // namespace qtool::runtime::kernels::compute
