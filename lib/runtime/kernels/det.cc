// Det (opset 11): X [..., M, M] float32 or float64; Y [...] the determinants, by LU factorisation with partial
// pivoting in double (the product of the pivots, negated per row swap), rounded to X's type. A singular matrix
// gives 0 (a zero pivot column).
#include <cmath>
#include <string>
#include <vector>

#include "runtime/kernels/blas.h"
#include "runtime/kernels/common.h"
#include "runtime/kernels/kernels.h"

namespace qtool::runtime::kernels {
namespace {
using compute::parallel_for;

double lu_determinant(std::vector<double>& a, int64_t m) {
  double det = 1;
  for (int64_t k = 0; k < m; ++k) {
    int64_t p = k;
    for (int64_t r = k + 1; r < m; ++r)
      if (std::abs(a[r * m + k]) > std::abs(a[p * m + k])) p = r;
    if (a[p * m + k] == 0) return 0;
    if (p != k) {
      for (int64_t c = 0; c < m; ++c) std::swap(a[p * m + c], a[k * m + c]);
      det = -det;
    }
    det *= a[k * m + k];
    for (int64_t r = k + 1; r < m; ++r) {
      const double f = a[r * m + k] / a[k * m + k];
      for (int64_t c = k + 1; c < m; ++c) a[r * m + c] -= f * a[k * m + c];
    }
  }
  return det;
}

void det(KernelContext& ctx) {
  const Tensor& X = ctx.input(0);
  const int64_t r = X.rank();
  if (r < 2 || X.dim(r - 1) != X.dim(r - 2))
    throw BadInputError(ctx.node.label() + ": X must be [..., M, M], got " + shape_str(X.shape()));
  const int64_t m = X.dim(r - 1),
                mats = m ? X.numel() / (m * m) : shape_numel(Shape(X.shape().begin(), X.shape().end() - 2));
  Tensor Y(X.dtype(), Shape(X.shape().begin(), X.shape().end() - 2));
  dispatch_float(X.dtype(), ctx.node, [&]<class T>() {
    const T* x = X.data<T>();
    T* y = Y.data<T>();
    parallel_for(mats, threads_for(mats * m * m * m, ctx.threads), [&](int64_t i) {
      std::vector<double> a(x + i * m * m, x + (i + 1) * m * m);
      y[i] = static_cast<T>(lu_determinant(a, m));  // an empty (0x0) matrix: 1
    });
  });
  ctx.outputs[0] = std::move(Y);
}

}  // namespace

std::unique_ptr<Kernel> make_det(const NodeInfo& node) { return make_function_kernel<det>(node); }

}  // namespace qtool::runtime::kernels
