// Resize (opsets 10-21) and Upsample (opsets 7-9), float32, any rank.
//
// For each output axis, x_out maps to x_in with coordinate_transformation_mode (scale = out/in, or the
// given scale): half_pixel (x+0.5)/s-0.5; half_pixel_symmetric (opset 19) the same, centred;
// pytorch_half_pixel as half_pixel but 0 when out = 1; align_corners x*(in-1)/(out-1);
// asymmetric x/s; tf_half_pixel_for_nn (x+0.5)/s; tf_crop_and_resize from the roi box, where
// samples outside [0, in-1] take extrapolation_value.
// Then: nearest picks one input index (nearest_mode round_prefer_floor|round_prefer_ceil|floor|ceil);
// linear weights floor(x), floor(x)+1 by 1-t, t; cubic uses floor(x)-1 .. floor(x)+2 with Keys weights
// (cubic_coeff_a), taps outside the input either clamped to the edge or, with exclude_outside, dropped
// and the weights renormalised. Opset 10 and Upsample use asymmetric coordinates and, for nearest, floor where the
// axis grows and ceil where it shrinks (ONNX Runtime's "simple" mode, the reference for these old opsets).
// Opset 18: `axes` restricts scales/sizes/roi to some axes; keep_aspect_ratio_policy not_larger /
// not_smaller scales every listed axis by one factor. antialias = 1 is not supported.
//
// Nearest is one gather pass. Linear and cubic kernels are tensor products, so the kernel resamples one
// axis at a time (identity axes are skipped); the result equals the direct N-D formula.
#include <algorithm>
#include <cmath>

#include "core/checked.h"
#include "core/limits.h"
#include "runtime/kernels/blas.h"
#include "runtime/kernels/compute_common.h"
#include "runtime/kernels/kernels.h"

namespace qtool::runtime::kernels {
namespace {
using namespace compute;

enum class Mode { Nearest, Linear, Cubic };
enum class Coord {
  HalfPixel,
  HalfPixelSymmetric,
  PytorchHalfPixel,
  AlignCorners,
  Asymmetric,
  TfHalfPixelForNN,
  TfCropAndResize
};
enum class NearestMode { RoundPreferFloor, RoundPreferCeil, Floor, Ceil };
enum class AspectPolicy { Stretch, NotLarger, NotSmaller };

struct AxisTaps {
  int64_t in = 0, out = 0;
  int ntaps = 1;
  std::vector<int64_t> idx;   // out * ntaps
  std::vector<float> w;       // out * ntaps
  std::vector<char> outside;  // out: sample outside the input (tf_crop_and_resize)
  bool identity = false;
};

struct ResizeAttrs {
  Mode mode = Mode::Nearest;
  Coord coord = Coord::HalfPixel;
  NearestMode nearest = NearestMode::RoundPreferFloor;
  float cubic_a = -0.75f;
  bool exclude_outside = false;
  float extrapolation = 0.f;
  AspectPolicy policy = AspectPolicy::Stretch;
  std::vector<int64_t> axes;
  bool legacy_nearest = false;  // Upsample / opset-10 Resize: floor, but ceil along an axis that shrinks
};

double to_input_coord(Coord c, double x, double scale, int64_t in, int64_t out, double roi_start, double roi_end) {
  switch (c) {
    case Coord::HalfPixel:
      return (x + 0.5) / scale - 0.5;
    case Coord::HalfPixelSymmetric: {
      const double adjustment = static_cast<double>(out) / (scale * static_cast<double>(in));
      const double center = static_cast<double>(in) / 2;
      const double offset = center * (1 - adjustment);
      return offset + (x + 0.5) / scale - 0.5;
    }
    case Coord::PytorchHalfPixel:
      return out > 1 ? (x + 0.5) / scale - 0.5 : 0.0;
    case Coord::AlignCorners:
      return out == 1 ? 0.0 : x * static_cast<double>(in - 1) / static_cast<double>(out - 1);
    case Coord::Asymmetric:
      return x / scale;
    case Coord::TfHalfPixelForNN:
      return (x + 0.5) / scale;
    case Coord::TfCropAndResize:
      return out > 1 ? roi_start * static_cast<double>(in - 1) +
                           x * (roi_end - roi_start) * static_cast<double>(in - 1) / static_cast<double>(out - 1)
                     : 0.5 * (roi_start + roi_end) * static_cast<double>(in - 1);
  }
  return x;
}

int64_t nearest_index(NearestMode m, double x) {
  const double f = std::floor(x);
  switch (m) {
    case NearestMode::RoundPreferFloor:
      return static_cast<int64_t>(x == f + 0.5 ? f : std::round(x));
    case NearestMode::RoundPreferCeil:
      return static_cast<int64_t>(x == f + 0.5 ? f + 1 : std::round(x));
    case NearestMode::Floor:
      return static_cast<int64_t>(f);
    case NearestMode::Ceil:
      return static_cast<int64_t>(std::ceil(x));
  }
  return static_cast<int64_t>(f);
}

AxisTaps make_taps(const ResizeAttrs& a, int64_t in, int64_t out, double scale, double roi_start, double roi_end) {
  AxisTaps t;
  t.in = in;
  t.out = out;
  t.ntaps = a.mode == Mode::Nearest ? 1 : a.mode == Mode::Linear ? 2 : 4;
  t.idx.resize(out * t.ntaps);
  t.w.resize(out * t.ntaps);
  t.outside.assign(out, 0);
  t.identity = in == out;
  auto clamp = [&](int64_t i) { return std::clamp<int64_t>(i, 0, in - 1); };
  for (int64_t j = 0; j < out; ++j) {
    const double x = to_input_coord(a.coord, static_cast<double>(j), scale, in, out, roi_start, roi_end);
    int64_t* idx = &t.idx[j * t.ntaps];
    float* w = &t.w[j * t.ntaps];
    if (a.coord == Coord::TfCropAndResize && (x < 0 || x > static_cast<double>(in - 1))) {
      t.outside[j] = 1;
      t.identity = false;
      for (int k = 0; k < t.ntaps; ++k) idx[k] = 0, w[k] = 0;
      continue;
    }
    if (a.mode == Mode::Nearest) {
      idx[0] = clamp(nearest_index(a.legacy_nearest && scale < 1 ? NearestMode::Ceil : a.nearest, x));
      w[0] = 1;
    } else if (a.mode == Mode::Linear) {
      const double f = std::floor(x), r = x - f;
      idx[0] = clamp(static_cast<int64_t>(f));
      idx[1] = clamp(static_cast<int64_t>(f) + 1);
      w[0] = static_cast<float>(1 - r);
      w[1] = static_cast<float>(r);
    } else {
      const double f = std::floor(x), r = x - f, A = a.cubic_a;
      const double c[4] = {((A * (r + 1) - 5 * A) * (r + 1) + 8 * A) * (r + 1) - 4 * A,
                           ((A + 2) * r - (A + 3)) * r * r + 1, ((A + 2) * (1 - r) - (A + 3)) * (1 - r) * (1 - r) + 1,
                           ((A * (2 - r) - 5 * A) * (2 - r) + 8 * A) * (2 - r) - 4 * A};
      double sum = 0;
      double cw[4];
      for (int k = 0; k < 4; ++k) {
        const int64_t i = static_cast<int64_t>(f) - 1 + k;
        cw[k] = a.exclude_outside && (i < 0 || i >= in) ? 0.0 : c[k];
        sum += cw[k];
        idx[k] = clamp(i);
      }
      for (int k = 0; k < 4; ++k) w[k] = static_cast<float>(a.exclude_outside ? cw[k] / sum : cw[k]);
    }
    // An identity axis maps every j to itself with weight 1.
    for (int k = 0; k < t.ntaps; ++k)
      if (w[k] != 0.f && (idx[k] != j || w[k] != 1.f)) t.identity = false;
  }
  return t;
}

// Resamples axis `axis` of `src` (shape `shape`) with `taps`; returns the new tensor.
Tensor resample_axis(const Tensor& src, size_t axis, const AxisTaps& taps, float extrapolation, int threads) {
  Shape shape = src.shape();
  int64_t outer = 1, inner = 1;
  for (size_t i = 0; i < axis; ++i) outer *= shape[i];
  for (size_t i = axis + 1; i < shape.size(); ++i) inner *= shape[i];
  shape[axis] = taps.out;
  Tensor dst(DType::Float32, shape);
  const float* s = src.data<float>();
  float* d = dst.data<float>();
  const int64_t Lin = taps.in, Lout = taps.out;
  parallel_for(outer * Lout, threads_for(dst.numel() * taps.ntaps, threads), [&](int64_t r) {
    const int64_t o = r / Lout, j = r % Lout;
    float* out = d + r * inner;
    if (taps.outside[j]) {
      std::fill_n(out, inner, extrapolation);
      return;
    }
    const int64_t* idx = &taps.idx[j * taps.ntaps];
    const float* w = &taps.w[j * taps.ntaps];
    const float* base = s + o * Lin * inner;
    if (inner == 1) {
      float acc = 0;
      for (int k = 0; k < taps.ntaps; ++k) acc += w[k] * base[idx[k]];
      *out = acc;
      return;
    }
    if (taps.ntaps == 1 && w[0] == 1.f) {
      std::copy_n(base + idx[0] * inner, inner, out);
      return;
    }
    scale_shift(base + idx[0] * inner, w[0], 0.f, out, inner);
    for (int k = 1; k < taps.ntaps; ++k) axpy(w[k], base + idx[k] * inner, out, inner);
  });
  return dst;
}

// Nearest in one pass: every output row (all axes but the last) copies from one input row through the
// last axis' index table; samples outside the roi box take the extrapolation value.
Tensor nearest_direct(const Tensor& X, const std::vector<AxisTaps>& taps, float extrapolation, int threads) {
  const size_t rank = taps.size();
  Shape ys(rank);
  for (size_t a = 0; a < rank; ++a) ys[a] = taps[a].out;
  Tensor Y(DType::Float32, ys);
  if (Y.numel() == 0) return Y;
  const auto in_strides = strides_of(X.shape());
  const int64_t OW = ys[rank - 1], rows = Y.numel() / OW;
  const AxisTaps& last = taps[rank - 1];
  const bool any_outside_last = std::find(last.outside.begin(), last.outside.end(), 1) != last.outside.end();
  const float* x = X.data<float>();
  float* y = Y.data<float>();
  parallel_for(rows, threads_for(Y.numel(), threads), [&](int64_t r) {
    int64_t rem = r, off = 0;
    bool outside = false;
    for (size_t a = rank - 1; a-- > 0;) {
      const int64_t j = rem % ys[a];
      rem /= ys[a];
      outside = outside || taps[a].outside[j];
      off += taps[a].idx[j] * in_strides[a];
    }
    float* out = y + r * OW;
    if (outside) {
      std::fill_n(out, OW, extrapolation);
      return;
    }
    const float* src = x + off;
    if (!any_outside_last) {
      for (int64_t i = 0; i < OW; ++i) out[i] = src[last.idx[i]];
      return;
    }
    for (int64_t i = 0; i < OW; ++i) out[i] = last.outside[i] ? extrapolation : src[last.idx[i]];
  });
  return Y;
}

ResizeAttrs parse_attrs(const NodeInfo& node, bool legacy) {
  ResizeAttrs a;
  const std::string mode = node.attrs.get_string("mode", "nearest");
  if (mode == "nearest")
    a.mode = Mode::Nearest;
  else if (mode == "linear" || mode == "bilinear" || mode == "trilinear")
    a.mode = Mode::Linear;
  else if (mode == "cubic" && !legacy)
    a.mode = Mode::Cubic;
  else
    throw BadInputError(node.label() + ": mode '" + mode + "' is not nearest, linear or cubic");
  if (legacy) {
    a.coord = Coord::Asymmetric;
    a.nearest = NearestMode::Floor;
    a.legacy_nearest = true;
    return a;
  }
  const std::string c = node.attrs.get_string("coordinate_transformation_mode", "half_pixel");
  const std::pair<const char*, Coord> coords[] = {{"half_pixel", Coord::HalfPixel},
                                                  {"half_pixel_symmetric", Coord::HalfPixelSymmetric},
                                                  {"pytorch_half_pixel", Coord::PytorchHalfPixel},
                                                  {"align_corners", Coord::AlignCorners},
                                                  {"asymmetric", Coord::Asymmetric},
                                                  {"tf_half_pixel_for_nn", Coord::TfHalfPixelForNN},
                                                  {"tf_crop_and_resize", Coord::TfCropAndResize}};
  bool found = false;
  for (const auto& [name, v] : coords)
    if (c == name) a.coord = v, found = true;
  if (!found) throw BadInputError(node.label() + ": unknown coordinate_transformation_mode '" + c + "'");
  const std::string n = node.attrs.get_string("nearest_mode", "round_prefer_floor");
  if (n == "round_prefer_floor")
    a.nearest = NearestMode::RoundPreferFloor;
  else if (n == "round_prefer_ceil")
    a.nearest = NearestMode::RoundPreferCeil;
  else if (n == "floor")
    a.nearest = NearestMode::Floor;
  else if (n == "ceil")
    a.nearest = NearestMode::Ceil;
  else
    throw BadInputError(node.label() + ": unknown nearest_mode '" + n + "'");
  a.cubic_a = node.attrs.get_float("cubic_coeff_a", -0.75f);
  a.exclude_outside = node.attrs.get_int("exclude_outside", 0) != 0;
  a.extrapolation = node.attrs.get_float("extrapolation_value", 0.f);
  if (node.attrs.get_int("antialias", 0) != 0)
    throw UnsupportedError(node.label() + ": antialias = 1 is not supported; export without antialiasing");
  const std::string p = node.attrs.get_string("keep_aspect_ratio_policy", "stretch");
  if (p == "stretch")
    a.policy = AspectPolicy::Stretch;
  else if (p == "not_larger")
    a.policy = AspectPolicy::NotLarger;
  else if (p == "not_smaller")
    a.policy = AspectPolicy::NotSmaller;
  else
    throw BadInputError(node.label() + ": unknown keep_aspect_ratio_policy '" + p + "'");
  a.axes = node.attrs.get_ints("axes");
  return a;
}

class ResizeKernel final : public Kernel {
 public:
  ResizeKernel(const NodeInfo& node, bool upsample)
      : node_(node), upsample_(upsample), attrs_(parse_attrs(node, upsample || node.opset < 11)) {
    if (upsample && node.opset < 9) attr_scales_ = node.attrs.get_floats("scales");
  }

  void run(KernelContext& ctx) override {
    const Tensor& X = float_input(ctx, 0);
    const int64_t rank = X.rank();
    // Which axes the scales/sizes/roi refer to.
    std::vector<int64_t> axes;
    if (attrs_.axes.empty()) {
      for (int64_t i = 0; i < rank; ++i) axes.push_back(i);
    } else {
      for (int64_t ax : attrs_.axes) axes.push_back(normalize_axis(ax, rank, node_));
    }
    const size_t na = axes.size();
    const bool legacy_inputs = upsample_ || node_.opset < 11;
    const size_t scales_i = legacy_inputs ? 1 : 2, sizes_i = 3, roi_i = 1;
    std::vector<float> scales = attr_scales_;
    if (scales.empty() && ctx.has_input(scales_i) && ctx.input(scales_i).numel() > 0) {
      const Tensor& s = float_input(ctx, scales_i);
      scales.assign(s.data<float>(), s.data<float>() + s.numel());
    }
    std::vector<int64_t> sizes;
    if (!legacy_inputs && ctx.has_input(sizes_i) && ctx.input(sizes_i).numel() > 0)
      sizes = read_ints(ctx.input(sizes_i), node_, "sizes");
    if (scales.empty() == sizes.empty())
      throw BadInputError(node_.label() + ": exactly one of 'scales' and 'sizes' must be given");
    if ((!scales.empty() && scales.size() != na) || (!sizes.empty() && sizes.size() != na))
      throw BadInputError(node_.label() + ": 'scales'/'sizes' need " + std::to_string(na) + " values");
    std::vector<double> roi;
    if (!legacy_inputs && ctx.has_input(roi_i) && ctx.input(roi_i).numel() > 0) {
      const Tensor& r = ctx.input(roi_i);
      if (r.dtype() == DType::Float32)
        roi.assign(r.data<float>(), r.data<float>() + r.numel());
      else if (r.dtype() == DType::Float64)
        roi.assign(r.data<double>(), r.data<double>() + r.numel());
      else
        throw BadInputError(node_.label() + ": 'roi' must be float");
      if (roi.size() != 2 * na)
        throw BadInputError(node_.label() + ": 'roi' needs " + std::to_string(2 * na) + " values");
    }
    // Per-axis output size and scale.
    std::vector<int64_t> out_dims(X.shape().begin(), X.shape().end());
    std::vector<double> axis_scale(rank, 1.0), roi_start(rank, 0.0), roi_end(rank, 1.0);
    if (!sizes.empty() && attrs_.policy != AspectPolicy::Stretch) {
      double s = attrs_.policy == AspectPolicy::NotLarger ? INFINITY : -INFINITY;
      for (size_t k = 0; k < na; ++k) {
        const double r = static_cast<double>(sizes[k]) / static_cast<double>(X.dim(axes[k]));
        s = attrs_.policy == AspectPolicy::NotLarger ? std::min(s, r) : std::max(s, r);
      }
      for (size_t k = 0; k < na; ++k) {
        axis_scale[axes[k]] = s;
        out_dims[axes[k]] =
            checked_to_int64(std::floor(s * static_cast<double>(X.dim(axes[k])) + 0.5), "output size");
      }
    } else {
      for (size_t k = 0; k < na; ++k) {
        const int64_t in = X.dim(axes[k]);
        if (!sizes.empty()) {
          out_dims[axes[k]] = sizes[k];
          axis_scale[axes[k]] = in ? static_cast<double>(sizes[k]) / static_cast<double>(in) : 1.0;
        } else {
          if (!(scales[k] > 0))
            throw BadInputError(node_.label() + ": scales must be positive, got " + std::to_string(scales[k]));
          axis_scale[axes[k]] = scales[k];
          out_dims[axes[k]] = checked_to_int64(std::floor(static_cast<double>(in) * scales[k]), "output size");
        }
      }
    }
    for (size_t k = 0; k < roi.size() / 2; ++k) {
      roi_start[axes[k]] = roi[k];
      roi_end[axes[k]] = roi[k + na];
    }
    // The output must fit the limits before per-axis tap tables (as long as the output axes) are built.
    for (int64_t d : out_dims)
      if (d < 0) throw BadInputError(node_.label() + ": negative output size in " + shape_str(out_dims));
    const auto out_bytes = static_cast<int64_t>(storage_bytes(X.dtype(), shape_numel(out_dims)));
    if (!tensor_allocation_fits(out_bytes)) throw_tensor_limit(out_bytes, "Resize output of shape " + shape_str(out_dims));
    if (attrs_.mode == Mode::Nearest && rank > 0 && X.numel() > 0) {
      std::vector<AxisTaps> taps;
      for (int64_t ax = 0; ax < rank; ++ax)
        taps.push_back(make_taps(attrs_, X.dim(ax), out_dims[ax], axis_scale[ax], roi_start[ax], roi_end[ax]));
      ctx.outputs[0] = nearest_direct(X, taps, attrs_.extrapolation, ctx.threads);
      return;
    }
    Tensor cur = X;
    for (int64_t ax = rank; ax-- > 0;) {
      if (out_dims[ax] < 0) throw BadInputError(node_.label() + ": negative output size");
      if (X.dim(ax) == 0) {
        if (out_dims[ax] != 0) throw BadInputError(node_.label() + ": cannot resize an empty axis");
        continue;
      }
      const AxisTaps taps = make_taps(attrs_, X.dim(ax), out_dims[ax], axis_scale[ax], roi_start[ax], roi_end[ax]);
      if (taps.identity) continue;
      cur = resample_axis(cur, static_cast<size_t>(ax), taps, attrs_.extrapolation, ctx.threads);
    }
    ctx.outputs[0] = cur.shape() == Shape(out_dims) && cur.raw() == X.raw() ? X.clone() : cur;
  }

 private:
  NodeInfo node_;
  bool upsample_;
  ResizeAttrs attrs_;
  std::vector<float> attr_scales_;
};

}  // namespace

std::unique_ptr<Kernel> make_resize(const NodeInfo& node) { return std::make_unique<ResizeKernel>(node, false); }
std::unique_ptr<Kernel> make_upsample(const NodeInfo& node) { return std::make_unique<ResizeKernel>(node, true); }

}  // namespace qtool::runtime::kernels
