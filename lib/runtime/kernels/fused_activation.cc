// The epilogue of Conv/Gemm/MatMul when graph preparation fused the following activation into them
// (runtime/fuse.h). Each formula is the one the standalone kernel (elementwise_unary.cc) uses, so a fused
// and an unfused graph give the same values (SiLU: with exp_approx for the standalone Sigmoid's std::exp, within
// a few ulp); tests/runtime/fuse_test.cc compares them.
#include <algorithm>
#include <cmath>

#include "runtime/kernels/blas.h"
#include "runtime/kernels/blocked_layout.h"
#include "runtime/kernels/common.h"
#include "runtime/kernels/compute_common.h"
#include "runtime/kernels/vector_math.h"

namespace qtool::runtime::kernels::compute {

QTOOL_HOT_LOOP
void apply_activation(const FusedActivation& act, float* y, int64_t n) {
  const float a = act.a, b = act.b;
  switch (act.kind) {
    case FusedActivation::Kind::None:
      return;
    case FusedActivation::Kind::Relu:
      for (int64_t i = 0; i < n; ++i) y[i] = y[i] > 0.f ? y[i] : 0.f;
      return;
    case FusedActivation::Kind::Clip:
      for (int64_t i = 0; i < n; ++i) y[i] = std::min(std::max(y[i], a), b);
      return;
    case FusedActivation::Kind::HardSigmoid:
      for (int64_t i = 0; i < n; ++i) y[i] = std::max(0.f, std::min(1.f, a * y[i] + b));
      return;
    case FusedActivation::Kind::HardSwish:
      for (int64_t i = 0; i < n; ++i) y[i] = y[i] * std::max(0.f, std::min(1.f, y[i] / 6.f + 0.5f));
      return;
    case FusedActivation::Kind::Silu:
      silu_approx(y, y, n);  // vector_math.h: exp_approx, not a libm call per value
      return;
    case FusedActivation::Kind::Gelu:
      gelu_approx(y, y, n);  // the standalone Gelu's function (elementwise_unary.cc): the same bits
      return;
    case FusedActivation::Kind::Softmax:  // by rows: softmax_in_place; only the MatMul kernel has it (runtime/fuse.h)
      return;
  }
}

QTOOL_HOT_LOOP
void apply_conv_epilogue(const FusedActivation& act, float* y, int64_t n, int64_t m) {
  apply_activation(act, y, n);
  if (!act.channels) return;
  const auto& c = *act.channels;
  const float lo = c.lo[m], hi = c.hi[m], s = c.scale[m], h = c.shift[m];
  // The clamp gives Min's and Max's values exactly (a NaN stays NaN); the multiply-add may contract into one fused
  // multiply-add, one rounding fewer than the unfused Mul and Add.
  for (int64_t i = 0; i < n; ++i) y[i] = std::min(std::max(y[i], lo), hi) * s + h;
}

namespace {
// The per-channel clamp and affine over `plane` groups of B channels c0..c0+B-1 (apply_conv_epilogue's operations).
// nChw8c: B = 8 is a constant and the channels' parameters sit in locals, so a group is one unrolled vector with the
// parameters in registers; NHWC: B is all channels, a long vectorised run per pixel.
template <int64_t kB>
[[gnu::always_inline]] inline void clamp_affine_blocked(const FusedActivation::Channels& c, float* y, int64_t plane,
                                                        int64_t c0, int64_t block) {
  if constexpr (kB > 0) {
    float lo[kB], hi[kB], s[kB], h[kB];
    for (int64_t k = 0; k < kB; ++k) {
      lo[k] = c.lo[c0 + k];
      hi[k] = c.hi[c0 + k];
      s[k] = c.scale[c0 + k];
      h[k] = c.shift[c0 + k];
    }
    for (int64_t p = 0; p < plane; ++p, y += kB)
      for (int64_t k = 0; k < kB; ++k) y[k] = std::min(std::max(y[k], lo[k]), hi[k]) * s[k] + h[k];
  } else {
    const float* __restrict lo = c.lo.data() + c0;
    const float* __restrict hi = c.hi.data() + c0;
    const float* __restrict s = c.scale.data() + c0;
    const float* __restrict h = c.shift.data() + c0;
    for (int64_t p = 0; p < plane; ++p, y += block)
      for (int64_t k = 0; k < block; ++k) y[k] = std::min(std::max(y[k], lo[k]), hi[k]) * s[k] + h[k];
  }
}
}  // namespace

QTOOL_HOT_LOOP
void apply_conv_epilogue_blocked(const FusedActivation& act, float* y, int64_t plane, int64_t c0, int64_t block) {
  apply_activation(act, y, plane * block);
  if (!act.channels) return;
  if (block == kChannelBlock)
    clamp_affine_blocked<kChannelBlock>(*act.channels, y, plane, c0, block);
  else
    clamp_affine_blocked<0>(*act.channels, y, plane, c0, block);
}

void softmax_in_place(float* y, int64_t rows, int64_t len) {
  constexpr int64_t kRows = 64;  // rows per pass through scratch (softmax_rows must not write its input)
  float* buf = scratch_floats(static_cast<size_t>(std::min(rows, kRows) * len));
  for (int64_t r = 0; r < rows; r += kRows) {
    const int64_t n = std::min(kRows, rows - r);
    std::copy_n(y + r * len, n * len, buf);
    softmax_rows(buf, y + r * len, n, len);
  }
}

void apply_activation(const FusedActivation& act, Tensor& Y, int threads) {
  if (act.kind == FusedActivation::Kind::None) return;
  if (act.kind == FusedActivation::Kind::Softmax) {
    const int64_t len = Y.rank() == 0 ? 1 : Y.dim(Y.rank() - 1), rows = len == 0 ? 0 : Y.numel() / len;
    float* y = Y.data<float>();
    parallel_range(
        rows, threads_for(Y.numel() * kTranscendentalCost, threads),
        [&](int64_t b, int64_t e) { softmax_in_place(y + b * len, e - b, len); }, 1);
    return;
  }
  constexpr int64_t kChunk = 1 << 14;
  const int64_t n = Y.numel(), chunks = (n + kChunk - 1) / kChunk;
  float* y = Y.data<float>();
  const bool transcendental = act.kind == FusedActivation::Kind::Silu || act.kind == FusedActivation::Kind::Gelu;
  const int64_t cost = transcendental ? kTranscendentalCost : 1;  // exp, erf
  parallel_for(chunks, threads_for(n * cost, threads),
               [&](int64_t c) { apply_activation(act, y + c * kChunk, std::min(kChunk, n - c * kChunk)); });
}

}  // namespace qtool::runtime::kernels::compute
