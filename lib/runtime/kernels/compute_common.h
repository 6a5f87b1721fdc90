// Small helpers shared by the compute kernels (conv, pool, gemm, normalization, reductions...):
// input checks with node-naming errors, axis normalisation, and the spatial geometry of
// Conv/ConvTranspose/pooling windows (kernel, strides, dilations, pads, auto_pad, ceil_mode).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "runtime/kernel.h"
#include "runtime/kernels/common.h"  // normalize_axis, read_ints, strides_of

// Hot loops are compiled three times (baseline x86-64, x86-64-v3 = AVX2+FMA, x86-64-v4 = AVX-512) and the
// running CPU picks one by its features when the program loads (GCC function multiversioning; "arch=haswell"
// would test the CPU model and never match AMD parts); other compilers/architectures get the baseline.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(QTOOL_NO_CLONES)
#define QTOOL_HOT_LOOP __attribute__((target_clones("default", "arch=x86-64-v3", "arch=x86-64-v4")))
#else
#define QTOOL_HOT_LOOP
#endif

namespace qtool::runtime::kernels::compute {

// Vector loops shared by kernels (multiversioned, see QTOOL_HOT_LOOP).
// y[i] = a * x[i] + b
void scale_shift(const float* x, float a, float b, float* y, int64_t n);
// y[i] += a * x[i]
void axpy(float a, const float* x, float* y, int64_t n);
// sum of x[0..n) with 8 partial sums (order fixed, independent of threads)
float sum_of(const float* x, int64_t n);
// sum_of's loop, for other multiversioned loops to inline (always_inline: a plain inline function called from a
// target clone may be compiled once, for the baseline target).
[[gnu::always_inline]] inline float sum_of_inline(const float* x, int64_t n) {
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int k = 0; k < 8; ++k) acc[k] += x[i + k];
  float s = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
  for (; i < n; ++i) s += x[i];
  return s;
}

// y[i] = act(y[i]) for a fused activation (runtime/kernel.h FusedActivation); nothing for Kind::None.
void apply_activation(const FusedActivation& act, float* y, int64_t n);
// The same over Y's numel values on `threads` OpenMP threads, in contiguous chunks (Kind::Softmax: over each row of
// Y's last axis).
void apply_activation(const FusedActivation& act, Tensor& Y, int threads);
// Softmax over `rows` contiguous rows of `len` values, in place (softmax_rows through a scratch copy: the same bits).
void softmax_in_place(float* y, int64_t rows, int64_t len);
// y[i] = act(y[i]), then the per-channel clamp and affine (FusedActivation::channels) of output channel m, over
// n values of that channel.
void apply_conv_epilogue(const FusedActivation& act, float* y, int64_t n, int64_t m);
// The same for one block of `block` channels c0..c0+block-1 in a blocked layout (blocked_layout.h: 8, or all
// channels for NHWC): y holds `plane` groups of `block` values, value k of each group belonging to channel c0 + k.
void apply_conv_epilogue_blocked(const FusedActivation& act, float* y, int64_t plane, int64_t c0, int64_t block);

// Per-thread scratch of at least n floats, kept between calls (grows, never shrinks). Valid until the
// same thread asks again; kernels use one buffer at a time.
float* scratch_floats(size_t n);

// Gemm's C term: y[M,N] = beta * C broadcast to [M,N] (C scalar, [N], [1,N], [M,1] or [M,N]). False, y untouched,
// when C does not broadcast.
bool gemm_fill_c(const Tensor& C, float beta, int64_t M, int64_t N, float* y);

// Input i as float32; UnsupportedError naming the node, input and dtype otherwise.
const Tensor& float_input(const KernelContext& ctx, size_t i);

// The operands of Conv and ConvTranspose: float X, W and optional bias B, X and W of one rank >= 3.
struct ConvOperands {
  const Tensor& X;
  const Tensor& W;
  const Tensor* B;
  size_t spatial_dims;  // rank - 2
};
ConvOperands conv_operands(const KernelContext& ctx);

// Calls fn(T{}) with T the element type of `dt` when `dt` is in `allowed` (a subset of float, double,
// int32, int64, int8, uint8); otherwise an UnsupportedError naming the node and dtype.
template <class F>
void visit_dtype(const NodeInfo& node, DType dt, std::initializer_list<DType> allowed, F&& fn) {
  bool ok = false;
  for (DType a : allowed) ok = ok || a == dt;
  switch (ok ? dt : DType::Undefined) {
    case DType::Float32:
      return fn(float{});
    case DType::Float64:
      return fn(double{});
    case DType::Int32:
      return fn(int32_t{});
    case DType::Int64:
      return fn(int64_t{});
    case DType::Int8:
      return fn(int8_t{});
    case DType::UInt8:
      return fn(uint8_t{});
    default:
      throw UnsupportedError(node.label() + ": dtype " + std::string(dtype_name(dt)) + " is not supported");
  }
}

enum class AutoPad { NotSet, SameUpper, SameLower, Valid };
AutoPad parse_auto_pad(const NodeInfo& node);

// Window attributes of a Conv/Pool node over `nd` spatial axes.
struct Window {
  std::vector<int64_t> kernel, strides, dilations, pads;  // pads: nd begins then nd ends
  AutoPad auto_pad = AutoPad::NotSet;
  bool ceil_mode = false;

  // Reads kernel_shape (required unless `kernel_from_weight` gives it), strides, dilations, pads,
  // auto_pad and ceil_mode; validates lengths and values.
  static Window parse(const NodeInfo& node, size_t nd, const std::vector<int64_t>& kernel_from_weight);
  // Output spatial sizes for input spatial sizes `in`; fills `pads_out` (auto_pad resolved).
  std::vector<int64_t> output_dims(const NodeInfo& node, const std::vector<int64_t>& in,
                                   std::vector<int64_t>& pads_out) const;
};

// One head of a rotary embedding (ai.onnx RotaryEmbedding-23 and ORT's contrib op): of x's d values the first r
// rotate in r/2 pairs (x1, x2), the halves [0, r/2) and [r/2, r), or with `interleaved` the even and odd
// positions; pair i becomes (cos[i]·x1 - sin[i]·x2, sin[i]·x1 + cos[i]·x2) in place of (x1, x2); the rest copy.
void rotate_head(const float* x, float* y, int64_t d, int64_t r, const float* cos, const float* sin, bool interleaved);

}  // namespace qtool::runtime::kernels::compute
