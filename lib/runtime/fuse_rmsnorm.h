// Graph preparation pass: recognises RMSNorm written out as elementwise ops (LLaMA-style exports, llama2c's 9
// norms) and runs it as one RMSNormalization node (ONNX opset 23 semantics, axis -1).
//
//   p = Pow(x, 2) | Mul(x, x);  m = ReduceMean(p, axes = [-1], keepdims = 1);  a = Add(m, eps) | Add(eps, m);
//   s = Sqrt(a);  n = Mul(x, Div(1, s)) | Mul(Div(1, s), x) | Div(x, s);  [y = Mul(n, w) | Mul(w, n)]
// become y = RMSNormalization(x, w) with epsilon = eps (n = RMSNormalization(x) without the scale when no Mul by
// a constant w follows). What it saves: six passes and nodes per norm (the Pow, the mean, the two Muls over x's
// size, and the executor's work per node: ORT fuses the same, SimplifiedLayerNormalization). What it changes: the
// mean of squares is summed in 8 partial sums and y = x · (1/√(mean + eps)) · w, which can differ from the
// written-out ops in the last bits. eps and w must be constants (w a float [D] or scalar); the chain's
// intermediates must each have one reader and be neither a graph output nor in `keep` (runtime/fuse.h's rule);
// x and y stay.
#pragma once

#include <set>
#include <string>

namespace qtool::runtime {

class Graph;

// Rewrites g.nodes in place (before kernels and use counts exist). Returns the number of nodes removed.
int fuse_rmsnorm(Graph& g, const std::set<std::string>& keep);

}  // namespace qtool::runtime
