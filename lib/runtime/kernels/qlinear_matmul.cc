// Quantized matrix products, as ONNX Runtime 1.30's CPU kernels compute them (arithmetic in quantized_ops.h):
//
//   acc[b, m, n] = sum_k (A[b, m, k] - a_zp) * (B[b, k, n] - b_zp[n])      exact int32 (int_gemm)
//   MatMulInteger (ai.onnx 10)          Y = acc (int32)
//   QLinearMatMul (ai.onnx 10, 21)      Y = requantize(acc, a_scale * b_scale[n] / y_scale, y_zp)
//   MatMulIntegerToFloat (com.microsoft) Y = float(acc) * (a_scale * b_scale[n]) + bias[n]
//   DynamicQuantizeMatMul (com.microsoft) the same, A first quantized to uint8 as DynamicQuantizeLinear does
//   QGemm (com.microsoft)               acc += C (int32, broadcast), scale = alpha * a_scale * b_scale[n] (/ y_scale);
//                                       Y = requantize(acc, scale, y_zp) with y_zero_point, else float(acc) * scale
//
// Shapes follow numpy matmul (batch axes broadcast; QGemm is 2-D with transA / transB). A's zero point and scale
// are one value (ORT refuses others); B's are one value, one per column [N], or one per column of each of B's own
// batches [..., 1, N]. The float outputs multiply, then add, in float: ORT's AVX2 processor may fuse them into one
// fused multiply-add, a difference of at most 1 ulp per value.
#include <cstring>
#include <optional>

#include "runtime/kernels/compute_common.h"
#include "runtime/kernels/quantized_ops.h"

namespace qtool::runtime::kernels {
namespace {

enum class Variant { Integer, QLinear, IntegerToFloat, DynamicQuantize };

// numpy matmul shapes: 1-D A is [1, K], 1-D B is [K, 1] (the added axis is dropped from Y), batch axes broadcast.
struct MatMulPlan {
  Shape y;
  int64_t M = 0, N = 0, K = 0;
  int64_t b_batches = 1;                  // B's own batch count
  std::vector<int64_t> a_batch, b_batch;  // per output batch: the batch of A and of B it reads
};

MatMulPlan plan_matmul(const Shape& a, const Shape& b, const NodeInfo& node) {
  if (a.empty() || b.empty()) throw BadInputError(node.label() + ": matmul inputs must have rank >= 1");
  MatMulPlan p;
  const bool a_vec = a.size() == 1, b_vec = b.size() == 1;
  p.M = a_vec ? 1 : a[a.size() - 2];
  p.K = a.back();
  const int64_t kb = b_vec ? b[0] : b[b.size() - 2];
  p.N = b_vec ? 1 : b.back();
  if (kb != p.K)
    throw BadInputError(node.label() + ": A " + shape_str(a) + " and B " + shape_str(b) + " do not multiply");
  const Shape ab(a.begin(), a.end() - (a_vec ? 1 : 2)), bb(b.begin(), b.end() - (b_vec ? 1 : 2));
  const size_t r = std::max(ab.size(), bb.size());
  Shape batch(r);
  for (size_t i = 0; i < r; ++i) {
    const int64_t da = i + ab.size() >= r ? ab[i + ab.size() - r] : 1;
    const int64_t db = i + bb.size() >= r ? bb[i + bb.size() - r] : 1;
    if (da != db && da != 1 && db != 1)
      throw BadInputError(node.label() + ": batch axes of A " + shape_str(a) + " and B " + shape_str(b) +
                          " do not broadcast");
    batch[i] = da == 1 ? db : da;
  }
  const int64_t nb = shape_numel(batch);
  p.b_batches = shape_numel(bb);
  for (int64_t i = 0; i < nb; ++i) {
    int64_t rest = i, ia = 0, ib = 0, sa = 1, sb = 1;
    for (size_t d = r; d-- > 0;) {
      const int64_t idx = rest % batch[d];
      rest /= batch[d];
      if (d + ab.size() >= r) {
        const int64_t da = ab[d + ab.size() - r];
        ia += (da == 1 ? 0 : idx) * sa;
        sa *= da;
      }
      if (d + bb.size() >= r) {
        const int64_t db = bb[d + bb.size() - r];
        ib += (db == 1 ? 0 : idx) * sb;
        sb *= db;
      }
    }
    p.a_batch.push_back(ia);
    p.b_batch.push_back(ib);
  }
  p.y = batch;
  if (!a_vec) p.y.push_back(p.M);
  if (!b_vec) p.y.push_back(p.N);
  return p;
}

// B's scale: one value, one per column, or one per column of each of B's batches. Returns the values.
std::vector<float> column_scales(const Tensor& s, const MatMulPlan& p, const NodeInfo& node, const char* what) {
  if (s.dtype() != DType::Float32)
    throw UnsupportedError(node.label() + ": " + what + " has dtype " + std::string(dtype_name(s.dtype())) +
                           "; qtool runs this op with float scales only");
  const int64_t z = s.numel();
  if (z != 1 && z != p.N && z != p.b_batches * p.N)
    throw UnsupportedError(node.label() + ": " + what + " " + shape_str(s.shape()) +
                           " is neither one value nor one per column of B; qtool (as ONNX Runtime) refuses it");
  return {s.data<float>(), s.data<float>() + z};
}

void check_column_zero_point(const Tensor* zp, const MatMulPlan& p, const NodeInfo& node, const char* what) {
  if (!zp) return;
  const int64_t z = zp->numel();
  if (z != 1 && z != p.N && z != p.b_batches * p.N)
    throw UnsupportedError(node.label() + ": " + what + " " + shape_str(zp->shape()) +
                           " is neither one value nor one per column of B; qtool (as ONNX Runtime) refuses it");
}

float scale_at(const std::vector<float>& s, int64_t b_batch, int64_t n, int64_t N) {
  return s[static_cast<size_t>((b_batch * N + n) % static_cast<int64_t>(s.size()))];
}

class QuantMatMulKernel final : public Kernel {
 public:
  QuantMatMulKernel(const NodeInfo& n, Variant v) : variant_(v) {
    switch (v) {
      case Variant::Integer:
        in_ = {0, 2, -1, 1, 3, -1, -1, -1, -1};
        break;
      case Variant::QLinear:
        in_ = {0, 2, 1, 3, 5, 4, 6, 7, -1};
        break;
      case Variant::IntegerToFloat:
        in_ = {0, 4, 2, 1, 5, 3, -1, -1, 6};
        break;
      case Variant::DynamicQuantize:
        in_ = {0, -1, -1, 1, 3, 2, -1, -1, 4};
        break;
    }
    b_const_ = is_const(n, in_.b) && (in_.b_zp < 0 || !has(n, in_.b_zp) || is_const(n, in_.b_zp));
  }

  void run(KernelContext& ctx) override {
    const NodeInfo& node = ctx.node;
    const Tensor* a_in = &ctx.input(static_cast<size_t>(in_.a));
    std::optional<DynamicQuantized> dq;
    if (variant_ == Variant::DynamicQuantize) {
      if (a_in->dtype() != DType::Float32)
        throw UnsupportedError(node.label() + ": A has dtype " + std::string(dtype_name(a_in->dtype())) +
                               "; DynamicQuantizeMatMul takes float A");
      dq = dynamic_quantize_uint8(*a_in, node, ctx.threads);
      a_in = &dq->y;
    }
    const Tensor& A = *a_in;
    const Tensor& B = ctx.input(static_cast<size_t>(in_.b));
    const Tensor* a_zp = opt(ctx, in_.a_zp);
    const Tensor* b_zp = opt(ctx, in_.b_zp);
    require_8bit(A, node, "A");
    require_8bit(B, node, "B");
    const MatMulPlan p = plan_matmul(A.shape(), B.shape(), node);
    check_column_zero_point(b_zp, p, node, "B's zero point");

    // Operands centred on their zero points.
    std::vector<int16_t> a_c(static_cast<size_t>(A.numel()));
    const Tensor a_zp_q = dq ? Tensor::scalar<uint8_t>(dq->zero_point) : Tensor();
    const int32_t za = scalar_zero_point(dq ? &a_zp_q : a_zp, node, "A's zero point");
    const Tensor za_t = A.dtype() == DType::Int8 ? Tensor::scalar<int8_t>(static_cast<int8_t>(za))
                                                 : Tensor::scalar<uint8_t>(static_cast<uint8_t>(za));
    centered(A, &za_t, 1, a_c.data(), node, "A");
    const int16_t* b_c = centered_b(B, b_zp, p, node);

    // acc[batch, M, N]
    const int64_t nb = static_cast<int64_t>(p.a_batch.size()), MN = p.M * p.N;
    std::vector<int32_t> acc(static_cast<size_t>(nb * MN));
    for (int64_t i = 0; i < nb; ++i)
      compute::int_gemm(p.M, p.N, p.K, a_c.data() + p.a_batch[i] * p.M * p.K, p.K, b_c + p.b_batch[i] * p.K * p.N, p.N,
                        acc.data() + i * MN, p.N, ctx.threads);

    if (variant_ == Variant::Integer) {
      Tensor Y(DType::Int32, p.y);
      std::memcpy(Y.data<int32_t>(), acc.data(), acc.size() * sizeof(int32_t));
      ctx.outputs[0] = std::move(Y);
      return;
    }
    const std::vector<float> b_s = column_scales(ctx.input(static_cast<size_t>(in_.b_scale)), p, node, "B's scale");
    const float a_s = dq ? dq->scale : scalar_scale(ctx.input(static_cast<size_t>(in_.a_scale)), node, "A's scale");
    if (variant_ == Variant::QLinear) {
      const float y_s = scalar_scale(ctx.input(static_cast<size_t>(in_.y_scale)), node, "y_scale");
      const Tensor& yzp = ctx.input(static_cast<size_t>(in_.y_zp));
      const int32_t zy = scalar_zero_point(&yzp, node, "y_zero_point");
      ctx.outputs[0] = compute::requantize_all(acc.data(), p.y, yzp.dtype(), zy, [&](int64_t o) {
        return a_s * scale_at(b_s, p.b_batch[static_cast<size_t>(o / MN)], o % p.N, p.N) / y_s;
      });
      return;
    }
    const Tensor* bias = opt(ctx, in_.bias);
    if (bias && (bias->dtype() != DType::Float32 || bias->numel() != p.N))
      throw UnsupportedError(node.label() + ": bias " + shape_str(bias->shape()) + " " +
                             std::string(dtype_name(bias->dtype())) +
                             " is not float [N] with N = " + std::to_string(p.N));
    Tensor Y(DType::Float32, p.y);
    float* y = Y.data<float>();
    for (int64_t i = 0; i < nb; ++i)
      for (int64_t n = 0; n < p.N; ++n) {
        const float s = a_s * scale_at(b_s, p.b_batch[i], n, p.N);
        const float b = bias ? bias->data<float>()[n] : 0.f;
        for (int64_t m = 0; m < p.M; ++m) {
          const int64_t o = i * MN + m * p.N + n;
          y[o] = static_cast<float>(acc[static_cast<size_t>(o)]) * s + b;
        }
      }
    ctx.outputs[0] = std::move(Y);
  }

 private:
  // Input positions of each role (-1: the variant has none): A, A's zero point, A's scale, B, B's zero point,
  // B's scale, y_scale, y_zero_point, bias.
  struct Inputs {
    int a, a_zp, a_scale, b, b_zp, b_scale, y_scale, y_zp, bias;
  };
  static bool has(const NodeInfo& n, int i) {
    return i >= 0 && static_cast<size_t>(i) < n.inputs.size() && !n.inputs[static_cast<size_t>(i)].empty();
  }
  static bool is_const(const NodeInfo& n, int i) {
    return has(n, i) && static_cast<size_t>(i) < n.const_inputs.size() && n.const_inputs[static_cast<size_t>(i)];
  }
  static const Tensor* opt(const KernelContext& ctx, int i) {
    return i >= 0 && ctx.has_input(static_cast<size_t>(i)) ? &ctx.input(static_cast<size_t>(i)) : nullptr;
  }
  // B - b_zp as int16, kept between runs when both are constants (weights).
  const int16_t* centered_b(const Tensor& B, const Tensor* zp, const MatMulPlan& p, const NodeInfo& node) {
    if (b_const_ && !b_cache_.empty()) return b_cache_.data();
    std::vector<int16_t> c(static_cast<size_t>(B.numel()));
    centered_columns(B, zp, p.K, p.N, c.data(), node, "B");
    b_cache_ = std::move(c);
    return b_cache_.data();
  }

  Variant variant_;
  Inputs in_{};
  bool b_const_ = false;
  std::vector<int16_t> b_cache_;
};

// QGemm: 2-D, transA / transB, int32 C, alpha; quantized output with y_zero_point, float otherwise.
class QGemmKernel final : public Kernel {
 public:
  explicit QGemmKernel(const NodeInfo& n)
      : trans_a_(n.attrs.get_int("transA", 0) != 0),
        trans_b_(n.attrs.get_int("transB", 0) != 0),
        alpha_(n.attrs.get_float("alpha", 1.f)) {}

  void run(KernelContext& ctx) override {
    const NodeInfo& node = ctx.node;
    const Tensor& A = ctx.input(0);
    const Tensor& B = ctx.input(3);
    require_8bit(A, node, "A");
    require_8bit(B, node, "B");
    if (A.rank() != 2 || B.rank() != 2)
      throw BadInputError(node.label() + ": A " + shape_str(A.shape()) + " and B " + shape_str(B.shape()) +
                          " must be 2-D");
    const int64_t M = trans_a_ ? A.dim(1) : A.dim(0), K = trans_a_ ? A.dim(0) : A.dim(1);
    const int64_t N = trans_b_ ? B.dim(0) : B.dim(1), KB = trans_b_ ? B.dim(1) : B.dim(0);
    if (K != KB)
      throw BadInputError(node.label() + ": A " + shape_str(A.shape()) + " and B " + shape_str(B.shape()) +
                          " do not multiply with transA = " + std::to_string(trans_a_) +
                          ", transB = " + std::to_string(trans_b_));
    const float a_s = scalar_scale(ctx.input(1), node, "a_scale");
    const int32_t za = scalar_zero_point(ctx.has_input(2) ? &ctx.input(2) : nullptr, node, "a_zero_point");
    const Tensor* b_zp = ctx.has_input(5) ? &ctx.input(5) : nullptr;
    const Tensor& b_scale = ctx.input(4);
    for (const Tensor* t : {&b_scale, b_zp})
      if (t && t->numel() != 1 && t->numel() != N)
        throw UnsupportedError(node.label() + ": b_scale / b_zero_point " + shape_str(t->shape()) +
                               " are neither one value nor one per column; qtool (as ONNX Runtime) refuses them");

    // A' [M, K] and B' [K, N], centred.
    std::vector<int16_t> a_c(static_cast<size_t>(M * K)), b_c(static_cast<size_t>(K * N)), tmp;
    const Tensor za_t = A.dtype() == DType::Int8 ? Tensor::scalar<int8_t>(static_cast<int8_t>(za))
                                                 : Tensor::scalar<uint8_t>(static_cast<uint8_t>(za));
    if (!trans_a_) {
      centered(A, &za_t, 1, a_c.data(), node, "A");
    } else {
      tmp.resize(a_c.size());
      centered(A, &za_t, 1, tmp.data(), node, "A");
      for (int64_t k = 0; k < K; ++k)
        for (int64_t m = 0; m < M; ++m) a_c[static_cast<size_t>(m * K + k)] = tmp[static_cast<size_t>(k * M + m)];
    }
    if (!trans_b_) {
      centered_columns(B, b_zp, K, N, b_c.data(), node, "B");
    } else {  // B is [N, K]: its zero points are per row there
      tmp.resize(b_c.size());
      centered(B, b_zp, K, tmp.data(), node, "B");
      for (int64_t n = 0; n < N; ++n)
        for (int64_t k = 0; k < K; ++k) b_c[static_cast<size_t>(k * N + n)] = tmp[static_cast<size_t>(n * K + k)];
    }
    std::vector<int32_t> acc(static_cast<size_t>(M * N));
    compute::int_gemm(M, N, K, a_c.data(), K, b_c.data(), N, acc.data(), N, ctx.threads);
    if (ctx.has_input(6)) add_c(ctx.input(6), M, N, acc, node);

    std::vector<float> scale(static_cast<size_t>(b_scale.numel()));
    const float* bs = b_scale.data<float>();
    const Tensor* y_scale = ctx.has_input(7) ? &ctx.input(7) : nullptr;
    const float y_s = y_scale ? scalar_scale(*y_scale, node, "y_scale") : 1.f;
    for (size_t i = 0; i < scale.size(); ++i) {
      scale[i] = alpha_ * a_s * bs[i];
      if (y_scale) scale[i] /= y_s;
    }
    auto s_at = [&](int64_t n) { return scale[static_cast<size_t>(n) % scale.size()]; };
    if (ctx.has_input(8)) {
      const Tensor& yzp = ctx.input(8);
      const int32_t zy = scalar_zero_point(&yzp, node, "y_zero_point");
      ctx.outputs[0] =
          compute::requantize_all(acc.data(), {M, N}, yzp.dtype(), zy, [&](int64_t o) { return s_at(o % N); });
      return;
    }
    Tensor Y(DType::Float32, {M, N});
    float* y = Y.data<float>();
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = 0; n < N; ++n) y[m * N + n] = static_cast<float>(acc[static_cast<size_t>(m * N + n)]) * s_at(n);
    ctx.outputs[0] = std::move(Y);
  }

 private:
  // acc += C: int32 of one value, [N] / [1, N], [M, 1] or [M, N].
  static void add_c(const Tensor& C, int64_t M, int64_t N, std::vector<int32_t>& acc, const NodeInfo& node) {
    if (C.dtype() != DType::Int32)
      throw BadInputError(node.label() + ": C has dtype " + std::string(dtype_name(C.dtype())) +
                          ", QGemm's C is int32; the model is corrupt");
    const int32_t* c = C.data<int32_t>();
    int64_t sm = 0, sn = 0;
    if (C.numel() == 1) {
    } else if ((C.rank() == 1 || C.dim(0) == 1) && C.numel() == N) {
      sn = 1;
    } else if (C.rank() == 2 && C.dim(1) == 1 && C.dim(0) == M) {
      sm = 1;
    } else if (C.rank() == 2 && C.dim(0) == M && C.dim(1) == N) {
      sm = N;
      sn = 1;
    } else {
      throw BadInputError(node.label() + ": C " + shape_str(C.shape()) + " does not broadcast to [" +
                          std::to_string(M) + ", " + std::to_string(N) + "]");
    }
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = 0; n < N; ++n)
        acc[static_cast<size_t>(m * N + n)] = static_cast<int32_t>(
            static_cast<uint32_t>(acc[static_cast<size_t>(m * N + n)]) + static_cast<uint32_t>(c[m * sm + n * sn]));
  }

  bool trans_a_, trans_b_;
  float alpha_;
};

}  // namespace

std::unique_ptr<Kernel> make_matmul_integer(const NodeInfo& n) {
  return std::make_unique<QuantMatMulKernel>(n, Variant::Integer);
}
std::unique_ptr<Kernel> make_qlinear_matmul(const NodeInfo& n) {
  return std::make_unique<QuantMatMulKernel>(n, Variant::QLinear);
}
std::unique_ptr<Kernel> make_matmul_integer_to_float(const NodeInfo& n) {
  return std::make_unique<QuantMatMulKernel>(n, Variant::IntegerToFloat);
}
std::unique_ptr<Kernel> make_dynamic_quantize_matmul(const NodeInfo& n) {
  return std::make_unique<QuantMatMulKernel>(n, Variant::DynamicQuantize);
}
std::unique_ptr<Kernel> make_qgemm(const NodeInfo& n) { return std::make_unique<QGemmKernel>(n); }

}  // namespace qtool::runtime::kernels
