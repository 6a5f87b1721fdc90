// Graph preparation pass: folds the activation that follows a Conv, Gemm or MatMul into it.
//
//   P = Conv|Gemm|MatMul(...) -> t;  A = Relu|Clip|HardSigmoid|HardSwish|Gelu(t) -> y
//   P -> t;  s = Sigmoid(t);  y = Mul(t, s)          (SiLU / Swish, either Mul operand order)
// become one node P -> y whose NodeInfo::activation the kernel applies to its output, so t (and s) are
// never written to memory and read back. Saves one pass over each such tensor (ORT does the same).
//
// A tensor disappears only when nothing may need to see it: t and s must not be graph outputs, must not
// be in `keep` (the tensors a tap observes, e.g. the calibrator's), and must have no consumer other than
// the activation. Clip folds only with constant float bounds (attributes, or initializer inputs). With `cpu` (a CPU
// session) Gelu (approximate "none") folds too: the CPU kernels apply it to each block of rows while the block is
// in cache (digits-vit's fc1 MatMul -> Gelu); the GPU kernels have no Gelu epilogue. Also CPU only:
//   t = MatMul(...);  [c = Cast(t, to float);]  y = Softmax(t|c, axis -1, opset >= 13)
// (attention's scores: the MatMul's output is float, so the Cast is an identity) becomes one MatMul whose kernel runs
// Softmax over each row of each block or batch of its output while it is in cache.
#pragma once

#include <set>
#include <string>

namespace qtool::runtime {

class Graph;

// Rewrites g.nodes in place (kernels not yet created, use counts not yet computed). Returns the number of
// activation nodes removed.
int fuse_activations(Graph& g, const std::set<std::string>& keep, bool cpu);

}  // namespace qtool::runtime
