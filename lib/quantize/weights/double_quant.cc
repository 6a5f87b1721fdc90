// Double quantization of block scales: see double_quant.h for the format and the error it minimises.
#include "quantize/weights/double_quant.h"

#include <algorithm>

#include "core/checked.h"
#include "core/error.h"
#include "numerics/qdq.h"

namespace qtool::quantize {

ScaleCodes double_quantize_scales(QParams& p, Tensor& codes, int64_t bits, int64_t scale_block_size) {
  if (p.block_size <= 0 || p.scale.rank() != 2 || p.scale.dtype() != DType::Float32)
    throw InternalError("double_quantize_scales: needs the float per-block scales of a 2-D weight");
  if (bits != 8 && bits != 4) throw InternalError("double_quantize_scales: bits must be 8 or 4");
  const DType code_type = bits == 8 ? DType::UInt8 : DType::UInt4;
  const int64_t qmax = bits == 8 ? 255 : 15;
  ScaleCodes out;
  out.axis = 1 - p.axis;
  out.block_size = scale_block_size;
  const Shape& ss = p.scale.shape();
  const int64_t rows = ss[0], cols = ss[1];
  const int64_t ch_len = ss[out.axis], groups = checked_ceil_div(ch_len, scale_block_size, "scale blocks");
  Shape cs = ss;
  cs[out.axis] = groups;
  out.scale = Tensor(DType::Float32, cs);
  const float* s = p.scale.data<float>();
  float* c = out.scale.data<float>();
  std::fill(c, c + out.scale.numel(), 0.0f);
  auto group_index = [&](int64_t r, int64_t k) {
    return out.axis == 1 ? r * groups + k / scale_block_size : (r / scale_block_size) * cols + k;
  };
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t k = 0; k < cols; ++k) {
      float& g = c[group_index(r, k)];
      g = std::max(g, s[r * cols + k] / static_cast<float>(qmax));
    }
  for (int64_t i = 0; i < out.scale.numel(); ++i)
    if (!(c[i] > 0.0f)) c[i] = 1.0f;  // a group of zero scales (all-zero blocks): codes 0 dequantize to 0 anyway
  numerics::QdqAttrs a;
  a.axis = out.axis;
  a.block_size = scale_block_size;
  a.output_dtype = code_type;
  out.codes = numerics::quantize_linear(p.scale, out.scale, nullptr, a);
  const auto& info = dtype_info(code_type);
  for (int64_t i = 0; i < out.codes.numel(); ++i)
    if (s[i] > 0.0f && info.load(out.codes.raw(), i) < 1) info.store(out.codes.raw(), i, 1.0f, true);
  a.output_dtype = DType::Undefined;
  Tensor new_scale = numerics::dequantize_linear(out.codes, out.scale, nullptr, a);

  numerics::QdqAttrs wa;
  wa.axis = p.axis;
  wa.block_size = p.block_size;
  const Tensor values = numerics::dequantize_linear(codes, p.scale, &p.zero_point, wa);
  p.scale = std::move(new_scale);
  codes = numerics::quantize_linear(values, p.scale, &p.zero_point, wa);
  return out;
}

}  // namespace qtool::quantize
