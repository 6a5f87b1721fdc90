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
// Both apply a fused activation (NodeInfo::activation) to Y. A MatMul whose product takes the direct GEMM
// (gemm_direct.h) with one B for every row does it block by block: each block of rows is filled with its epilogue
// terms, computed and activated while it is in cache (the same operations in the same order as filling all of Y,
// one GEMM, then the activation over Y: the same bits). A constant such B is packed once, when the kernel is made,
// and then (alpha 1) the GEMM's accumulators start from the addend and bias instead of a fill of Y (addend + bias
// rounded first, then the multiply-adds in k order).
#include <algorithm>
#include <optional>

#include "runtime/kernels/blas.h"
#include "runtime/kernels/broadcast.h"
#include "runtime/kernels/compute_common.h"
#include "runtime/kernels/gemm_direct.h"
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

// Rows of C per block of the direct path: about 8192 values (32 KB, the L1 data cache), a multiple of the 6-row strip.
int64_t epilogue_block_rows(int64_t N) { return std::max<int64_t>(6, 8192 / std::max<int64_t>(N, 1) / 6 * 6); }

// Y = alpha · A·B with MatMul's broadcasting, plus the fused epilogue inputs 2 and 3 when the node has them.
// packed: B packed for the direct GEMM (a constant B, packed once per session), or null.
void matmul_of(KernelContext& ctx, const Tensor& A, const Tensor& B, float alpha, const PackedB* packed) {
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
  const int64_t rows = nb * M;
  std::optional<BroadcastPlan> addend_plan;
  if (ctx.has_input(3)) addend_plan = plan_broadcast({&Y.shape(), &float_input(ctx, 3).shape()}, ctx.node);
  // Not with an addend that broadcasts Y up: the activation comes after that addition.
  const bool blocked = b_shared && a_packed && rows > 0 && N > 0 && use_sgemm_direct(false, false, rows, N, K) &&
                       !(addend_plan && addend_plan->out_shape != Y.shape());
  // The epilogue terms the blocked path copies per block: an addend of Y's own shape, the bias.
  const float* row_addend = nullptr;
  const float* row_bias = nullptr;
  if (ctx.has_input(3)) {  // fused addend
    BroadcastPlan& p = *addend_plan;
    if (blocked && float_input(ctx, 3).shape() == Y.shape()) {
      row_addend = float_input(ctx, 3).data<float>();
      beta = 1.f;
    } else if (p.out_shape == Y.shape()) {
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
    if (blocked) row_bias = bv;
    for (int64_t row = 0, all = blocked ? 0 : Y.numel() / std::max<int64_t>(N, 1); row < all; ++row) {
      if (beta == 0.f)
        std::copy_n(bv, N, y + row * N);
      else
        for (int64_t j = 0; j < N; ++j) y[row * N + j] += bv[j];
    }
    beta = 1.f;
  }
  // The activation of whole rows of N values while they are in cache (each block or batch), unless an addend
  // broadcasts Y up (the activation comes after that addition) or, for Softmax (over Y's last axis), B is a vector
  // (Y's last axis is not N): then it runs after, over all of Y.
  const FusedActivation& act = ctx.node.activation;
  const bool by_rows = !late && (act.kind != FusedActivation::Kind::Softmax || !b_vec);
  auto finish = [&](float* yr, int64_t n) {
    if (!by_rows) return;
    if (act.kind == FusedActivation::Kind::Softmax)
      softmax_in_place(yr, n, N);
    else
      apply_activation(act, yr, n * N);
  };
  if (blocked) {
    // Block by block: fill (addend, then + bias), multiply-add onto it, activate. packed is B when it was constant;
    // with it and alpha 1 the tiles start from the addend and bias instead (no fill).
    const bool use_packed = packed && packed->rows() == K && packed->cols() == N;
    const bool start = use_packed && alpha == 1.f && (row_addend || row_bias);
    const int64_t block = epilogue_block_rows(N), blocks = (rows + block - 1) / block;
    parallel_for(blocks, threads_for_direct_macs(rows * N * K, ctx.threads), [&](int64_t c) {
      const int64_t r0 = c * block, n = std::min(block, rows - r0);
      float* yb = y + r0 * N;
      if (start) {
        sgemm_direct_packed(n, 1.f, a + r0 * K, K, *packed, 0.f, yb, N,
                            {row_addend ? row_addend + r0 * N : nullptr, N, row_bias});
        finish(yb, n);
        return;
      }
      if (row_addend) std::copy_n(row_addend + r0 * N, n * N, yb);
      if (row_bias)
        for (int64_t i = 0; i < n; ++i) {
          if (row_addend)
            for (int64_t j = 0; j < N; ++j) yb[i * N + j] += row_bias[j];
          else
            std::copy_n(row_bias, N, yb + i * N);
        }
      if (use_packed)
        sgemm_direct_packed(n, alpha, a + r0 * K, K, *packed, beta, yb, N);
      else
        sgemm_direct(n, N, K, alpha, a + r0 * K, K, b, N, beta, yb, N);
      finish(yb, n);
    });
    if (!by_rows) apply_activation(act, Y, ctx.threads);
    ctx.outputs[0] = std::move(Y);
    return;
  }
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
      finish(y + i * M * N, M);  // attention's scores: Softmax while the batch is in cache
    });
    if (by_rows) {
      ctx.outputs[0] = std::move(Y);
      return;
    }
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

// MatMul; a constant 2-D B that the direct GEMM takes is packed here, once per session.
class MatMulKernel final : public Kernel {
 public:
  explicit MatMulKernel(const NodeInfo& node) {
    const Tensor* b = node.const_inputs.size() > 1 ? node.const_inputs[1] : nullptr;
    if (b && b->dtype() == DType::Float32 && b->rank() == 2 && use_packed_b(b->dim(0), b->dim(1)))
      packed_ = std::make_unique<PackedB>(b->dim(0), b->dim(1), b->data<float>(), b->dim(1));
  }
  void run(KernelContext& ctx) override {
    matmul_of(ctx, float_input(ctx, 0), float_input(ctx, 1), ctx.node.matmul_alpha, packed_.get());
  }

 private:
  std::unique_ptr<PackedB> packed_;
};

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
    matmul_of(ctx, trans_a_ ? transpose_last2(A) : A, trans_b_ ? transpose_last2(B) : B, alpha_, nullptr);
  }

 private:
  float alpha_;
  bool trans_a_, trans_b_;
};

}  // namespace

std::unique_ptr<Kernel> make_gemm(const NodeInfo& node) { return std::make_unique<GemmKernel>(node); }
std::unique_ptr<Kernel> make_matmul(const NodeInfo& node) { return std::make_unique<MatMulKernel>(node); }
std::unique_ptr<Kernel> make_fused_matmul(const NodeInfo& node) { return std::make_unique<FusedMatMulKernel>(node); }

}  // namespace qtool::runtime::kernels
