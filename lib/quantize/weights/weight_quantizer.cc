#include "quantize/weights/weight_quantizer.h"

#include "core/error.h"
#include "numerics/qdq.h"

namespace qtool::quantize {
namespace {

numerics::QdqAttrs attrs_of(const QParams& p) {
  numerics::QdqAttrs a;
  a.axis = p.axis >= 0 ? p.axis : 1;
  a.block_size = p.block_size;
  return a;
}

Tensor dequantized(const Tensor& codes, const QParams& p) {
  return numerics::dequantize_linear(codes, p.scale, &p.zero_point, attrs_of(p));
}

}  // namespace

bool gptq_has_rows(const LayerHessian& h) { return h.rows >= h.k; }

WeightResult quantize_weight_values(const WeightInput& in) {
  switch (in.settings.algorithm) {
    case WeightAlgorithm::Rtn:
      return quantize_rtn(in);
    case WeightAlgorithm::ClipSearch:
      return quantize_clip_search(in);
    case WeightAlgorithm::Gptq:
      if (in.w.rank() > 2) return quantize_conv_gptq(in);
      return in.hessian && !gptq_has_rows(*in.hessian) ? quantize_rtn(in) : quantize_gptq(in);
    case WeightAlgorithm::Awq:
      return quantize_awq(in);
  }
  throw InternalError("unknown weight algorithm");
}

ScaleIndex scale_index(const Tensor& w, const QParams& p) {
  const numerics::QdqAttrs a = attrs_of(p);
  const numerics::QdqLayout L = numerics::qdq_layout(w.shape(), p.scale, &p.zero_point, a.axis, a.block_size, "scale",
                                               "zero_point");
  return {L.axis_len * L.inner, L.inner, L.axis_len, L.block, L.scale_stride_outer, L.scale_stride_axis,
          L.scale_stride_inner};
}

// Element by element, as DequantizeLinear computes it ((code - zero point) * scale in float), without a dequantized
// copy of the weight: a big model's quantization holds one float weight at a time (onnx/spill.h).
double weight_sse(const Tensor& w, const Tensor& codes, const QParams& p) {
  const numerics::QdqAttrs a = attrs_of(p);
  const numerics::QdqLayout L = numerics::qdq_layout(w.shape(), p.scale, &p.zero_point, a.axis, a.block_size, "scale",
                                               "zero_point");
  const auto& cinfo = dtype_info(codes.dtype());
  const auto& zinfo = dtype_info(p.zero_point.dtype());
  const float* x = w.data<float>();
  const float* sd = p.scale.data<float>();
  double s = 0;
  for (int64_t m = 0; m < L.outer; ++m)
    for (int64_t k = 0; k < L.axis_len; ++k)
      for (int64_t j = 0; j < L.inner; ++j) {
        const int64_t i = (m * L.axis_len + k) * L.inner + j;
        const int64_t si = m * L.scale_stride_outer + (k / L.block) * L.scale_stride_axis + j * L.scale_stride_inner;
        const float dq = (cinfo.load(codes.raw(), i) - zinfo.load(p.zero_point.raw(), si)) * sd[si];
        const double d = static_cast<double>(x[i]) - dq;
        s += d * d;
      }
  return s;
}

double output_sse(const Tensor& w, const Tensor& codes, const QParams& p, int64_t k_axis, const LayerHessian& h) {
  if (w.rank() != 2 || k_axis < 0 || k_axis > 1 || w.dim(k_axis) != h.k)
    throw InternalError("output_sse: weight " + shape_str(w.shape()) + " does not match a Hessian of size " +
                        std::to_string(h.k));
  const Tensor dq = dequantized(codes, p);
  const int64_t K = h.k, N = w.dim(1 - k_axis);
  const float* a = w.data<float>();
  const float* b = dq.data<float>();
  std::vector<double> d(static_cast<size_t>(K));
  double s = 0;
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t k = 0; k < K; ++k) {
      const int64_t i = k_axis == 0 ? k * N + n : n * K + k;
      d[static_cast<size_t>(k)] = static_cast<double>(a[i]) - b[i];
    }
    for (int64_t r = 0; r < K; ++r) {
      // four partial sums: independent chains the CPU overlaps (AWQ evaluates this 22 times per weight)
      const double* hr = h.h.data() + r * K;
      const double* dv = d.data();
      double a0 = 0, a1 = 0, a2 = 0, a3 = 0;
      int64_t c = 0;
      for (; c + 4 <= K; c += 4) {
        a0 += hr[c] * dv[c];
        a1 += hr[c + 1] * dv[c + 1];
        a2 += hr[c + 2] * dv[c + 2];
        a3 += hr[c + 3] * dv[c + 3];
      }
      for (; c < K; ++c) a0 += hr[c] * dv[c];
      s += dv[r] * ((a0 + a1) + (a2 + a3));
    }
  }
  return s;
}

}  // namespace qtool::quantize
