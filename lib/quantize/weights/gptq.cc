// GPTQ (Frantar et al. 2022, "GPTQ: Accurate Post-Training Quantization for Generative Pre-trained Transformers"):
// minimises the layer-output error || X W - X Q ||^2 over the calibration inputs X of the layer, one output row of
// W (here: the weight's values along its reduction axis K, for one output n) at a time, with the shared Hessian
// H = X^T X (the paper's 2 X^T X / rows; the factor changes nothing). Inputs never seen (H_ii = 0) get weight 0.
//   - Dampening: H += lambda I, lambda = 1 % of the mean diagonal (raised tenfold while H is not positive definite).
//   - U = upper Cholesky factor of H^-1 (H^-1 = U^T U). Columns k = 0..K-1 are quantized in order; the error of
//     column k, e = (w_k - q_k) / U_kk, is fed back into the not yet quantized columns: w_j -= e U_kj (j > k).
//   - Lazy batches: the feedback stays inside a batch of 128 columns; the rest of W gets the batch's errors in one
//     product at the end of the batch (same result, better memory traffic).
//   - Scales: per_block groups take their scale from the updated weights when their first column is reached
//     (the paper's "groupsize"; batches are whole groups), by clip search on those weights (as the reference
//     quantizer's "mse" option); per_channel and per_tensor scales are RTN's.
//   - Grids: integer dtypes round w / scale half to even and clamp to [qmin, qmax]; FP8 dtypes (per_channel or
//     per_tensor) round w / scale to the nearest value of the format, saturating at its largest finite value, as
//     QuantizeLinear does. The error feedback is the same for both: it only needs q, the dequantized value.
// Memory: one layer's weight (double) and its K x K Hessian; the caller goes layer by layer.
#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "numerics/qparams.h"
#include "quantize/weights/weight_quantizer.h"

namespace qtool::quantize {
namespace {

// In place: lower Cholesky factor L of the symmetric n x n matrix a (A = L L^T); false when not positive definite.
bool cholesky_lower(std::vector<double>& a, int64_t n) {
  for (int64_t j = 0; j < n; ++j) {
    double d = a[static_cast<size_t>(j * n + j)];
    for (int64_t k = 0; k < j; ++k) d -= a[static_cast<size_t>(j * n + k)] * a[static_cast<size_t>(j * n + k)];
    if (!(d > 0)) return false;
    const double l = std::sqrt(d);
    a[static_cast<size_t>(j * n + j)] = l;
    for (int64_t i = j + 1; i < n; ++i) {
      double v = a[static_cast<size_t>(i * n + j)];
      for (int64_t k = 0; k < j; ++k) v -= a[static_cast<size_t>(i * n + k)] * a[static_cast<size_t>(j * n + k)];
      a[static_cast<size_t>(i * n + j)] = v / l;
    }
    for (int64_t i = 0; i < j; ++i) a[static_cast<size_t>(i * n + j)] = 0;  // upper part: zero
  }
  return true;
}

// H^-1 from the lower Cholesky factor L of H: L^-1 by forward substitution, then L^-T L^-1.
std::vector<double> inverse_from_cholesky(const std::vector<double>& l, int64_t n) {
  std::vector<double> li(static_cast<size_t>(n * n), 0.0);
  for (int64_t c = 0; c < n; ++c) {
    li[static_cast<size_t>(c * n + c)] = 1.0 / l[static_cast<size_t>(c * n + c)];
    for (int64_t r = c + 1; r < n; ++r) {
      double v = 0;
      for (int64_t k = c; k < r; ++k) v -= l[static_cast<size_t>(r * n + k)] * li[static_cast<size_t>(k * n + c)];
      li[static_cast<size_t>(r * n + c)] = v / l[static_cast<size_t>(r * n + r)];
    }
  }
  std::vector<double> inv(static_cast<size_t>(n * n), 0.0);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j <= i; ++j) {
      double v = 0;
      for (int64_t k = i; k < n; ++k) v += li[static_cast<size_t>(k * n + i)] * li[static_cast<size_t>(k * n + j)];
      inv[static_cast<size_t>(i * n + j)] = inv[static_cast<size_t>(j * n + i)] = v;
    }
  return inv;
}

// Upper factor U (row-major, H^-1 = U^T U) of the dampened Hessian's inverse; dead inputs (H_ii = 0) get H_ii = 1.
std::vector<double> inverse_hessian_factor(const LayerHessian& hs, std::vector<bool>& dead) {
  const int64_t n = hs.k;
  double mean_diag = 0;
  dead.assign(static_cast<size_t>(n), false);
  for (int64_t i = 0; i < n; ++i) {
    dead[static_cast<size_t>(i)] = !(hs.h[static_cast<size_t>(i * n + i)] > 0);
    mean_diag += hs.h[static_cast<size_t>(i * n + i)];
  }
  mean_diag = mean_diag > 0 ? mean_diag / static_cast<double>(n) : 1.0;
  for (double damp = 0.01; damp < 1e4; damp *= 10) {
    std::vector<double> a = hs.h;
    for (int64_t i = 0; i < n; ++i) {
      if (dead[static_cast<size_t>(i)]) {
        for (int64_t j = 0; j < n; ++j) a[static_cast<size_t>(i * n + j)] = a[static_cast<size_t>(j * n + i)] = 0;
        a[static_cast<size_t>(i * n + i)] = 1;
      }
      a[static_cast<size_t>(i * n + i)] += damp * mean_diag;
    }
    if (!cholesky_lower(a, n)) continue;
    std::vector<double> inv = inverse_from_cholesky(a, n);
    if (!cholesky_lower(inv, n)) continue;
    std::vector<double> u(static_cast<size_t>(n * n));  // U = L'^T
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < n; ++j) u[static_cast<size_t>(i * n + j)] = inv[static_cast<size_t>(j * n + i)];
    return u;
  }
  throw BadInputError("gptq: the layer's Hessian is not positive definite even with heavy dampening (non-finite "
                      "calibration inputs?)");
}

}  // namespace

WeightResult quantize_gptq(const WeightInput& in) {
  const TensorSettings& s = in.settings;
  if (!in.hessian) throw InternalError("gptq: no Hessian for this weight");
  const Tensor& wt = in.w;
  if (wt.rank() != 2 || in.k_axis < 0 || in.k_axis > 1 || wt.dim(in.k_axis) != in.hessian->k)
    throw BadInputError("gptq needs a 2-D MatMul/Gemm weight whose reduction axis matches its input, got " +
                        shape_str(wt.shape()));
  const bool blocked = s.granularity == Granularity::PerBlock;
  const bool fp8 = is_float8(s.dtype);
  if (!is_integer(s.dtype) && !fp8)
    throw BadInputError("gptq quantizes to integer or FP8 dtypes, not " + std::string(dtype_name(s.dtype)));
  if (fp8 && blocked)
    throw BadInputError("gptq: per_block scales are searched on an integer grid; use per_channel for " +
                        std::string(dtype_name(s.dtype)) + " weights");
  if (blocked && in.axis != in.k_axis)
    throw BadInputError("gptq: per_block weights must be blocked along the reduction axis (" +
                        std::to_string(in.k_axis) + "), not axis " + std::to_string(in.axis));

  const int64_t K = in.hessian->k, N = wt.dim(1 - in.k_axis);
  auto at = [&](int64_t n, int64_t k) { return in.k_axis == 0 ? k * N + n : n * K + k; };  // element index in wt
  WeightResult r;
  r.params = weight_params(wt, s, in.axis);  // shapes and layout; per_block scales are recomputed below
  const ScaleIndex index = scale_index(wt, r.params);
  const numerics::QSpec spec = spec_for(s);
  const numerics::QBounds b = fp8 ? numerics::QBounds{} : numerics::quant_bounds(spec);
  float* scale = r.params.scale.data<float>();
  const auto& zinfo = dtype_info(r.params.zero_point.dtype());
  // The dequantized grid value nearest to w (see "Grids" above).
  auto nearest = [&](double w, double sc, double zp) -> double {
    if (!(sc > 0)) return 0.0;
    if (fp8) {
      std::byte code{};
      zinfo.store(&code, 0, static_cast<float>(w / sc), true);
      return static_cast<double>(zinfo.load(&code, 0)) * sc;
    }
    return (std::clamp(std::nearbyint(w / sc) + zp, static_cast<double>(b.qmin), static_cast<double>(b.qmax)) - zp) *
           sc;
  };

  std::vector<bool> dead;
  const std::vector<double> U = inverse_hessian_factor(*in.hessian, dead);
  // W as N rows of K (row-major, double), the working copy GPTQ updates.
  std::vector<double> W(static_cast<size_t>(N * K)), Q(W.size());
  const float* wd = wt.data<float>();
  for (int64_t n = 0; n < N; ++n)
    for (int64_t k = 0; k < K; ++k)
      W[static_cast<size_t>(n * K + k)] = dead[static_cast<size_t>(k)] ? 0.0 : wd[at(n, k)];

  const int64_t group = blocked ? s.block_size : K;
  const int64_t batch = blocked ? group * std::max<int64_t>(1, 128 / group) : 128;
  std::vector<double> err(static_cast<size_t>(N * batch)), block;
  for (int64_t k1 = 0; k1 < K; k1 += batch) {
    const int64_t k2 = std::min(K, k1 + batch);
    for (int64_t k = k1; k < k2; ++k) {
      if (blocked && k % group == 0) {  // this block's scale from the updated weights of its columns
        const int64_t ke = std::min(K, k + group);
        for (int64_t n = 0; n < N; ++n) {
          double lo = 0, hi = 0;
          for (int64_t j = k; j < ke; ++j)
            lo = std::min(lo, W[static_cast<size_t>(n * K + j)]), hi = std::max(hi, W[static_cast<size_t>(n * K + j)]);
          const numerics::QParams g = numerics::choose_qparams(static_cast<float>(lo), static_cast<float>(hi), spec);
          const int64_t si = index(at(n, k));
          block.assign(W.begin() + n * K + k, W.begin() + n * K + ke);
          scale[si] = clip_search_scale(block, g.scale, g.zero_point, b.qmin, b.qmax);
          zinfo.store(r.params.zero_point.raw(), si, static_cast<float>(g.zero_point), true);
        }
      }
      const double d = U[static_cast<size_t>(k * K + k)];
      for (int64_t n = 0; n < N; ++n) {
        const int64_t si = index(at(n, k));
        const double sc = scale[si], zp = zinfo.load(r.params.zero_point.raw(), si);
        const double w = W[static_cast<size_t>(n * K + k)];
        const double q = nearest(w, sc, zp);
        Q[static_cast<size_t>(n * K + k)] = q;
        const double e = (w - q) / d;
        err[static_cast<size_t>(n * batch + (k - k1))] = e;
        for (int64_t j = k + 1; j < k2; ++j) W[static_cast<size_t>(n * K + j)] -= e * U[static_cast<size_t>(k * K + j)];
      }
    }
    for (int64_t n = 0; n < N; ++n)  // lazy update of the columns after the batch
      for (int64_t k = k1; k < k2; ++k) {
        const double e = err[static_cast<size_t>(n * batch + (k - k1))];
        for (int64_t j = k2; j < K; ++j) W[static_cast<size_t>(n * K + j)] -= e * U[static_cast<size_t>(k * K + j)];
      }
  }
  // The dequantized values lie on the grid: QuantizeLinear gives back exactly their codes.
  Tensor dq = Tensor::zeros(DType::Float32, wt.shape());
  float* dd = dq.data<float>();
  for (int64_t n = 0; n < N; ++n)
    for (int64_t k = 0; k < K; ++k) dd[at(n, k)] = static_cast<float>(Q[static_cast<size_t>(n * K + k)]);
  r.codes = quantize_tensor(dq, r.params);
  r.error = output_sse(wt, r.codes, r.params, in.k_axis, *in.hessian);
  r.metric = "output_sse";
  return r;
}

}  // namespace qtool::quantize
