// Resize (opsets 10-21) and Upsample (opsets 7-9), float32, any rank.
//
// The numbers are ONNX Runtime 1.30's CPU kernel's, bit for bit, in every case ORT runs (its float NCHW kernels in
// core/providers/cpu/tensor/upsample*; checked on the cases of tests/kernels/resize_ort_cases.py):
// - Output size: `sizes` as given, or trunc(scale * in) in float. keep_aspect_ratio_policy not_larger / not_smaller:
//   one scale, the min / max of the float ratios out / in over the listed axes, and size round(scale * in).
// - Each axis has a float scale (the given one, or float(out) / float(in)) and maps output index x to a source
//   coordinate c in float arithmetic: half_pixel (x + 0.5) / s - 0.5; pytorch_half_pixel the same, 0 when out = 1;
//   align_corners x * (in - 1) / (out - 1); asymmetric x / s; tf_half_pixel_for_nn (x + 0.5) / s;
//   tf_crop_and_resize from the roi box, where samples with c outside [0, in - 1] take extrapolation_value;
//   half_pixel_symmetric (opset 19) the half_pixel formula in double, shifted by a float offset that centres it.
//   An axis whose scale is exactly 1 maps x to x whatever the mode and roi, and an output of the input's shape is a
//   copy of it.
// - nearest: c rounded by nearest_mode, clamped to the input (round_prefer_floor / _ceil: floor / ceil where c is
//   within 1e-6 of n + 0.5, else round half away from 0). Opset 10 and Upsample: c truncated where the axis grows, ceil
//   where it shrinks (ORT's "simple" mode, the reference for these old opsets).
// - linear: c clamped to [0, in - 1], lo = trunc(c), hi = min(lo + 1, in - 1), weights w_lo = |c - hi| and
//   w_hi = |c - lo|, both 0.5 when lo = hi. Two axes (rank 2; rank 4 with N and C unscaled, or N and the last axis
//   unscaled as NHWC) give, summed left to right,
//     y = (wx_lo*wy_lo)*X[lo,lo] + (wx_hi*wy_lo)*X[lo,hi] + (wx_lo*wy_hi)*X[hi,lo] + (wx_hi*wy_hi)*X[hi,hi];
//   three axes (rank 3; rank 5 with N and C unscaled) the same eight terms, weights ((wx*wy)*wz), z slowest.
// - cubic (rank 2; rank 4 with N and C unscaled): Keys weights (cubic_coeff_a) of s = c - floor(c) in float, taps
//   floor(c) - 1 .. floor(c) + 2 clamped to the edge or, with exclude_outside, weighted 0 and the weights divided
//   by their float sum. Each of the four source rows is interpolated along x, 0 + (wx_k / sum_x) * X summed in tap
//   order, then y = 0 + (row_k * wy_k) / sum_y summed in tap order.
// resize.cc is compiled without contraction into fused multiply-adds (lib/runtime/CMakeLists.txt), so every
// CPU and every clone of the hot loops gives these bits. Layouts ORT refuses (linear or cubic resampling N or C,
// other ranks) resample one axis at a time with the same per-axis indices and weights, as y = sum of w_k * X_k.
// Opset 18: `axes` restricts scales/sizes/roi to some axes. antialias = 1 is not supported.
#include <algorithm>
#include <array>
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
// Simple: Upsample and opset-10 Resize (truncate where the axis grows, ceil where it shrinks).
enum class NearestMode { RoundPreferFloor, RoundPreferCeil, Floor, Ceil, Simple };
enum class AspectPolicy { Stretch, NotLarger, NotSmaller };

struct ResizeAttrs {
  Mode mode = Mode::Nearest;
  Coord coord = Coord::HalfPixel;
  NearestMode nearest = NearestMode::RoundPreferFloor;
  float cubic_a = -0.75f;
  bool exclude_outside = false;
  float extrapolation = 0.f;
  AspectPolicy policy = AspectPolicy::Stretch;
  std::vector<int64_t> axes;
};

// One axis of the resize: its lengths, float scale and roi box.
struct AxisGeom {
  int64_t in = 1, out = 1;
  float scale = 1.f;
  float roi_start = 0.f, roi_end = 1.f;
};

// Source coordinate of output index x (a float, as every step below).
float source_coord(Coord c, float x, const AxisGeom& g) {
  const float s = g.scale, in = static_cast<float>(g.in), out = static_cast<float>(g.out);
  switch (c) {
    case Coord::HalfPixel:
      return (x + 0.5f) / s - 0.5f;
    case Coord::HalfPixelSymmetric: {
      const float adjustment = out / (s * in);
      const float offset = in / 2 * (1 - adjustment);
      return static_cast<float>(offset + (x + 0.5) / s - 0.5);  // in double around the float offset
    }
    case Coord::PytorchHalfPixel:
      return out > 1 ? (x + 0.5f) / s - 0.5f : 0.f;
    case Coord::AlignCorners:
      return out == 1 ? 0.f : x * (in - 1) / (out - 1);
    case Coord::Asymmetric:
      return x / s;
    case Coord::TfHalfPixelForNN:
      return (x + 0.5f) / s;
    case Coord::TfCropAndResize: {
      const float a = g.roi_start, b = g.roi_end;
      return out > 1 ? a * (in - 1) + x * (b - a) * (in - 1) / (out - 1)
                     : static_cast<float>(0.5 * (a + b) * (in - 1));  // the centre in double
    }
  }
  return x;
}

// Source coordinates of every output index; x itself on an axis whose scale is 1.
std::vector<float> source_coords(Coord c, const AxisGeom& g) {
  std::vector<float> x(g.out);
  for (int64_t j = 0; j < g.out; ++j) {
    const float xj = static_cast<float>(j);
    x[j] = g.scale == 1.f ? xj : source_coord(c, xj, g);
  }
  return x;
}

// tf_crop_and_resize: a sample outside the input takes extrapolation_value.
bool outside(float c, int64_t in) { return c < 0 || c > static_cast<float>(in - 1); }

// c limited to [-4, in + 4] before it becomes an integer: the same taps once clamped to the input, and no overflow
// from the huge (or NaN) coordinates of an absurdly small scale.
float bounded(float c, int64_t in) { return std::fmin(std::fmax(c, -4.f), static_cast<float>(in) + 4); }

// round_prefer_floor / round_prefer_ceil take c within 1e-6 of n + 0.5 for a tie (ORT 1.30 does: a coordinate one
// float step from the half, like 3.5000005, rounds to 3 with prefer-floor), and round half away from 0 otherwise.
int64_t nearest_index(NearestMode m, float x, bool shrinking) {
  const float f = std::floor(x);
  const bool tie = std::fabs(x - f - 0.5f) < 1e-6f;
  switch (m) {
    case NearestMode::RoundPreferFloor:
      return static_cast<int64_t>(tie ? f : std::round(x));
    case NearestMode::RoundPreferCeil:
      return static_cast<int64_t>(tie ? f + 1 : std::round(x));
    case NearestMode::Floor:
      return static_cast<int64_t>(f);
    case NearestMode::Ceil:
      return static_cast<int64_t>(std::ceil(x));
    case NearestMode::Simple:
      return shrinking ? static_cast<int64_t>(std::ceil(x)) : static_cast<int64_t>(x);
  }
  return static_cast<int64_t>(f);
}

// Linear interpolation along one axis: y = w_lo * X[lo] + w_hi * X[hi].
struct LinearAxis {
  std::vector<float> coord;     // before clamping (the extrapolation test)
  std::vector<int64_t> lo, hi;  // source indices
  std::vector<float> w_lo, w_hi;
};

LinearAxis linear_axis(Coord c, const AxisGeom& g) {
  LinearAxis t;
  t.coord = source_coords(c, g);
  t.lo.resize(g.out), t.hi.resize(g.out), t.w_lo.resize(g.out), t.w_hi.resize(g.out);
  const float last = static_cast<float>(g.in - 1);
  for (int64_t j = 0; j < g.out; ++j) {
    const float x = std::max(0.f, std::min(t.coord[j], last));
    const int64_t lo = std::min(static_cast<int64_t>(x), g.in - 1), hi = std::min(lo + 1, g.in - 1);
    t.lo[j] = lo, t.hi[j] = hi;
    t.w_lo[j] = lo == hi ? 0.5f : std::fabs(x - static_cast<float>(hi));
    t.w_hi[j] = lo == hi ? 0.5f : std::fabs(x - static_cast<float>(lo));
  }
  return t;
}

// Cubic interpolation along one axis: taps base - 1 .. base + 2 (clamped to the input) with weights w / sum.
struct CubicAxis {
  std::vector<float> coord;  // before clamping (the extrapolation test)
  std::vector<int64_t> base;
  std::vector<std::array<float, 4>> w;
  std::vector<float> sum;  // 1, or with exclude_outside the sum of the weights inside
};

// Keys' cubic convolution weights of the four taps at distance s + 1, s, 1 - s, 2 - s (s in [0, 1)).
std::array<float, 4> keys_weights(float s, float A) {
  const float s1 = s + 1, r = 1 - s, r1 = 2 - s;
  return {((A * s1 - 5 * A) * s1 + 8 * A) * s1 - 4 * A, ((A + 2) * s - (A + 3)) * s * s + 1,
          ((A + 2) * r - (A + 3)) * r * r + 1, ((A * r1 - 5 * A) * r1 + 8 * A) * r1 - 4 * A};
}

CubicAxis cubic_axis(const ResizeAttrs& a, const AxisGeom& g) {
  CubicAxis t;
  t.coord = source_coords(a.coord, g);
  t.base.resize(g.out), t.w.resize(g.out), t.sum.assign(g.out, 1.f);
  for (int64_t j = 0; j < g.out; ++j) {
    const float x = t.coord[j], f = std::floor(x);
    t.base[j] = static_cast<int64_t>(bounded(f, g.in));
    t.w[j] = keys_weights(x - f, a.cubic_a);
    if (!a.exclude_outside) continue;
    float sum = 0;
    for (int k = 0; k < 4; ++k) {
      const int64_t i = t.base[j] - 1 + k;
      if (i < 0 || i >= g.in) t.w[j][k] = 0;
      sum += t.w[j][k];
    }
    t.sum[j] = sum;
  }
  return t;
}

// ---- ORT's kernels: bilinear, trilinear, bicubic ----

// One output row of the bilinear sum over contiguous rows `top` (source row lo) and `bottom` (row hi).
QTOOL_HOT_LOOP
void bilinear_row(const float* top, const float* bottom, float wy_lo, float wy_hi, const int64_t* lo, const int64_t* hi,
                  const float* w_lo, const float* w_hi, float* out, int64_t n) {
  for (int64_t x = 0; x < n; ++x)
    out[x] = (w_lo[x] * wy_lo) * top[lo[x]] + (w_hi[x] * wy_lo) * top[hi[x]] + (w_lo[x] * wy_hi) * bottom[lo[x]] +
             (w_hi[x] * wy_hi) * bottom[hi[x]];
}

// X seen as [outer, H, W, inner] (inner = 1: NCHW or rank 2; inner = C: NHWC), resampled along H and W.
Tensor bilinear(const Tensor& X, const Shape& out_shape, int64_t outer, int64_t inner, const AxisGeom& gy,
                const AxisGeom& gx, const ResizeAttrs& a, int threads) {
  const LinearAxis ty = linear_axis(a.coord, gy), tx = linear_axis(a.coord, gx);
  const bool extrapolate = a.coord == Coord::TfCropAndResize;
  Tensor Y(DType::Float32, out_shape);
  const int64_t H = gy.in, W = gx.in, OH = gy.out, OW = gx.out;
  const float* xd = X.data<float>();
  float* yd = Y.data<float>();
  parallel_for(outer * OH, threads_for(Y.numel() * 8, threads), [&](int64_t r) {
    const int64_t o = r / OH, y = r % OH;
    float* out = yd + r * OW * inner;
    if (extrapolate && outside(ty.coord[y], H)) {
      std::fill_n(out, OW * inner, a.extrapolation);
      return;
    }
    const float* top = xd + (o * H + ty.lo[y]) * W * inner;
    const float* bottom = xd + (o * H + ty.hi[y]) * W * inner;
    const float wy_lo = ty.w_lo[y], wy_hi = ty.w_hi[y];
    if (inner == 1) {
      bilinear_row(top, bottom, wy_lo, wy_hi, tx.lo.data(), tx.hi.data(), tx.w_lo.data(), tx.w_hi.data(), out, OW);
    } else {
      for (int64_t x = 0; x < OW; ++x) {
        const float c00 = tx.w_lo[x] * wy_lo, c01 = tx.w_hi[x] * wy_lo, c10 = tx.w_lo[x] * wy_hi,
                    c11 = tx.w_hi[x] * wy_hi;
        const float *t0 = top + tx.lo[x] * inner, *t1 = top + tx.hi[x] * inner;
        const float *b0 = bottom + tx.lo[x] * inner, *b1 = bottom + tx.hi[x] * inner;
        float* dst = out + x * inner;
        for (int64_t k = 0; k < inner; ++k) dst[k] = c00 * t0[k] + c01 * t1[k] + c10 * b0[k] + c11 * b1[k];
      }
    }
    if (extrapolate)
      for (int64_t x = 0; x < OW; ++x)
        if (outside(tx.coord[x], W)) std::fill_n(out + x * inner, inner, a.extrapolation);
  });
  return Y;
}

// X seen as [outer, D, H, W], resampled along D, H and W.
Tensor trilinear(const Tensor& X, const Shape& out_shape, int64_t outer, const AxisGeom& gz, const AxisGeom& gy,
                 const AxisGeom& gx, const ResizeAttrs& a, int threads) {
  const LinearAxis tz = linear_axis(a.coord, gz), ty = linear_axis(a.coord, gy), tx = linear_axis(a.coord, gx);
  const bool extrapolate = a.coord == Coord::TfCropAndResize;
  Tensor Y(DType::Float32, out_shape);
  const int64_t D = gz.in, H = gy.in, W = gx.in, OD = gz.out, OH = gy.out, OW = gx.out;
  const float* xd = X.data<float>();
  float* yd = Y.data<float>();
  parallel_for(outer * OD * OH, threads_for(Y.numel() * 16, threads), [&](int64_t r) {
    const int64_t o = r / (OD * OH), z = r / OH % OD, y = r % OH;
    float* out = yd + r * OW;
    if (extrapolate && (outside(tz.coord[z], D) || outside(ty.coord[y], H))) {
      std::fill_n(out, OW, a.extrapolation);
      return;
    }
    const float* plane = xd + o * D * H * W;
    const float* r00 = plane + (tz.lo[z] * H + ty.lo[y]) * W;  // z lo, y lo
    const float* r01 = plane + (tz.lo[z] * H + ty.hi[y]) * W;
    const float* r10 = plane + (tz.hi[z] * H + ty.lo[y]) * W;
    const float* r11 = plane + (tz.hi[z] * H + ty.hi[y]) * W;
    const float wz_lo = tz.w_lo[z], wz_hi = tz.w_hi[z], wy_lo = ty.w_lo[y], wy_hi = ty.w_hi[y];
    for (int64_t x = 0; x < OW; ++x) {
      if (extrapolate && outside(tx.coord[x], W)) {
        out[x] = a.extrapolation;
        continue;
      }
      const int64_t lo = tx.lo[x], hi = tx.hi[x];
      const float wl = tx.w_lo[x], wh = tx.w_hi[x];
      out[x] = wl * wy_lo * wz_lo * r00[lo] + wh * wy_lo * wz_lo * r00[hi] + wl * wy_hi * wz_lo * r01[lo] +
               wh * wy_hi * wz_lo * r01[hi] + wl * wy_lo * wz_hi * r10[lo] + wh * wy_lo * wz_hi * r10[hi] +
               wl * wy_hi * wz_hi * r11[lo] + wh * wy_hi * wz_hi * r11[hi];
    }
  });
  return Y;
}

// X seen as [outer, H, W], resampled along H and W by the cubic kernel: every source row along x first (into a
// scratch tensor [outer, H, OW]), then the output rows from four of those.
Tensor bicubic(const Tensor& X, const Shape& out_shape, int64_t outer, const AxisGeom& gy, const AxisGeom& gx,
               const ResizeAttrs& a, int threads) {
  const CubicAxis ty = cubic_axis(a, gy), tx = cubic_axis(a, gx);
  const bool extrapolate = a.coord == Coord::TfCropAndResize;
  const int64_t H = gy.in, W = gx.in, OH = gy.out, OW = gx.out;
  // Per output column: the four clamped source columns and the weights w / sum along x.
  std::vector<std::array<int64_t, 4>> col(OW);
  std::vector<std::array<float, 4>> wx(OW);
  for (int64_t x = 0; x < OW; ++x)
    for (int k = 0; k < 4; ++k) {
      col[x][k] = std::clamp<int64_t>(tx.base[x] - 1 + k, 0, W - 1);
      wx[x][k] = tx.w[x][k] / tx.sum[x];
    }
  Tensor rows(DType::Float32, {outer, H, OW});
  const float* xd = X.data<float>();
  float* rd = rows.data<float>();
  parallel_for(outer * H, threads_for(rows.numel() * 8, threads), [&](int64_t r) {
    const float* src = xd + r * W;
    float* dst = rd + r * OW;
    for (int64_t x = 0; x < OW; ++x) {
      float acc = 0;
      for (int k = 0; k < 4; ++k) acc += wx[x][k] * src[col[x][k]];
      dst[x] = acc;
    }
  });
  Tensor Y(DType::Float32, out_shape);
  float* yd = Y.data<float>();
  parallel_for(outer * OH, threads_for(Y.numel() * 8, threads), [&](int64_t r) {
    const int64_t o = r / OH, y = r % OH;
    float* out = yd + r * OW;
    if (extrapolate && outside(ty.coord[y], H)) {
      std::fill_n(out, OW, a.extrapolation);
      return;
    }
    std::fill_n(out, OW, 0.f);
    const float sy = ty.sum[y];
    for (int k = 0; k < 4; ++k) {
      const float* src = rd + (o * H + std::clamp<int64_t>(ty.base[y] - 1 + k, 0, H - 1)) * OW;
      const float wy = ty.w[y][k];
      if (sy == 1.f) {  // (row * wy) / 1 is row * wy
        for (int64_t x = 0; x < OW; ++x) out[x] += src[x] * wy;
      } else {
        for (int64_t x = 0; x < OW; ++x) out[x] += src[x] * wy / sy;
      }
    }
    if (extrapolate)
      for (int64_t x = 0; x < OW; ++x)
        if (outside(tx.coord[x], W)) out[x] = a.extrapolation;
  });
  return Y;
}

// ---- Nearest, and the axis-at-a-time form for layouts ORT refuses ----

// Taps of one axis: output j = sum over k of w[j, k] * X[idx[j, k]].
struct AxisTaps {
  int64_t in = 0, out = 0;
  int ntaps = 1;
  std::vector<int64_t> idx;   // out * ntaps
  std::vector<float> w;       // out * ntaps
  std::vector<char> outside;  // out: sample outside the input (tf_crop_and_resize)
  bool identity = false;
};

AxisTaps make_taps(const ResizeAttrs& a, const AxisGeom& g) {
  AxisTaps t;
  t.in = g.in;
  t.out = g.out;
  t.ntaps = a.mode == Mode::Nearest ? 1 : a.mode == Mode::Linear ? 2 : 4;
  t.idx.resize(g.out * t.ntaps);
  t.w.resize(g.out * t.ntaps);
  t.outside.assign(g.out, 0);
  std::vector<float> coord;
  if (a.mode == Mode::Nearest) {
    coord = source_coords(a.coord, g);
    for (int64_t j = 0; j < g.out; ++j) {
      t.idx[j] = std::clamp<int64_t>(nearest_index(a.nearest, bounded(coord[j], g.in), g.scale < 1), 0, g.in - 1);
      t.w[j] = 1;
    }
  } else if (a.mode == Mode::Linear) {
    const LinearAxis l = linear_axis(a.coord, g);
    for (int64_t j = 0; j < g.out; ++j)
      t.idx[2 * j] = l.lo[j], t.idx[2 * j + 1] = l.hi[j], t.w[2 * j] = l.w_lo[j], t.w[2 * j + 1] = l.w_hi[j];
    coord = l.coord;
  } else {
    const CubicAxis c = cubic_axis(a, g);
    for (int64_t j = 0; j < g.out; ++j)
      for (int k = 0; k < 4; ++k) {
        t.idx[4 * j + k] = std::clamp<int64_t>(c.base[j] - 1 + k, 0, g.in - 1);
        t.w[4 * j + k] = c.w[j][k] / c.sum[j];
      }
    coord = c.coord;
  }
  if (a.coord == Coord::TfCropAndResize)
    for (int64_t j = 0; j < g.out; ++j) t.outside[j] = outside(coord[j], g.in);
  t.identity = g.in == g.out && g.scale == 1.f;  // every x maps to x (source_coords)
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

// out[i] = src[idx[i]]
QTOOL_HOT_LOOP
void gather_row(const float* src, const int64_t* idx, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = src[idx[i]];
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
      gather_row(src, last.idx.data(), out, OW);
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
    a.nearest = NearestMode::Simple;
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
    const std::vector<AxisGeom> geom = axis_geometry(ctx, X);
    Shape out_dims(rank);
    for (int64_t ax = 0; ax < rank; ++ax) out_dims[ax] = geom[ax].out;
    // The output must fit the limits before per-axis tap tables (as long as the output axes) are built.
    const auto out_bytes = static_cast<int64_t>(storage_bytes(X.dtype(), shape_numel(out_dims)));
    if (!tensor_allocation_fits(out_bytes))
      throw_tensor_limit(out_bytes, "Resize output of shape " + shape_str(out_dims));
    for (int64_t ax = 0; ax < rank; ++ax)
      if (X.dim(ax) == 0 && out_dims[ax] != 0) throw BadInputError(node_.label() + ": cannot resize an empty axis");
    if (out_dims == X.shape() || rank == 0) {
      ctx.outputs[0] = X.clone();
      return;
    }
    if (shape_numel(out_dims) == 0) {
      ctx.outputs[0] = Tensor(DType::Float32, out_dims);
      return;
    }
    if (attrs_.mode == Mode::Nearest) {
      std::vector<AxisTaps> taps;
      for (int64_t ax = 0; ax < rank; ++ax) taps.push_back(make_taps(attrs_, geom[ax]));
      ctx.outputs[0] = nearest_direct(X, taps, attrs_.extrapolation, ctx.threads);
      return;
    }
    if (run_ort_layout(ctx, X, geom, out_dims)) return;
    Tensor cur = X;
    for (int64_t ax = rank; ax-- > 0;) {
      const AxisTaps taps = make_taps(attrs_, geom[ax]);
      if (taps.identity) continue;
      cur = resample_axis(cur, static_cast<size_t>(ax), taps, attrs_.extrapolation, ctx.threads);
    }
    ctx.outputs[0] = cur.raw() == X.raw() ? X.clone() : cur;
  }

 private:
  // Per-axis lengths, float scales and roi, as ONNX Runtime derives them from scales or sizes, axes and policy.
  std::vector<AxisGeom> axis_geometry(KernelContext& ctx, const Tensor& X) const {
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
    std::vector<float> roi;
    if (!legacy_inputs && ctx.has_input(roi_i) && ctx.input(roi_i).numel() > 0) {
      const Tensor& r = ctx.input(roi_i);
      if (r.dtype() == DType::Float32)
        roi.assign(r.data<float>(), r.data<float>() + r.numel());
      else if (r.dtype() == DType::Float64)
        for (int64_t i = 0; i < r.numel(); ++i) roi.push_back(static_cast<float>(r.data<double>()[i]));
      else
        throw BadInputError(node_.label() + ": 'roi' must be float");
      if (roi.size() != 2 * na)
        throw BadInputError(node_.label() + ": 'roi' needs " + std::to_string(2 * na) + " values");
    }
    std::vector<AxisGeom> g(rank);
    for (int64_t ax = 0; ax < rank; ++ax) g[ax].in = g[ax].out = X.dim(ax);
    for (size_t k = 0; k < roi.size() / 2; ++k) {
      g[axes[k]].roi_start = roi[k];
      g[axes[k]].roi_end = roi[k + na];
    }
    if (!scales.empty()) {
      // Output length trunc(scale * in), the product in float.
      for (size_t k = 0; k < na; ++k) {
        if (!(scales[k] > 0))
          throw BadInputError(node_.label() + ": scales must be positive, got " + std::to_string(scales[k]));
        AxisGeom& ga = g[axes[k]];
        ga.scale = scales[k];
        ga.out = checked_to_int64(std::trunc(ga.scale * static_cast<float>(ga.in)), "output size");
      }
      return g;
    }
    for (size_t k = 0; k < na; ++k) {
      if (sizes[k] < 0) throw BadInputError(node_.label() + ": negative output size " + std::to_string(sizes[k]));
      g[axes[k]].out = sizes[k];
    }
    for (AxisGeom& ga : g) ga.scale = ga.in ? static_cast<float>(ga.out) / static_cast<float>(ga.in) : 1.f;
    if (attrs_.policy != AspectPolicy::Stretch) {
      // One scale for the listed axes, their length round(scale * in) with the product in float.
      const bool larger = attrs_.policy == AspectPolicy::NotSmaller;
      float s = larger ? 0.f : INFINITY;
      for (int64_t ax : axes) s = larger ? std::max(s, g[ax].scale) : std::min(s, g[ax].scale);
      for (int64_t ax : axes) {
        g[ax].scale = s;
        g[ax].out = checked_to_int64(std::round(s * static_cast<float>(g[ax].in)), "output size");
      }
    }
    return g;
  }

  // ORT's bilinear, trilinear and bicubic layouts; false when X's is none of them.
  bool run_ort_layout(KernelContext& ctx, const Tensor& X, const std::vector<AxisGeom>& g, const Shape& out_dims) {
    const int64_t rank = X.rank();
    const bool nc_kept = rank >= 4 && g[0].scale == 1.f && g[1].scale == 1.f;
    const bool linear = attrs_.mode == Mode::Linear;
    if ((linear || attrs_.mode == Mode::Cubic) && (rank == 2 || (rank == 4 && nc_kept))) {
      const int64_t outer = rank == 2 ? 1 : X.dim(0) * X.dim(1);
      const AxisGeom &gy = g[rank - 2], &gx = g[rank - 1];
      ctx.outputs[0] = linear ? bilinear(X, out_dims, outer, 1, gy, gx, attrs_, ctx.threads)
                              : bicubic(X, out_dims, outer, gy, gx, attrs_, ctx.threads);
      return true;
    }
    if (linear && rank == 4 && g[0].scale == 1.f && g[3].scale == 1.f) {  // NHWC
      ctx.outputs[0] = bilinear(X, out_dims, X.dim(0), X.dim(3), g[1], g[2], attrs_, ctx.threads);
      return true;
    }
    if (linear && (rank == 3 || (rank == 5 && nc_kept))) {
      const int64_t outer = rank == 3 ? 1 : X.dim(0) * X.dim(1);
      ctx.outputs[0] = trilinear(X, out_dims, outer, g[rank - 3], g[rank - 2], g[rank - 1], attrs_, ctx.threads);
      return true;
    }
    return false;
  }

  NodeInfo node_;
  bool upsample_;
  ResizeAttrs attrs_;
  std::vector<float> attr_scales_;
};

}  // namespace

std::unique_ptr<Kernel> make_resize(const NodeInfo& node) { return std::make_unique<ResizeKernel>(node, false); }
std::unique_ptr<Kernel> make_upsample(const NodeInfo& node) { return std::make_unique<ResizeKernel>(node, true); }

}  // namespace qtool::runtime::kernels
