// Cross-layer equalization (Nagel et al. 2019, "Data-Free Quantization Through Weight Equalization and Bias
// Correction", section 4.1). Data-free: reads only the weights.
#pragma once

#include <vector>

#include "quantize/graph.h"

namespace qtool::quantize {

struct EqualizationReport {
  int pairs = 0;   // Conv -> [Relu | LeakyRelu] -> Conv pairs equalized
  int rounds = 0;  // sweeps over all pairs until the scales settled (or the cap)
};

// Every Conv -> (Relu | LeakyRelu | nothing) -> Conv pair (grouped and depthwise convolutions included) whose
// middle tensors are read by that pair only is rescaled in place: output channel i of the first conv (weights and
// bias) by 1/s_i and input channel i of the second by s_i. Exact in float for these activations (f(x/s) = f(x)/s
// for s > 0); a Clip / Relu6 between the two is not (its bound would need scaling per channel): such pairs stay,
// as do pairs with a weight already on an int8 grid (exact there: rescaling adds rounding error).
EqualizationReport equalize_cross_layer(Graph& g, int max_rounds = 20);

// The quantity equalization maximises, for tests and reports: the sum over pairs and channels of
// (r1_i / R1) * (r2_i / R2), r = the channel's max |w|, R = the whole tensor's (section 4.1, eq. 9).
double equalization_objective(const Graph& g);

}  // namespace qtool::quantize
