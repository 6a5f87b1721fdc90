// Plain-loop reference twins of the fast compute kernels, for tests (tests/kernels/) to compare
// the fast paths against. They take resolved parameters (no auto_pad) and favour obviousness.
#pragma once

#include <cstdint>
#include <vector>

#include "core/tensor.h"

namespace qtool::runtime::kernels::compute {

struct ConvParams {
  std::vector<int64_t> strides, dilations, pads;  // pads: begins then ends
  int64_t group = 1;
};

// Y[n, m, o...] = B[m] + sum_{c in group(m), k...} X[n, c, o*s - p + k*d] * W[m, c, k...]
Tensor conv_ref(const Tensor& X, const Tensor& W, const Tensor* B, const ConvParams& p);
// Transposed convolution: Y[n, m, o...] = B[m] + sum over (i, c, k) with o = i*s - p + k*d of X[n, c, i] * W[c, m, k].
// `out` gives the output spatial sizes.
Tensor conv_transpose_ref(const Tensor& X, const Tensor& W, const Tensor* B, const ConvParams& p,
                          const std::vector<int64_t>& out);

}  // namespace qtool::runtime::kernels::compute
