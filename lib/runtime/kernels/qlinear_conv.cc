// Quantized convolutions, as ONNX Runtime 1.30's CPU kernels compute them (arithmetic in quantized_ops.h):
//
//   acc[n, m, o...] = sum_{c in group(m), k...} (X[n, c, o*stride - pad + k*dilation] - x_zp) * (W[m, c, k...] -
//   w_zp[m]) ConvInteger (ai.onnx 10)  Y = acc (int32) QLinearConv (ai.onnx 10)  Y = requantize(acc + B[m], x_scale *
//   w_scale[m] / y_scale, y_zp)
//
// Taps in the padding read x_zp (ORT pads its im2col buffer with the zero point), i.e. contribute 0 to acc. Any
// number of spatial axes, groups, auto_pad. x_zp is one value; w_zp and w_scale one value or one per output
// channel. Computed per image and group as one integer GEMM W'[Mg, Cg*k] x col[Cg*k, out] (int_gemm).
#include <cstring>

#include "core/checked.h"
#include "runtime/kernels/compute_common.h"
#include "runtime/kernels/im2col.h"
#include "runtime/kernels/quantized_ops.h"

namespace qtool::runtime::kernels {
namespace {
using compute::ConvGeom;
using compute::Window;

// Row k (a kernel tap) of one channel's im2col (im2col.h), on centred int16 values: 0 where the tap is in the padding.
// 2-D walks output rows and columns directly; other ranks decode each position (compute::tap_offset).
void col_row(const ConvGeom& g, const int16_t* im, int64_t k, int16_t* dst) {
  if (g.in.size() != 2) {
    for (int64_t o = 0; o < g.out_volume(); ++o) {
      const int64_t off = compute::tap_offset(g, o, k);
      dst[o] = off < 0 ? int16_t{0} : im[off];
    }
    return;
  }
  const int64_t IH = g.in[0], IW = g.in[1], OH = g.out[0], OW = g.out[1];
  const int64_t ih0 = (k / g.kernel[1]) * g.dilations[0] - g.pads[0];
  const int64_t iw0 = (k % g.kernel[1]) * g.dilations[1] - g.pads[1];
  for (int64_t oh = 0; oh < OH; ++oh, dst += OW) {
    const int64_t ih = oh * g.strides[0] + ih0;
    if (ih < 0 || ih >= IH) {
      std::fill(dst, dst + OW, int16_t{0});
      continue;
    }
    const int16_t* src = im + ih * IW;
    for (int64_t ow = 0; ow < OW; ++ow) {
      const int64_t iw = ow * g.strides[1] + iw0;
      dst[ow] = iw < 0 || iw >= IW ? int16_t{0} : src[iw];
    }
  }
}

class QuantConvKernel final : public Kernel {
 public:
  QuantConvKernel(const NodeInfo& n, bool qlinear) : qlinear_(qlinear), group_(n.attrs.get_int("group", 1)) {
    if (group_ < 1) throw BadInputError(n.label() + ": group must be >= 1");
    in_ = qlinear ? Inputs{0, 2, 3, 5} : Inputs{0, 2, 1, 3};
  }

  void run(KernelContext& ctx) override {
    const NodeInfo& node = ctx.node;
    const Tensor& X = ctx.input(static_cast<size_t>(in_.x));
    const Tensor& W = ctx.input(static_cast<size_t>(in_.w));
    require_8bit(X, node, "x");
    require_8bit(W, node, "w");
    if (X.rank() < 3 || W.rank() != X.rank())
      throw BadInputError(node.label() + ": x " + shape_str(X.shape()) + " and w " + shape_str(W.shape()) +
                          " must have the same rank >= 3");
    const size_t nd = static_cast<size_t>(X.rank() - 2);
    const Window win = Window::parse(node, nd, {W.shape().begin() + 2, W.shape().end()});
    const int64_t N = X.dim(0), C = X.dim(1), M = W.dim(0);
    if (C != checked_mul(W.dim(1), group_, "w channels * group") || M % group_ != 0)
      throw BadInputError(node.label() + ": x has " + std::to_string(C) + " channels but w " + shape_str(W.shape()) +
                          " with group " + std::to_string(group_) + " expects " + std::to_string(W.dim(1) * group_));
    ConvGeom g;
    g.in.assign(X.shape().begin() + 2, X.shape().end());
    g.out = win.output_dims(node, g.in, g.pads);
    g.kernel = win.kernel;
    g.strides = win.strides;
    g.dilations = win.dilations;
    g.channels = C / group_;
    const int64_t kv = g.kernel_volume(), iv = g.in_volume(), ov = g.out_volume();
    const int64_t Mg = M / group_, rows = g.channels * kv;

    const Tensor* x_zp = opt(ctx, in_.x_zp);
    const Tensor* w_zp = opt(ctx, in_.w_zp);
    const int32_t zx = scalar_zero_point(x_zp, node, "x_zero_point");
    if (w_zp && w_zp->numel() != 1 && w_zp->numel() != M)
      throw BadInputError(node.label() + ": w_zero_point " + shape_str(w_zp->shape()) +
                          " is neither one value nor one per output channel (" + std::to_string(M) + ")");
    std::vector<int16_t> x_c(static_cast<size_t>(X.numel())), w_c(static_cast<size_t>(W.numel()));
    const Tensor zx_t = X.dtype() == DType::Int8 ? Tensor::scalar<int8_t>(static_cast<int8_t>(zx))
                                                 : Tensor::scalar<uint8_t>(static_cast<uint8_t>(zx));
    centered(X, &zx_t, 1, x_c.data(), node, "x");
    centered(W, w_zp, rows, w_c.data(), node, "w");

    Shape ys{N, M};
    ys.insert(ys.end(), g.out.begin(), g.out.end());
    std::vector<int32_t> acc(static_cast<size_t>(N * M * ov));
    std::vector<int16_t> col(static_cast<size_t>(rows * ov));
    for (int64_t n = 0; n < N; ++n)
      for (int64_t gi = 0; gi < group_; ++gi) {
        const int16_t* im = x_c.data() + (n * C + gi * g.channels) * iv;
        parallel_range(
            rows, threads_for(rows * ov, ctx.threads),
            [&](int64_t r0, int64_t r1) {
              for (int64_t r = r0; r < r1; ++r) col_row(g, im + (r / kv) * iv, r % kv, col.data() + r * ov);
            },
            1);
        compute::int_gemm(Mg, ov, rows, w_c.data() + gi * Mg * rows, rows, col.data(), ov,
                          acc.data() + (n * M + gi * Mg) * ov, ov, ctx.threads);
      }

    if (!qlinear_) {
      Tensor Y(DType::Int32, ys);
      std::memcpy(Y.data<int32_t>(), acc.data(), acc.size() * sizeof(int32_t));
      ctx.outputs[0] = std::move(Y);
      return;
    }
    // QLinearConv: + B[m] (int32), then requantize per output channel.
    const float x_s = scalar_scale(ctx.input(1), node, "x_scale");
    const Tensor& w_scale = ctx.input(4);
    if (w_scale.dtype() != DType::Float32 || (w_scale.numel() != 1 && w_scale.numel() != M))
      throw BadInputError(node.label() + ": w_scale " + shape_str(w_scale.shape()) +
                          " is not float with one value or one per output channel (" + std::to_string(M) + ")");
    const float y_s = scalar_scale(ctx.input(6), node, "y_scale");
    const Tensor& yzp = ctx.input(7);
    const int32_t zy = scalar_zero_point(&yzp, node, "y_zero_point");
    const Tensor* B = opt(ctx, 8);
    if (B && (B->dtype() != DType::Int32 || B->numel() != M))
      throw BadInputError(node.label() + ": B " + shape_str(B->shape()) + " " + std::string(dtype_name(B->dtype())) +
                          " is not int32 with one value per output channel (" + std::to_string(M) + ")");
    std::vector<float> scale(static_cast<size_t>(M));
    for (int64_t m = 0; m < M; ++m) {
      scale[static_cast<size_t>(m)] = x_s * w_scale.data<float>()[w_scale.numel() == 1 ? 0 : m] / y_s;
      if (!B) continue;
      const uint32_t b = static_cast<uint32_t>(B->data<int32_t>()[m]);
      for (int64_t n = 0; n < N; ++n)
        for (int64_t o = 0; o < ov; ++o) {
          int32_t& a = acc[static_cast<size_t>((n * M + m) * ov + o)];
          a = static_cast<int32_t>(static_cast<uint32_t>(a) + b);
        }
    }
    ctx.outputs[0] = compute::requantize_all(acc.data(), ys, yzp.dtype(), zy,
                                             [&](int64_t i) { return scale[static_cast<size_t>((i / ov) % M)]; });
  }

 private:
  struct Inputs {
    int x, x_zp, w, w_zp;
  };
  static const Tensor* opt(const KernelContext& ctx, int i) {
    return ctx.has_input(static_cast<size_t>(i)) ? &ctx.input(static_cast<size_t>(i)) : nullptr;
  }

  bool qlinear_;
  int64_t group_;
  Inputs in_{};
};

}  // namespace

std::unique_ptr<Kernel> make_conv_integer(const NodeInfo& n) { return std::make_unique<QuantConvKernel>(n, false); }
std::unique_ptr<Kernel> make_qlinear_conv(const NodeInfo& n) { return std::make_unique<QuantConvKernel>(n, true); }

}  // namespace qtool::runtime::kernels
