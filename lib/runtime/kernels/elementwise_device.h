// Elementwise float kernels as device code (device/portable.h): the per-element formulas of the CPU kernels
// (elementwise_unary.cc, elementwise_binary.cc, fused_activation.cc) written once as QTOOL_HD functions, and the
// per-thread grid-stride loops a CUDA kernel runs. tests/kernels/elementwise_device_test.cc runs the loops through
// the emulated launch grid and compares with the CPU kernels bit for bit.
//
// Each formula is the CPU's, operation for operation (std::min(a, b) is `b < a ? b : a`, std::max(a, b) is
// `a < b ? b : a`: NaN goes where the CPU sends it). On a GPU, Relu, LeakyRelu, Clip, HardSigmoid, HardSwish and
// the arithmetic ops are the same IEEE operations (the CUDA sources are built with --fmad=false); Sigmoid and Silu
// call the device's expf, within 2 ulp of glibc's, so they match within float tolerance, not bit for bit.
#pragma once

#include <cmath>
#include <cstdint>

#include "device/portable.h"
#include "runtime/kernels/broadcast.h"

namespace qtool::runtime::kernels::device_elementwise {

using qtool::device::ThreadCoord;

// Silu is not an ONNX op: it is the activation fusion folds from Sigmoid then Mul (runtime/fuse.h).
enum class Unary : uint8_t { Relu, LeakyRelu, Clip, HardSigmoid, HardSwish, Sigmoid, Silu };
enum class Binary : uint8_t { Add, Sub, Mul, Div, Max, Min };

struct UnaryOp {
  Unary op;
  float a = 0;  // LeakyRelu alpha, Clip lo, HardSigmoid alpha
  float b = 0;  // Clip hi, HardSigmoid beta
};

QTOOL_HD inline float std_min(float a, float b) { return b < a ? b : a; }
QTOOL_HD inline float std_max(float a, float b) { return a < b ? b : a; }

QTOOL_HD inline float apply(const UnaryOp& u, float v) {
  switch (u.op) {
    case Unary::Relu: return v > 0.f ? v : 0.f;
    case Unary::LeakyRelu: return v < 0.f ? u.a * v : v;
    case Unary::Clip: return std_min(std_max(v, u.a), u.b);
    case Unary::HardSigmoid: return std_max(0.f, std_min(1.f, u.a * v + u.b));
    case Unary::HardSwish: return v * std_max(0.f, std_min(1.f, v / 6.f + 0.5f));
    case Unary::Sigmoid: return 1.f / (1.f + expf(-v));
    case Unary::Silu: return v * (1.f / (1.f + expf(-v)));
  }
  return v;
}

// The activation graph preparation fused into a Conv, Gemm or MatMul (runtime/kernel.h FusedActivation) as a
// device op: the formulas of compute::apply_activation (fused_activation.cc). Kind::None has none: false.
inline bool fused_unary(const FusedActivation& a, UnaryOp& u) {
  switch (a.kind) {
    case FusedActivation::Kind::None: return false;
    case FusedActivation::Kind::Relu: u = {Unary::Relu}; return true;
    case FusedActivation::Kind::Clip: u = {Unary::Clip, a.a, a.b}; return true;
    case FusedActivation::Kind::HardSigmoid: u = {Unary::HardSigmoid, a.a, a.b}; return true;
    case FusedActivation::Kind::HardSwish: u = {Unary::HardSwish}; return true;
    case FusedActivation::Kind::Silu: u = {Unary::Silu}; return true;
    case FusedActivation::Kind::Gelu:  // never fused in GPU sessions (runtime/fuse.h)
    case FusedActivation::Kind::Softmax: return false;
  }
  return false;
}

// NaN handling of Max/Min as the CPU kernel: a NaN in either operand is the result.
QTOOL_HD inline float apply(Binary op, float x, float y) {
  switch (op) {
    case Binary::Add: return x + y;
    case Binary::Sub: return x - y;
    case Binary::Mul: return x * y;
    case Binary::Div: return x / y;
    case Binary::Max: return y != y ? y : (x < y ? y : x);
    case Binary::Min: return y != y ? y : (y < x ? y : x);
  }
  return x;
}

// Broadcasting of two inputs: the output's dims and each input's element strides (0 along broadcast dims), at most
// kMaxRank dims (runtime/kernels/broadcast.h collapses contiguous dims first).
constexpr int kMaxRank = 8;
struct Broadcast2 {
  int rank = 1;
  int64_t dims[kMaxRank] = {1};
  int64_t stride_a[kMaxRank] = {0};
  int64_t stride_b[kMaxRank] = {0};

  // Offsets into a and b of output element i (C order).
  QTOOL_HD void offsets(int64_t i, int64_t& oa, int64_t& ob) const {
    oa = 0;
    ob = 0;
    for (int d = rank - 1; d >= 0; --d) {
      const int64_t k = i % dims[d];
      i /= dims[d];
      oa += k * stride_a[d];
      ob += k * stride_b[d];
    }
  }
};

// The two-input plan `p` (plan_broadcast) as a Broadcast2; false when it has more than kMaxRank collapsed dims.
inline bool to_broadcast2(const kernels::BroadcastPlan& p, Broadcast2& out) {
  if (p.n_inputs != 2 || p.dims.size() > static_cast<size_t>(kMaxRank)) return false;
  out.rank = static_cast<int>(p.dims.size());
  for (int d = 0; d < out.rank; ++d) {
    out.dims[d] = p.dims[static_cast<size_t>(d)];
    out.stride_a[d] = p.strides[0][static_cast<size_t>(d)];
    out.stride_b[d] = p.strides[1][static_cast<size_t>(d)];
  }
  return true;
}

// One thread's share of y = u(x) over n values.
QTOOL_HD inline void unary_loop(ThreadCoord t, UnaryOp u, const float* x, float* y, int64_t n) {
  for (int64_t i = t.first(); i < n; i += t.stride()) y[i] = apply(u, x[i]);
}

// One thread's share of y = op(a, b) over the n output values.
QTOOL_HD inline void binary_loop(ThreadCoord t, Binary op, const Broadcast2& bc, const float* a, const float* b,
                                 float* y, int64_t n) {
  for (int64_t i = t.first(); i < n; i += t.stride()) {
    int64_t oa = 0, ob = 0;
    bc.offsets(i, oa, ob);
    y[i] = apply(op, a[oa], b[ob]);
  }
}

}  // namespace qtool::runtime::kernels::device_elementwise
