// Clip search: for every group that shares a scale (tensor, channel or block), try shrinking its range to
// a * (RTN range) for a on the grid 1.00, 0.99, ..., 0.50 and keep the a with the least squared reconstruction
// error of the group's weights, sum_i (w_i - DQ(Q(w_i)))^2. Clipping the few largest weights buys a finer step
// for all the others; a = 1 is plain round to nearest, so the error is never above RTN's.
// The zero point stays RTN's: shrinking lo and hi by the same factor keeps qmin - lo / scale unchanged.
// Integer dtypes only (float8 steps are not uniform: those weights are rounded to nearest); a saturation_safe
// scale is a lower bound (qparams.h), so such weights are not clipped either.
#include <algorithm>
#include <cmath>

#include "numerics/qparams.h"
#include "quantize/weights/weight_quantizer.h"

namespace qtool::quantize {
namespace {

constexpr int kGridSteps = 51;  // a = 1 - 0.01 * step
constexpr double kGridStep = 0.01;

}  // namespace

float clip_search_scale(const std::vector<double>& values, float scale, double zp, int64_t qmin, int64_t qmax) {
  float best = scale;
  double best_err = -1;
  for (int step = 0; step < kGridSteps; ++step) {
    const auto sc = static_cast<float>(scale * (1.0 - kGridStep * step));
    if (!(sc > 0)) break;
    double e = 0;
    for (double v : values) {
      const double q = std::clamp(std::nearbyint(v / sc) + zp, static_cast<double>(qmin), static_cast<double>(qmax));
      const double d = v - (q - zp) * sc;
      e += d * d;
    }
    if (best_err < 0 || e < best_err) best_err = e, best = sc;
  }
  return best;
}

WeightResult quantize_clip_search(const WeightInput& in) {
  const TensorSettings& s = in.settings;
  if (!is_integer(s.dtype) || s.saturation_safe) return quantize_rtn(in);
  WeightResult r;
  r.params = weight_params(in.w, s, in.axis, std::nullopt, in.threads);
  const int64_t groups = r.params.scale.numel();
  const ScaleIndex index = scale_index(in.w, r.params);
  const numerics::QBounds b = numerics::quant_bounds(spec_for(s));
  const std::vector<int64_t> zp = r.params.zero_points();
  float* scale = r.params.scale.data<float>();
  const float* w = in.w.data<float>();
  std::vector<std::vector<double>> members(static_cast<size_t>(groups));  // each group's weights
  for (int64_t i = 0; i < in.w.numel(); ++i) members[static_cast<size_t>(index(i))].push_back(w[i]);
  for (int64_t g = 0; g < groups; ++g)
    if (scale[g] > 0)
      scale[g] = clip_search_scale(members[static_cast<size_t>(g)], scale[g], static_cast<double>(zp[static_cast<size_t>(g)]),
                                   b.qmin, b.qmax);
  r.codes = quantize_tensor(in.w, r.params, Rounding::Nearest, in.threads);
  r.error = weight_sse(in.w, r.codes, r.params, in.threads);
  return r;
}

}  // namespace qtool::quantize
