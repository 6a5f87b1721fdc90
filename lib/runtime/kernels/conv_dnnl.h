// 2-D float Conv on oneDNN (libdnnl). In builds with oneDNN it runs every 2-D Conv with constant float weights:
// it measured faster than conv.cc's own kernels for each of their shape classes (depthwise, pointwise, general
// im2col+sgemm) on mobilenetv2, ppocrv4-det and ppocrv4-rec at 1 and 2 threads (docs/interpreter.md "oneDNN
// for Conv"). The own kernels remain for builds without oneDNN, other ranks and non-constant weights.
//
// Same contract as the own kernel: Y[n, m, oh, ow] = act(B[m] + sum_{c in group(m), kh, kw}
// X[n, c, oh*sh - pt + kh*dh, ow*sw - pl + kw*dw] * W[m, c, kh, kw]), taps in the padding read 0; X and Y
// plain NCHW. The weights are reordered into oneDNN's blocked layout once, when the primitive for an input
// shape and thread count is first built (cached per node), never per call. Bias is the primitive's own
// term; Relu and Clip are oneDNN post-ops (max/min, exact); HardSigmoid, HardSwish and SiLU are applied
// after with apply_activation, because oneDNN evaluates them with other operations (multiply by 1/6, its
// own exp) and a fused graph must give the unfused graph's values.
//
// Kernels and threads (conv_dnnl.cc, build): which oneDNN kernels run a Conv depends on its shape and the CPU alone.
// Where oneDNN runs AVX-512 kernels every Conv with a direct NHWC kernel runs as parts along its output rows (a
// pointwise one along its pixels) on NHWC, read and written in place when the activations are NHWC
// (blocked_layout.h); elsewhere most run as parts along the output channels on nChw8c images. Each part is a
// one-thread primitive, the parts shared out by the kernels' own work sharing (as many parts as threads or a
// multiple, one at one thread); Convs with no such parts run whole, with copies, on oneDNN's OpenMP threads (whose
// thread count is set for the duration of the call, as oneDNN reads it when a primitive is built and run).
// Results are bitwise the same whichever layouts the activations have and however many threads run.
#pragma once

#include <cstdint>
#include <memory>

#include "core/tensor.h"
#include "runtime/kernel.h"
#include "runtime/kernels/im2col.h"

namespace qtool::runtime::kernels::compute {

// Where X and Y are stored: plain NCHW, or the channel-blocked layout of blocked_layout.h (nChw8c, or NHWC on
// AVX-512), which oneDNN's convolutions read and write without a reorder (runtime/conv_layout.h decides which tensors stay blocked).
struct ConvLayouts {
  bool src_blocked = false;
  bool dst_blocked = false;
};

class DnnlConv {
 public:
  virtual ~DnnlConv() = default;
  // Y (N x M x OH x OW) for X (N x C x IH x IW) and the weights given at creation, each in its layout; g is 2-D
  // with pads resolved. False when oneDNN has no primitive for this shape, or a blocked layout is asked for a
  // channel count it cannot store (nChw8c: not a multiple of 8; the caller runs its own kernel).
  virtual bool run(const ConvGeom& g, int64_t N, int64_t C, const float* x, const float* b, float* y, int threads,
                   ConvLayouts layouts = {}) = 0;
};

// True in builds with oneDNN (make_dnnl_conv returns a Conv for 2-D float weights).
bool dnnl_conv_available();
// True when oneDNN runs AVX-512 (avx512_core) kernels on this CPU (ONEDNN_MAX_CPU_ISA caps it); false without oneDNN.
// blocked_layout.h then keeps blocked activations as NHWC.
bool dnnl_conv_avx512();

// A oneDNN Conv for constant float 2-D weights W [M, C/group, KH, KW] (shared with the graph's initializer);
// nullptr when this build has no oneDNN.
std::unique_ptr<DnnlConv> make_dnnl_conv(const Tensor& W, int64_t group, bool has_bias, const FusedActivation& act);

}  // namespace qtool::runtime::kernels::compute
