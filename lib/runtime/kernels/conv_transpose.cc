// ConvTranspose (opset 1-21), float32, any number of spatial axes.
//
// Y[n, m, i*stride - pad_begin + k*dilation] += X[n, c, i] * W[c, m', k]   (m = group(c)*M/group + m')
// plus B[m]. Output size per axis: stride*(in-1) + output_padding + (k-1)*dilation + 1 - pad_begin - pad_end,
// or output_shape when given (its padding split in halves, the larger half at the end unless
// auto_pad is SAME_LOWER, as the ONNX backend tests expect), or in*stride with auto_pad SAME_*.
//
// Fast path: col = W_g^T x X_g with one sgemm per image and group, then col2im adds col into Y.
// Reference twin: conv_transpose_ref (direct scatter loops).
#include <algorithm>

#include "core/checked.h"
#include "runtime/kernels/blas.h"
#include "runtime/kernels/compute_common.h"
#include "runtime/kernels/im2col.h"
#include "runtime/kernels/kernels.h"
#include "runtime/kernels/reference.h"

namespace qtool::runtime::kernels {
namespace {
using namespace compute;

class ConvTransposeKernel final : public Kernel {
 public:
  explicit ConvTransposeKernel(const NodeInfo& node) : node_(node) {
    group_ = node.attrs.get_int("group", 1);
    if (group_ < 1) throw BadInputError(node.label() + ": group must be >= 1");
    output_padding_ = node.attrs.get_ints("output_padding");
    output_shape_ = node.attrs.get_ints("output_shape");
  }

  void run(KernelContext& ctx) override {
    const auto [X, W, B, nd] = conv_operands(ctx);
    Window win = Window::parse(node_, nd, {W.shape().begin() + 2, W.shape().end()});
    const int64_t N = X.dim(0), C = X.dim(1), Mg = W.dim(1), M = checked_mul(Mg, group_, "output channels");
    if (W.dim(0) != C || C % group_ != 0)
      throw BadInputError(node_.label() + ": X has " + std::to_string(C) + " channels but W " + shape_str(W.shape()) +
                          " expects " + std::to_string(W.dim(0)));
    if (B && B->numel() != M)
      throw BadInputError(node_.label() + ": bias B has " + std::to_string(B->numel()) + " values, expected " +
                          std::to_string(M));
    std::vector<int64_t> opad = output_padding_.empty() ? std::vector<int64_t>(nd, 0) : output_padding_;
    if (opad.size() != nd) throw BadInputError(node_.label() + ": output_padding needs one value per spatial axis");
    std::vector<int64_t> oshape = output_shape_;
    if (oshape.size() == nd + 2) oshape.erase(oshape.begin(), oshape.begin() + 2);
    if (!oshape.empty() && oshape.size() != nd)
      throw BadInputError(node_.label() + ": output_shape needs one value per spatial axis");

    ConvGeom g;  // im2col geometry with the roles swapped: "in" is Y's spatial shape, "out" is X's
    g.out.assign(X.shape().begin() + 2, X.shape().end());
    g.in.resize(nd);
    g.pads = win.pads;
    for (size_t d = 0; d < nd; ++d) {
      constexpr std::string_view what = "output size arithmetic (strides, pads, dilations, output_shape)";
      const int64_t ext = checked_add(checked_mul(win.kernel[d] - 1, win.dilations[d], what), 1, what);
      const int64_t full =
          checked_add(checked_add(checked_mul(win.strides[d], g.out[d] - 1, what), opad[d], what), ext, what);
      const bool same = win.auto_pad == AutoPad::SameUpper || win.auto_pad == AutoPad::SameLower;
      if (!oshape.empty() || same) {
        const int64_t target = !oshape.empty() ? oshape[d] : checked_mul(g.out[d], win.strides[d], what);
        const int64_t total = checked_sub(full, target, what);
        const int64_t small = total / 2, big = total - small;
        if (win.auto_pad == AutoPad::SameLower) {
          g.pads[d] = big;
          g.pads[d + nd] = small;
        } else {
          g.pads[d] = small;
          g.pads[d + nd] = big;
        }
        g.in[d] = target;
      } else {
        if (win.auto_pad == AutoPad::Valid) g.pads[d] = g.pads[d + nd] = 0;
        g.in[d] = checked_sub(checked_sub(full, g.pads[d], what), g.pads[d + nd], what);
      }
      if (g.in[d] <= 0)
        throw BadInputError(node_.label() + ": output spatial axis " + std::to_string(d) + " would have size " +
                            std::to_string(g.in[d]));
    }
    g.kernel = win.kernel;
    g.strides = win.strides;
    g.dilations = win.dilations;
    g.channels = Mg;
    Shape yshape{N, M};
    yshape.insert(yshape.end(), g.in.begin(), g.in.end());
    Tensor Y(DType::Float32, yshape);
    ctx.outputs[0] = Y;
    const int64_t iv = g.in_volume(), ov = g.out_volume(), kv = g.kernel_volume();
    const int64_t Cg = C / group_;
    float* y = Y.data<float>();
    for (int64_t m = 0; m < N * M; ++m) std::fill_n(y + m * iv, iv, B ? B->data<float>()[m % M] : 0.f);
    float* col = scratch_floats(static_cast<size_t>(Mg * kv * ov));
    for (int64_t n = 0; n < N; ++n)
      for (int64_t gi = 0; gi < group_; ++gi) {
        const float* wg = W.data<float>() + gi * Cg * Mg * kv;
        const float* xg = X.data<float>() + (n * C + gi * Cg) * ov;
        sgemm(true, false, Mg * kv, ov, Cg, 1.f, wg, Mg * kv, xg, ov, 0.f, col, ov, ctx.threads);
        col2im_add(g, col, y + (n * M + gi * Mg) * iv, ctx.threads);
      }
  }

 private:
  NodeInfo node_;
  int64_t group_ = 1;
  std::vector<int64_t> output_padding_, output_shape_;
};

}  // namespace

std::unique_ptr<Kernel> make_conv_transpose(const NodeInfo& node) {
  return std::make_unique<ConvTransposeKernel>(node);
}

namespace compute {
Tensor conv_transpose_ref(const Tensor& X, const Tensor& W, const Tensor* B, const ConvParams& p,
                          const std::vector<int64_t>& out) {
  const size_t nd = static_cast<size_t>(X.rank() - 2);
  const int64_t N = X.dim(0), C = X.dim(1), Mg = W.dim(1), M = Mg * p.group, Cg = C / p.group;
  Shape ys{N, M};
  ys.insert(ys.end(), out.begin(), out.end());
  Tensor Y = Tensor::zeros(DType::Float32, ys);
  const Shape xin(X.shape().begin() + 2, X.shape().end());
  const Shape ksz(W.shape().begin() + 2, W.shape().end());
  const Shape osz(out.begin(), out.end());
  const int64_t iv = shape_numel(xin), kv = shape_numel(ksz), ov = shape_numel(osz);
  const auto is = strides_of(xin), ks = strides_of(ksz), os = strides_of(osz);
  float* y = Y.data<float>();
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t i = 0; i < iv; ++i)
        for (int64_t m = 0; m < Mg; ++m)
          for (int64_t k = 0; k < kv; ++k) {
            int64_t off = 0;
            bool inside = true;
            for (size_t d = 0; d < nd; ++d) {
              const int64_t o = (i / is[d]) % xin[d] * p.strides[d] - p.pads[d] + (k / ks[d]) % ksz[d] * p.dilations[d];
              inside = inside && o >= 0 && o < osz[d];
              off += o * os[d];
            }
            if (!inside) continue;
            const int64_t mm = (c / Cg) * Mg + m;
            y[(n * M + mm) * ov + off] +=
                X.data<float>()[(n * C + c) * iv + i] * W.data<float>()[(c * Mg + m) * kv + k];
          }
  if (B)
    for (int64_t j = 0; j < N * M; ++j)
      for (int64_t o = 0; o < ov; ++o) y[j * ov + o] += B->data<float>()[j % M];
  return Y;
}
}  // namespace compute

}  // namespace qtool::runtime::kernels
