// GridSample (opset 16; opset 20's spellings), float32, 2-D: X [N, C, H, W], grid [N, H_out, W_out, 2] of (x, y)
// in [-1, 1]; output [N, C, H_out, W_out]. As ONNX Runtime's CPU kernel:
//   x = ((gx + 1) · W - 1) / 2 (align_corners 0: -1 and 1 are the outer pixel edges) or (gx + 1) / 2 · (W - 1)
//   (align_corners 1: the outer pixel centres); y likewise with H.
//   mode nearest: round half to even; bilinear (20: linear): the 4 neighbours; bicubic (20: cubic): the 4x4
//   neighbours with Keys' kernel, a = -0.75.
//   padding_mode zeros: taps outside the image read 0; border: an out-of-range coordinate is clamped to
//   [0, W - 1] and taps are clamped; reflection: an out-of-range coordinate is reflected at the borders (the
//   pixel edges, or centres with align_corners) until inside, and taps are reflected the same way.
//   Cubic pads each of its 16 taps, not the coordinate (ONNX Runtime 1.30 and PyTorch agree on this).
// A NaN coordinate gives NaN; an infinite one reads 0 (zeros), the border pixel (border) or NaN (reflection).
// Volumetric grids (opset 20, X of rank 5) are not supported.
#include <cmath>
#include <limits>
#include <string>

#include "runtime/kernels/blas.h"
#include "runtime/kernels/compute_common.h"
#include "runtime/kernels/kernels.h"

namespace qtool::runtime::kernels {
namespace {
using namespace compute;

enum class Interp { Nearest, Linear, Cubic };
enum class Padding { Zeros, Border, Reflection };

// Reflects x at lo and hi until it lies in [lo, hi] (fmod instead of an integer count: no overflow).
double reflect(double x, double lo, double hi) {
  const double range = hi - lo;
  if (range <= 0) return lo;
  if (x < lo) {
    const double d = lo - x, r = std::fmod(d, range);
    return std::fmod(std::floor(d / range), 2.0) == 0 ? lo + r : hi - r;
  }
  if (x > hi) {
    const double d = x - hi, r = std::fmod(d, range);
    return std::fmod(std::floor(d / range), 2.0) == 0 ? hi - r : lo + r;
  }
  return x;
}

void cubic_coeffs(float x, float c[4]) {
  constexpr float a = -0.75f;
  x = std::abs(x);
  c[0] = ((a * (x + 1) - 5 * a) * (x + 1) + 8 * a) * (x + 1) - 4 * a;
  c[1] = ((a + 2) * x - (a + 3)) * x * x + 1;
  c[2] = ((a + 2) * (1 - x) - (a + 3)) * (1 - x) * (1 - x) + 1;
  c[3] = ((a * (2 - x) - 5 * a) * (2 - x) + 8 * a) * (2 - x) - 4 * a;
}

class GridSampleKernel final : public Kernel {
 public:
  explicit GridSampleKernel(const NodeInfo& n) : align_corners_(n.attrs.get_int("align_corners", 0) != 0) {
    const std::string mode = n.attrs.get_string("mode", n.opset >= 20 ? "linear" : "bilinear");
    const bool v20 = n.opset >= 20;
    if (mode == "nearest")
      interp_ = Interp::Nearest;
    else if (mode == (v20 ? "linear" : "bilinear"))
      interp_ = Interp::Linear;
    else if (mode == (v20 ? "cubic" : "bicubic"))
      interp_ = Interp::Cubic;
    else
      throw BadInputError(n.label() + ": mode \"" + mode + "\" is not one of " +
                          (v20 ? "\"linear\", \"nearest\", \"cubic\"" : "\"bilinear\", \"nearest\", \"bicubic\"") +
                          " (opset " + std::to_string(n.opset) + ")");
    const std::string pad = n.attrs.get_string("padding_mode", "zeros");
    if (pad == "zeros")
      padding_ = Padding::Zeros;
    else if (pad == "border")
      padding_ = Padding::Border;
    else if (pad == "reflection")
      padding_ = Padding::Reflection;
    else
      throw BadInputError(n.label() + ": padding_mode \"" + pad +
                          "\" is not one of \"zeros\", \"border\", \"reflection\"");
  }

  void run(KernelContext& ctx) override {
    const NodeInfo& node = ctx.node;
    const Tensor& X = float_input(ctx, 0);
    const Tensor& grid = float_input(ctx, 1);
    if (X.rank() == 5)
      throw UnsupportedError(node.label() + ": volumetric GridSample (X of rank 5) is not supported (rank 4 is)");
    if (X.rank() != 4) throw BadInputError(node.label() + ": X must be [N, C, H, W], got " + shape_str(X.shape()));
    if (grid.rank() != 4 || grid.dim(0) != X.dim(0) || grid.dim(3) != 2)
      throw BadInputError(node.label() + ": grid must be [" + std::to_string(X.dim(0)) + ", H_out, W_out, 2], got " +
                          shape_str(grid.shape()));
    const int64_t N = X.dim(0), C = X.dim(1), H = X.dim(2), W = X.dim(3), Ho = grid.dim(1), Wo = grid.dim(2);
    Tensor Y(DType::Float32, {N, C, Ho, Wo});
    if (Y.numel() == 0) {
      ctx.outputs[0] = std::move(Y);
      return;
    }
    if (H == 0 || W == 0) throw BadInputError(node.label() + ": X has an empty spatial size " + shape_str(X.shape()));
    const float* x = X.data<float>();
    const float* g = grid.data<float>();
    float* y = Y.data<float>();
    const int64_t plane_out = Ho * Wo;
    const int64_t taps = interp_ == Interp::Cubic ? 16 : interp_ == Interp::Linear ? 4 : 1;
    parallel_for(N * C, threads_for(Y.numel() * taps * 4, ctx.threads), [&](int64_t nc) {
      const float* img = x + nc * H * W;
      const float* gn = g + (nc / C) * plane_out * 2;
      for (int64_t i = 0; i < plane_out; ++i) y[nc * plane_out + i] = sample(img, H, W, gn[2 * i], gn[2 * i + 1]);
    });
    ctx.outputs[0] = std::move(Y);
  }

 private:
  // The input value at integer tap (r, c) under the padding mode.
  float pixel(const float* img, int64_t H, int64_t W, int64_t r, int64_t c) const {
    switch (padding_) {
      case Padding::Zeros:
        return (r >= 0 && r < H && c >= 0 && c < W) ? img[r * W + c] : 0.f;
      case Padding::Border:
        return img[std::clamp<int64_t>(r, 0, H - 1) * W + std::clamp<int64_t>(c, 0, W - 1)];
      case Padding::Reflection: {
        const auto [x_lo, x_hi] = edges(W);
        const auto [y_lo, y_hi] = edges(H);
        // Reflected taps stay within [-0.5, size - 0.5]; truncation (as ORT) and the clamp keep them inside.
        const int64_t cc = static_cast<int64_t>(reflect(static_cast<double>(c), x_lo, x_hi));
        const int64_t rr = static_cast<int64_t>(reflect(static_cast<double>(r), y_lo, y_hi));
        return img[std::clamp<int64_t>(rr, 0, H - 1) * W + std::clamp<int64_t>(cc, 0, W - 1)];
      }
    }
    return 0.f;
  }
  // The borders coordinates are reflected at: pixel edges, or outer pixel centres with align_corners.
  std::pair<double, double> edges(int64_t size) const {
    return align_corners_ ? std::pair{0.0, static_cast<double>(size - 1)} : std::pair{-0.5, size - 0.5};
  }
  float denormalize(float v, int64_t size) const {
    return align_corners_ ? (v + 1) / 2.f * static_cast<float>(size - 1)
                          : ((v + 1) * static_cast<float>(size) - 1) / 2.f;
  }

  // Cubic taps under border or reflection padding: the coordinate itself is not padded (ORT and PyTorch pad each
  // tap), so a far coordinate is brought near the image first, leaving every tap's value unchanged: border taps
  // beyond the edge all read the edge pixel; reflected taps repeat with period 2·(hi - lo) (a whole number).
  float bounded_tap_coordinate(float v, int64_t size) const {
    const auto [lo, hi] = edges(size);
    if (v >= lo - 4 && v <= hi + 4) return v;
    if (padding_ == Padding::Border)  // a whole-pixel shift keeps the fraction, so the weights, exactly
      return static_cast<float>(v < lo ? v + std::floor(lo - 3 - v) : v - std::floor(v - (hi + 3)));
    const double period = 2 * (hi - lo);
    if (period <= 0) return static_cast<float>(lo);
    return static_cast<float>(lo + std::fmod(v - lo, period) + (v < lo ? period : 0.0));
  }

  float sample(const float* img, int64_t H, int64_t W, float gx, float gy) const {
    if (std::isnan(gx) || std::isnan(gy)) return std::numeric_limits<float>::quiet_NaN();
    float fx = denormalize(gx, W), fy = denormalize(gy, H);
    // An infinite coordinate on a 1-pixel axis with align_corners denormalises to inf·0 = NaN: NaN as well.
    if (std::isnan(fx) || std::isnan(fy)) return std::numeric_limits<float>::quiet_NaN();
    if (interp_ == Interp::Nearest) {
      fx = std::nearbyint(fx);
      fy = std::nearbyint(fy);
    }
    const auto [x_lo, x_hi] = edges(W);
    const auto [y_lo, y_hi] = edges(H);
    if ((fx < x_lo || fx > x_hi || fy < y_lo || fy > y_hi) &&
        (interp_ != Interp::Cubic || padding_ == Padding::Zeros)) {
      if (padding_ == Padding::Border) {
        fx = std::clamp(fx, 0.f, static_cast<float>(W - 1));
        fy = std::clamp(fy, 0.f, static_cast<float>(H - 1));
      } else if (padding_ == Padding::Reflection) {
        if (std::isinf(fx) || std::isinf(fy)) return std::numeric_limits<float>::quiet_NaN();
        fx = static_cast<float>(reflect(fx, x_lo, x_hi));
        fy = static_cast<float>(reflect(fy, y_lo, y_hi));
      } else {
        // Zeros: a coordinate 3 or more pixels outside reads only zero taps; clamping it there keeps the integer
        // conversions below defined for any float.
        fx = std::clamp(fx, static_cast<float>(x_lo - 4), static_cast<float>(x_hi + 4));
        fy = std::clamp(fy, static_cast<float>(y_lo - 4), static_cast<float>(y_hi + 4));
      }
    }
    if (interp_ == Interp::Cubic && padding_ != Padding::Zeros) {
      if (std::isinf(fx) || std::isinf(fy))
        return padding_ == Padding::Border ? pixel(img, H, W, fy > 0 ? H : -1, fx > 0 ? W : -1)
                                           : std::numeric_limits<float>::quiet_NaN();
      fx = bounded_tap_coordinate(fx, W);
      fy = bounded_tap_coordinate(fy, H);
    }
    if (interp_ == Interp::Nearest) return pixel(img, H, W, static_cast<int64_t>(fy), static_cast<int64_t>(fx));
    const int64_t x1 = static_cast<int64_t>(std::floor(fx)), y1 = static_cast<int64_t>(std::floor(fy));
    if (interp_ == Interp::Linear) {
      const float p11 = pixel(img, H, W, y1, x1), p12 = pixel(img, H, W, y1, x1 + 1);
      const float p21 = pixel(img, H, W, y1 + 1, x1), p22 = pixel(img, H, W, y1 + 1, x1 + 1);
      const float dx2 = static_cast<float>(x1 + 1) - fx, dx1 = fx - static_cast<float>(x1);
      const float dy2 = static_cast<float>(y1 + 1) - fy, dy1 = fy - static_cast<float>(y1);
      return dy2 * (dx2 * p11 + dx1 * p12) + dy1 * (dx2 * p21 + dx1 * p22);
    }
    const int64_t x0 = x1 - 1, y0 = y1 - 1;
    float cx[4], cy[4], v[4];
    cubic_coeffs(fx - static_cast<float>(x0) - 1, cx);
    cubic_coeffs(fy - static_cast<float>(y0) - 1, cy);
    for (int64_t r = 0; r < 4; ++r) {
      v[r] = 0;
      for (int64_t c = 0; c < 4; ++c) v[r] += cx[c] * pixel(img, H, W, y0 + r, x0 + c);
    }
    return cy[0] * v[0] + cy[1] * v[1] + cy[2] * v[2] + cy[3] * v[3];
  }

  bool align_corners_;
  Interp interp_ = Interp::Linear;
  Padding padding_ = Padding::Zeros;
};

// AffineGrid (opset 20): theta [N, 2, 3] with size [N, C, H, W], or theta [N, 3, 4] with size [N, C, D, H, W];
// grid[n, (d,) h, w] = theta[n] · (x_w, y_h, (z_d,) 1), the base coordinates spread over [-1, 1]: pixel centres
// (2i + 1)/L - 1 (align_corners 0) or -1 + 2i/(L - 1) (align_corners 1; for L = 1 ONNX Runtime
// 1.30 answers 1, Eigen's LinSpaced, and so does qtool: PyTorch's affine_grid answers 0). Output [N, (D,) H, W, 2 or
// 3], GridSample's grid.
void affine_grid(KernelContext& ctx) {
  const NodeInfo& node = ctx.node;
  const bool align = node.attrs.get_int("align_corners", 0) != 0;
  const Tensor& theta = float_input(ctx, 0);
  const std::vector<int64_t> size = read_ints(ctx.input(1), node, "size");
  const int64_t nd = static_cast<int64_t>(size.size()) - 2;  // 2 or 3 spatial axes
  if ((nd != 2 && nd != 3) || theta.rank() != 3 || theta.dim(1) != nd || theta.dim(2) != nd + 1 ||
      theta.dim(0) != size[0])
    throw BadInputError(node.label() + ": theta " + shape_str(theta.shape()) + " and size " + shape_str(size) +
                        " must be [N, 2, 3] with [N, C, H, W] or [N, 3, 4] with [N, C, D, H, W]");
  for (int64_t d : size)
    if (d < 0) throw BadInputError(node.label() + ": size has a negative dimension");
  Shape out = {size[0]};
  for (int64_t i = 0; i < nd; ++i) out.push_back(size[2 + i]);
  out.push_back(nd);
  Tensor Y(DType::Float32, out);
  const int64_t D = nd == 3 ? size[2] : 1, H = size[nd == 3 ? 3 : 2], W = size[nd == 3 ? 4 : 3];
  auto base = [&](int64_t i, int64_t L) -> double {
    if (align) return L > 1 ? -1.0 + 2.0 * static_cast<double>(i) / static_cast<double>(L - 1) : 1.0;
    return (2.0 * static_cast<double>(i) + 1.0) / static_cast<double>(L) - 1.0;
  };
  const float* t = theta.data<float>();
  float* y = Y.data<float>();
  for (int64_t n = 0; n < size[0]; ++n) {
    const float* tn = t + n * nd * (nd + 1);
    for (int64_t d = 0; d < D; ++d)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t w = 0; w < W; ++w) {
          const double v[4] = {base(w, W), base(h, H), nd == 3 ? base(d, D) : 1.0, 1.0};
          for (int64_t r = 0; r < nd; ++r) {
            double acc = 0;
            for (int64_t c = 0; c <= nd; ++c) acc += tn[r * (nd + 1) + c] * v[c];
            *y++ = static_cast<float>(acc);
          }
        }
  }
  ctx.outputs[0] = std::move(Y);
}

}  // namespace

std::unique_ptr<Kernel> make_affine_grid(const NodeInfo& n) { return make_function_kernel<affine_grid>(n); }
std::unique_ptr<Kernel> make_grid_sample(const NodeInfo& n) { return std::make_unique<GridSampleKernel>(n); }

}  // namespace qtool::runtime::kernels
