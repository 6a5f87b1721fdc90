// Conv (opset 1-21), float32, any number of spatial axes.
//
// Y[n, m, o...] = B[m] + sum_{c in group(m), k...} X[n, c, o*stride - pad_begin + k*dilation] * W[m, c, k...]
// with taps outside the input reading 0; auto_pad SAME_UPPER/SAME_LOWER/VALID resolved per run.
//
// Paths (each compared with conv_ref in tests/kernels/):
//  - depthwise with one output per channel and outputs <= 32 wide: 8 channels per vector over a padded
//    channel-interleaved copy of the input (depthwise_channels8_2d), parallel over channel blocks;
//  - other depthwise (group == C, one or more outputs per channel), 1-D/2-D: direct loops per plane;
//  - pointwise (kernel 1, stride 1, no pads): Y_g = W_g x X_g, one sgemm per image and group;
//  - general: im2col in tiles of output rows (cache-sized per-thread buffers), one sgemm per tile.
// W's layout [M, C/group, k...] already is the row-major GEMM operand, so no weight packing is needed.
// In builds with oneDNN, 2-D Convs with constant weights run there instead (conv_dnnl.h: faster in every
// class measured); the paths below serve the other builds, ranks and non-constant weights.
// A fused activation (NodeInfo::activation, runtime/fuse.h) and its per-channel clamp and affine
// (runtime/fuse_conv.h) are applied to each block of Y right after the block is computed, while it is still in cache.
#include <algorithm>
#include <cstdint>
#include <cstring>

#include "core/checked.h"
#include "runtime/kernels/blas.h"
#include "runtime/kernels/blocked_layout.h"
#include "runtime/kernels/compute_common.h"
#include "runtime/kernels/conv_dnnl.h"
#include "runtime/kernels/im2col.h"
#include "runtime/kernels/kernels.h"
#include "runtime/kernels/reference.h"

namespace qtool::runtime::kernels {
namespace {
using namespace compute;

// Column-buffer floats per im2col tile (1 MiB): small enough for L2/L3, wide enough for sgemm.
constexpr int64_t kTileFloats = 1 << 18;
// Depthwise outputs at most this wide take the channel-blocked path (measured on mobilenetv2's layers).
constexpr int64_t kChannelBlockedMaxWidth = 32;

// One output plane of a 2-D depthwise conv: out[OH, OW] = bias + sum_k in[...] * w[k].
// Border columns (some tap outside the input) take a checked scalar loop. Interior columns run in blocks
// of 8-32 outputs whose accumulators stay in registers across all taps; with stride 2 the input rows
// are first split into even and odd columns so every tap reads contiguous memory.
// B interior outputs starting at ow0 (contiguous taps): B/8 vector accumulators kept in registers
// across all taps, one store each. GCC vector extensions, so each QTOOL_HOT_LOOP clone gets its ISA's
// instructions (two SSE halves on baseline x86-64, one AVX register on x86-64-v3/v4).
typedef float Float8 __attribute__((vector_size(32)));

// GCC 12 reports the vector accumulators as maybe-uninitialized inside the target clones (a false
// positive: every element is assigned before use).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
template <int B>
inline __attribute__((always_inline)) void depthwise_block(const float* const* tap_src, const float* tap_w,
                                                           int64_t ntaps, float bias, int64_t ow0, float* o) {
  constexpr int V = B / 8;
  const Float8 b = {bias, bias, bias, bias, bias, bias, bias, bias};
  Float8 acc[V] = {};
  for (int v = 0; v < V; ++v) acc[v] = b;
  for (int64_t t = 0; t < ntaps; ++t) {
    const float* src = tap_src[t] + ow0;
    const float w = tap_w[t];
    const Float8 wv = {w, w, w, w, w, w, w, w};
    for (int v = 0; v < V; ++v) {
      Float8 x;
      std::memcpy(&x, src + 8 * v, sizeof x);
      acc[v] += wv * x;
    }
  }
  for (int v = 0; v < V; ++v) std::memcpy(o + ow0 + 8 * v, &acc[v], sizeof acc[v]);
}

QTOOL_HOT_LOOP
void depthwise_plane_2d(const float* in, const float* w, float bias, float* out, const ConvGeom& g) {
  const int64_t IH = g.in[0], IW = g.in[1], OH = g.out[0], OW = g.out[1];
  const int64_t KH = g.kernel[0], KW = g.kernel[1], sh = g.strides[0], sw = g.strides[1];
  const int64_t dh = g.dilations[0], dw = g.dilations[1], ph = g.pads[0], pw = g.pads[1];
  // Output columns for which every tap column is inside the input.
  int64_t ow_lo = (pw + sw - 1) / sw;
  int64_t ow_hi = IW - 1 + pw - (KW - 1) * dw >= 0 ? (IW - 1 + pw - (KW - 1) * dw) / sw + 1 : 0;
  ow_lo = std::min(ow_lo, OW);
  ow_hi = std::clamp(ow_hi, ow_lo, OW);
  const bool split = sw == 2 && dw == 1;
  const int64_t half = (IW + 1) / 2 + 1;
  // Even/odd rows live in this thread's scratch (the depthwise path uses no im2col buffer).
  float* halves = split ? scratch_floats(static_cast<size_t>(KH * 2 * half)) : nullptr;
  // Per tap: where the interior loop reads, and its weight; on the stack for kernels up to 8x8.
  constexpr int64_t kStackTaps = 64;
  const float* stack_src[kStackTaps];
  float stack_w[kStackTaps];
  std::vector<const float*> heap_src(KH * KW > kStackTaps ? static_cast<size_t>(KH * KW) : 0);
  std::vector<float> heap_w(heap_src.size());
  const float** tap_src = heap_src.empty() ? stack_src : heap_src.data();
  float* tap_w = heap_w.empty() ? stack_w : heap_w.data();
  for (int64_t oh = 0; oh < OH; ++oh) {
    float* o = out + oh * OW;
    int64_t ntaps = 0;
    for (int64_t kh = 0; kh < KH; ++kh) {
      const int64_t ih = oh * sh - ph + kh * dh;
      if (ih < 0 || ih >= IH) continue;
      const float* row = in + ih * IW;
      float* even = split ? halves + kh * 2 * half : nullptr;
      float* odd = split ? even + half : nullptr;
      if (split)
        for (int64_t i = 0; 2 * i < IW; ++i) {
          even[i] = row[2 * i];
          if (2 * i + 1 < IW) odd[i] = row[2 * i + 1];
        }
      for (int64_t kw = 0; kw < KW; ++kw) {
        const int64_t off = kw * dw - pw;
        tap_w[ntaps] = w[kh * KW + kw];
        if (split) {
          // iw = 2*ow + off: even column (off even) or odd column (off odd) number ow + floor(off/2).
          const int64_t q = off >= 0 ? off / 2 : -((-off + 1) / 2);
          tap_src[ntaps] = ((off % 2) == 0 ? even : odd) + q;
        } else {
          tap_src[ntaps] = row + off;  // read at ow * sw
        }
        ++ntaps;
      }
    }
    // Border columns: checked loops.
    auto border = [&](int64_t ow) {
      float acc = bias;
      for (int64_t kh = 0; kh < KH; ++kh) {
        const int64_t ih = oh * sh - ph + kh * dh;
        if (ih < 0 || ih >= IH) continue;
        for (int64_t kw = 0; kw < KW; ++kw) {
          const int64_t iw = ow * sw + kw * dw - pw;
          if (iw >= 0 && iw < IW) acc += w[kh * KW + kw] * in[ih * IW + iw];
        }
      }
      o[ow] = acc;
    };
    for (int64_t ow = 0; ow < ow_lo; ++ow) border(ow);
    for (int64_t ow = ow_hi; ow < OW; ++ow) border(ow);
    // Interior columns in register blocks of 32, 16 or 8; the last block is shifted back to end at ow_hi
    // (recomputing a few outputs, which is idempotent) so every block is full.
    const int64_t width = ow_hi - ow_lo;
    const int64_t step = split ? 1 : sw;
    if (step == 1 && width >= 8) {
      const int64_t B = width >= 32 ? 32 : width >= 16 ? 16 : 8;
      for (int64_t ow0 = ow_lo; ow0 < ow_hi; ow0 += B) {
        const int64_t start = std::min(ow0, ow_hi - B);
        if (B == 32)
          depthwise_block<32>(tap_src, tap_w, ntaps, bias, start, o);
        else if (B == 16)
          depthwise_block<16>(tap_src, tap_w, ntaps, bias, start, o);
        else
          depthwise_block<8>(tap_src, tap_w, ntaps, bias, start, o);
      }
    } else {
      for (int64_t ow = ow_lo; ow < ow_hi; ++ow) {
        float acc = bias;
        for (int64_t t = 0; t < ntaps; ++t) acc += tap_w[t] * tap_src[t][ow * step];
        o[ow] = acc;
      }
    }
  }
}

// Depthwise conv (one output per channel) of up to 8 channels at once, vectorised over channels: the
// channels' planes are transposed into a zero-padded [PH][PW][8] buffer (this thread's scratch) so every
// tap of every output reads one aligned vector with no border checks; each output is bias + sum over taps
// of 8-channel FMAs, scattered back to the NCHW planes. Small planes (the 7x7..28x28 layers of
// mobilenet-style nets) gain most: the per-plane path has few interior columns there and spends its
// time in border and tail loops. in/out point at channel c0's plane; nc <= 8 channels are valid.
QTOOL_HOT_LOOP
void depthwise_channels8_2d(const float* in, const float* w, const float* bias, int64_t nc, float* out,
                            const ConvGeom& g) {
  const int64_t IH = g.in[0], IW = g.in[1], OH = g.out[0], OW = g.out[1];
  const int64_t KH = g.kernel[0], KW = g.kernel[1], sh = g.strides[0], sw = g.strides[1];
  const int64_t dh = g.dilations[0], dw = g.dilations[1], ph = g.pads[0], pw = g.pads[1];
  const int64_t iv = IH * IW, ov = OH * OW, ntaps = KH * KW;
  // Padded extent actually read: rows [0, (OH-1)*sh + (KH-1)*dh], likewise columns.
  const int64_t PH = (OH - 1) * sh + (KH - 1) * dh + 1, PW = (OW - 1) * sw + (KW - 1) * dw + 1;
  Float8* buf = reinterpret_cast<Float8*>(scratch_floats(static_cast<size_t>(8 * (PH * PW + ntaps) + 8)));
  buf = reinterpret_cast<Float8*>((reinterpret_cast<uintptr_t>(buf) + 31) & ~uintptr_t{31});
  Float8* wv = buf + PH * PW;
  std::memset(static_cast<void*>(buf), 0, sizeof(Float8) * static_cast<size_t>(PH * PW + ntaps));
  float* pb = reinterpret_cast<float*>(buf);
  float* pwv = reinterpret_cast<float*>(wv);
  for (int64_t c = 0; c < nc; ++c) {
    for (int64_t t = 0; t < ntaps; ++t) pwv[t * 8 + c] = w[c * ntaps + t];
    const float* plane = in + c * iv;
    for (int64_t ih = 0; ih < IH; ++ih) {
      const int64_t r = ih + ph;
      if (r < 0 || r >= PH) continue;
      const int64_t iw0 = std::max<int64_t>(0, -pw), iw1 = std::min(IW, PW - pw);
      for (int64_t iw = iw0; iw < iw1; ++iw) pb[(r * PW + iw + pw) * 8 + c] = plane[ih * IW + iw];
    }
  }
  Float8 b = {};
  for (int64_t c = 0; c < nc; ++c) b[c] = bias ? bias[c] : 0.f;
  int64_t off[64];
  std::vector<int64_t> heap_off(ntaps > 64 ? static_cast<size_t>(ntaps) : 0);
  int64_t* toff = heap_off.empty() ? off : heap_off.data();
  for (int64_t kh = 0; kh < KH; ++kh)
    for (int64_t kw = 0; kw < KW; ++kw) toff[kh * KW + kw] = kh * dh * PW + kw * dw;
  if (ntaps == 9) {  // 3x3: the nine weight vectors stay in registers
    Float8 wk[9];
    for (int t = 0; t < 9; ++t) wk[t] = wv[t];
    for (int64_t oh = 0; oh < OH; ++oh)
      for (int64_t ow = 0; ow < OW; ++ow) {
        const Float8* src = buf + oh * sh * PW + ow * sw;
        Float8 acc = b;
        for (int t = 0; t < 9; ++t) acc += src[toff[t]] * wk[t];
        const int64_t o = oh * OW + ow;
        for (int64_t c = 0; c < nc; ++c) out[c * ov + o] = acc[c];
      }
    return;
  }
  for (int64_t oh = 0; oh < OH; ++oh)
    for (int64_t ow = 0; ow < OW; ++ow) {
      const Float8* src = buf + oh * sh * PW + ow * sw;
      Float8 acc = b;
      for (int64_t t = 0; t < ntaps; ++t) acc += src[toff[t]] * wv[t];
      const int64_t o = oh * OW + ow;
      for (int64_t c = 0; c < nc; ++c) out[c * ov + o] = acc[c];
    }
}

#pragma GCC diagnostic pop

class ConvKernel final : public Kernel {
 public:
  explicit ConvKernel(const NodeInfo& node) : node_(node) {
    group_ = node.attrs.get_int("group", 1);
    if (group_ < 1) throw BadInputError(node.label() + ": group must be >= 1");
    if (node.inputs.size() < 2) throw BadInputError(node.label() + ": needs inputs X and W");
    if (node.const_inputs.size() > 1 && node.const_inputs[1]) {
      const Tensor& w = *node.const_inputs[1];
      if (w.rank() < 3) throw BadInputError(node.label() + ": weight W must have rank >= 3");
      win_ = Window::parse(node, static_cast<size_t>(w.rank() - 2), {w.shape().begin() + 2, w.shape().end()});
      parsed_ = true;
      if (w.rank() == 4 && w.dtype() == DType::Float32) {
        const bool has_bias = node.inputs.size() > 2 && !node.inputs[2].empty();
        dnnl_ = make_dnnl_conv(w, group_, has_bias, node.activation);
      }
    }
  }

  void run(KernelContext& ctx) override {
    if (!node_.blocked_input && !node_.blocked_output) return run_plain(ctx);
    if (run_blocked(ctx)) return;
    // oneDNN has no primitive for this shape: the own kernel on NCHW, converting around it.
    std::vector<const Tensor*> ins(ctx.inputs.begin(), ctx.inputs.end());
    Tensor plain;
    if (node_.blocked_input) {
      plain = from_blocked(blocked_x(float_input(ctx, 0)), ctx.threads);
      ins[0] = &plain;
    }
    KernelContext plain_ctx{ctx.node, ins, ctx.outputs, ctx.threads, ctx.subgraphs};
    run_plain(plain_ctx);
    if (node_.blocked_output) ctx.outputs[0] = to_blocked(ctx.outputs[0], ctx.threads);
  }

 private:
  // X's dims xs (logical NCHW...) checked against W and B; the geometry of this Conv on them.
  ConvGeom geometry(const Shape& xs, const Tensor& W, const Tensor* B, size_t nd) const {
    const Window win = parsed_ ? win_ : Window::parse(node_, nd, {W.shape().begin() + 2, W.shape().end()});
    const int64_t C = xs[1], M = W.dim(0);
    if (C != checked_mul(W.dim(1), group_, "W channels * group") || M % group_ != 0)
      throw BadInputError(node_.label() + ": X has " + std::to_string(C) + " channels but W " + shape_str(W.shape()) +
                          " with group " + std::to_string(group_) + " expects " + std::to_string(W.dim(1) * group_));
    if (B && B->numel() != M)
      throw BadInputError(node_.label() + ": bias B has " + std::to_string(B->numel()) + " values, expected " +
                          std::to_string(M));
    ConvGeom g;
    g.in.assign(xs.begin() + 2, xs.end());
    g.out = win.output_dims(node_, g.in, g.pads);
    g.kernel = win.kernel;
    g.strides = win.strides;
    g.dilations = win.dilations;
    g.channels = C / group_;
    return g;
  }

  // Threads for the oneDNN Conv: a second one only when the convolution holds enough work for its regions (the
  // convolution, and a reorder for each side that is not blocked). Dot products of fewer than 64 terms (depthwise)
  // run at elementwise speed, longer ones at GEMM speed.
  static int dnnl_threads(const ConvGeom& g, int64_t N, int64_t M, ConvLayouts layouts, int threads) {
    const int regions = 1 + !layouts.src_blocked + !layouts.dst_blocked;
    const int64_t kv = g.kernel_volume(), macs = N * M * g.out_volume() * g.channels * kv;
    return g.channels * kv < 64 ? threads_for(macs, threads, regions) : threads_for_macs(macs, threads, regions);
  }

  // Input X in the blocked layout: as it arrives, or a plain NHWC [N, H, W, C] (NodeInfo::nhwc_input) viewed as the
  // NHWC blocked [N, 1, H, W, C].
  Tensor blocked_x(const Tensor& X) const {
    if (!node_.nhwc_input) return X;
    if (X.rank() != 4)
      throw BadInputError(node_.label() + ": input X (the input of the Transpose to NCHW before it) must be 4-D NHWC, got " +
                          shape_str(X.shape()));
    return X.reshaped({X.dim(0), 1, X.dim(1), X.dim(2), X.dim(3)});
  }

  // The Conv with a blocked input or output on oneDNN; false when oneDNN has no primitive for it.
  bool run_blocked(KernelContext& ctx) {
    if (!dnnl_) return false;
    const Tensor X = node_.blocked_input ? blocked_x(float_input(ctx, 0)) : float_input(ctx, 0);
    const Tensor& W = float_input(ctx, 1);
    const Tensor* B = ctx.has_input(2) ? &float_input(ctx, 2) : nullptr;
    const Shape xs = node_.blocked_input ? logical_nchw(X, node_.label() + " input X") : X.shape();
    if (xs.size() != 4 || W.rank() != 4) return false;
    const ConvGeom g = geometry(xs, W, B, 2);
    const int64_t N = xs[0], M = W.dim(0);
    const ConvLayouts layouts{node_.blocked_input, node_.blocked_output};
    const int64_t block = channel_block(M);  // blocked_layout.h: 8, or M (NHWC)
    if (layouts.dst_blocked && block == 0) return false;
    Tensor Y(DType::Float32, layouts.dst_blocked ? Shape{N, M / block, g.out[0], g.out[1], block}
                                                 : Shape{N, M, g.out[0], g.out[1]});
    if (Y.numel() == 0) return false;
    if (!dnnl_->run(g, N, xs[1], X.data<float>(), B ? B->data<float>() : nullptr, Y.data<float>(),
                    dnnl_threads(g, N, M, layouts, ctx.threads), layouts))
      return false;
    ctx.outputs[0] = Y;
    return true;
  }

  void run_plain(KernelContext& ctx) {
    const auto [X, W, B, nd] = conv_operands(ctx);
    ConvGeom g = geometry(X.shape(), W, B, nd);
    const int64_t N = X.dim(0), C = X.dim(1), M = W.dim(0);
    Shape yshape{N, M};
    yshape.insert(yshape.end(), g.out.begin(), g.out.end());
    Tensor Y(DType::Float32, yshape);
    ctx.outputs[0] = Y;
    if (Y.numel() == 0) return;
    if (nd == 1) {  // 1-D as 2-D with a height of 1
      g.in.insert(g.in.begin(), 1);
      g.out.insert(g.out.begin(), 1);
      g.kernel.insert(g.kernel.begin(), 1);
      g.strides.insert(g.strides.begin(), 1);
      g.dilations.insert(g.dilations.begin(), 1);
      g.pads = {0, g.pads[0], 0, g.pads[1]};
    }
    const float* x = X.data<float>();
    const float* w = W.data<float>();
    const float* b = B ? B->data<float>() : nullptr;
    float* y = Y.data<float>();
    const int64_t iv = g.in_volume(), ov = g.out_volume(), kv = g.kernel_volume();
    const int64_t Mg = M / group_;
    const FusedActivation& act = node_.activation;
    if (dnnl_ && g.in.size() == 2 && nd == 2 && dnnl_->run(g, N, C, x, b, y, dnnl_threads(g, N, M, {}, ctx.threads)))
      return;

    if (group_ == C && g.channels == 1 && g.in.size() == 2 && Mg == 1 && g.out[1] <= kChannelBlockedMaxWidth) {
      const int64_t blocks = (C + 7) / 8;  // depthwise, small planes: 8 channels per vector
      parallel_for(N * blocks, threads_for(N * M * ov * kv, ctx.threads), [&](int64_t nb) {
        const int64_t n = nb / blocks, c0 = nb % blocks * 8;
        const int64_t nc = std::min<int64_t>(8, C - c0);
        depthwise_channels8_2d(x + (n * C + c0) * iv, w + c0 * kv, b ? b + c0 : nullptr, nc, y + (n * M + c0) * ov, g);
        if (act.channels)
          for (int64_t c = 0; c < nc; ++c) apply_conv_epilogue(act, y + (n * M + c0 + c) * ov, ov, c0 + c);
        else
          apply_activation(act, y + (n * M + c0) * ov, nc * ov);
      });
      return;
    }
    if (group_ == C && g.channels == 1 && g.in.size() == 2) {  // depthwise
      parallel_for(N * M, threads_for(N * M * ov * kv, ctx.threads), [&](int64_t nm) {
        const int64_t n = nm / M, m = nm % M, c = m / Mg;
        depthwise_plane_2d(x + (n * C + c) * iv, w + m * kv, b ? b[m] : 0.f, y + nm * ov, g);
        apply_conv_epilogue(act, y + nm * ov, ov, m);
      });
      return;
    }
    bool pointwise = kv == 1;
    for (size_t d = 0; d < g.in.size(); ++d)
      pointwise = pointwise && g.strides[d] == 1 && g.pads[d] == 0 && g.pads[d + g.in.size()] == 0;
    const int64_t K = g.channels * kv;
    for (int64_t n = 0; n < N; ++n)
      for (int64_t gi = 0; gi < group_; ++gi) {
        const float* xg = x + (n * C + gi * g.channels) * iv;
        const float* wg = w + gi * Mg * K;
        float* yg = y + (n * M + gi * Mg) * ov;
        if (b)
          for (int64_t m = 0; m < Mg; ++m) std::fill_n(yg + m * ov, ov, b[gi * Mg + m]);
        if (pointwise) {
          sgemm(false, false, Mg, ov, K, 1.f, wg, K, xg, ov, b ? 1.f : 0.f, yg, ov, ctx.threads);
          if (act.any())
            parallel_for(Mg, threads_for(Mg * ov, ctx.threads),
                         [&](int64_t m) { apply_conv_epilogue(act, yg + m * ov, ov, gi * Mg + m); });
          continue;
        }
        // im2col in tiles of whole output rows (about kTileFloats col floats each), so the column buffer
        // stays in cache; tiles run in parallel, each with its own buffer and a single-threaded sgemm.
        const int64_t row = g.in.size() == 2 ? g.out[1] : 1;
        const int64_t rows_total = ov / row;
        const int64_t rows_per_tile = std::clamp<int64_t>(kTileFloats / std::max<int64_t>(1, K * row), 1, rows_total);
        const int64_t tiles = (rows_total + rows_per_tile - 1) / rows_per_tile;
        const int t = inside_parallel_loop()
                          ? 1
                          : static_cast<int>(std::min<int64_t>(threads_for_macs(Mg * K * ov, ctx.threads), tiles));
#pragma omp parallel for num_threads(t) schedule(dynamic)
        for (int64_t ti = 0; ti < tiles; ++ti) {
          const int64_t p0 = ti * rows_per_tile * row, p1 = std::min(rows_total, (ti + 1) * rows_per_tile) * row;
          float* col = scratch_floats(static_cast<size_t>(K * (p1 - p0)));
          im2col_range(g, xg, col, p0, p1);
          sgemm(false, false, Mg, p1 - p0, K, 1.f, wg, K, col, p1 - p0, b ? 1.f : 0.f, yg + p0, ov, 1);
          if (act.any())
            for (int64_t m = 0; m < Mg; ++m) apply_conv_epilogue(act, yg + m * ov + p0, p1 - p0, gi * Mg + m);
        }
      }
  }

  NodeInfo node_;
  int64_t group_ = 1;
  std::unique_ptr<DnnlConv> dnnl_;  // set in builds with oneDNN for 2-D constant float weights
  Window win_;
  bool parsed_ = false;
};

}  // namespace

std::unique_ptr<Kernel> make_conv(const NodeInfo& node) { return std::make_unique<ConvKernel>(node); }

namespace compute {
Tensor conv_ref(const Tensor& X, const Tensor& W, const Tensor* B, const ConvParams& p) {
  const size_t nd = static_cast<size_t>(X.rank() - 2);
  const int64_t N = X.dim(0), C = X.dim(1), M = W.dim(0), Cg = C / p.group, Mg = M / p.group;
  ConvGeom g;
  g.in.assign(X.shape().begin() + 2, X.shape().end());
  g.kernel.assign(W.shape().begin() + 2, W.shape().end());
  g.out.resize(nd);
  for (size_t d = 0; d < nd; ++d)
    g.out[d] = (g.in[d] + p.pads[d] + p.pads[d + nd] - ((g.kernel[d] - 1) * p.dilations[d] + 1)) / p.strides[d] + 1;
  g.strides = p.strides;
  g.dilations = p.dilations;
  g.pads = p.pads;
  g.channels = Cg;
  Shape ys{N, M};
  ys.insert(ys.end(), g.out.begin(), g.out.end());
  Tensor Y = Tensor::zeros(DType::Float32, ys);
  const int64_t iv = g.in_volume(), ov = g.out_volume(), kv = g.kernel_volume();
  std::vector<float> col(static_cast<size_t>(Cg * kv * ov));
  for (int64_t n = 0; n < N; ++n)
    for (int64_t gi = 0; gi < p.group; ++gi) {
      im2col_ref(g, X.data<float>() + (n * C + gi * Cg) * iv, col.data());
      for (int64_t m = 0; m < Mg; ++m) {
        const int64_t mm = gi * Mg + m;
        const float* wm = W.data<float>() + mm * Cg * kv;
        for (int64_t o = 0; o < ov; ++o) {
          double acc = B ? B->data<float>()[mm] : 0.0;
          for (int64_t r = 0; r < Cg * kv; ++r) acc += static_cast<double>(wm[r]) * col[r * ov + o];
          Y.data<float>()[(n * M + mm) * ov + o] = static_cast<float>(acc);
        }
      }
    }
  return Y;
}
}  // namespace compute

}  // namespace qtool::runtime::kernels
