#include "quantize/weights/weight_quantizer.h"

#include <algorithm>
#include <vector>

#include "core/checked.h"
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

namespace {

// Code i of a packed or byte tensor, as a function object so row_sse inlines it for the common weight dtypes
// (dtype_info's load is an indirect call per element, most of a big model's quantize time before).
template <DType D>
struct CodeAt {
  float operator()(const std::byte* b, int64_t i) const {
    if constexpr (D == DType::Int8) return static_cast<float>(reinterpret_cast<const int8_t*>(b)[i]);
    if constexpr (D == DType::UInt8) return static_cast<float>(reinterpret_cast<const uint8_t*>(b)[i]);
    if constexpr (D == DType::Int4 || D == DType::UInt4) return static_cast<float>(nibble_at(b, i, D == DType::Int4));
    return 0.0f;
  }
};

// Sum over row r's elements of (w - (code - zp) * scale)^2; `load` reads a code (CodeAt, or dtype_info's load for
// the other dtypes).
template <class Load>
double row_sse(const float* x, const std::byte* codes, const float* zp, const float* sd, const numerics::QdqLayout& L,
               int64_t r, Load load) {
  const int64_t m = r / L.axis_len, k = r % L.axis_len;
  const int64_t s0 = m * L.scale_stride_outer + (k / L.block) * L.scale_stride_axis;
  auto sq = [&](int64_t j) {
    const int64_t i = r * L.inner + j;
    const int64_t si = s0 + j * L.scale_stride_inner;
    const double d = static_cast<double>(x[i]) - (load(codes, i) - zp[si]) * sd[si];
    return d * d;
  };
  // Four running sums (independent chains the CPU overlaps), combined in a fixed order.
  double s[4] = {0, 0, 0, 0};
  int64_t j = 0;
  for (; j + 4 <= L.inner; j += 4)
    for (int u = 0; u < 4; ++u) s[u] += sq(j + u);
  for (; j < L.inner; ++j) s[0] += sq(j);
  return (s[0] + s[1]) + (s[2] + s[3]);
}

}  // namespace

// Element by element, as DequantizeLinear computes it ((code - zero point) * scale in float), without a dequantized
// copy of the weight: a big model's quantization holds one float weight at a time (onnx/spill.h).
double weight_sse(const Tensor& w, const Tensor& codes, const QParams& p, int threads) {
  const numerics::QdqAttrs a = attrs_of(p);
  const numerics::QdqLayout L = numerics::qdq_layout(w.shape(), p.scale, &p.zero_point, a.axis, a.block_size, "scale",
                                               "zero_point");
  const Tensor zp = to_float32(p.zero_point);  // one per scale: as DequantizeLinear subtracts it, in float
  const float* x = w.data<float>();
  const float* sd = p.scale.data<float>();
  const float* z = zp.data<float>();
  const std::byte* c = codes.raw();
  const auto generic = dtype_info(codes.dtype()).load;
  // One partial sum per chunk of (outer, axis) rows, about 64K elements each whatever the thread count, the rows
  // of a chunk and the chunks added in order: the same total for any thread count, and a few partials even where
  // a row is one element (a per-channel weight on its last axis).
  const int64_t rows = L.outer * L.axis_len;
  const int64_t rows_per_chunk = std::max<int64_t>(1, (int64_t{1} << 16) / std::max<int64_t>(L.inner, 1));
  const int64_t chunks = checked_ceil_div(rows, rows_per_chunk, "weight row chunks");
  std::vector<double> partial(static_cast<size_t>(chunks));
  const int team = chunks > 1 ? std::max(threads, 1) : 1;
#pragma omp parallel for schedule(static) num_threads(team)
  for (int64_t ch = 0; ch < chunks; ++ch) {
    auto with = [&](auto load) {
      double sum = 0;
      for (int64_t r = ch * rows_per_chunk; r < std::min(rows, (ch + 1) * rows_per_chunk); ++r)
        sum += row_sse(x, c, z, sd, L, r, load);
      partial[static_cast<size_t>(ch)] = sum;
    };
    switch (codes.dtype()) {
      case DType::Int8:
        with(CodeAt<DType::Int8>{});
        break;
      case DType::UInt8:
        with(CodeAt<DType::UInt8>{});
        break;
      case DType::Int4:
        with(CodeAt<DType::Int4>{});
        break;
      case DType::UInt4:
        with(CodeAt<DType::UInt4>{});
        break;
      default:
        with(generic);
        break;
    }
  }
  double s = 0;
  for (double v : partial) s += v;
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
