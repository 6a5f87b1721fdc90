#include "quantize/qparams.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "numerics/qdq.h"

namespace qtool::quantize {

std::vector<float> QParams::scales() const { return {scale.data<float>(), scale.data<float>() + scale.numel()}; }

std::vector<int64_t> QParams::zero_points() const {
  std::vector<int64_t> out(static_cast<size_t>(zero_point.numel()));
  const auto& info = dtype_info(zero_point.dtype());
  for (int64_t i = 0; i < zero_point.numel(); ++i)
    out[static_cast<size_t>(i)] = static_cast<int64_t>(info.load(zero_point.raw(), i));
  return out;
}

numerics::QSpec spec_for(const TensorSettings& s) {
  numerics::QSpec spec;
  spec.dtype = s.dtype;
  const bool fp8 = dtype_info(s.dtype).cls == DTypeClass::Float;
  spec.mapping = s.symmetric || fp8 ? numerics::QMapping::Symmetric : numerics::QMapping::Asymmetric;
  spec.range = s.reduce_range                                            ? numerics::QRange::ReduceRange
               : s.narrow_range && dtype_info(s.dtype).is_signed && !fp8 ? numerics::QRange::Narrow
                                                                         : numerics::QRange::Full;
  spec.convention = numerics::SymmetricScaleConvention::OrtMaxQ;  // int8: amax / 127, as ONNX Runtime
  return spec;
}

QParams params_from_range(double lo, double hi, const TensorSettings& s) {
  const numerics::QParams q = numerics::choose_qparams(static_cast<float>(lo), static_cast<float>(hi), spec_for(s));
  return fixed_params(q.scale, q.zero_point, s.dtype);
}

QParams fixed_params(double scale, int64_t zero_point, DType dtype) {
  QParams p;
  p.scale = Tensor::scalar<float>(static_cast<float>(scale));
  p.zero_point = Tensor::zeros(dtype, {});
  dtype_info(dtype).store(p.zero_point.raw(), 0, static_cast<float>(zero_point), true);
  return p;
}

std::optional<float> existing_grid(const Tensor& w, const TensorSettings& s) {
  if (!s.symmetric || !is_integer(s.dtype) || !dtype_info(s.dtype).is_signed || w.numel() < 2) return std::nullopt;
  const float* d = w.data<float>();
  float lo = 0, hi = 0;
  for (int64_t i = 0; i < w.numel(); ++i) lo = std::min(lo, d[i]), hi = std::max(hi, d[i]);
  const double amax = std::max(-lo, hi);
  if (!(amax > 0)) return std::nullopt;
  const numerics::QBounds b = numerics::quant_bounds(spec_for(s));
  for (double steps : {127.0, 127.5, 128.0, 255.0, 7.0, 7.5, 8.0, 15.0}) {
    const double g = (steps == 255.0 || steps == 15.0) ? (static_cast<double>(hi) - lo) / steps : amax / steps;
    if (!(g > 0) || amax / g > static_cast<double>(b.qmax) + 1e-3 || -amax / g < static_cast<double>(b.qmin) - 1e-3)
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

namespace {

// Per scale (one per tensor, or one per index along `axis`): the sum of the two largest magnitudes it scales.
std::vector<double> top_two_sums(const Tensor& w, int64_t axis, int64_t channels) {
  std::vector<double> m1(static_cast<size_t>(channels), 0.0), m2(m1);
  int64_t inner = 1;
  if (channels > 1)
    for (int64_t k = axis + 1; k < w.rank(); ++k) inner *= w.dim(k);
  const float* d = w.data<float>();
  for (int64_t i = 0; i < w.numel(); ++i) {
    const auto c = static_cast<size_t>(channels > 1 ? (i / inner) % channels : 0);
    const double a = std::fabs(static_cast<double>(d[i]));
    if (a > m1[c])
      m2[c] = m1[c], m1[c] = a;
    else if (a > m2[c])
      m2[c] = a;
  }
  for (size_t c = 0; c < m1.size(); ++c) m1[c] += m2[c];
  return m1;
}

constexpr double kSafePairCodes = 126.0;  // see saturation_safe in qparams.h: rounding can add up to 2 codes

bool pair_fits(double pair_sum, double scale) { return pair_sum / scale <= kSafePairCodes + 1e-6; }

}  // namespace

QParams weight_params(const Tensor& w, const TensorSettings& s, int64_t axis,
                      const std::optional<std::vector<double>>& kernel_pairs, int threads) {
  numerics::QGranularity g;
  if (s.granularity == Granularity::PerChannel && axis >= 0) {
    g.kind = numerics::Granularity::PerChannel;
    g.axis = axis;
  } else if (s.granularity == Granularity::PerBlock && axis >= 0) {
    g.kind = numerics::Granularity::PerBlock;
    g.axis = axis;
    g.block_size = s.block_size;
  }
  QParams p;
  const bool safe = s.saturation_safe && g.kind != numerics::Granularity::PerBlock && s.dtype == DType::Int8 &&
                    s.symmetric && w.dtype() == DType::Float32;
  const int64_t channels = g.kind == numerics::Granularity::PerChannel ? w.dim(axis) : 1;
  std::vector<double> pair_sums;  // per scale; empty when not saturation-safe
  if (safe)
    pair_sums = kernel_pairs && kernel_pairs->size() == static_cast<size_t>(channels) ? *kernel_pairs
                                                                                       : top_two_sums(w, axis, channels);
  const auto step = g.kind != numerics::Granularity::PerBlock ? existing_grid(w, s) : std::nullopt;
  if (step) {
    // Already quantized: keep its step, which is exact (unless its codes could overflow: see below).
    const bool fits = std::all_of(pair_sums.begin(), pair_sums.end(), [&](double v) { return pair_fits(v, *step); });
    if (fits) {
      const Shape shape = g.kind == numerics::Granularity::PerChannel ? Shape{channels} : Shape{};
      p.scale = Tensor::from_vector<float>(shape, std::vector<float>(static_cast<size_t>(channels), *step));
      p.zero_point = Tensor::zeros(s.dtype, shape);
      p.axis = g.kind == numerics::Granularity::PerChannel ? axis : -1;
      return p;
    }
  }
  numerics::QParamTensors t = numerics::choose_qparams(w, g, spec_for(s), threads);
  const bool per_channel_grid = step.has_value() && g.kind == numerics::Granularity::PerChannel;
  const float grid = step.value_or(0.0f);
  if (safe) {
    float* sc = t.scale.data<float>();
    for (size_t c = 0; c < pair_sums.size(); ++c) {
      // Per channel, an existing grid stays where its codes cannot overflow (exact there); elsewhere the channel
      // gets the smallest safe scale.
      if (per_channel_grid && pair_fits(pair_sums[c], grid))
        sc[c] = grid;
      else
        sc[c] = std::max(sc[c], static_cast<float>(pair_sums[c] / kSafePairCodes));
    }
  }
  p.scale = std::move(t.scale);
  p.zero_point = std::move(t.zero_point);
  p.axis = g.kind == numerics::Granularity::PerTensor ? -1 : axis;
  p.block_size = g.kind == numerics::Granularity::PerBlock ? g.block_size : 0;
  return p;
}

namespace {

// Kernel-sum rounding: within each group of `group` consecutive values (one output and one input channel's
// taps), flip the roundings that cost least until the group's rounding errors sum to at most 1/2 step.
// Neighbouring taps of a smooth input see nearly the same value, so the dot product's error then cancels
// instead of adding up to a bias (ESPCN super-resolution: 31.3 dB -> 42.5 dB PSNR against float).
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
        const double e = static_cast<double>(q[i]) - r[i];
        const double cost = down ? -e : e;  // smallest = rounded furthest in err's direction
        if (best == g1 || cost < best_cost) best = i, best_cost = cost;
      }
      if (best == g1) break;
      q[best] += down ? -1 : 1;
      err += down ? -1.0 : 1.0;
    }
  }
}

}  // namespace

Tensor quantize_tensor(const Tensor& x, const QParams& p, Rounding rounding, int threads) {
  numerics::QdqAttrs attrs;
  attrs.axis = p.axis >= 0 ? p.axis : 1;
  attrs.block_size = p.block_size;
  Tensor q = numerics::quantize_linear(x, p.scale, &p.zero_point, attrs, threads);
  const auto& info = dtype_info(q.dtype());
  if (rounding != Rounding::KernelSum || x.rank() < 3 || info.cls != DTypeClass::Integer) return q;
  int64_t group = 1;
  for (int64_t k = 2; k < x.rank(); ++k) group *= x.dim(k);
  if (group <= 1) return q;
  // The exact quotient r = x / scale + zp of every element, from the same (outer, axis, block, inner) layout.
  const numerics::QdqLayout L =
      numerics::qdq_layout(x.shape(), p.scale, &p.zero_point, attrs.axis, p.block_size, "scale", "zero_point");
  const float* xd = x.data<float>();
  const float* sd = p.scale.data<float>();
  const auto& zinfo = dtype_info(p.zero_point.dtype());
  const auto n = static_cast<size_t>(x.numel());
  std::vector<double> r(n);
  std::vector<int64_t> qi(n);
  for (int64_t m = 0; m < L.outer; ++m)
    for (int64_t k = 0; k < L.axis_len; ++k)
      for (int64_t j = 0; j < L.inner; ++j) {
        const int64_t i = (m * L.axis_len + k) * L.inner + j;
        const int64_t si = m * L.scale_stride_outer + (k / L.block) * L.scale_stride_axis + j * L.scale_stride_inner;
        r[i] = static_cast<double>(xd[i]) / sd[si] + zinfo.load(p.zero_point.raw(), si);
        qi[i] = static_cast<int64_t>(info.load(q.raw(), i));
      }
  kernel_sum_round(r, qi, group, info.qmin, info.qmax);
  for (size_t i = 0; i < n; ++i) info.store(q.raw(), static_cast<int64_t>(i), static_cast<float>(qi[i]), true);
  return q;
}

void widen_for_bias(QParams& weight, const Tensor& bias, float input_scale) {
  const int64_t n = weight.scale.numel();
  if (bias.dtype() != DType::Float32 || bias.rank() != 1 || (n != 1 && n != bias.numel()) || !(input_scale > 0)) return;
  float* sd = weight.scale.data<float>();
  const float* bd = bias.data<float>();
  constexpr double kMaxCode = 2147483647.0 * 0.5;  // headroom: ORT adds the zero-point corrections in int32
  for (int64_t c = 0; c < bias.numel(); ++c) {
    float& s = sd[n == 1 ? 0 : c];
    const double need = std::fabs(static_cast<double>(bd[c])) / (static_cast<double>(input_scale) * kMaxCode);
    if (need > s) s = static_cast<float>(need);
  }
}

QParams bias_params(float input_scale, const std::vector<float>& weight_scales, int64_t channels) {
  QParams p;
  std::vector<float> s(static_cast<size_t>(weight_scales.size() == 1 ? 1 : channels));
  for (size_t c = 0; c < s.size(); ++c) {
    s[c] = input_scale * weight_scales[weight_scales.size() == 1 ? 0 : c];
    if (!(s[c] > 0)) s[c] = 1.0f;
  }
  const Shape shape = s.size() == 1 ? Shape{} : Shape{static_cast<int64_t>(s.size())};
  p.scale = Tensor::from_vector<float>(shape, s);
  p.zero_point = Tensor::zeros(DType::Int32, shape);
  p.axis = s.size() == 1 ? -1 : 0;
  return p;
}

std::optional<Tensor> quantize_bias(const Tensor& b, const QParams& p) {
  // int32 codes can exceed 2^24, beyond what quantize_linear's float32 path represents exactly: double here.
  const float* sd = p.scale.data<float>();
  std::vector<int32_t> q(static_cast<size_t>(b.numel()));
  for (int64_t c = 0; c < b.numel(); ++c) {
    const double v = std::nearbyint(static_cast<double>(b.data<float>()[c]) / sd[p.scale.numel() == 1 ? 0 : c]);
    if (!(v >= -2147483648.0 && v <= 2147483647.0)) return std::nullopt;
    q[static_cast<size_t>(c)] = static_cast<int32_t>(v);
  }
  return Tensor::from_vector<int32_t>(b.shape(), q);
}

}  // namespace qtool::quantize
