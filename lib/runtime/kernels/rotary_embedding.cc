// RotaryEmbedding (ai.onnx opset 23), float32. Inputs X, cos_cache, sin_cache, optional position_ids.
// X is [B, S, H·D] (attribute num_heads gives H) or [B, H, S, D]. Of each head's D values the first R
// (rotary_embedding_dim, 0 = D) rotate, the rest pass through. cos/sin for token (b, s): cos_cache[pos[b, s]]
// when position_ids is given (caches [max_pos, ≥ R/2]), else cos_cache[b, s] (caches [B, S, ≥ R/2]); their first
// R/2 values pair with the rotated values' pairs (x1[i], x2[i]): the halves x[0..R/2) and x[R/2..R), or with
// interleaved = 1 the even and odd positions x[2i], x[2i+1]. Each pair becomes
//   (cos_i · x1 - sin_i · x2,  sin_i · x1 + cos_i · x2)
// written back where it came from. Position ids outside [0, max_pos) are a BadInputError naming the node.
#include <algorithm>

#include "runtime/kernels/blas.h"  // parallel_for
#include "runtime/kernels/compute_common.h"
#include "runtime/kernels/kernels.h"

namespace qtool::runtime::kernels {
namespace {
using namespace compute;

class RotaryEmbeddingKernel final : public Kernel {
 public:
  explicit RotaryEmbeddingKernel(const NodeInfo& n)
      : interleaved_(n.attrs.get_int("interleaved", 0) != 0),
        num_heads_(n.attrs.get_int("num_heads", 0)),
        rotary_dim_(n.attrs.get_int("rotary_embedding_dim", 0)) {}

  void run(KernelContext& ctx) override {
    const NodeInfo& node = ctx.node;
    const Tensor& X = float_input(ctx, 0);
    const Tensor& cos_t = float_input(ctx, 1);
    const Tensor& sin_t = float_input(ctx, 2);
    const bool has_pos = ctx.has_input(3);
    if (X.rank() != 3 && X.rank() != 4)
      throw BadInputError(node.label() + ": X must be [batch, seq, hidden] or [batch, heads, seq, head_size], got " +
                          shape_str(X.shape()));
    // Layout of X as strides in elements: token (b, s), head h, value d at b*sb + s*ss + h*sh + d.
    int64_t B = X.dim(0), S, H, D, sb, ss, sh;
    if (X.rank() == 3) {
      if (num_heads_ <= 0 || X.dim(2) % num_heads_ != 0)
        throw BadInputError(node.label() + ": a 3-D X " + shape_str(X.shape()) +
                            " needs attribute num_heads dividing its last dimension; set num_heads");
      S = X.dim(1), H = num_heads_, D = X.dim(2) / H;
      sb = S * H * D, ss = H * D, sh = D;
    } else {
      H = X.dim(1), S = X.dim(2), D = X.dim(3);
      sb = H * S * D, ss = D, sh = S * D;
    }
    const int64_t R = rotary_dim_ == 0 ? D : rotary_dim_;
    if (R <= 0 || R > D || R % 2 != 0)
      throw BadInputError(node.label() + ": rotary_embedding_dim " + std::to_string(R) +
                          " must be even and at most the head size " + std::to_string(D));
    const int64_t half = R / 2;
    if (cos_t.shape() != sin_t.shape())
      throw BadInputError(node.label() + ": cos_cache " + shape_str(cos_t.shape()) + " and sin_cache " +
                          shape_str(sin_t.shape()) + " differ in shape");
    std::vector<int64_t> pos;
    int64_t rows = 0;  // rows of the caches
    if (has_pos) {
      pos = read_ints(ctx.input(3), node, "position_ids");
      if (cos_t.rank() != 2 || static_cast<int64_t>(pos.size()) != B * S)
        throw BadInputError(node.label() + ": with position_ids " + shape_str(ctx.input(3).shape()) +
                            " the caches must be [max_position, " + std::to_string(half) + "] and the ids [" +
                            std::to_string(B) + ", " + std::to_string(S) + "], got caches " + shape_str(cos_t.shape()));
      rows = cos_t.dim(0);
      for (int64_t p : pos)
        if (p < 0 || p >= rows)
          throw BadInputError(node.label() + ": position id " + std::to_string(p) + " is outside the caches' " +
                              std::to_string(rows) + " rows");
    } else if (cos_t.rank() != 3 || cos_t.dim(0) != B || cos_t.dim(1) != S) {
      throw BadInputError(node.label() + ": without position_ids the caches must be [" + std::to_string(B) + ", " +
                          std::to_string(S) + ", " + std::to_string(half) + "], got " + shape_str(cos_t.shape()));
    }
    const int64_t width = cos_t.dim(cos_t.rank() - 1);
    if (width < half)
      throw BadInputError(node.label() + ": the caches hold " + std::to_string(width) + " values per position, " +
                          std::to_string(half) + " needed (rotary_embedding_dim / 2)");
    Tensor Y(DType::Float32, X.shape());
    const float* x = X.data<float>();
    float* y = Y.data<float>();
    const float* cosv = cos_t.data<float>();
    const float* sinv = sin_t.data<float>();
    parallel_for(B * S, threads_for(X.numel() * 4, ctx.threads), [&](int64_t t) {
      const int64_t b = t / S, s = t % S;
      const int64_t row = has_pos ? pos[static_cast<size_t>(t)] : t;
      const float* c = cosv + row * width;
      const float* sn = sinv + row * width;
      for (int64_t h = 0; h < H; ++h) {
        const int64_t base = b * sb + s * ss + h * sh;
        rotate_head(x + base, y + base, D, R, c, sn, interleaved_);
      }
    });
    ctx.outputs[0] = std::move(Y);
  }

 private:
  bool interleaved_;
  int64_t num_heads_, rotary_dim_;
};

}  // namespace

namespace compute {
void rotate_head(const float* x, float* y, int64_t d, int64_t r, const float* cos, const float* sin, bool interleaved) {
  const int64_t half = r / 2, step = interleaved ? 2 : 1, x2_off = interleaved ? 1 : half;
  for (int64_t i = 0; i < half; ++i) {
    const int64_t i1 = i * step, i2 = i * step + x2_off;
    const float x1 = x[i1], x2 = x[i2];
    y[i1] = cos[i] * x1 - sin[i] * x2;
    y[i2] = sin[i] * x1 + cos[i] * x2;
  }
  std::copy(x + r, x + d, y + r);
}
}  // namespace compute

std::unique_ptr<Kernel> make_rotary_embedding(const NodeInfo& n) { return std::make_unique<RotaryEmbeddingKernel>(n); }

}  // namespace qtool::runtime::kernels
