// Kernels of already-quantized models, as ONNX Runtime 1.30's CPU provider computes them: ORT's QOperator format
// (QLinearConv, QLinearMatMul, com.microsoft QLinear* and QGemm), dynamic quantization (MatMulInteger, ConvInteger,
// com.microsoft DynamicQuantizeMatMul, MatMulIntegerToFloat) and onnxruntime-genai's int4 ops (com.microsoft
// MatMulNBits, GatherBlockQuantized). Factories (registry.cc lists them) and the integer arithmetic they share.
//
// Exactness. 8-bit operands enter the GEMMs as int16 differences d = x - zero_point (|d| <= 255); every product
// fits 17 bits and the int32 sum of K of them is exact while K * 255^2 < 2^31 (K <= 33025); past that it wraps
// modulo 2^32, as MLAS's int32 accumulators do. qtool's float sgemm is not used: a float sum of such products is
// exact only while every partial sum stays below 2^24, i.e. K * 255^2 < 2^24 (K <= 258), too short for real layers.
//
// Requantization (MLAS MlasRequantizeOutput, used by QLinearMatMul, QLinearConv, QGemm, QLinearGlobalAveragePool):
//   y = zp + round_half_even(clamp(float(acc) * scale, qmin - zp, qmax - zp))
// with float(acc) rounded to nearest even (cvtdq2ps; exact below 2^24) and `scale` the float product/quotient the
// op defines, computed in the same order as ORT (e.g. a_scale * b_scale / y_scale). Bit for bit ORT's result.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <vector>

#include "core/tensor.h"
#include "runtime/kernel.h"

namespace qtool::runtime::kernels {

// --- factories ---
// qlinear_matmul.cc
std::unique_ptr<Kernel> make_matmul_integer(const NodeInfo& n);           // MatMulInteger (ai.onnx 10)
std::unique_ptr<Kernel> make_qlinear_matmul(const NodeInfo& n);           // QLinearMatMul (ai.onnx 10, 21)
std::unique_ptr<Kernel> make_matmul_integer_to_float(const NodeInfo& n);  // com.microsoft MatMulIntegerToFloat
std::unique_ptr<Kernel> make_dynamic_quantize_matmul(const NodeInfo& n);  // com.microsoft DynamicQuantizeMatMul
std::unique_ptr<Kernel> make_qgemm(const NodeInfo& n);                    // com.microsoft QGemm
// qlinear_conv.cc
std::unique_ptr<Kernel> make_conv_integer(const NodeInfo& n);  // ConvInteger (ai.onnx 10)
std::unique_ptr<Kernel> make_qlinear_conv(const NodeInfo& n);  // QLinearConv (ai.onnx 10)
// qlinear_elementwise.cc (com.microsoft)
std::unique_ptr<Kernel> make_qlinear_binary(const NodeInfo& n);           // QLinearAdd, QLinearMul
std::unique_ptr<Kernel> make_qlinear_lookup(const NodeInfo& n);           // QLinearSigmoid, QLinearLeakyRelu
std::unique_ptr<Kernel> make_qlinear_global_avg_pool(const NodeInfo& n);  // QLinearGlobalAveragePool
std::unique_ptr<Kernel> make_qlinear_concat(const NodeInfo& n);
std::unique_ptr<Kernel> make_qlinear_average_pool(const NodeInfo& n);  // QLinearAveragePool
std::unique_ptr<Kernel> make_qlinear_softmax(const NodeInfo& n);       // QLinearSoftmax           // QLinearConcat
// matmul_nbits.cc (com.microsoft)
std::unique_ptr<Kernel> make_matmul_nbits(const NodeInfo& n);            // MatMulNBits
std::unique_ptr<Kernel> make_gather_block_quantized(const NodeInfo& n);  // GatherBlockQuantized

// --- shared arithmetic (integer_gemm.cc) ---
namespace compute {

// C[M,N] = A[M,K] · B[K,N] on int16 operands with int32 (wrapping) accumulators, row-major with leading dimensions,
// rows of C split over `threads`. The result does not depend on the thread count.
void int_gemm(int64_t M, int64_t N, int64_t K, const int16_t* A, int64_t lda, const int16_t* B, int64_t ldb, int32_t* C,
              int64_t ldc, int threads);
// Reference twin: one dot product per output in int64, reduced modulo 2^32.
void int_gemm_ref(int64_t M, int64_t N, int64_t K, const int16_t* A, int64_t lda, const int16_t* B, int64_t ldb,
                  int32_t* C, int64_t ldc);

// MlasRequantizeOutput's arithmetic for one value (contract in the header comment); T int8 or uint8.
template <class T>
inline T requantize(int32_t acc, float scale, int32_t zp) {
  constexpr float lo = static_cast<float>(std::numeric_limits<T>::min());
  constexpr float hi = static_cast<float>(std::numeric_limits<T>::max());
  float v = static_cast<float>(acc) * scale;
  v = std::min(std::max(v, lo - static_cast<float>(zp)), hi - static_cast<float>(zp));
  return static_cast<T>(static_cast<int32_t>(std::nearbyint(v)) + zp);
}

// Y (shape `shape`, dtype of y_zero_point: int8 or uint8) = requantize(acc[i], scale_at(i), zp) for every i.
template <class ScaleAt>
Tensor requantize_all(const int32_t* acc, const Shape& shape, DType y_dtype, int32_t zp, ScaleAt&& scale_at) {
  Tensor Y(y_dtype, shape);
  auto fill = [&]<class T>(T* y) {
    for (int64_t i = 0; i < Y.numel(); ++i) y[i] = requantize<T>(acc[i], scale_at(i), zp);
  };
  if (y_dtype == DType::Int8)
    fill(Y.data<int8_t>());
  else
    fill(Y.data<uint8_t>());
  return Y;
}

}  // namespace compute

// An int8/uint8 tensor minus its zero point, as int16: out[i] = x[i] - zp[(i / inner) % zp.numel()] (zp omitted:
// 0). `inner` = 1 with zp of one value per row of a [rows, cols] view gives per-row points; inner = 1 and a
// zp broadcast per column is handled by the caller (centered_columns). UnsupportedError naming `what` otherwise.
void centered(const Tensor& x, const Tensor* zp, int64_t inner, int16_t* out, const NodeInfo& node, const char* what);
// The same with zero points per column: x viewed as [rows, cols], out[r, c] = x[r, c] - zp[(batch * cols + c) % Z]
// with batch = r / rows_per_batch, Z = zp.numel() (1, cols or batches * cols).
void centered_columns(const Tensor& x, const Tensor* zp, int64_t rows_per_batch, int64_t cols, int16_t* out,
                      const NodeInfo& node, const char* what);
// Integer value of a 1-element int8/uint8 zero point (0 when omitted); BadInputError naming `what` when it has more.
int32_t scalar_zero_point(const Tensor* zp, const NodeInfo& node, const char* what);
// The float value of a 1-element float scale; BadInputError naming `what` otherwise.
float scalar_scale(const Tensor& s, const NodeInfo& node, const char* what);
// UnsupportedError naming the node and `what` unless t is int8 or uint8.
void require_8bit(const Tensor& t, const NodeInfo& node, const char* what);

// DynamicQuantizeLinear's uint8 quantization of a float tensor (qdq.cc): range [min(0, min x), max(0, max x)],
// scale = range / 255, zero point round_half_even(clamp(-min / scale, 0, 255)), y = QuantizeLinear(x, scale, zp).
struct DynamicQuantized {
  Tensor y;
  float scale = 0;
  uint8_t zero_point = 0;
};
DynamicQuantized dynamic_quantize_uint8(const Tensor& x, const NodeInfo& node, int threads);

}  // namespace qtool::runtime::kernels
