#include "runtime/kernels/vector_math.h"

#include <bit>
#include <cstdint>
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

namespace {

// max_of's loop (always_inline: see sum_of_inline).
[[gnu::always_inline]] inline float max_inline(const float* x, int64_t n) {
  constexpr float kLow = -std::numeric_limits<float>::infinity();
  float m[8] = {kLow, kLow, kLow, kLow, kLow, kLow, kLow, kLow};
  int64_t i = 0;
  if (n >= 64) {  // four vectors of partial maxima; short rows (digits-vit's 17) skip their set-up and reduction
    float w[32];
    for (float& v : w) v = kLow;
    for (; i + 32 <= n; i += 32)
      for (int k = 0; k < 32; ++k) w[k] = x[i + k] > w[k] ? x[i + k] : w[k];
    for (int k = 0; k < 32; ++k) m[k % 8] = w[k] > m[k % 8] ? w[k] : m[k % 8];
  }
  for (; i + 8 <= n; i += 8)
    for (int k = 0; k < 8; ++k) m[k] = x[i + k] > m[k] ? x[i + k] : m[k];
  for (; i < n; ++i) m[0] = x[i] > m[0] ? x[i] : m[0];
  for (int k = 1; k < 8; ++k) m[0] = m[k] > m[0] ? m[k] : m[0];
  return m[0];
}

}  // namespace

QTOOL_HOT_LOOP
float max_of(const float* x, int64_t n) { return max_inline(x, n); }

QTOOL_HOT_LOOP
static void exp_shifted(const float* x, float shift, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = exp_nonpositive(x[i] - shift);
}

namespace {

// The length of x[0..n) without its trailing run of -inf (a causal mask's future positions), or n when every value
// is -inf (the full computation then gives the NaNs of -inf - -inf).
[[gnu::always_inline]] inline int64_t finite_prefix(const float* x, int64_t n) {
  constexpr uint32_t kLow = 0xff800000u;  // -inf's bits
  int64_t e = n;
  for (; e >= 8; e -= 8) {  // eight at a time, as integers: a vector xor and or
    uint32_t other = 0;
    for (int k = 1; k <= 8; ++k) other |= std::bit_cast<uint32_t>(x[e - k]) ^ kLow;
    if (other) break;
  }
  while (e > 0 && std::bit_cast<uint32_t>(x[e - 1]) == kLow) --e;
  return e == 0 ? n : e;
}

}  // namespace

QTOOL_HOT_LOOP
void softmax_rows(const float* x, float* y, int64_t rows, int64_t len) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * len;
    float* yr = y + r * len;
    // Past the finite prefix e^(-inf - max) is exactly 0 (exp_nonpositive's underflow select) and -inf never is the
    // maximum, so those values are written as 0 without the exp: the bits of the whole-row computation (the sum still
    // runs over the whole row, in sum_of's order).
    const int64_t n = finite_prefix(xr, len);
    const float mx = max_inline(xr, n);
    for (int64_t i = 0; i < n; ++i) yr[i] = exp_nonpositive(xr[i] - mx);
    for (int64_t i = n; i < len; ++i) yr[i] = 0.f;
    const float inv = 1.f / sum_of_inline(yr, len);
    for (int64_t i = 0; i < n; ++i) yr[i] *= inv;  // scale_shift(y, inv, 0)'s bits: y >= 0 (0 · inv is 0)
  }
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
