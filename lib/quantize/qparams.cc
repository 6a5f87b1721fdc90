#include "quantize/qparams.h"

#include <algorithm>
#include <cmath>

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

QParams weight_params(const Tensor& w, const TensorSettings& s, int64_t axis) {
  const float* d = w.data<float>();
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

Tensor quantize_tensor(const Tensor& x, const QParams& p, int64_t axis) {
  const float* d = x.data<float>();
  const bool per_axis = p.scale.size() > 1;
  int64_t channels = 1, inner = x.numel();
  if (per_axis) {
    channels = x.dim(axis);
    inner = 1;
    for (int64_t k = axis + 1; k < x.rank(); ++k) inner *= x.dim(k);
  }
  Tensor out(p.dtype, x.shape());
  const bool fp8 = p.dtype == DType::Float8E4M3FN;
  const auto& info = dtype_info(p.dtype);
  for (int64_t i = 0; i < x.numel(); ++i) {
    const size_t c = per_axis ? static_cast<size_t>((i / inner) % channels) : 0;
    const double v = static_cast<double>(d[i]) / p.scale[c];
    if (fp8) {
      reinterpret_cast<uint8_t*>(out.raw())[i] = to_e4m3fn(static_cast<float>(v));
      continue;
    }
    const double q = std::clamp(std::nearbyint(v) + static_cast<double>(p.zero_point[c]),
                                static_cast<double>(info.qmin), static_cast<double>(info.qmax));
    const auto qi = static_cast<int64_t>(q);
    switch (p.dtype) {
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
        const uint8_t nib = static_cast<uint8_t>(qi & 0xF);
        if (i % 2 == 0)
          b[i / 2] = nib;
        else
          b[i / 2] = static_cast<uint8_t>(b[i / 2] | (nib << 4));
        break;
      }
      default:
        throw UnsupportedError("quantize to " + std::string(dtype_name(p.dtype)) + " is not supported");
    }
  }
  return out;
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
  Tensor t = Tensor::zeros(p.dtype, shape);
  if (p.dtype == DType::Float8E4M3FN || p.dtype == DType::Float8E5M2) return t;
  const auto& info = dtype_info(p.dtype);
  for (size_t i = 0; i < p.zero_point.size(); ++i) {
    const int64_t z = p.zero_point[i];
    switch (p.dtype) {
      case DType::Int8:
        t.data<int8_t>()[i] = static_cast<int8_t>(z);
        break;
      case DType::UInt8:
        t.data<uint8_t>()[i] = static_cast<uint8_t>(z);
        break;
      case DType::Int16:
        t.data<int16_t>()[i] = static_cast<int16_t>(z);
        break;
      case DType::UInt16:
        t.data<uint16_t>()[i] = static_cast<uint16_t>(z);
        break;
      case DType::Int32:
        t.data<int32_t>()[i] = static_cast<int32_t>(z);
        break;
      case DType::Int4:
      case DType::UInt4: {
        auto* b = reinterpret_cast<uint8_t*>(t.raw());
        const uint8_t nib = static_cast<uint8_t>(z & 0xF);
        b[i / 2] = static_cast<uint8_t>(i % 2 == 0 ? (b[i / 2] & 0xF0) | nib : (b[i / 2] & 0x0F) | (nib << 4));
        break;
      }
      default:
        throw InternalError("zero point dtype " + std::string(info.name));
    }
  }
  return t;
}

}  // namespace qtool::quantize
