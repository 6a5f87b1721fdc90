// com.microsoft MatMulNBits (onnxruntime-genai's int4 / int8 weights): Y[..., N] = A[..., K] · W^T + bias with
//
//   W[n, k] = (q[n, k] - zp[n, k / block_size]) * scales[n, k / block_size]
//
// q: B [N, k_blocks, blob] packs bits-wide unsigned codes of each block, low bits first (bits 2, 4 or 8);
// zp: uint8 zero_points packed the same way per row ([N, ceil(k_blocks * bits / 8)]), or float ones per block, or
// 2^(bits - 1) when omitted. The weight is dequantized once when B, scales and zero points are constants, and the
// product runs as qtool's float GEMM (blas.h sgemm), as ORT's CPU kernel does for accuracy_level 0-3 (float
// compute on dequantized blocks): the two differ by float summation order only. accuracy_level 4 makes ORT
// quantize A per block to int8 first; qtool keeps A float there (a difference of A's int8 rounding error,
// documented in docs/interpreter.md). g_idx (act-order) is refused by name.
#include "runtime/kernels/blas.h"
#include "runtime/kernels/compute_common.h"
#include "runtime/kernels/quantized_ops.h"

namespace qtool::runtime::kernels {
namespace {

// Code i of a row of bits-wide unsigned values packed low bits first (bits 2, 4 or 8), as a float.
float packed_code(const uint8_t* bytes, int64_t i, int64_t bits) {
  const int64_t per_byte = 8 / bits;
  return static_cast<float>((bytes[i / per_byte] >> ((i % per_byte) * bits)) & ((1u << bits) - 1));
}

// bits 2, 4 or 8 and a block_size that is a power of 2 >= 16, as ORT requires of both ops.
void check_bits_and_block(const NodeInfo& n, int64_t bits, int64_t block) {
  if (bits != 2 && bits != 4 && bits != 8)
    throw UnsupportedError(n.label() + ": bits = " + std::to_string(bits) + "; qtool runs " + n.op_type +
                           " with 2, 4 or 8");
  if (block < 16 || (block & (block - 1)) != 0)
    throw BadInputError(n.label() + ": block_size = " + std::to_string(block) + " is not a power of 2 >= 16");
}

class MatMulNBitsKernel final : public Kernel {
 public:
  explicit MatMulNBitsKernel(const NodeInfo& n)
      : K_(n.attrs.require_int("K")),
        N_(n.attrs.require_int("N")),
        bits_(n.attrs.get_int("bits", 4)),
        block_(n.attrs.require_int("block_size")) {
    check_bits_and_block(n, bits_, block_);
    if (n.inputs.size() > 4 && !n.inputs[4].empty())
      throw UnsupportedError(n.label() + ": input g_idx (act-order weights) is not supported; re-export without it");
    const auto is_const = [&](size_t i) {
      return i >= n.inputs.size() || n.inputs[i].empty() || (i < n.const_inputs.size() && n.const_inputs[i]);
    };
    const_weight_ = is_const(1) && is_const(2) && is_const(3);
  }

  void run(KernelContext& ctx) override {
    const NodeInfo& node = ctx.node;
    const Tensor& A = ctx.input(0);
    if (A.dtype() != DType::Float32)
      throw UnsupportedError(node.label() + ": A has dtype " + std::string(dtype_name(A.dtype())) + "; float A only");
    if (A.rank() < 1 || A.dim(-1) != K_)
      throw BadInputError(node.label() + ": A " + shape_str(A.shape()) + " does not end in K = " + std::to_string(K_));
    if (!const_weight_ || w_.empty()) w_ = dequantize(ctx);
    const int64_t M = A.numel() / K_;
    Shape ys = A.shape();
    ys.back() = N_;
    Tensor Y(DType::Float32, ys);
    compute::sgemm(false, true, M, N_, K_, 1.f, A.data<float>(), K_, w_.data(), K_, 0.f, Y.data<float>(), N_,
                   ctx.threads);
    if (ctx.has_input(5)) {
      const Tensor& bias = ctx.input(5);
      if (bias.dtype() != DType::Float32 || bias.numel() != N_)
        throw BadInputError(node.label() + ": bias " + shape_str(bias.shape()) +
                            " is not float [N = " + std::to_string(N_) + "]");
      float* y = Y.data<float>();
      for (int64_t m = 0; m < M; ++m)
        for (int64_t j = 0; j < N_; ++j) y[m * N_ + j] += bias.data<float>()[j];
    }
    ctx.outputs[0] = std::move(Y);
  }

 private:
  // W [N, K] float from B, scales and zero points.
  std::vector<float> dequantize(const KernelContext& ctx) const {
    const NodeInfo& node = ctx.node;
    const Tensor& B = ctx.input(1);
    const Tensor& S = ctx.input(2);
    const Tensor* Z = ctx.has_input(3) ? &ctx.input(3) : nullptr;
    const int64_t kb = (K_ + block_ - 1) / block_, blob = block_ * bits_ / 8;
    if (B.dtype() != DType::UInt8 || B.numel() != N_ * kb * blob)
      throw BadInputError(node.label() + ": B " + shape_str(B.shape()) + " " + std::string(dtype_name(B.dtype())) +
                          " is not uint8 [N, k_blocks, blob] = [" + std::to_string(N_) + ", " + std::to_string(kb) +
                          ", " + std::to_string(blob) + "]");
    if (S.dtype() != DType::Float32 || S.numel() != N_ * kb)
      throw BadInputError(node.label() + ": scales " + shape_str(S.shape()) +
                          " is not float with N * k_blocks = " + std::to_string(N_ * kb) + " values");
    const int64_t zrow = (kb * bits_ + 7) / 8;
    if (Z && !((Z->dtype() == DType::UInt8 && Z->numel() == N_ * zrow) ||
               (Z->dtype() == DType::Float32 && Z->numel() == N_ * kb)))
      throw UnsupportedError(node.label() + ": zero_points " + shape_str(Z->shape()) + " " +
                             std::string(dtype_name(Z->dtype())) + " is neither packed uint8 [" +
                             std::to_string(N_ * zrow) + "] nor float [" + std::to_string(N_ * kb) + "]");
    const auto code = [&](const uint8_t* bytes, int64_t i) { return packed_code(bytes, i, bits_); };
    const uint8_t* q = B.data<uint8_t>();
    const float* s = S.data<float>();
    const float dflt = static_cast<float>(1 << (bits_ - 1));
    std::vector<float> w(static_cast<size_t>(N_ * K_));
    for (int64_t n = 0; n < N_; ++n)
      for (int64_t b = 0; b < kb; ++b) {
        float zp = dflt;
        if (Z && Z->dtype() == DType::UInt8) zp = code(Z->data<uint8_t>() + n * zrow, b);
        if (Z && Z->dtype() == DType::Float32) zp = Z->data<float>()[n * kb + b];
        const float sc = s[n * kb + b];
        const uint8_t* blk = q + (n * kb + b) * blob;
        for (int64_t i = 0; i < block_ && b * block_ + i < K_; ++i)
          w[static_cast<size_t>(n * K_ + b * block_ + i)] = (code(blk, i) - zp) * sc;
      }
    return w;
  }

  int64_t K_, N_, bits_, block_;
  bool const_weight_ = false;
  mutable std::vector<float> w_;
};

// GatherBlockQuantized (uint8 data, ORT's genai form): gather_axis 0, quantize_axis the last axis, data[..., Kp]
// packing K = Kp * 8 / bits codes per row (bits 2, 4 or 8), scales [..., ceil(K / block_size)], zero_points packed
// like data ([..., ceil(k_blocks * bits / 8)]) or 2^(bits - 1) when omitted:
//   Y[i..., rest..., k] = (q[idx[i...], rest..., k] - zp[.., k / block_size]) * scales[.., k / block_size]
// as ORT computes it, bit for bit. int4 / uint4 data and other axes are refused by name, and so is an index
// outside [-D0, D0) (ORT writes zeros there).
class GatherBlockQuantizedKernel final : public Kernel {
 public:
  explicit GatherBlockQuantizedKernel(const NodeInfo& n)
      : gather_axis_(n.attrs.get_int("gather_axis", 0)),
        quantize_axis_(n.attrs.get_int("quantize_axis", 1)),
        block_(n.attrs.get_int("block_size", 128)),
        bits_(n.attrs.get_int("bits", 4)) {
    check_bits_and_block(n, bits_, block_);
  }

  void run(KernelContext& ctx) override {
    const NodeInfo& node = ctx.node;
    const Tensor& D = ctx.input(0);
    const Tensor& I = ctx.input(1);
    const Tensor& S = ctx.input(2);
    const Tensor* Z = ctx.has_input(3) ? &ctx.input(3) : nullptr;
    if (D.dtype() != DType::UInt8)
      throw UnsupportedError(node.label() + ": data has dtype " + std::string(dtype_name(D.dtype())) +
                             "; qtool runs GatherBlockQuantized on packed uint8 data only");
    const int64_t r = D.rank();
    if (r < 1 || normalize_axis(gather_axis_, r, node) != 0 || normalize_axis(quantize_axis_, r, node) != r - 1)
      throw UnsupportedError(node.label() + ": gather_axis " + std::to_string(gather_axis_) + " / quantize_axis " +
                             std::to_string(quantize_axis_) + "; uint8 data needs gather_axis 0 and the last axis");
    if (S.dtype() != DType::Float32)
      throw UnsupportedError(node.label() + ": scales has dtype " + std::string(dtype_name(S.dtype())) +
                             "; float only");
    const int64_t comp = 8 / bits_, D0 = D.dim(0), Kp = D.dim(-1), K = Kp * comp;
    const int64_t rows = D.numel() / std::max<int64_t>(D0 * Kp, 1), kb = (K + block_ - 1) / block_;
    const int64_t zrow = (kb + comp - 1) / comp;
    if (S.numel() != D0 * rows * kb)
      throw BadInputError(node.label() + ": scales " + shape_str(S.shape()) + " do not match data " +
                          shape_str(D.shape()) + " with block_size " + std::to_string(block_));
    if (Z && (Z->dtype() != DType::UInt8 || Z->numel() != D0 * rows * zrow))
      throw BadInputError(node.label() + ": zero_points " + shape_str(Z->shape()) + " is not uint8 packed like data");
    const std::vector<int64_t> idx = read_ints(I, node, "indices");
    Shape ys = I.shape();
    ys.insert(ys.end(), D.shape().begin() + 1, D.shape().end());
    ys.back() = K;
    Tensor Y(DType::Float32, ys);
    float* y = Y.data<float>();
    const uint8_t* q = D.data<uint8_t>();
    const float* s = S.data<float>();
    const float dflt = static_cast<float>(1 << (bits_ - 1));
    for (size_t i = 0; i < idx.size(); ++i) {
      int64_t g = idx[i];
      if (g < -D0 || g >= D0)
        throw BadInputError(node.label() + ": index " + std::to_string(g) + " is outside [" + std::to_string(-D0) +
                            ", " + std::to_string(D0) + ")");
      if (g < 0) g += D0;
      for (int64_t row = 0; row < rows; ++row) {
        const int64_t rr = g * rows + row;
        float* out = y + (static_cast<int64_t>(i) * rows + row) * K;
        for (int64_t k = 0; k < K; ++k) {
          const int64_t b = k / block_;
          const float zp = Z ? packed_code(Z->data<uint8_t>() + rr * zrow, b, bits_) : dflt;
          out[k] = (packed_code(q + rr * Kp, k, bits_) - zp) * s[rr * kb + b];
        }
      }
    }
    ctx.outputs[0] = std::move(Y);
  }

 private:
  int64_t gather_axis_, quantize_axis_, block_, bits_;
};

}  // namespace

std::unique_ptr<Kernel> make_gather_block_quantized(const NodeInfo& n) {
  return std::make_unique<GatherBlockQuantizedKernel>(n);
}
std::unique_ptr<Kernel> make_matmul_nbits(const NodeInfo& n) { return std::make_unique<MatMulNBitsKernel>(n); }

}  // namespace qtool::runtime::kernels
