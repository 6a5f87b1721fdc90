#include "runtime/kernels/vector_math.h"

#include <limits>

#include "runtime/kernels/compute_common.h"

namespace qtool::runtime::kernels::compute {

QTOOL_HOT_LOOP
void exp_approx(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = exp_approx(x[i]);
}

QTOOL_HOT_LOOP
void erf_approx(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = erf_approx(x[i]);
}

QTOOL_HOT_LOOP
float max_of(const float* x, int64_t n) {
  constexpr float kLow = -std::numeric_limits<float>::infinity();
  float m[32];
  for (float& v : m) v = kLow;
  int64_t i = 0;
  for (; i + 32 <= n; i += 32)
    for (int k = 0; k < 32; ++k) m[k] = x[i + k] > m[k] ? x[i + k] : m[k];
  for (; i + 8 <= n; i += 8)  // short rows (digits-vit's 17) still take whole vectors
    for (int k = 0; k < 8; ++k) m[k] = x[i + k] > m[k] ? x[i + k] : m[k];
  for (; i < n; ++i) m[0] = x[i] > m[0] ? x[i] : m[0];
  for (int k = 1; k < 32; ++k) m[0] = m[k] > m[0] ? m[k] : m[0];
  return m[0];
}

QTOOL_HOT_LOOP
static void exp_shifted(const float* x, float shift, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = exp_nonpositive(x[i] - shift);
}

float exp_shifted_sum(const float* x, float shift, float* y, int64_t n) {
  exp_shifted(x, shift, y, n);
  return sum_of(y, n);
}

QTOOL_HOT_LOOP
void gelu_approx(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = 0.5f * x[i] * (1.f + erf_approx(x[i] * 0.70710678118654752440f));
}

QTOOL_HOT_LOOP
void silu_approx(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] * (1.f / (1.f + exp_approx(-x[i])));
}

}  // namespace qtool::runtime::kernels::compute
