// Helpers for rewrites that rescale the channels between two convolutions (cross-layer and clamp equalization).
#pragma once

#include <cstdint>

#include "core/tensor.h"
#include "quantize/graph.h"

namespace qtool::quantize {

// A float Conv whose weight (and bias, if any) is an initializer only this node reads: its weights can change.
inline bool own_conv(const Graph& g, int i) {
  if (i < 0) return false;
  const auto& n = g.node(i);
  if (n.op_type() != "Conv" || n.input_size() < 2 || n.output_size() != 1) return false;
  for (int k = 1; k < n.input_size(); ++k) {
    if (k == 2 && n.input(k).empty()) continue;
    if (!g.is_float_initializer(n.input(k)) || g.consumers(n.input(k)).size() != 1 || g.is_graph_input(n.input(k)))
      return false;
  }
  return true;
}

// Per input channel of the second conv: its weights as (output, local channel) rows of `inner` taps. With G
// groups, output o reads channels [g * C/G, (g + 1) * C/G), g = o / (O/G).
template <class F>
void for_input_channel(const Tensor& w, int64_t group, F&& f) {
  const int64_t outs = w.dim(0), local = w.dim(1), inner = w.numel() / (outs * local), per_group = outs / group;
  for (int64_t o = 0; o < outs; ++o)
    for (int64_t j = 0; j < local; ++j) f((o / per_group) * local + j, (o * local + j) * inner, inner);
}

}  // namespace qtool::quantize
