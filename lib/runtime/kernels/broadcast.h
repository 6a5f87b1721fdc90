// NumPy-style multidirectional broadcasting for elementwise kernels.
//
// plan_broadcast() computes the output shape and, per input, element strides (0 along broadcast
// dimensions), then collapses adjacent dimensions that every input walks contiguously. The fast path
// (broadcast_binary/ternary) walks the output in blocks along the last collapsed dimension with
// specialised inner loops for stride 1 / stride 0; broadcast_*_reference computes every element's
// input offsets from its multi-index. Both apply the same scalar function to the same operands, so
// their results are bitwise identical (tests/runtime compare them), whatever the thread count.
#pragma once

#include <algorithm>
#include <array>
#include <initializer_list>

#include "runtime/kernels/common.h"

namespace qtool::runtime::kernels {

constexpr int kMaxBroadcastInputs = 3;

struct BroadcastPlan {
  Shape out_shape;
  int64_t numel = 0;
  int n_inputs = 0;
  std::vector<int64_t> dims;  // collapsed output dims, never empty (a scalar is {1})
  std::array<std::vector<int64_t>, kMaxBroadcastInputs> strides;       // per input, per collapsed dim
  std::array<std::vector<int64_t>, kMaxBroadcastInputs> full_strides;  // per input, per output dim
};

// BadInputError naming the node when the shapes do not broadcast.
Shape broadcast_shape(std::initializer_list<const Shape*> shapes, const NodeInfo& node);
BroadcastPlan plan_broadcast(std::initializer_list<const Shape*> shapes, const NodeInfo& node);

// Calls fn(out_offset, length, in_offsets) for contiguous runs of the output along the last collapsed
// dimension, covering [0, numel) once; runs are split across threads. Rows are walked with an odometer (no
// division per run: llama2c's rotary Muls broadcast in runs of 4 values).
template <class Fn>
void for_each_block(const BroadcastPlan& p, int threads, Fn&& fn) {
  const int64_t inner = p.dims.back();
  const int nd = static_cast<int>(p.dims.size());
  parallel_range(p.numel, threads, [&](int64_t begin, int64_t end) {
    std::vector<int64_t> idx(static_cast<size_t>(nd - 1));  // coordinates of the current row
    std::array<int64_t, kMaxBroadcastInputs> base{}, off{};  // per input: offset of the row's first value
    int64_t row = begin / inner, col = begin % inner;
    for (int d = nd - 2; d >= 0; --d) {
      idx[d] = row % p.dims[d];
      row /= p.dims[d];
      for (int k = 0; k < p.n_inputs; ++k) base[k] += idx[d] * p.strides[k][d];
    }
    for (int64_t i = begin; i < end; col = 0) {
      const int64_t len = std::min(inner - col, end - i);
      for (int k = 0; k < p.n_inputs; ++k) off[k] = base[k] + col * p.strides[k][nd - 1];
      fn(i, len, off.data());
      i += len;
      for (int d = nd - 2; d >= 0; --d) {
        for (int k = 0; k < p.n_inputs; ++k) base[k] += p.strides[k][d];
        if (++idx[d] < p.dims[d]) break;
        for (int k = 0; k < p.n_inputs; ++k) base[k] -= idx[d] * p.strides[k][d];
        idx[d] = 0;
      }
    }
  });
}

template <class TA, class TB, class TO, class F>
void broadcast_binary(const BroadcastPlan& p, const TA* a, const TB* b, TO* out, int threads, F f) {
  const int64_t sa = p.strides[0].back(), sb = p.strides[1].back();
  for_each_block(p, threads, [&](int64_t o, int64_t len, const int64_t* off) {
    const TA* pa = a + off[0];
    const TB* pb = b + off[1];
    TO* po = out + o;
    if (sa == 1 && sb == 1) {
      for (int64_t j = 0; j < len; ++j) po[j] = f(pa[j], pb[j]);
    } else if (sa == 1 && sb == 0) {
      const TB vb = *pb;
      for (int64_t j = 0; j < len; ++j) po[j] = f(pa[j], vb);
    } else if (sa == 0 && sb == 1) {
      const TA va = *pa;
      for (int64_t j = 0; j < len; ++j) po[j] = f(va, pb[j]);
    } else {
      for (int64_t j = 0; j < len; ++j) po[j] = f(pa[j * sa], pb[j * sb]);
    }
  });
}

// out = input k of the plan broadcast to the output shape (a copy; out must not alias it).
template <class T>
void broadcast_fill(const BroadcastPlan& p, int k, const T* in, T* out, int threads) {
  const int64_t s = p.strides[k].back();
  for_each_block(p, threads, [&](int64_t o, int64_t len, const int64_t* off) {
    const T* pi = in + off[k];
    T* po = out + o;
    if (s == 1)
      std::copy_n(pi, len, po);
    else if (s == 0)
      std::fill_n(po, len, *pi);
    else
      for (int64_t j = 0; j < len; ++j) po[j] = pi[j * s];
  });
}

template <class TA, class TB, class TC, class TO, class F>
void broadcast_ternary(const BroadcastPlan& p, const TA* a, const TB* b, const TC* c, TO* out, int threads, F f) {
  const int64_t sa = p.strides[0].back(), sb = p.strides[1].back(), sc = p.strides[2].back();
  for_each_block(p, threads, [&](int64_t o, int64_t len, const int64_t* off) {
    const TA* pa = a + off[0];
    const TB* pb = b + off[1];
    const TC* pc = c + off[2];
    TO* po = out + o;
    for (int64_t j = 0; j < len; ++j) po[j] = f(pa[j * sa], pb[j * sb], pc[j * sc]);
  });
}

// Tensor-level convenience: broadcasts a and b, allocates the output of dtype `out`, applies f.
template <class TA, class TB, class TO, class F>
Tensor apply_binary(const Tensor& a, const Tensor& b, DType out, const NodeInfo& node, int threads, F f) {
  const BroadcastPlan p = plan_broadcast({&a.shape(), &b.shape()}, node);
  Tensor y(out, p.out_shape);
  broadcast_binary(p, a.data<TA>(), b.data<TB>(), y.data<TO>(), threads, f);
  return y;
}

// Reference twins: one multi-index per output element, no collapsing, no threads.
inline int64_t reference_offset(const BroadcastPlan& p, int k, int64_t i) {
  int64_t off = 0;
  for (int64_t d = static_cast<int64_t>(p.out_shape.size()) - 1; d >= 0; --d) {
    const int64_t idx = i % p.out_shape[d];
    i /= p.out_shape[d];
    off += idx * p.full_strides[k][d];
  }
  return off;
}
template <class TA, class TB, class TO, class F>
void broadcast_binary_reference(const BroadcastPlan& p, const TA* a, const TB* b, TO* out, F f) {
  for (int64_t i = 0; i < p.numel; ++i) out[i] = f(a[reference_offset(p, 0, i)], b[reference_offset(p, 1, i)]);
}
template <class TA, class TB, class TC, class TO, class F>
void broadcast_ternary_reference(const BroadcastPlan& p, const TA* a, const TB* b, const TC* c, TO* out, F f) {
  for (int64_t i = 0; i < p.numel; ++i)
    out[i] = f(a[reference_offset(p, 0, i)], b[reference_offset(p, 1, i)], c[reference_offset(p, 2, i)]);
}

}  // namespace qtool::runtime::kernels
