// Graph preparation pass: recognises HardSwish written out as elementwise ops and runs it as one HardSwish.
//
//   a = Add(x, 3);  c = Clip(a, 0, 6);  y = Div(Mul(x, c), 6)      (Paddle's exporter, older PyTorch)
//   a = Add(x, 3);  c = Clip(a, 0, 6);  y = Mul(x, Div(c, 6))
// (Add and Mul in either operand order; dividing by 6 may be Mul by 1/6) become y = HardSwish(x).
// What it saves: three full passes over x's size (each reads and writes a tensor as large as x), which
// is memory traffic, not arithmetic. What it changes: y is computed as x * clamp(x/6 + 1/2, 0, 1), the ONNX
// HardSwish formula, which can differ from the written-out form in the last bit (one rounding fewer).
// Same visibility rule as runtime/fuse.h: a, c and the product/quotient in the middle must each have one
// consumer and be neither a graph output nor in `keep`; x and y stay. When x comes from a Conv/Gemm/MatMul,
// the activation pass that runs afterwards can fold the HardSwish into it.
#pragma once

#include <set>
#include <string>

namespace qtool::runtime {

class Graph;

// Rewrites g.nodes in place (before kernels and use counts exist). Returns the number of nodes removed.
int fuse_hard_swish(Graph& g, const std::set<std::string>& keep);

}  // namespace qtool::runtime
