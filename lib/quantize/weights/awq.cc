// AWQ, activation-aware weight quantization (Lin et al. 2023), for 2-D MatMul/Gemm weights. Error it minimises:
// the layer-output error on the calibration rows X,
//     || X W - (X S^-1) DQ(Q(S W)) ||^2 = sum over outputs n of d_n^T (S^-1 H S^-1) d_n,  d_n = (S W - DQ(Q(S W)))_n,
// S = diag(s) over the input channels, s_k = a_k^alpha / sqrt(max_k a^alpha * min_k a^alpha) (AutoAWQ's
// normalisation), a_k = sqrt(H_kk / rows): the RMS of input channel k from the Hessian's diagonal (the paper uses
// mean |x_k|; H is what qtool collects). alpha is searched on the paper's grid 0, 0.05, ..., 1; alpha = 0 is s = 1,
// plain RTN, so the result is never worse than RTN on this error. Q is round to nearest with the weight's settings
// during the search; at the best alpha the clip search (clip_search.cc) of S W replaces it where it lowers the same
// error (AutoAWQ's second stage searches clipping on the scaled weight too).
// The float model stays exact: the caller multiplies the layer's input by `input_scale` = 1/s (a Mul in qdq.cc).
#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "quantize/weights/weight_quantizer.h"

namespace qtool::quantize {

WeightResult quantize_awq(const WeightInput& in) {
  if (!in.hessian || in.w.rank() != 2 || in.k_axis < 0 || in.k_axis > 1 || in.w.dim(in.k_axis) != in.hessian->k)
    throw InternalError("quantize_awq: needs a 2-D weight and its layer's Hessian");
  const LayerHessian& h = *in.hessian;
  const int64_t K = h.k, N = in.w.dim(1 - in.k_axis);
  const double rows = static_cast<double>(std::max<int64_t>(h.rows, 1));
  std::vector<double> act(static_cast<size_t>(K));
  for (int64_t k = 0; k < K; ++k)
    act[static_cast<size_t>(k)] = std::max(std::sqrt(std::max(h.h[static_cast<size_t>(k * K + k)], 0.0) / rows), 1e-8);
  const float* w = in.w.data<float>();
  auto evaluate = [&](double alpha, WeightResult (*quantizer)(const WeightInput&)) {
    std::vector<double> s(static_cast<size_t>(K));
    double lo = INFINITY, hi = 0;
    for (int64_t k = 0; k < K; ++k) {
      s[static_cast<size_t>(k)] = std::pow(act[static_cast<size_t>(k)], alpha);
      lo = std::min(lo, s[static_cast<size_t>(k)]);
      hi = std::max(hi, s[static_cast<size_t>(k)]);
    }
    // 1/s is stored as float; the weight is scaled by its exact inverse so that (x / s) (s W) = x W in float
    Tensor inv(DType::Float32, {K});
    const double norm = std::sqrt(lo * hi);
    for (int64_t k = 0; k < K; ++k)
      inv.data<float>()[k] = static_cast<float>(norm / s[static_cast<size_t>(k)]);
    Tensor scaled(DType::Float32, in.w.shape());
    for (int64_t k = 0; k < K; ++k)
      for (int64_t n = 0; n < N; ++n) {
        const int64_t i = in.k_axis == 0 ? k * N + n : n * K + k;
        scaled.data<float>()[i] = static_cast<float>(w[i] / static_cast<double>(inv.data<float>()[k]));
      }
    LayerHessian hs = h;
    for (int64_t r = 0; r < K; ++r)
      for (int64_t c = 0; c < K; ++c)
        hs.h[static_cast<size_t>(r * K + c)] *=
            static_cast<double>(inv.data<float>()[r]) * static_cast<double>(inv.data<float>()[c]);
    WeightResult r = quantizer(WeightInput{scaled, in.settings, in.axis});
    r.error = output_sse(scaled, r.codes, r.params, in.k_axis, hs);
    r.metric = "output_sse";
    r.input_scale = std::move(inv);
    return r;
  };
  WeightResult best = evaluate(0.0, quantize_rtn);
  double best_alpha = 0.0;
  for (int step = 1; step <= 20; ++step)
    if (WeightResult r = evaluate(step / 20.0, quantize_rtn); r.error < best.error) {
      best = std::move(r);
      best_alpha = step / 20.0;
    }
  if (WeightResult r = evaluate(best_alpha, quantize_clip_search); r.error < best.error) best = std::move(r);
  return best;
}

}  // namespace qtool::quantize
