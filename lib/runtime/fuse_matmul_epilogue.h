// Graph preparation pass: folds a constant scale, a constant bias and an added tensor that follow a MatMul into it.
//
//   t = MatMul(A, B);  y = Mul(t, c) | Mul(c, t) | Div(t, c)        c a constant float scalar
//   t = MatMul(A, B);  y = Add(t, b) | Add(b, t)                    b a constant float [N], N = B's last dim
//   t = MatMul(A, B);  y = Add(t, r) | Add(r, t)                    r any other tensor computed before the MatMul
// become one MatMul -> y with NodeInfo::matmul_alpha = c (1/c for Div), the bias as its input 2 and r (the
// "addend": a residual branch, attention's mask) as its input 3 (input 2 then omitted when there is no bias). The
// kernel fills Y with r and b and accumulates alpha·A·B onto it (OpenBLAS beta = 1), so t is never written and
// read back, the Add's pass over Y is saved, and the output is not zeroed first either (OpenBLAS's sgemm_beta
// pass for beta = 0: 7-9 % of llama2c's and digits-vit's 1-thread samples). An r that broadcasts Y up (y larger
// than t) is added after the GEMM instead. Attention's QK^T/√d (Div) + mask, ViT's linear layers (Add) and the
// residual Adds after a block's last MatMul are the targets; ORT fuses the scale and bias (FusedMatMul, MatMul +
// Add bias).
//
// Rounding: alpha·(A·B) is rounded once instead of twice, 1/c replaces a division, and r + b + A·B is summed in
// that order instead of (A·B + b) + r, so y moves in the last bits; tests/runtime/fuse_matmul_epilogue_test.cc
// compares fused and unfused graphs within float tolerance.
// Same rule as the other fusions: t must not be a graph output, not in `keep`, and have no other reader. A scale
// folds before a bias and an addend (y = alpha·A·B + b + r), never after them.
#pragma once

#include <set>
#include <string>

namespace qtool::runtime {

class Graph;

// Rewrites g.nodes in place before kernels are created. Returns the number of nodes removed.
int fuse_matmul_epilogue(Graph& g, const std::set<std::string>& keep);

}  // namespace qtool::runtime
