// Clamp equalization: per-channel Min bounds between two convolutions become one bound.
#pragma once

#include "quantize/graph.h"

namespace qtool::quantize {

// Every Conv A -> Relu -> Min(., C) -> Conv B chain whose middle tensors and constants are read by the chain only,
// with C one bound per channel of A (C_i >= 0, not all equal), is rescaled in place: output channel i of A (weights
// and bias) by k_i = max(C) / C_i, input channel i of B by 1 / k_i, and C becomes the scalar max(C). Exact in
// float (Min(k x, k c) = k Min(x, c) and Relu(k x) = k Relu(x) for k > 0; a channel with C_i = 0 is constant 0,
// so A's channel is zeroed and B's left as is). Returns the number of chains rewritten.
int equalize_clamps(Graph& g);

}  // namespace qtool::quantize
