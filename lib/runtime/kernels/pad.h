// Pad: the plan shared by the fast row-wise kernel and its per-element reference twin.
//
// Contract (ONNX Pad 2-21): out[o] = x[src(o)] where, per dim d, i = o_d - before_d; inside [0, dim)
// it is i, outside: constant -> the fill value; edge -> clamp(i, 0, dim-1); reflect -> mirrored
// without repeating the border (period 2*(dim-1)); wrap -> i mod dim. Negative pads crop.
#pragma once

#include <cstddef>
#include <vector>

#include "core/tensor.h"
#include "runtime/kernel.h"

namespace qtool::runtime::kernels {

enum class PadMode { Constant, Reflect, Edge, Wrap };

struct PadPlan {
  PadMode mode = PadMode::Constant;
  std::vector<int64_t> before, after;  // per dim, may be negative
  Shape out_shape;
  std::vector<std::byte> fill;  // one element in x's dtype (constant mode)
};

// Input index along dim d for output index o, or -1 for the fill value.
int64_t pad_source(const PadPlan& p, const Shape& in_shape, size_t d, int64_t o);

// Fast path: whole output rows (last dim) at a time, interior copied with memcpy.
void pad_rows(const PadPlan& p, const Tensor& x, Tensor& y, const NodeInfo& node, int threads);
// Reference: one element at a time through pad_source.
void pad_reference(const PadPlan& p, const Tensor& x, Tensor& y, const NodeInfo& node);

}  // namespace qtool::runtime::kernels
