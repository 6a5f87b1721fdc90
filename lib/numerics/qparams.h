// Choosing quantization parameters (scale, zero point) from observed ranges, in the terms of torch.ao,
// torchao and NVIDIA ModelOpt.
//
// Range [qmin, qmax] (QRange):
//   Full        the dtype's range, e.g. int8 [-128, 127]
//   Narrow      signed types drop the most negative code, e.g. int8 [-127, 127] (unsigned: [0, qmax - 1]
//               is NOT used; unsigned types keep their full range)
//   ReduceRange one bit less, as torch's reduce_range: int8 [-64, 63], uint8 [0, 127]
//   Explicit    quant_min / quant_max given by the caller (must lie inside the dtype's range)
// Mapping (QMapping), for min_val <= max_val; the range is first widened to include 0
//   (min_neg = min(min_val, 0), max_pos = max(max_val, 0)):
//   Symmetric   amax = max(-min_neg, max_pos)
//               TorchHalfRange: scale = amax / ((qmax - qmin) / 2)      int8 full range: amax / 127.5
//               OrtMaxQ:        signed types use [-qmax, qmax] first  int8: amax / 127 (ORT, ModelOpt)
//               zero point: 0 for signed types; for unsigned types the middle of the range (uint8: 128)
//   Asymmetric  scale = (max_pos - min_neg) / (qmax - qmin)
//               zero_point = clamp(qmin - round_half_even(min_neg / scale), qmin, qmax)
//   scale = max(scale, eps) (eps default = float32 epsilon, torch's default), so an all-zero or constant tensor
//   gets a small valid scale, never 0, inf or NaN. Arithmetic is float32, as in torch's observers.
// FP8 dtypes: scale = max(amax / float_max, eps) (E4M3FN: amax / 448 as torchao and ModelOpt; E5M2: / 57344),
//   zero point 0; the mapping must be symmetric.
#pragma once

#include <cstdint>
#include <limits>
#include <vector>

#include "core/tensor.h"

namespace qtool::numerics {

enum class QMapping : uint8_t { Symmetric, Asymmetric };
enum class QRange : uint8_t { Full, Narrow, ReduceRange, Explicit };
// Where PyTorch and ONNX Runtime differ for symmetric signed quantization (see README "Quantization conventions").
enum class SymmetricScaleConvention : uint8_t {
  TorchHalfRange,  // torch.ao observers, torchao: scale = amax / ((qmax - qmin) / 2), int8 -> amax / 127.5
  OrtMaxQ,         // ONNX Runtime quantizer, ModelOpt: scale = amax / qmax, int8 -> amax / 127
};
enum class Granularity : uint8_t { PerTensor, PerChannel, PerBlock };

struct QSpec {
  DType dtype = DType::Int8;
  QMapping mapping = QMapping::Asymmetric;
  QRange range = QRange::Full;
  int64_t quant_min = 0, quant_max = 0;  // QRange::Explicit only
  SymmetricScaleConvention convention = SymmetricScaleConvention::TorchHalfRange;
  float eps = std::numeric_limits<float>::epsilon();
};

struct QBounds {
  int64_t qmin, qmax;
};
// The integer range a spec quantizes to (validates Explicit ranges; UsageError when meaningless).
QBounds quant_bounds(const QSpec& spec);

struct QParams {
  float scale;
  int64_t zero_point;
};
// Scale and zero point for one observed range. BadInputError if min/max are NaN/inf or min > max.
QParams choose_qparams(float min_val, float max_val, const QSpec& spec);

// Where the statistics are taken and the parameters apply (ONNX per-tensor / per-axis / opset-21 blocked).
struct QGranularity {
  Granularity kind = Granularity::PerTensor;
  int64_t axis = 0;        // PerChannel and PerBlock
  int64_t block_size = 0;  // PerBlock
};

// Per-group min and max of a float tensor (float32/float16/bfloat16), NaN ignored. Groups are laid out as the
// scale tensor of that granularity: scalar, [x.dim(axis)], or x's shape with dim(axis) = ceil(dim / block).
struct MinMax {
  Shape shape;  // the scale shape
  std::vector<float> min, max;
};
MinMax compute_minmax(const Tensor& x, const QGranularity& g, int threads = 1);

// Scale (float32) and zero point (spec.dtype) tensors shaped like MinMax::shape, ready for quantize_linear
// with QdqAttrs{axis, block_size}.
struct QParamTensors {
  Tensor scale;
  Tensor zero_point;
};
QParamTensors qparams_from_minmax(const MinMax& mm, const QSpec& spec);
QParamTensors choose_qparams(const Tensor& x, const QGranularity& g, const QSpec& spec, int threads = 1);

}  // namespace qtool::numerics
