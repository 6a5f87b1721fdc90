// ORT's QOperator elementwise, activation, pooling and concat ops (com.microsoft), T int8 or uint8, every scale
// and zero point one value. Formulas as ONNX Runtime 1.30's CPU kernels (MLAS) compute them, with
// q(v) = zp_y + round_half_even(clamp(v / scale_y, qmin - zp_y, qmax - zp_y)) (MlasQuantizeLinear):
//
//   QLinearAdd   c = clamp(round_half_even((a_s * (a - a_zp) + b_s * (b - b_zp)) / c_s) + c_zp)   (MLAS's scalar
//                kernel). ORT's x86 vector kernels compute the same sum in fixed point (21-bit multipliers of
//                a_s / c_s and b_s / c_s) and may differ by 1 at values that fall within ~2^-20 of a rounding tie.
//   QLinearMul   c = clamp(round_half_even((a - a_zp) * (b - b_zp) * (a_s * b_s / c_s)) + c_zp); MLAS's vector
//                kernels add c_zp before rounding: they differ from this by 1 at exact ties with an odd c_zp.
//   QLinearSigmoid / QLinearLeakyRelu   a 256-entry table y[x] = q(f(x_s * (x - x_zp))), f = 1 / (1 + exp(-v)) or
//                v >= 0 ? v : alpha * v (alpha default 0.01). ORT's table uses MLAS's logistic approximation (a few
//                ulps from exp's): a table entry may differ by 1 where f lands within those ulps of a tie.
//   QLinearGlobalAveragePool  y[n, c] = requantize(sum(x[n, c, ...]) - x_zp * size, x_s / (y_s * size), y_zp)
//                (quantized_ops.h requantize; channels_last reads [N, ..., C]); bit for bit.
//   QLinearConcat  inputs whose scale and zero point equal y's are copied; the others map through the table
//                q(x_s * (x - x_zp)); bit for bit.
//   QLinearAveragePool  y = clamp(round_half_even(avg / y_s + y_zp)), avg = the float sum of x_s * (x - x_zp) over
//                the window's taps inside X (row-major order) / count (the taps inside, or with count_include_pad
//                the kernel's size), as ORT's qlinear_pool.cc computes it (y_zp added before rounding); bit for bit.
//   QLinearSoftmax  ORT's table arithmetic (qlinear_softmax.cc): e[i] = float(exp((i - 255 + b) * x_s)) in double for
//                the 256 codes, b = max(0, ln(FLT_MAX / D) - 5) / x_s; per row of D values (attribute opset < 13:
//                the flattened axes from `axis` on, else `axis` alone) t = e[x - max + 255], sum = float sum of t in
//                row order, y = round_half_even(t * floor(1 / y_s) / sum) + y_zp. ORT lets an int8 result above 127
//                wrap and leaves a row whose sum underflows to 0 unwritten; qtool saturates and writes y_zp there.
#include <cstring>

#include "runtime/kernels/broadcast.h"
#include "runtime/kernels/compute_common.h"
#include "runtime/kernels/quantized_ops.h"

namespace qtool::runtime::kernels {
namespace {

template <class T>
T quantize_value(float v, float scale, int32_t zp) {
  constexpr float lo = static_cast<float>(std::numeric_limits<T>::min());
  constexpr float hi = static_cast<float>(std::numeric_limits<T>::max());
  v = std::min(std::max(v / scale, lo - static_cast<float>(zp)), hi - static_cast<float>(zp));
  return static_cast<T>(static_cast<int32_t>(std::nearbyint(v)) + zp);
}

template <class T>
T saturate(int32_t v) {
  return static_cast<T>(std::clamp<int32_t>(v, std::numeric_limits<T>::min(), std::numeric_limits<T>::max()));
}

const Tensor* opt(const KernelContext& ctx, size_t i) { return ctx.has_input(i) ? &ctx.input(i) : nullptr; }

// Calls f.template operator()<T>() for T = int8_t or uint8_t, x's dtype.
template <class F>
void dispatch_8bit(const Tensor& x, const NodeInfo& node, const char* what, F&& f) {
  require_8bit(x, node, what);
  if (x.dtype() == DType::Int8)
    f.template operator()<int8_t>();
  else
    f.template operator()<uint8_t>();
}

// Every input but the first must have the first's dtype.
void same_dtype(const Tensor& a, const Tensor& b, const NodeInfo& node, const char* what) {
  if (a.dtype() != b.dtype())
    throw BadInputError(node.label() + ": " + what + " is " + std::string(dtype_name(b.dtype())) +
                        " but the input is " + std::string(dtype_name(a.dtype())) + "; the model is corrupt");
}

// QLinearAdd, QLinearMul: inputs A, A_scale, A_zp?, B, B_scale, B_zp?, C_scale, C_zp?; numpy broadcasting.
class QLinearBinaryKernel final : public Kernel {
 public:
  explicit QLinearBinaryKernel(const NodeInfo& n) : mul_(n.op_type == "QLinearMul") {}
  void run(KernelContext& ctx) override {
    const NodeInfo& node = ctx.node;
    const Tensor& A = ctx.input(0);
    const Tensor& B = ctx.input(3);
    same_dtype(A, B, node, "B");
    const float as = scalar_scale(ctx.input(1), node, "A_scale"), bs = scalar_scale(ctx.input(4), node, "B_scale");
    const float cs = scalar_scale(ctx.input(6), node, "C_scale");
    const int32_t za = scalar_zero_point(opt(ctx, 2), node, "A_zero_point");
    const int32_t zb = scalar_zero_point(opt(ctx, 5), node, "B_zero_point");
    const int32_t zc = scalar_zero_point(opt(ctx, 7), node, "C_zero_point");
    const BroadcastPlan p = plan_broadcast({&A.shape(), &B.shape()}, node);
    Tensor C(A.dtype(), p.out_shape);
    const float ratio = as * bs / cs;
    dispatch_8bit(A, node, "A", [&]<class T>() {
      if (mul_) {
        broadcast_binary(p, A.data<T>(), B.data<T>(), C.data<T>(), ctx.threads, [=](T a, T b) {
          const float prod = static_cast<float>((int32_t{a} - za) * (int32_t{b} - zb));
          return saturate<T>(static_cast<int32_t>(std::nearbyint(prod * ratio)) + zc);
        });
      } else {
        broadcast_binary(p, A.data<T>(), B.data<T>(), C.data<T>(), ctx.threads, [=](T a, T b) {
          const float va = as * static_cast<float>(int32_t{a} - za), vb = bs * static_cast<float>(int32_t{b} - zb);
          return saturate<T>(static_cast<int32_t>(std::nearbyint((va + vb) / cs)) + zc);
        });
      }
    });
    ctx.outputs[0] = std::move(C);
  }

 private:
  bool mul_;
};

// QLinearSigmoid, QLinearLeakyRelu: inputs X, X_scale, X_zp?, Y_scale, Y_zp?; a table over the 256 codes.
class QLinearLookupKernel final : public Kernel {
 public:
  explicit QLinearLookupKernel(const NodeInfo& n)
      : sigmoid_(n.op_type == "QLinearSigmoid"), alpha_(n.attrs.get_float("alpha", 0.01f)) {}
  void run(KernelContext& ctx) override {
    const NodeInfo& node = ctx.node;
    const Tensor& X = ctx.input(0);
    const float xs = scalar_scale(ctx.input(1), node, "X_scale"), ys = scalar_scale(ctx.input(3), node, "Y_scale");
    const int32_t zx = scalar_zero_point(opt(ctx, 2), node, "X_zero_point");
    const int32_t zy = scalar_zero_point(opt(ctx, 4), node, "Y_zero_point");
    Tensor Y(X.dtype(), X.shape());
    dispatch_8bit(X, node, "X", [&]<class T>() {
      T table[256];
      for (int i = 0; i < 256; ++i) {
        const T x = static_cast<T>(i);  // every code of T once (int8: i = 128..255 are -128..-1)
        const float v = xs * static_cast<float>(int32_t{x} - zx);
        const float f = sigmoid_ ? 1.f / (1.f + std::exp(-v)) : (v >= 0 ? v : alpha_ * v);
        table[static_cast<uint8_t>(x)] = quantize_value<T>(f, ys, zy);
      }
      const T* x = X.data<T>();
      T* y = Y.data<T>();
      parallel_range(X.numel(), ctx.threads, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) y[i] = table[static_cast<uint8_t>(x[i])];
      });
    });
    ctx.outputs[0] = std::move(Y);
  }

 private:
  bool sigmoid_;
  float alpha_;
};

// QLinearGlobalAveragePool: inputs X, x_scale, x_zp, y_scale, y_zp; channels_last attribute.
class QLinearGlobalAvgPoolKernel final : public Kernel {
 public:
  explicit QLinearGlobalAvgPoolKernel(const NodeInfo& n) : channels_last_(n.attrs.get_int("channels_last", 0) != 0) {}
  void run(KernelContext& ctx) override {
    const NodeInfo& node = ctx.node;
    const Tensor& X = ctx.input(0);
    if (X.rank() < 3) throw BadInputError(node.label() + ": X " + shape_str(X.shape()) + " must have rank >= 3");
    const float xs = scalar_scale(ctx.input(1), node, "x_scale"), ys = scalar_scale(ctx.input(3), node, "y_scale");
    const int32_t zx = scalar_zero_point(opt(ctx, 2), node, "x_zero_point");
    const int32_t zy = scalar_zero_point(opt(ctx, 4), node, "y_zero_point");
    const int64_t N = X.dim(0), C = channels_last_ ? X.dim(-1) : X.dim(1),
                  size = X.numel() / std::max<int64_t>(N * C, 1);
    Shape ys_shape(X.shape().size(), 1);
    ys_shape[0] = N;
    ys_shape[channels_last_ ? ys_shape.size() - 1 : 1] = C;
    Tensor Y(X.dtype(), ys_shape);
    const float scale = xs / (ys * static_cast<float>(size));
    dispatch_8bit(X, node, "X", [&]<class T>() {
      const T* x = X.data<T>();
      T* y = Y.data<T>();
      for (int64_t n = 0; n < N; ++n)
        for (int64_t c = 0; c < C; ++c) {
          int32_t s = -zx * static_cast<int32_t>(size);
          const T* p = x + n * C * size;
          if (channels_last_)
            for (int64_t i = 0; i < size; ++i) s += p[i * C + c];
          else
            for (int64_t i = 0; i < size; ++i) s += p[c * size + i];
          y[n * C + c] = compute::requantize<T>(s, scale, zy);
        }
    });
    ctx.outputs[0] = std::move(Y);
  }

 private:
  bool channels_last_;
};

// QLinearConcat: inputs Y_scale, Y_zp, then (X, X_scale, X_zp) per input; axis attribute.
class QLinearConcatKernel final : public Kernel {
 public:
  explicit QLinearConcatKernel(const NodeInfo& n) : axis_(n.attrs.require_int("axis")) {}
  void run(KernelContext& ctx) override {
    const NodeInfo& node = ctx.node;
    if (ctx.num_inputs() < 5 || (ctx.num_inputs() - 2) % 3 != 0)
      throw BadInputError(node.label() +
                          ": expects Y_scale, Y_zero_point and (X, X_scale, X_zero_point) triples, got " +
                          std::to_string(ctx.num_inputs()) + " inputs");
    const float ys = scalar_scale(ctx.input(0), node, "Y_scale");
    const Tensor& yzp = ctx.input(1);
    const int32_t zy = scalar_zero_point(&yzp, node, "Y_zero_point");
    const size_t k = (ctx.num_inputs() - 2) / 3;
    const Tensor& X0 = ctx.input(2);
    const int64_t axis = normalize_axis(axis_, X0.rank(), node);
    Shape out = X0.shape();
    out[static_cast<size_t>(axis)] = 0;
    for (size_t i = 0; i < k; ++i) {
      const Tensor& X = ctx.input(2 + 3 * i);
      same_dtype(yzp, X, node, "an input");
      bool ok = X.rank() == X0.rank();
      for (int64_t d = 0; ok && d < X.rank(); ++d) ok = d == axis || X.dim(d) == X0.dim(d);
      if (!ok)
        throw BadInputError(node.label() + ": input " + shape_str(X.shape()) + " does not concatenate with " +
                            shape_str(X0.shape()) + " on axis " + std::to_string(axis));
      out[static_cast<size_t>(axis)] += X.dim(axis);
    }
    Tensor Y(yzp.dtype(), out);
    int64_t outer = 1, inner = 1;
    for (int64_t d = 0; d < axis; ++d) outer *= out[static_cast<size_t>(d)];
    for (int64_t d = axis + 1; d < static_cast<int64_t>(out.size()); ++d) inner *= out[static_cast<size_t>(d)];
    const int64_t row = out[static_cast<size_t>(axis)] * inner;
    dispatch_8bit(yzp, node, "Y_zero_point", [&]<class T>() {
      T* y = Y.data<T>();
      int64_t at = 0;
      for (size_t i = 0; i < k; ++i) {
        const Tensor& X = ctx.input(2 + 3 * i);
        const float xs = scalar_scale(ctx.input(3 + 3 * i), node, "X_scale");
        const int32_t zx = scalar_zero_point(opt(ctx, 4 + 3 * i), node, "X_zero_point");
        const int64_t len = X.dim(axis) * inner;
        const T* x = X.data<T>();
        const bool copy = xs == ys && zx == zy;
        T table[256];
        for (int c = 0; c < 256 && !copy; ++c) {
          const T v = static_cast<T>(c);
          table[static_cast<uint8_t>(v)] = quantize_value<T>(xs * static_cast<float>(int32_t{v} - zx), ys, zy);
        }
        for (int64_t o = 0; o < outer; ++o) {
          T* dst = y + o * row + at;
          const T* src = x + o * len;
          if (copy)
            std::memcpy(dst, src, static_cast<size_t>(len) * sizeof(T));
          else
            for (int64_t j = 0; j < len; ++j) dst[j] = table[static_cast<uint8_t>(src[j])];
        }
        at += len;
      }
    });
    ctx.outputs[0] = std::move(Y);
  }

 private:
  int64_t axis_;
};

// QLinearAveragePool: inputs X, x_scale, x_zp?, y_scale, y_zp?; kernel_shape, strides, pads, auto_pad, ceil_mode,
// count_include_pad over 1-3 spatial axes (NCHW; channels_last = 1 refused, dilations must be 1, as ORT's).
class QLinearAveragePoolKernel final : public Kernel {
 public:
  explicit QLinearAveragePoolKernel(const NodeInfo& n) : include_pad_(n.attrs.get_int("count_include_pad", 0) != 0) {
    if (n.attrs.get_int("channels_last", 0) != 0)
      throw UnsupportedError(n.label() + ": channels_last = 1 is not supported; qtool runs QLinearAveragePool on NCHW");
  }
  void run(KernelContext& ctx) override {
    const NodeInfo& node = ctx.node;
    const Tensor& X = ctx.input(0);
    if (X.rank() < 3 || X.rank() > 5)
      throw UnsupportedError(node.label() + ": X " + shape_str(X.shape()) + " must have 1 to 3 spatial axes");
    const float xs = scalar_scale(ctx.input(1), node, "x_scale"), ys = scalar_scale(ctx.input(3), node, "y_scale");
    const int32_t zx = scalar_zero_point(opt(ctx, 2), node, "x_zero_point");
    const int32_t zy = scalar_zero_point(opt(ctx, 4), node, "y_zero_point");
    const size_t nd = static_cast<size_t>(X.rank() - 2);
    const compute::Window win = compute::Window::parse(node, nd, {});
    for (int64_t d : win.dilations)
      if (d != 1) throw UnsupportedError(node.label() + ": dilations other than 1 are not supported (nor by ORT)");
    std::vector<int64_t> pads;
    const std::vector<int64_t> in(X.shape().begin() + 2, X.shape().end()), out = win.output_dims(node, in, pads);
    // As 3-D with unit leading axes.
    int64_t I[3] = {1, 1, 1}, O[3] = {1, 1, 1}, K[3] = {1, 1, 1}, S[3] = {1, 1, 1}, P[3] = {0, 0, 0};
    for (size_t d = 0; d < nd; ++d) {
      const size_t e = 3 - nd + d;
      I[e] = in[d], O[e] = out[d], K[e] = win.kernel[d], S[e] = win.strides[d], P[e] = pads[d];
    }
    Shape yshape{X.dim(0), X.dim(1)};
    yshape.insert(yshape.end(), out.begin(), out.end());
    Tensor Y(X.dtype(), yshape);
    const int64_t planes = X.dim(0) * X.dim(1), iv = I[0] * I[1] * I[2], ov = O[0] * O[1] * O[2];
    dispatch_8bit(X, node, "X", [&]<class T>() {
      parallel_range(
          planes, ctx.threads,
          [&](int64_t p0, int64_t p1) {
            std::vector<float> f(static_cast<size_t>(iv));
            for (int64_t p = p0; p < p1; ++p) {
              const T* x = X.data<T>() + p * iv;
              for (int64_t i = 0; i < iv; ++i) f[static_cast<size_t>(i)] = xs * static_cast<float>(int32_t{x[i]} - zx);
              T* y = Y.data<T>() + p * ov;
              for (int64_t od = 0; od < O[0]; ++od)
                for (int64_t oh = 0; oh < O[1]; ++oh)
                  for (int64_t ow = 0; ow < O[2]; ++ow) {
                    int64_t lo[3], hi[3];
                    const int64_t o3[3] = {od, oh, ow};
                    for (int e = 0; e < 3; ++e) {
                      lo[e] = o3[e] * S[e] - P[e];
                      hi[e] = std::min(lo[e] + K[e], I[e]);
                      lo[e] = std::max<int64_t>(lo[e], 0);
                    }
                    float sum = 0;
                    for (int64_t d = lo[0]; d < hi[0]; ++d)
                      for (int64_t h = lo[1]; h < hi[1]; ++h)
                        for (int64_t w = lo[2]; w < hi[2]; ++w)
                          sum += f[static_cast<size_t>((d * I[1] + h) * I[2] + w)];
                    const int64_t count =
                        include_pad_ ? K[0] * K[1] * K[2] : (hi[0] - lo[0]) * (hi[1] - lo[1]) * (hi[2] - lo[2]);
                    sum /= static_cast<float>(std::max<int64_t>(count, 1));
                    y[(od * O[1] + oh) * O[2] + ow] =
                        saturate<T>(static_cast<int32_t>(std::nearbyint(sum / ys + static_cast<float>(zy))));
                  }
            }
          },
          1);
    });
    ctx.outputs[0] = std::move(Y);
  }

 private:
  bool include_pad_;
};

// QLinearSoftmax: inputs X, X_scale, X_zp?, Y_scale, Y_zp?; attributes opset (required) and axis.
class QLinearSoftmaxKernel final : public Kernel {
 public:
  explicit QLinearSoftmaxKernel(const NodeInfo& n) : opset_(n.attrs.require_int("opset")) {
    axis_ = n.attrs.get_int("axis", opset_ < 13 ? 1 : -1);
  }
  void run(KernelContext& ctx) override {
    const NodeInfo& node = ctx.node;
    const Tensor& X = ctx.input(0);
    const float xs = scalar_scale(ctx.input(1), node, "X_scale"), ys = scalar_scale(ctx.input(3), node, "Y_scale");
    const int32_t zy = scalar_zero_point(opt(ctx, 4), node, "Y_zero_point");
    const int64_t axis = normalize_axis(axis_, std::max<int64_t>(X.rank(), 1), node);
    int64_t outer = 1, D = 1, inner = 1;
    for (int64_t d = 0; d < X.rank(); ++d) (d < axis ? outer : d == axis || opset_ < 13 ? D : inner) *= X.dim(d);
    Tensor Y(X.dtype(), X.shape());
    if (X.numel() == 0) {
      ctx.outputs[0] = std::move(Y);
      return;
    }
    const double shift =
        std::max(0.0, std::log(static_cast<double>(std::numeric_limits<float>::max()) / static_cast<double>(D)) - 5.0) /
        xs;
    float e[256];
    for (int i = 0; i < 256; ++i) e[i] = static_cast<float>(std::exp((i - 255 + shift) * static_cast<double>(xs)));
    const float ys_inv = std::floor(1.0f / ys);
    dispatch_8bit(X, node, "X", [&]<class T>() {
      const T* x = X.data<T>();
      T* y = Y.data<T>();
      parallel_range(
          outer * inner, ctx.threads,
          [&](int64_t r0, int64_t r1) {
            for (int64_t r = r0; r < r1; ++r) {
              const int64_t base = (r / inner) * D * inner + r % inner;
              T mx = x[base];
              for (int64_t j = 1; j < D; ++j) mx = std::max(mx, x[base + j * inner]);
              float sum = 0;
              for (int64_t j = 0; j < D; ++j) sum += e[int32_t{x[base + j * inner]} - mx + 255];
              for (int64_t j = 0; j < D; ++j) {
                const float t = e[int32_t{x[base + j * inner]} - mx + 255];
                y[base + j * inner] = sum == 0
                                          ? saturate<T>(zy)
                                          : saturate<T>(static_cast<int32_t>(std::nearbyint(t * ys_inv / sum)) + zy);
              }
            }
          },
          1);
    });
    ctx.outputs[0] = std::move(Y);
  }

 private:
  int64_t opset_, axis_ = -1;
};

}  // namespace

std::unique_ptr<Kernel> make_qlinear_softmax(const NodeInfo& n) { return std::make_unique<QLinearSoftmaxKernel>(n); }
std::unique_ptr<Kernel> make_qlinear_average_pool(const NodeInfo& n) {
  return std::make_unique<QLinearAveragePoolKernel>(n);
}
std::unique_ptr<Kernel> make_qlinear_binary(const NodeInfo& n) { return std::make_unique<QLinearBinaryKernel>(n); }
std::unique_ptr<Kernel> make_qlinear_lookup(const NodeInfo& n) { return std::make_unique<QLinearLookupKernel>(n); }
std::unique_ptr<Kernel> make_qlinear_global_avg_pool(const NodeInfo& n) {
  return std::make_unique<QLinearGlobalAvgPoolKernel>(n);
}
std::unique_ptr<Kernel> make_qlinear_concat(const NodeInfo& n) { return std::make_unique<QLinearConcatKernel>(n); }

}  // namespace qtool::runtime::kernels
