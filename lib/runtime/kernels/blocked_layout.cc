#include "runtime/kernels/blocked_layout.h"

#include <string>

#include "runtime/kernels/blas.h"
#include "runtime/kernels/conv_dnnl.h"
#include "runtime/kernels/threading.h"

namespace qtool::runtime::kernels::compute {

bool blocked_layout_is_nhwc() {
  static const bool nhwc = dnnl_conv_avx512();
  return nhwc;
}

int64_t channel_block(int64_t C) {
  if (C <= 0) return 0;
  if (blocked_layout_is_nhwc()) return C;
  return C % kChannelBlock == 0 ? kChannelBlock : 0;
}

const char* blocked_layout_name() { return blocked_layout_is_nhwc() ? "nhwc" : "nChw8c"; }

Shape logical_nchw(const Tensor& blocked, const std::string& what) {
  const Shape& s = blocked.shape();
  if (blocked.dtype() != DType::Float32 || s.size() != 5 || s[4] <= 0 || (s[4] != kChannelBlock && s[1] != 1))
    throw BadInputError(what + ": expected a float tensor in a channel-blocked layout [N, C/8, H, W, 8] or " +
                        "[N, 1, H, W, C], got " + shape_str(s));
  return {s[0], s[1] * s[4], s[2], s[3]};
}

namespace {
// One copy between the layouts: `to` true for NCHW -> blocked. Parallel over (n, channel block).
Tensor convert(const Tensor& in, const Shape& nchw, int64_t block, bool to, int threads) {
  const int64_t N = nchw[0], B = block, CB = nchw[1] / B, plane = nchw[2] * nchw[3];
  Tensor out(DType::Float32, to ? Shape{N, CB, nchw[2], nchw[3], B} : nchw);
  const float* x = in.data<float>();
  float* y = out.data<float>();
  parallel_for(N * CB, threads_for(in.numel(), threads), [&](int64_t nb) {
    const float* src = x + nb * B * plane;  // the same offset in both layouts
    float* dst = y + nb * B * plane;
    for (int64_t p = 0; p < plane; ++p)
      for (int64_t c = 0; c < B; ++c) {
        if (to)
          dst[p * B + c] = src[c * plane + p];
        else
          dst[c * plane + p] = src[p * B + c];
      }
  });
  return out;
}
}  // namespace

Tensor to_blocked(const Tensor& X, int threads, int64_t block) {
  if (X.dtype() != DType::Float32 || X.rank() != 4 || block <= 0 || X.dim(1) % block != 0 ||
      (block != kChannelBlock && block != X.dim(1)))
    throw BadInputError("expected a float NCHW tensor whose channels the block " + std::to_string(block) +
                        " divides (8, or all channels) for the blocked layout, got " + shape_str(X.shape()));
  return convert(X, X.shape(), block, true, threads);
}

Tensor to_blocked(const Tensor& X, int threads) {
  return to_blocked(X, threads, X.rank() == 4 ? channel_block(X.dim(1)) : 0);
}

Tensor from_blocked(const Tensor& B, int threads) {
  const Shape nchw = logical_nchw(B, "from_blocked");
  return convert(B, nchw, B.dim(4), false, threads);
}

}  // namespace qtool::runtime::kernels::compute
