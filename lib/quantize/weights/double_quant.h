// Double quantization of block scales (QLoRA's "double quant", ModelOpt's scale_bits): the float scales of a
// per-block weight are stored as unsigned integer codes plus one float per group of scales, and a second
// DequantizeLinear expands them into the weight DequantizeLinear's scale input:
//
//   codes (uint8|uint4) --DQ(axis = channel axis, block_size = scale_block_size)--> scale --> DQ(weight codes)
//
// The channel axis is the weight's other axis (2-D weights only): the scales of neighbouring output channels
// (MatMul's [K/B, N] scales: along N) share a float.
#pragma once

#include "core/tensor.h"
#include "quantize/qparams.h"

namespace qtool::quantize {

struct ScaleCodes {
  Tensor codes;            // uint8 or uint4, the shape of the weight's scale
  Tensor scale;            // float32: the scale's shape with dim `axis` = ceil(dim / block_size)
  int64_t axis = 0;        // of the scale tensor
  int64_t block_size = 0;  // scales per float
};

// Replaces p.scale by its double-quantized value (exactly what DequantizeLinear computes from the returned codes)
// and re-rounds `codes` to it. Error it minimises: each scale's rounding error for its group's step,
// codes = round(s / c) with c = max(s in the group) / (2^bits - 1), codes clamped to >= 1 so that no block loses its
// scale; the weight codes then go to the nearest code under the new scale of the value they dequantized to (so GPTQ's
// error feedback is kept: a scale moves by at most half its group's step, few codes change).
// `bits`: 8 (uint8 codes) or 4 (uint4). p must be per-block on a 2-D weight.
ScaleCodes double_quantize_scales(QParams& p, Tensor& codes, int64_t bits, int64_t scale_block_size);

}  // namespace qtool::quantize
