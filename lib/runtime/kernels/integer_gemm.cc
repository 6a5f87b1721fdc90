// The integer arithmetic of the quantized-operator kernels (contract in quantized_ops.h): int16 x int16 -> int32
// GEMM, its reference twin, and the centring of 8-bit operands on their zero points.
#include <cstring>

#include "runtime/kernels/blas.h"
#include "runtime/kernels/compute_common.h"
#include "runtime/kernels/quantized_ops.h"

namespace qtool::runtime::kernels {
namespace compute {
namespace {

// Rows [m0, m1) of C. Per row: the int32 row accumulates a[k] * B[k, :] over k (products of int16 operands, summed
// in unsigned arithmetic so an overflow wraps as MLAS's int32 accumulators do); the inner loop over N vectorises.
QTOOL_HOT_LOOP
void int_gemm_rows(int64_t m0, int64_t m1, int64_t N, int64_t K, const int16_t* A, int64_t lda, const int16_t* B,
                   int64_t ldb, int32_t* C, int64_t ldc) {
  std::vector<uint32_t> acc(static_cast<size_t>(N));
  for (int64_t m = m0; m < m1; ++m) {
    std::fill(acc.begin(), acc.end(), 0u);
    const int16_t* a = A + m * lda;
    for (int64_t k = 0; k < K; ++k) {
      const int32_t av = a[k];
      if (av == 0) continue;
      const int16_t* b = B + k * ldb;
      uint32_t* c = acc.data();
      for (int64_t n = 0; n < N; ++n) c[n] += static_cast<uint32_t>(av * static_cast<int32_t>(b[n]));
    }
    std::memcpy(C + m * ldc, acc.data(), sizeof(int32_t) * static_cast<size_t>(N));
  }
}

}  // namespace

void int_gemm(int64_t M, int64_t N, int64_t K, const int16_t* A, int64_t lda, const int16_t* B, int64_t ldb, int32_t* C,
              int64_t ldc, int threads) {
  const int t = threads_for_macs(M * N * K, threads);
  const int64_t chunks = std::min<int64_t>(M, int64_t{8} * t);
  parallel_for(chunks, t,
               [&](int64_t c) { int_gemm_rows(M * c / chunks, M * (c + 1) / chunks, N, K, A, lda, B, ldb, C, ldc); });
}

void int_gemm_ref(int64_t M, int64_t N, int64_t K, const int16_t* A, int64_t lda, const int16_t* B, int64_t ldb,
                  int32_t* C, int64_t ldc) {
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      int64_t s = 0;
      for (int64_t k = 0; k < K; ++k) s += int64_t{A[m * lda + k]} * B[k * ldb + n];
      C[m * ldc + n] = static_cast<int32_t>(static_cast<uint32_t>(static_cast<uint64_t>(s)));
    }
}

}  // namespace compute

void require_8bit(const Tensor& t, const NodeInfo& node, const char* what) {
  if (t.dtype() != DType::Int8 && t.dtype() != DType::UInt8)
    throw UnsupportedError(node.label() + ": " + what + " has dtype " + std::string(dtype_name(t.dtype())) +
                           "; qtool runs this op on int8 and uint8 only");
}

namespace {
// Calls f(const T*) with x's int8 or uint8 data.
template <class F>
void with_8bit(const Tensor& x, F&& f) {
  if (x.dtype() == DType::Int8)
    f(x.data<int8_t>());
  else
    f(x.data<uint8_t>());
}

std::vector<int32_t> zero_points(const Tensor* zp, DType want, const NodeInfo& node, const char* what) {
  if (!zp) return {0};
  if (zp->dtype() != want)
    throw BadInputError(node.label() + ": the zero point of " + what + " is " + std::string(dtype_name(zp->dtype())) +
                        " but " + what + " is " + std::string(dtype_name(want)) + "; the model is corrupt");
  std::vector<int32_t> v(static_cast<size_t>(zp->numel()));
  with_8bit(*zp, [&](const auto* p) { std::copy(p, p + zp->numel(), v.begin()); });
  if (v.empty()) v.push_back(0);
  return v;
}
}  // namespace

void centered(const Tensor& x, const Tensor* zp, int64_t inner, int16_t* out, const NodeInfo& node, const char* what) {
  require_8bit(x, node, what);
  const std::vector<int32_t> z = zero_points(zp, x.dtype(), node, what);
  const int64_t n = x.numel(), nz = static_cast<int64_t>(z.size());
  with_8bit(x, [&](const auto* p) {
    if (nz == 1) {
      for (int64_t i = 0; i < n; ++i) out[i] = static_cast<int16_t>(p[i] - z[0]);
      return;
    }
    for (int64_t i = 0; i < n; ++i) out[i] = static_cast<int16_t>(p[i] - z[static_cast<size_t>((i / inner) % nz)]);
  });
}

void centered_columns(const Tensor& x, const Tensor* zp, int64_t rows_per_batch, int64_t cols, int16_t* out,
                      const NodeInfo& node, const char* what) {
  require_8bit(x, node, what);
  const std::vector<int32_t> z = zero_points(zp, x.dtype(), node, what);
  const int64_t nz = static_cast<int64_t>(z.size()), rows = cols == 0 ? 0 : x.numel() / cols;
  with_8bit(x, [&](const auto* p) {
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t base = rows_per_batch == 0 ? 0 : (r / rows_per_batch) * cols;
      for (int64_t c = 0; c < cols; ++c)
        out[r * cols + c] = static_cast<int16_t>(p[r * cols + c] - z[static_cast<size_t>((base + c) % nz)]);
    }
  });
}

int32_t scalar_zero_point(const Tensor* zp, const NodeInfo& node, const char* what) {
  if (!zp) return 0;
  if (zp->numel() != 1)
    throw UnsupportedError(node.label() + ": " + what + " has " + std::to_string(zp->numel()) +
                           " values; qtool (as ONNX Runtime) runs this op with one zero point there");
  require_8bit(*zp, node, what);
  int32_t v = 0;
  with_8bit(*zp, [&](const auto* p) { v = p[0]; });
  return v;
}

float scalar_scale(const Tensor& s, const NodeInfo& node, const char* what) {
  if (s.dtype() != DType::Float32)
    throw UnsupportedError(node.label() + ": " + what + " has dtype " + std::string(dtype_name(s.dtype())) +
                           "; qtool runs this op with float scales only");
  if (s.numel() != 1)
    throw UnsupportedError(node.label() + ": " + what + " has " + std::to_string(s.numel()) +
                           " values; qtool (as ONNX Runtime) runs this op with one scale there");
  return s.data<float>()[0];
}

}  // namespace qtool::runtime::kernels
