// Graph preparation pass: recognises Gelu written out with Erf (PyTorch's export of nn.GELU before opset 20)
// and runs it as one Gelu.
//
//   d = Div(x, √2) | Mul(x, 1/√2);  e = Erf(d);  a = Add(e, 1);  y = Mul(Mul(x, a), 0.5)
//   d, e, a as above;                                              y = Mul(Mul(x, 0.5), a)
// (Add and Mul in either operand order) become y = Gelu(x) (opset 20 semantics, approximate = none). What it
// saves: four passes over x's size (digits-vit: arith<float> and erf were 22 % of its 1-thread samples after
// vectorising erf). What it changes: y is computed as x/2 · (1 + erf(x · 1/√2)), the Gelu kernel's formula,
// which can differ from the written-out one in the last bits.
// Same visibility rule as runtime/fuse.h: d, e, a and the product in the middle must each have one reader and
// be neither a graph output nor in `keep`; x and y stay.
#pragma once

#include <set>
#include <string>

namespace qtool::runtime {

class Graph;

// Rewrites g.nodes in place (before kernels and use counts exist). Returns the number of nodes removed.
int fuse_gelu(Graph& g, const std::set<std::string>& keep);

}  // namespace qtool::runtime
