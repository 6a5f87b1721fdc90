#include "quantize/qparams.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include "core/error.h"

namespace qtool::quantize {
namespace {

// Converts a float to float8 e4m3fn (round to nearest even, saturate to +-448; NaN -> 0x7F).
uint8_t to_e4m3fn(float x) {
  if (std::isnan(x)) return 0x7F;
  const uint8_t sign = std::signbit(x) ? 0x80 : 0;
  float a = std::fabs(x);
  if (a >= 448.0f) return sign | 0x7E;
  if (a < std::ldexp(1.0f, -10)) return sign;  // below half the smallest subnormal (2^-9)
  int e;
  std::frexp(a, &e);       // a = m * 2^e, m in [0.5, 1)
  int exp = e - 1;         // a = 1.f * 2^exp
  if (exp < -6) exp = -6;  // subnormals share exponent -6
  const float step = std::ldexp(1.0f, exp - 3);
  float q = std::nearbyint(a / step) * step;  // 3 mantissa bits
  if (q >= 448.0f) return sign | 0x7E;
  int qe;
  const float qm = std::frexp(q, &qe);
  int biased = qe - 1 + 7;
  if (biased <= 0) {  // subnormal: value = m/8 * 2^-6
    const int m = static_cast<int>(std::lround(q / std::ldexp(1.0f, -9)));
    return sign | static_cast<uint8_t>(m);
  }
  const int mant = static_cast<int>(std::lround((qm * 2.0f - 1.0f) * 8.0f));
  return sign | static_cast<uint8_t>((biased << 3) | mant);
}

}  // namespace

std::pair<int64_t, int64_t> qrange(const TensorSettings& s) {
  const auto& info = dtype_info(s.dtype);
  int64_t lo = info.qmin, hi = info.qmax;
  if (s.reduce_range) {  // one bit less
    if (info.is_signed) {
      lo /= 2;
      hi = hi / 2;
    } else {
      hi /= 2;
    }
  }
  if (s.narrow_range && info.is_signed) lo = -hi;
  return {lo, hi};
}

QParams params_from_range(double lo, double hi, const TensorSettings& s) {
  QParams p;
  p.dtype = s.dtype;
  if (s.dtype == DType::Float8E4M3FN || s.dtype == DType::Float8E5M2) {
    const double amax = std::max(std::fabs(lo), std::fabs(hi));
    const double fmax = s.dtype == DType::Float8E4M3FN ? 448.0 : 57344.0;
    p.scale = {static_cast<float>(amax > 0 ? amax / fmax : 1.0)};
    p.zero_point = {0};
    return p;
  }
  const auto [qmin, qmax] = qrange(s);
  lo = std::min(lo, 0.0);
  hi = std::max(hi, 0.0);
  double scale, zp;
  if (s.symmetric) {
    const double amax = std::max(std::fabs(lo), std::fabs(hi));
    const double half = static_cast<double>(qmax - qmin) / 2.0;
    scale = amax / half;
    zp = dtype_info(s.dtype).is_signed ? 0.0 : std::ceil((qmin + qmax) / 2.0);
  } else {
    scale = (hi - lo) / static_cast<double>(qmax - qmin);
    zp = scale > 0 ? std::nearbyint(static_cast<double>(qmin) - lo / scale) : 0.0;
  }
  if (!(scale > 0) || !std::isfinite(scale)) {
    scale = 1.0;
    zp = s.symmetric ? zp : (dtype_info(s.dtype).is_signed ? 0.0 : static_cast<double>(qmin));
  }
  zp = std::clamp(zp, static_cast<double>(qmin), static_cast<double>(qmax));
  p.scale = {static_cast<float>(scale)};
  p.zero_point = {static_cast<int64_t>(zp)};
  return p;
}

std::optional<float> existing_grid(const Tensor& w, const TensorSettings& s) {
  if (!s.symmetric || !is_integer(s.dtype) || !dtype_info(s.dtype).is_signed || w.numel() < 2) return std::nullopt;
  const float* d = w.data<float>();
  float lo = 0, hi = 0;
  for (int64_t i = 0; i < w.numel(); ++i) lo = std::min(lo, d[i]), hi = std::max(hi, d[i]);
  const double amax = std::max(-lo, hi);
  if (!(amax > 0)) return std::nullopt;
  const auto [qmin, qmax] = qrange(s);
  for (double steps : {127.0, 127.5, 128.0, 255.0, 7.0, 7.5, 8.0, 15.0}) {
    const double g = (steps == 255.0 || steps == 15.0) ? (static_cast<double>(hi) - lo) / steps : amax / steps;
    if (!(g > 0) || amax / g > static_cast<double>(qmax) + 1e-3 || -amax / g < static_cast<double>(qmin) - 1e-3)
      continue;
    bool on_grid = true;
    for (int64_t i = 0; i < w.numel() && on_grid; ++i) {
      const double r = d[i] / g;
      on_grid = std::fabs(r - std::nearbyint(r)) <= 1e-3;
    }
    if (on_grid) return static_cast<float>(g);
  }
  return std::nullopt;
}

QParams weight_params(const Tensor& w, const TensorSettings& s, int64_t axis) {
  const float* d = w.data<float>();
  if (const auto g = existing_grid(w, s)) {  // already quantized: keep its step, which is exact
    QParams p;
    p.dtype = s.dtype;
    const size_t n = s.granularity == Granularity::PerChannel && w.rank() > 0 ? static_cast<size_t>(w.dim(axis)) : 1;
    p.scale.assign(n, *g);
    p.zero_point.assign(n, dtype_info(s.dtype).is_signed ? 0 : (qrange(s).first + qrange(s).second + 1) / 2);
    return p;
  }
  if (s.granularity == Granularity::PerTensor || w.rank() == 0) {
    float lo = 0, hi = 0;
    for (int64_t i = 0; i < w.numel(); ++i) lo = std::min(lo, d[i]), hi = std::max(hi, d[i]);
    return params_from_range(lo, hi, s);
  }
  if (s.granularity == Granularity::PerBlock) throw UnsupportedError("per_block weights are not implemented yet");
  const int64_t channels = w.dim(axis);
  int64_t outer = 1, inner = 1;
  for (int64_t k = 0; k < axis; ++k) outer *= w.dim(k);
  for (int64_t k = axis + 1; k < w.rank(); ++k) inner *= w.dim(k);
  std::vector<float> lo(static_cast<size_t>(channels), 0.0f), hi(static_cast<size_t>(channels), 0.0f);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t c = 0; c < channels; ++c)
      for (int64_t i = 0; i < inner; ++i) {
        const float v = d[(o * channels + c) * inner + i];
        lo[c] = std::min(lo[c], v);
        hi[c] = std::max(hi[c], v);
      }
  QParams p;
  p.dtype = s.dtype;
  for (int64_t c = 0; c < channels; ++c) {
    const QParams pc = params_from_range(lo[c], hi[c], s);
    p.scale.push_back(pc.scale[0]);
    p.zero_point.push_back(pc.zero_point[0]);
  }
  return p;
}

namespace {

// Writes integer values into a tensor of p.dtype (4-bit types packed low nibble first).
Tensor pack_integers(const std::vector<int64_t>& q, DType dtype, const Shape& shape) {
  Tensor out = Tensor::zeros(dtype, shape);
  for (size_t i = 0; i < q.size(); ++i) {
    const int64_t qi = q[i];
    switch (dtype) {
      case DType::Int8:
        out.data<int8_t>()[i] = static_cast<int8_t>(qi);
        break;
      case DType::UInt8:
        out.data<uint8_t>()[i] = static_cast<uint8_t>(qi);
        break;
      case DType::Int16:
        out.data<int16_t>()[i] = static_cast<int16_t>(qi);
        break;
      case DType::UInt16:
        out.data<uint16_t>()[i] = static_cast<uint16_t>(qi);
        break;
      case DType::Int32:
        out.data<int32_t>()[i] = static_cast<int32_t>(qi);
        break;
      case DType::Int4:
      case DType::UInt4: {
        auto* b = reinterpret_cast<uint8_t*>(out.raw());
        const auto nib = static_cast<uint8_t>(qi & 0xF);
        b[i / 2] = static_cast<uint8_t>(i % 2 == 0 ? (b[i / 2] & 0xF0) | nib : (b[i / 2] & 0x0F) | (nib << 4));
        break;
      }
      default:
        throw UnsupportedError("quantize to " + std::string(dtype_name(dtype)) + " is not supported");
    }
  }
  return out;
}

// Kernel-sum rounding: within each group of `group` consecutive values (one output and one input channel's
// taps), flip the roundings that cost least until the group's rounding errors sum to at most 1/2 step.
// Neighbouring taps of a smooth input see nearly the same value, so the dot product's error then cancels
// instead of adding up to a bias (which plain rounding leaves in, e.g. -2.6 dB -> +11 dB PSNR on ESPCN).
void kernel_sum_round(const std::vector<double>& r, std::vector<int64_t>& q, int64_t group, int64_t qmin,
                      int64_t qmax) {
  for (size_t g0 = 0; g0 < r.size(); g0 += static_cast<size_t>(group)) {
    const size_t g1 = std::min(r.size(), g0 + static_cast<size_t>(group));
    double err = 0;
    for (size_t i = g0; i < g1; ++i) err += static_cast<double>(q[i]) - r[i];
    while (std::fabs(err) > 0.5) {
      const bool down = err > 0;
      size_t best = g1;
      double best_cost = 0;
      for (size_t i = g0; i < g1; ++i) {
        if (down ? q[i] <= qmin : q[i] >= qmax) continue;
        const double e = static_cast<double>(q[i]) - r[i];  // in [-0.5, 0.5] after nearest rounding
        const double cost = down ? -e : e;                  // smallest = rounded furthest in err's direction
        if (best == g1 || cost < best_cost) best = i, best_cost = cost;
      }
      if (best == g1) break;
      q[best] += down ? -1 : 1;
      err += down ? -1.0 : 1.0;
    }
  }
}

}  // namespace

Tensor quantize_tensor(const Tensor& x, const QParams& p, int64_t axis, Rounding rounding) {
  const float* d = x.data<float>();
  const bool per_axis = p.scale.size() > 1;
  int64_t channels = 1, inner = x.numel();
  if (per_axis) {
    channels = x.dim(axis);
    inner = 1;
    for (int64_t k = axis + 1; k < x.rank(); ++k) inner *= x.dim(k);
  }
  const auto n = static_cast<size_t>(x.numel());
  if (p.dtype == DType::Float8E4M3FN) {
    Tensor out(p.dtype, x.shape());
    for (size_t i = 0; i < n; ++i) {
      const size_t c = per_axis ? static_cast<size_t>((static_cast<int64_t>(i) / inner) % channels) : 0;
      reinterpret_cast<uint8_t*>(out.raw())[i] = to_e4m3fn(d[i] / p.scale[c]);
    }
    return out;
  }
  const auto& info = dtype_info(p.dtype);
  std::vector<double> r(n);
  std::vector<int64_t> q(n);
  for (size_t i = 0; i < n; ++i) {
    const size_t c = per_axis ? static_cast<size_t>((static_cast<int64_t>(i) / inner) % channels) : 0;
    r[i] = static_cast<double>(d[i]) / p.scale[c] + static_cast<double>(p.zero_point[c]);
    q[i] = static_cast<int64_t>(
        std::clamp(std::nearbyint(r[i]), static_cast<double>(info.qmin), static_cast<double>(info.qmax)));
  }
  if (rounding == Rounding::KernelSum && x.rank() >= 3) {
    int64_t group = 1;
    for (int64_t k = 2; k < x.rank(); ++k) group *= x.dim(k);
    if (group > 1) kernel_sum_round(r, q, group, info.qmin, info.qmax);
  }
  return pack_integers(q, p.dtype, x.shape());
}

Tensor quantize_bias(const Tensor& b, float input_scale, const std::vector<float>& weight_scales,
                     std::vector<float>& bias_scales) {
  const int64_t n = b.numel();
  bias_scales.assign(static_cast<size_t>(n), 0.0f);
  Tensor out(DType::Int32, b.shape());
  for (int64_t c = 0; c < n; ++c) {
    const float ws = weight_scales[weight_scales.size() == 1 ? 0 : static_cast<size_t>(c)];
    float s = input_scale * ws;
    if (!(s > 0)) s = 1.0f;
    bias_scales[static_cast<size_t>(c)] = s;
    const double q = std::nearbyint(static_cast<double>(b.data<float>()[c]) / s);
    out.data<int32_t>()[c] = static_cast<int32_t>(std::clamp(q, -2147483648.0, 2147483647.0));
  }
  return out;
}

Tensor scale_tensor(const QParams& p) {
  if (p.scale.size() == 1) return Tensor::scalar<float>(p.scale[0]);
  return Tensor::from_vector<float>({static_cast<int64_t>(p.scale.size())}, p.scale);
}

Tensor zero_point_tensor(const QParams& p) {
  const Shape shape = p.zero_point.size() == 1 ? Shape{} : Shape{static_cast<int64_t>(p.zero_point.size())};
  if (p.dtype == DType::Float8E4M3FN || p.dtype == DType::Float8E5M2) return Tensor::zeros(p.dtype, shape);
  return pack_integers(p.zero_point, p.dtype, shape);
}

}  // namespace qtool::quantize
