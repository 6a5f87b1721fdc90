// Graph preparation pass: keeps the activations between Convs in oneDNN's channel-blocked layout.
//
// A Conv on oneDNN computes in the layout nChw8c, or NHWC on a CPU with AVX-512 (kernels/blocked_layout.h). With
// NCHW tensors every such Conv
// reorders its input into that layout and its output back, and mobilenetv2 then spends 28 % of its Conv time in
// the two copies (docs/interpreter.md, "Blocked activations between oneDNN Convs"); ONNX Runtime keeps them blocked
// between its Convs (its NCHWc transformer). This pass does the same: a tensor t is stored blocked when
//   - its producer is a Conv that runs on oneDNN (2-D, constant float weights, a build with oneDNN, a CPU
//     session) with output channels the layout can block (a multiple of 8 for nChw8c, any for NHWC), or an Add
//     of two blocked tensors of one channel count;
//   - every reader is such a Conv reading t as its input X, or such an Add (an elementwise op over two tensors
//     of one layout is layout-blind; with equal channel counts a broadcast over N, H or W is too);
//   - t may disappear (runtime/fuse.h's rule: not a graph output, not in `keep`), since its NCHW form never
//     exists: the value is renamed "<name>/nChw8c" (or "<name>/nhwc"), so a tap sees the blocked tensor under a
//     name of its own and never a blocked tensor under the model's name.
// Either layout stores no padding channels that a reader could see. Conv nodes learn
// their layouts through NodeInfo::blocked_input and blocked_output; a Conv for whose shape oneDNN has no primitive
// converts around its own kernel. Where the layout is NHWC, a Transpose from NHWC to NCHW (perm [0, 3, 1, 2]) read
// only by such Convs as X, and free to disappear, is dropped: those Convs read its NHWC input in place
// (NodeInfo::nhwc_input; models exported from NHWC frameworks start this way). The result equals the NCHW run's
// exactly (the same primitive, fed the same values; only the copies are gone).
#pragma once

#include <set>
#include <string>

namespace qtool::runtime {

class Graph;

// Marks the Convs and renames the blocked values; runs last, on the final node list. Returns the number of tensors
// kept blocked (0 in builds without oneDNN).
int keep_conv_layout_blocked(Graph& g, const std::set<std::string>& keep);

}  // namespace qtool::runtime
