// Graph preparation pass: folds a constant scale and a constant bias that follow a MatMul into it.
//
//   t = MatMul(A, B);  y = Mul(t, c) | Mul(c, t) | Div(t, c)        c a constant float scalar
//   t = MatMul(A, B);  y = Add(t, b) | Add(b, t)                    b a constant float [N], N = B's last dim
// become one MatMul -> y with NodeInfo::matmul_alpha = c (1/c for Div) and the bias as its input 2. The kernel
// fills Y with b and accumulates alpha·A·B onto it (OpenBLAS beta = 1), so t is never written and read back,
// and the output is not zeroed first either (OpenBLAS's sgemm_beta pass for beta = 0: 7-9 % of llama2c's and
// digits-vit's 1-thread samples). Attention's QK^T/√d (Div) and ViT's linear layers (Add) are the targets;
// ORT fuses the same (FusedMatMul, MatMul + Add bias).
//
// Rounding: alpha·(A·B) is rounded once instead of twice, and 1/c replaces a division, so y moves in the last
// bit; tests/runtime/fuse_test.cc compares fused and unfused graphs within float tolerance.
// Same rule as the other fusions: t must not be a graph output, not in `keep`, and have no other reader. A scale
// folds before a bias (y = alpha·A·B + b), never after it.
#pragma once

#include <set>
#include <string>

namespace qtool::runtime {

class Graph;

// Rewrites g.nodes in place before kernels are created. Returns the number of nodes removed.
int fuse_matmul_epilogue(Graph& g, const std::set<std::string>& keep);

}  // namespace qtool::runtime
