#include "runtime/kernels/blocked_layout.h"

#include <string>

#include "runtime/kernels/blas.h"
#include "runtime/kernels/threading.h"

namespace qtool::runtime::kernels::compute {

Shape logical_nchw(const Tensor& blocked, const std::string& what) {
  const Shape& s = blocked.shape();
  if (blocked.dtype() != DType::Float32 || s.size() != 5 || s[4] != kChannelBlock)
    throw BadInputError(what + ": expected a float tensor in the blocked layout [N, C/8, H, W, 8], got " +
                        shape_str(s));
  return {s[0], s[1] * kChannelBlock, s[2], s[3]};
}

namespace {
// One copy between the layouts: `to` true for NCHW -> blocked. Parallel over (n, channel block).
Tensor convert(const Tensor& in, const Shape& nchw, bool to, int threads) {
  const int64_t N = nchw[0], CB = nchw[1] / kChannelBlock, plane = nchw[2] * nchw[3];
  Tensor out(DType::Float32, to ? Shape{N, CB, nchw[2], nchw[3], kChannelBlock} : nchw);
  const float* x = in.data<float>();
  float* y = out.data<float>();
  parallel_for(N * CB, threads_for(in.numel(), threads), [&](int64_t nb) {
    const float* src = x + nb * kChannelBlock * plane;  // the same offset in both layouts
    float* dst = y + nb * kChannelBlock * plane;
    for (int64_t p = 0; p < plane; ++p)
      for (int64_t c = 0; c < kChannelBlock; ++c) {
        if (to)
          dst[p * kChannelBlock + c] = src[c * plane + p];
        else
          dst[c * plane + p] = src[p * kChannelBlock + c];
      }
  });
  return out;
}
}  // namespace

Tensor to_blocked(const Tensor& X, int threads) {
  if (X.dtype() != DType::Float32 || X.rank() != 4 || X.dim(1) % kChannelBlock != 0)
    throw BadInputError("expected a float NCHW tensor with a multiple of 8 channels for the blocked layout, got " +
                        shape_str(X.shape()));
  return convert(X, X.shape(), true, threads);
}

Tensor from_blocked(const Tensor& B, int threads) {
  return convert(B, logical_nchw(B, "from_blocked"), false, threads);
}

}  // namespace qtool::runtime::kernels::compute
