// Gemm and MatMul, float32, on compute::sgemm (OpenBLAS; reference twin sgemm_ref).
//
// Gemm:   Y[M,N] = alpha * op(A) * op(B) + beta * C, op = transpose when transA/transB, C broadcast to [M,N]
//         (scalar, [N], [1,N], [M,1], [M,N]); C optional from opset 11.
// MatMul: numpy matmul: 1-D A is [1,K] and 1-D B is [K,1] (the added axis is dropped from Y), batch axes
//         broadcast. A batch of A against a 2-D B is one [batch*M, K] x [K, N] GEMM. After graph preparation's
//         epilogue fusion (runtime/fuse_matmul_epilogue.h): Y = matmul_alpha · A·B + bias + addend, the bias [N]
//         being input 2 and the addend (any tensor that broadcasts with Y) input 3, either omitted; Y is filled
//         with addend + bias and the GEMM accumulates onto it, or, where the addend broadcasts Y to a larger
//         shape, the addend is added after the GEMM.
// Both apply a fused activation (NodeInfo::activation) to Y.
#include <algorithm>
#include <optional>

#include "runtime/kernels/blas.h"
#include "runtime/kernels/broadcast.h"
#include "runtime/kernels/compute_common.h"
#include "runtime/kernels/kernels.h"

namespace qtool::runtime::kernels {
namespace {
using namespace compute;

class GemmKernel final : public Kernel {
 public:
  explicit GemmKernel(const NodeInfo& node)
      : node_(node),
        alpha_(node.attrs.get_float("alpha", 1.f)),
        beta_(node.attrs.get_float("beta", 1.f)),
        trans_a_(node.attrs.get_int("transA", 0) != 0),
        trans_b_(node.attrs.get_int("transB", 0) != 0) {}

  void run(KernelContext& ctx) override {
    const Tensor& A = float_input(ctx, 0);
    const Tensor& B = float_input(ctx, 1);
    if (A.rank() != 2 || B.rank() != 2)
      throw BadInputError(node_.label() + ": A " + shape_str(A.shape()) + " and B " + shape_str(B.shape()) +
                          " must be 2-D");
    const int64_t M = trans_a_ ? A.dim(1) : A.dim(0), K = trans_a_ ? A.dim(0) : A.dim(1);
    const int64_t Kb = trans_b_ ? B.dim(1) : B.dim(0), N = trans_b_ ? B.dim(0) : B.dim(1);
    if (K != Kb)
      throw BadInputError(node_.label() + ": inner dimensions differ: A " + shape_str(A.shape()) + " B " +
                          shape_str(B.shape()) + " (transA " + std::to_string(trans_a_) + ", transB " +
                          std::to_string(trans_b_) + ")");
    Tensor Y(DType::Float32, {M, N});
    float* y = Y.data<float>();
    const bool has_c = ctx.has_input(2) && beta_ != 0.f;
    if (has_c) {
      const Tensor& C = float_input(ctx, 2);
      if (!gemm_fill_c(C, beta_, M, N, y))
        throw BadInputError(node_.label() + ": C " + shape_str(C.shape()) + " does not broadcast to [" +
                            std::to_string(M) + "," + std::to_string(N) + "]");
    }
    sgemm(trans_a_, trans_b_, M, N, K, alpha_, A.data<float>(), A.dim(1), B.data<float>(), B.dim(1), has_c ? 1.f : 0.f,
          y, N, ctx.threads);
    apply_activation(node_.activation, Y, ctx.threads);
    ctx.outputs[0] = std::move(Y);
  }

 private:
  NodeInfo node_;
  float alpha_, beta_;
  bool trans_a_, trans_b_;
};

// Y = alpha · A·B with MatMul's broadcasting, plus the fused epilogue inputs 2 and 3 when the node has them.
void matmul_of(KernelContext& ctx, const Tensor& A, const Tensor& B, float alpha) {
  if (A.rank() == 0 || B.rank() == 0) throw BadInputError(ctx.node.label() + ": MatMul operands must not be scalars");
  Shape as = A.shape(), bs = B.shape();
  const bool a_vec = as.size() == 1, b_vec = bs.size() == 1;
  if (a_vec) as.insert(as.begin(), 1);
  if (b_vec) bs.push_back(1);
  const int64_t M = as[as.size() - 2], K = as.back(), N = bs.back();
  if (bs[bs.size() - 2] != K)
    throw BadInputError(ctx.node.label() + ": inner dimensions differ: A " + shape_str(A.shape()) + " B " +
                        shape_str(B.shape()));
  // Broadcast batch axes.
  const size_t ra = as.size() - 2, rb = bs.size() - 2, r = std::max(ra, rb);
  Shape batch(r);
  std::vector<int64_t> a_str(r, 0), b_str(r, 0);
  for (size_t i = 0; i < r; ++i) {
    const int64_t da = i + ra >= r ? as[i + ra - r] : 1, db = i + rb >= r ? bs[i + rb - r] : 1;
    if (da != db && da != 1 && db != 1)
      throw BadInputError(ctx.node.label() + ": batch axes of A " + shape_str(A.shape()) + " and B " +
                          shape_str(B.shape()) + " do not broadcast");
    batch[i] = std::max(da, db);
    if (da == 0 || db == 0) batch[i] = 0;
  }
  int64_t sa = M * K, sb = K * N;
  for (size_t i = r; i-- > 0;) {
    const int64_t da = i + ra >= r ? as[i + ra - r] : 1, db = i + rb >= r ? bs[i + rb - r] : 1;
    a_str[i] = da == 1 ? 0 : sa;
    b_str[i] = db == 1 ? 0 : sb;
    sa *= da;
    sb *= db;
  }
  Shape ys = batch;
  if (!a_vec) ys.push_back(M);
  if (!b_vec) ys.push_back(N);
  Tensor Y(DType::Float32, ys);
  const float* a = A.data<float>();
  const float* b = B.data<float>();
  float* y = Y.data<float>();
  float beta = 0.f;  // 1 once Y holds the epilogue's terms
  std::optional<BroadcastPlan> late;  // an addend that broadcasts Y up: added after the GEMM
  if (ctx.has_input(3)) {  // fused addend
    BroadcastPlan p = plan_broadcast({&Y.shape(), &float_input(ctx, 3).shape()}, ctx.node);
    if (p.out_shape == Y.shape()) {
      broadcast_fill(p, 1, float_input(ctx, 3).data<float>(), y, threads_for(Y.numel(), ctx.threads));
      beta = 1.f;
    } else {
      late = std::move(p);
    }
  }
  if (ctx.has_input(2)) {  // fused bias
    const Tensor& bias = float_input(ctx, 2);
    if (bias.numel() != N || b_vec)
      throw InternalError(ctx.node.label() + ": fused bias " + shape_str(bias.shape()) + " for an output of " +
                          std::to_string(N) + " columns");
    const float* bv = bias.data<float>();
    for (int64_t row = 0, rows = Y.numel() / std::max<int64_t>(N, 1); row < rows; ++row) {
      if (beta == 0.f)
        std::copy_n(bv, N, y + row * N);
      else
        for (int64_t j = 0; j < N; ++j) y[row * N + j] += bv[j];
    }
    beta = 1.f;
  }
  const int64_t nb = shape_numel(batch);
  const bool b_shared = std::all_of(b_str.begin(), b_str.end(), [](int64_t s) { return s == 0; });
  const bool a_packed = [&] {  // A's batch axes are dense (no broadcast), so A is [nb*M, K]
    int64_t expect = M * K;
    for (size_t i = r; i-- > 0;) {
      if (a_str[i] != expect && batch[i] != 1) return false;
      expect *= batch[i];
    }
    return true;
  }();
  if (nb == 0 || M == 0 || N == 0) {
    if (beta == 0.f) std::fill_n(y, Y.numel(), 0.f);
  } else if (b_shared && a_packed) {
    sgemm(false, false, nb * M, N, K, alpha, a, K, b, N, beta, y, N, ctx.threads);
  } else {
    auto offset = [&](int64_t idx, const std::vector<int64_t>& str) {
      int64_t off = 0;
      for (size_t i = r; i-- > 0;) {
        off += (idx % batch[i]) * str[i];
        idx /= batch[i];
      }
      return off;
    };
    const bool per_batch = nb >= ctx.threads && M * N * K < (1 << 20);
    parallel_for(nb, per_batch ? threads_for_macs(nb * M * N * K, ctx.threads) : 1, [&](int64_t i) {
      sgemm(false, false, M, N, K, alpha, a + offset(i, a_str), K, b + offset(i, b_str), N, beta, y + i * M * N, N,
            per_batch ? 1 : ctx.threads);
    });
  }
  if (late) {
    Tensor sum(DType::Float32, late->out_shape);
    broadcast_binary(*late, Y.data<float>(), float_input(ctx, 3).data<float>(), sum.data<float>(),
                     threads_for(sum.numel(), ctx.threads), [](float u, float v) { return u + v; });
    Y = std::move(sum);
  }
  apply_activation(ctx.node.activation, Y, ctx.threads);
  ctx.outputs[0] = std::move(Y);
}

void matmul(KernelContext& ctx) { matmul_of(ctx, float_input(ctx, 0), float_input(ctx, 1), ctx.node.matmul_alpha); }

// t with its last two axes swapped (a copy); t itself when its rank is below 2.
Tensor transpose_last2(const Tensor& t) {
  if (t.rank() < 2) return t;
  const int64_t r = t.dim(t.rank() - 2), c = t.dim(t.rank() - 1), mats = r * c != 0 ? t.numel() / (r * c) : 0;
  Shape s = t.shape();
  std::swap(s[s.size() - 2], s[s.size() - 1]);
  Tensor out(DType::Float32, s);
  const float* x = t.data<float>();
  float* y = out.data<float>();
  for (int64_t m = 0; m < mats; ++m)
    for (int64_t i = 0; i < r; ++i)
      for (int64_t j = 0; j < c; ++j) y[m * r * c + j * r + i] = x[m * r * c + i * c + j];
  return out;
}

// FusedMatMul (com.microsoft): Y = alpha · op(A)·op(B), op swapping the last two axes where transA / transB is set,
// then MatMul's broadcasting. transBatchA / transBatchB (batch axes moved next to the matrix axes) are refused.
class FusedMatMulKernel final : public Kernel {
 public:
  explicit FusedMatMulKernel(const NodeInfo& node)
      : alpha_(node.attrs.get_float("alpha", 1.f)),
        trans_a_(node.attrs.get_int("transA", 0) != 0),
        trans_b_(node.attrs.get_int("transB", 0) != 0) {
    if (node.attrs.get_int("transBatchA", 0) != 0 || node.attrs.get_int("transBatchB", 0) != 0)
      throw UnsupportedError(node.label() + ": transBatchA / transBatchB = 1 is not supported; export the model without " +
                             "ORT's MatMul-Transpose fusion");
  }
  void run(KernelContext& ctx) override {
    const Tensor& A = float_input(ctx, 0);
    const Tensor& B = float_input(ctx, 1);
    matmul_of(ctx, trans_a_ ? transpose_last2(A) : A, trans_b_ ? transpose_last2(B) : B, alpha_);
  }

 private:
  float alpha_;
  bool trans_a_, trans_b_;
};

}  // namespace

std::unique_ptr<Kernel> make_gemm(const NodeInfo& node) { return std::make_unique<GemmKernel>(node); }
std::unique_ptr<Kernel> make_matmul(const NodeInfo& node) { return make_function_kernel<matmul>(node); }
std::unique_ptr<Kernel> make_fused_matmul(const NodeInfo& node) { return std::make_unique<FusedMatMulKernel>(node); }

}  // namespace qtool::runtime::kernels
