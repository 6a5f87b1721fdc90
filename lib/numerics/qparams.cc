#include "numerics/qparams.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "core/checked.h"
#include "numerics/qdq.h"

namespace qtool::numerics {
namespace {
std::string dt(DType t) { return std::string(dtype_name(t)); }

// torch.round / ONNX rounding: half to even (default floating-point rounding mode).
float round_half_even(float v) { return std::nearbyint(v); }
}  // namespace

QBounds quant_bounds(const QSpec& spec) {
  const DTypeInfo& info = dtype_info(spec.dtype);
  if (info.cls != DTypeClass::Integer || info.bits > 16)
    throw UsageError("quantization dtype " + dt(spec.dtype) +
                     " has no integer range; use int8, uint8, int16, uint16, int4 or uint4");
  switch (spec.range) {
    case QRange::Full:
      return {info.qmin, info.qmax};
    case QRange::Narrow:
      return {info.is_signed ? info.qmin + 1 : info.qmin, info.qmax};
    case QRange::ReduceRange:
      // One bit less: signed [qmin/2, qmax/2] (int8 [-64, 63]); unsigned [0, qmax/2] (uint8 [0, 127]).
      return {info.qmin / 2, info.qmax / 2};
    case QRange::Explicit:
      if (spec.quant_min > spec.quant_max || spec.quant_min < info.qmin || spec.quant_max > info.qmax ||
          spec.quant_min > 0 || spec.quant_max < 0)
        throw UsageError("quant_min/quant_max [" + std::to_string(spec.quant_min) + ", " +
                         std::to_string(spec.quant_max) + "] must contain 0 and lie inside " + dt(spec.dtype) +
                         "'s range [" + std::to_string(info.qmin) + ", " + std::to_string(info.qmax) + "]");
      return {spec.quant_min, spec.quant_max};
  }
  throw InternalError("quant_bounds: unknown range");
}

QParams choose_qparams(float min_val, float max_val, const QSpec& spec) {
  if (!std::isfinite(min_val) || !std::isfinite(max_val))
    throw BadInputError("cannot choose a scale for the range [" + std::to_string(min_val) + ", " +
                        std::to_string(max_val) + "]: it is not finite (the tensor holds inf or NaN)");
  if (min_val > max_val)
    throw BadInputError("cannot choose a scale: min " + std::to_string(min_val) + " > max " + std::to_string(max_val));
  const float eps = spec.eps > 0.0f ? spec.eps : std::numeric_limits<float>::min();
  const float min_neg = std::min(min_val, 0.0f);
  const float max_pos = std::max(max_val, 0.0f);
  const DTypeInfo& info = dtype_info(spec.dtype);
  if (info.cls == DTypeClass::Float) {  // FP8 (and other float targets): scale = amax / max finite
    if (spec.mapping != QMapping::Symmetric)
      throw UsageError("quantization to " + dt(spec.dtype) + " is symmetric only (zero point 0)");
    const float amax = std::max(-min_neg, max_pos);
    return {std::max(amax / static_cast<float>(info.float_max), eps), 0};
  }
  const QBounds b = quant_bounds(spec);
  const float qmin = static_cast<float>(b.qmin), qmax = static_cast<float>(b.qmax);
  if (spec.mapping == QMapping::Symmetric) {
    const float amax = std::max(-min_neg, max_pos);
    int64_t zp = 0;
    float half_range;
    if (spec.convention == SymmetricScaleConvention::OrtMaxQ) {
      // ORT: compute_scale_zp on [-amax, amax] with signed ranges made symmetric ([-qmax, qmax]).
      half_range = info.is_signed ? qmax : (qmax - qmin) / 2.0f;
      if (!info.is_signed) zp = static_cast<int64_t>(std::nearbyint((b.qmin + b.qmax) / 2.0));
    } else {
      half_range = (qmax - qmin) / 2.0f;
      if (!info.is_signed)  // torch: 128 for uint8's full range, the rounded-down middle of a custom range
        zp = spec.range == QRange::Full ? (b.qmin + b.qmax + 1) / 2 : (b.qmin + b.qmax) / 2;
    }
    return {std::max(amax / half_range, eps), zp};
  }
  const float scale = std::max((max_pos - min_neg) / (qmax - qmin), eps);
  const float zpf = qmin - round_half_even(min_neg / scale);
  const int64_t zp = std::clamp(static_cast<int64_t>(zpf), b.qmin, b.qmax);
  return {scale, zp};
}

MinMax compute_minmax(const Tensor& x, const QGranularity& g, int threads) {
  if (!is_float(x.dtype())) throw UnsupportedError("range statistics need a float tensor, got " + dt(x.dtype()));
  MinMax mm;
  const auto load = dtype_info(x.dtype()).load;
  const std::byte* base = x.raw();
  const float inf = std::numeric_limits<float>::infinity();
  if (g.kind == Granularity::PerTensor) {
    float lo = inf, hi = -inf;
    const int64_t n = x.numel();
    const bool f32 = x.dtype() == DType::Float32;
    const float* xf = f32 ? x.data<float>() : nullptr;
#pragma omp parallel for num_threads(std::max(1, threads)) reduction(min                   \
                                                                     : lo) reduction(max   \
                                                                                     : hi) \
    schedule(static) if (threads > 1 && n > (1 << 16))
    for (int64_t i = 0; i < n; ++i) {
      const float v = f32 ? xf[i] : load(base, i);
      if (std::isnan(v)) continue;
      lo = std::min(lo, v);
      hi = std::max(hi, v);
    }
    mm.min = {lo};
    mm.max = {hi};
    return mm;
  }
  const int64_t rank = x.rank();
  if (g.axis < -rank || g.axis >= rank)
    throw UsageError("axis " + std::to_string(g.axis) + " is out of range for a tensor of shape " +
                     shape_str(x.shape()));
  const int64_t axis = g.axis < 0 ? g.axis + rank : g.axis;
  const int64_t block = g.kind == Granularity::PerBlock ? g.block_size : 0;
  if (g.kind == Granularity::PerBlock && block <= 0)
    throw UsageError("per-block granularity needs block_size > 0, got " + std::to_string(block));
  if (g.kind == Granularity::PerChannel) {
    mm.shape = {x.dim(axis)};
  } else {
    mm.shape = x.shape();
    mm.shape[static_cast<size_t>(axis)] = x.dim(axis) / block + (x.dim(axis) % block != 0);  // no overflow for huge blocks
  }
  const Tensor dummy_scale(DType::Float32, mm.shape);
  const QdqLayout L = qdq_layout(x.shape(), dummy_scale, nullptr, axis, block, "scale", "zero_point");
  const size_t groups = static_cast<size_t>(shape_numel(mm.shape));
  mm.min.assign(groups, inf);
  mm.max.assign(groups, -inf);
  const float* xf = x.dtype() == DType::Float32 ? x.data<float>() : nullptr;
  // Elements [m, k0..k1, n0..n1) into their groups.
  auto visit = [&](int64_t m, int64_t k0, int64_t k1, int64_t n0, int64_t n1) {
    for (int64_t k = k0; k < k1; ++k) {
      const int64_t row = (m * L.axis_len + k) * L.inner;
      const int64_t s0 = m * L.scale_stride_outer + (k / L.block) * L.scale_stride_axis;
      for (int64_t n = n0; n < n1; ++n) {
        const float v = xf ? xf[row + n] : load(base, row + n);
        if (std::isnan(v)) continue;
        const auto s = static_cast<size_t>(s0 + n * L.scale_stride_inner);
        mm.min[s] = std::min(mm.min[s], v);
        mm.max[s] = std::max(mm.max[s], v);
      }
    }
  };
  // Threads split the dimension that indexes the groups most finely (outer rows, runs of axis blocks, or inner
  // columns in chunks), so no two threads share a group: min and max are exact, the result the same for any count.
  // A run of axis blocks spans about kChunk elements of a row, so where a group is one column of a row-major
  // matrix (per-channel on the last axis: inner is 1) each row is read in runs of kChunk rather than an element at
  // a time (it was a quarter of an int8 per-channel weight-only quantize).
  constexpr int64_t kChunk = 1024;
  const int64_t blocks = checked_ceil_div(L.axis_len, L.block, "blocks per axis");  // block may be near INT64_MAX
  const int64_t run_blocks = L.block >= kChunk || L.inner >= kChunk
                                 ? 1
                                 : std::max<int64_t>(1, kChunk / std::max<int64_t>(1, L.block * L.inner));
  const int64_t run_len = run_blocks * L.block;  // block itself where run_blocks is 1, else at most kChunk
  const int64_t extent_outer = L.scale_stride_outer != 0 ? L.outer : 0;
  const int64_t extent_axis = L.scale_stride_axis != 0 ? checked_ceil_div(blocks, run_blocks, "block runs") : 0;
  const int64_t extent_inner = L.scale_stride_inner != 0 ? checked_ceil_div(L.inner, kChunk, "column chunks") : 0;
  const int64_t extent = std::max({extent_outer, extent_axis, extent_inner, int64_t{1}});
  const int team = threads > 1 && x.numel() >= (int64_t{1} << 16) && extent > 1 ? threads : 1;
#pragma omp parallel for schedule(static) num_threads(team)
  for (int64_t d = 0; d < extent; ++d) {
    if (extent == extent_outer) {
      visit(d, 0, L.axis_len, 0, L.inner);
    } else if (extent == extent_axis) {
      const int64_t k0 = d * run_len;  // < axis_len: d < extent_axis
      for (int64_t m = 0; m < L.outer; ++m) visit(m, k0, k0 + std::min(L.axis_len - k0, run_len), 0, L.inner);
    } else if (extent == extent_inner) {
      for (int64_t m = 0; m < L.outer; ++m) visit(m, 0, L.axis_len, d * kChunk, std::min(L.inner, (d + 1) * kChunk));
    } else {  // one group per split: serial
      for (int64_t m = 0; m < L.outer; ++m) visit(m, 0, L.axis_len, 0, L.inner);
    }
  }
  return mm;
}

QParamTensors qparams_from_minmax(const MinMax& mm, const QSpec& spec) {
  QParamTensors out{Tensor(DType::Float32, mm.shape), Tensor::zeros(spec.dtype, mm.shape)};
  const auto store = dtype_info(spec.dtype).store;
  float* s = out.scale.data<float>();
  for (size_t i = 0; i < mm.min.size(); ++i) {
    // A group with only NaN (or no elements) has min = +inf > max = -inf: treat it as all zero.
    const bool empty = mm.min[i] > mm.max[i];
    const QParams p = choose_qparams(empty ? 0.0f : mm.min[i], empty ? 0.0f : mm.max[i], spec);
    s[i] = p.scale;
    store(out.zero_point.raw(), static_cast<int64_t>(i), static_cast<float>(p.zero_point), true);
  }
  return out;
}

QParamTensors choose_qparams(const Tensor& x, const QGranularity& g, const QSpec& spec, int threads) {
  return qparams_from_minmax(compute_minmax(x, g, threads), spec);
}

}  // namespace qtool::numerics
