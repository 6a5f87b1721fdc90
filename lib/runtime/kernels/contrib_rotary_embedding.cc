// ONNX Runtime's contrib RotaryEmbedding (com.microsoft), float32, as ORT 1.30's CPU kernel computes it (the
// ai.onnx-23 op, with another input order and cache layout, is rotary_embedding.cc).
//
// Inputs: 0 input [B, S, N·h] or [B, N, S, h]; 1 position_ids int64 [B, S], or [1] (the first position, then +s);
// 2 cos_cache and 3 sin_cache [max_position, r/2]. Attributes: num_heads (needed for 3-D input unless r gives h),
// rotary_embedding_dim r (0: h), interleaved.
// Per head, for p = position of token s and i < r (c = cos_cache[p], d = sin_cache[p]):
//   not interleaved: y[i] = x[i]·c[i mod r/2] ∓ x[(i + r/2) mod r]·d[i mod r/2], minus for i < r/2;
//   interleaved:     y[i] = x[i]·c[i/2] ∓ x[i ± 1]·d[i/2], minus (and i + 1) for even i;
// y[i] = x[i] for i >= r. A position outside the caches is a one-line error. is_packed_batching is refused.
#include <algorithm>

#include "runtime/kernels/compute_common.h"
#include "runtime/kernels/kernels.h"

namespace qtool::runtime::kernels {
namespace {
using namespace compute;

class RotaryEmbeddingKernel final : public Kernel {
 public:
  explicit RotaryEmbeddingKernel(const NodeInfo& node)
      : node_(node),
        heads_(node.attrs.get_int("num_heads", 0)),
        rot_(node.attrs.get_int("rotary_embedding_dim", 0)),
        interleaved_(node.attrs.get_int("interleaved", 0) != 0) {
    if (node.attrs.get_int("is_packed_batching", 0) != 0)
      throw UnsupportedError(node.label() + ": is_packed_batching = 1 is not supported");
    if (heads_ < 0 || rot_ < 0 || rot_ % 2 != 0)
      throw BadInputError(node.label() + ": num_heads and rotary_embedding_dim must be non-negative, the latter even");
    if (rot_ > 0 && heads_ == 0)  // as ORT
      throw BadInputError(node.label() + ": num_heads must be given with rotary_embedding_dim");
  }

  void run(KernelContext& ctx) override {
    const Tensor& X = float_input(ctx, 0);
    const Tensor& pos_t = ctx.input(1);
    const Tensor& cos_t = float_input(ctx, 2);
    const Tensor& sin_t = float_input(ctx, 3);
    if ((X.rank() != 3 && X.rank() != 4) || cos_t.rank() != 2 || sin_t.shape() != cos_t.shape())
      throw BadInputError(node_.label() + ": input " + shape_str(X.shape()) + " must be [B, S, hidden] or [B, N, S, " +
                          "head], cos_cache and sin_cache one 2-D shape (got " + shape_str(cos_t.shape()) + ", " +
                          shape_str(sin_t.shape()) + ")");
    const int64_t B = X.dim(0), S = X.rank() == 3 ? X.dim(1) : X.dim(2);
    const int64_t half = cos_t.dim(1), max_pos = cos_t.dim(0);
    int64_t h = X.rank() == 4 ? X.dim(3) : 0, N = X.rank() == 4 ? X.dim(1) : heads_;
    if (X.rank() == 3) {
      if (N == 0) N = X.dim(2) / std::max<int64_t>(rot_ ? rot_ : 2 * half, 1);
      if (N <= 0 || X.dim(2) % N != 0)
        throw BadInputError(node_.label() + ": hidden size " + std::to_string(X.dim(2)) + " is not a multiple of " +
                            "num_heads " + std::to_string(N));
      h = X.dim(2) / N;
    }
    const int64_t r = rot_ ? rot_ : h;
    if (r > h || r != 2 * half)
      throw BadInputError(node_.label() + ": rotary dimension " + std::to_string(r) + " must be at most the head " +
                          "size " + std::to_string(h) + " and twice cos_cache's last axis " + std::to_string(half));
    if (pos_t.dtype() != DType::Int64 || !(pos_t.shape() == Shape{B, S} || pos_t.shape() == Shape{1}))
      throw BadInputError(node_.label() + ": position_ids must be int64 [" + std::to_string(B) + ", " +
                          std::to_string(S) + "] or [1], got " + std::string(dtype_name(pos_t.dtype())) + " " +
                          shape_str(pos_t.shape()));
    const int64_t* pos = pos_t.data<int64_t>();
    const bool offset = pos_t.rank() == 1;
    const int64_t batch_stride = S * N * h, seq_stride = X.rank() == 3 ? N * h : h,
                  head_stride = X.rank() == 3 ? h : S * h;
    Tensor Y(DType::Float32, X.shape());
    const float* x = X.data<float>();
    float* y = Y.data<float>();
    for (int64_t b = 0; b < B; ++b)
      for (int64_t s = 0; s < S; ++s) {
        // With one start position the positions run pos[0], pos[0] + 1, ...; a start at or past the caches is
        // reported as it is (pos[0] + s could overflow for a start near 2^63).
        const int64_t p = !offset ? pos[b * S + s] : pos[0] < max_pos ? pos[0] + s : pos[0];
        if (p < 0 || p >= max_pos)
          throw BadInputError(node_.label() + ": position " + std::to_string(p) + " is outside the caches' " +
                              std::to_string(max_pos) + " rows");
        const float* c = cos_t.data<float>() + p * half;
        const float* d = sin_t.data<float>() + p * half;
        for (int64_t n = 0; n < N; ++n) {
          const int64_t o = b * batch_stride + s * seq_stride + n * head_stride;
          rotate_head(x + o, y + o, h, r, c, d, interleaved_);
        }
      }
    ctx.outputs[0] = std::move(Y);
  }

 private:
  NodeInfo node_;
  int64_t heads_, rot_;
  bool interleaved_;
};

}  // namespace

std::unique_ptr<Kernel> make_contrib_rotary_embedding(const NodeInfo& node) {
  return std::make_unique<RotaryEmbeddingKernel>(node);
}

}  // namespace qtool::runtime::kernels
