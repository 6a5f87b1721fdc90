// Softmax, LogSoftmax, Hardmax, float32.
//
// Before opset 13 the input is coerced to 2-D [prod(shape[:axis]), prod(shape[axis:])] (axis default 1) and
// the op runs over each row; from opset 13 it runs along `axis` alone (default -1).
// Softmax:    y = exp(x - max) / sum exp(x - max)
// LogSoftmax: y = x - max - log(sum exp(x - max))
// Hardmax:    y = 1 at the first maximum, 0 elsewhere.
// exp is compute::exp_approx (vector_math.h, within 2 ulp of std::exp); every row takes the vector loops (a
// strided one, the axis not being the last, through a scratch copy), with the sum in sum_of's fixed order.
#include <cmath>

#include "runtime/kernels/blas.h"
#include "runtime/kernels/compute_common.h"
#include "runtime/kernels/kernels.h"
#include "runtime/kernels/vector_math.h"

namespace qtool::runtime::kernels {
namespace {
using namespace compute;

enum class SoftKind { Softmax, LogSoftmax, Hardmax };

template <SoftKind K>
void softmax_like(KernelContext& ctx) {
  const Tensor& X = float_input(ctx, 0);
  const bool legacy = ctx.node.opset < 13;
  const int64_t rank = X.rank();
  const int64_t axis = rank == 0 ? 0 : normalize_axis(ctx.node.attrs.get_int("axis", legacy ? 1 : -1), rank, ctx.node);
  int64_t outer = 1, len = 1, inner = 1;
  for (int64_t i = 0; i < rank; ++i) {
    if (i < axis)
      outer *= X.dim(i);
    else if (i == axis || legacy)
      len *= X.dim(i);
    else
      inner *= X.dim(i);
  }
  Tensor Y(DType::Float32, X.shape());
  const float* x = X.data<float>();
  float* y = Y.data<float>();
  const int threads = threads_for(X.numel() * kTranscendentalCost, ctx.threads);
  if (K == SoftKind::Softmax && inner == 1) {  // contiguous rows: one call per chunk of rows
    parallel_range(
        outer, threads, [&](int64_t b, int64_t e) { softmax_rows(x + b * len, y + b * len, e - b, len); }, 1);
    ctx.outputs[0] = std::move(Y);
    return;
  }
  parallel_for(outer * inner, threads, [&](int64_t r) {
    const int64_t o = r / inner, in = r % inner;
    const float* xs = x + o * len * inner + in;
    float* ys = y + o * len * inner + in;
    if constexpr (K == SoftKind::Hardmax) {
      float mx = -INFINITY;
      int64_t arg = 0;
      for (int64_t j = 0; j < len; ++j)
        if (xs[j * inner] > mx) mx = xs[j * inner], arg = j;
      for (int64_t j = 0; j < len; ++j) ys[j * inner] = j == arg ? 1.f : 0.f;
    } else {
      // A strided row (the axis is not the last) is gathered into scratch, so every row takes the vector loops.
      const float* row = xs;
      float* out = ys;
      float* buf = inner == 1 ? nullptr : scratch_floats(2 * static_cast<size_t>(len));
      if (buf) {
        for (int64_t j = 0; j < len; ++j) buf[j] = xs[j * inner];
        row = buf;
        out = buf + len;
      }
      const float mx = max_of(row, len);
      const float sum = exp_shifted_sum(row, mx, out, len);
      if constexpr (K == SoftKind::Softmax) {
        scale_shift(out, 1.f / sum, 0.f, out, len);  // y·inv + 0: y >= 0, so the same bits as y·inv
      } else {
        const float lse = mx + std::log(sum);
        for (int64_t j = 0; j < len; ++j) out[j] = row[j] - lse;
      }
      if (buf)
        for (int64_t j = 0; j < len; ++j) ys[j * inner] = out[j];
    }
  });
  ctx.outputs[0] = std::move(Y);
}

}  // namespace

std::unique_ptr<Kernel> make_softmax(const NodeInfo& node) {
  return make_function_kernel<softmax_like<SoftKind::Softmax>>(node);
}
std::unique_ptr<Kernel> make_log_softmax(const NodeInfo& node) {
  return make_function_kernel<softmax_like<SoftKind::LogSoftmax>>(node);
}
std::unique_ptr<Kernel> make_hardmax(const NodeInfo& node) {
  return make_function_kernel<softmax_like<SoftKind::Hardmax>>(node);
}

}  // namespace qtool::runtime::kernels
