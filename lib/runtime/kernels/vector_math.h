// exp and erf for float32 written so that GCC vectorises loops over them (no branches, no libm calls):
// the Softmax, Exp, Erf and Gelu kernels spent most of their time in scalar libm calls (__erff: 21 % of
// digits-vit's 1-thread samples, __expf 9 % of llama2c's). The standalone Sigmoid keeps std::exp: the CUDA
// emulation test pins it bit for bit against the device formula. The fused SiLU uses exp_approx (silu_approx):
// the test holds it, like the device's expf, to float tolerance.
//
// The polynomials are evaluated with explicit fused multiply-adds (std::fma, correctly rounded by definition), so
// every clone and every CPU gives the same bits: the x86-64-v3/v4 clones run vfmadd, the baseline clone and the
// scalar forms call libm's fmaf (through glibc's FMA-instruction variant wherever the CPU has one). Against
// separate multiplies and adds (this file is built with -ffp-contract=off) that is half the instructions on the
// dependency chain: Gelu 1.5x, exp 1.4x faster (2026-11-24, 278k values, best of 30).
//
// Reference twins are std::exp / std::erf; tests/kernels/vector_math_test.cc pins the error bound over a
// sweep of every exponent range: exp_approx within 2 ulp, erf_approx within 3 ulp (the bound the test
// names), both exact at the special values (0, ±inf, NaN, overflow to inf, underflow to 0).
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>

namespace qtool::runtime::kernels::compute {

// e^x. x = n·ln2 + r with n = round(x / ln2), |r| <= ln2/2 (ln2 in two parts, so r is exact to ~2^-35);
// e^r by its Taylor series to r^7 (truncation < 2^-27 relative on that interval); 2^n is applied as
// two factors 2^(n/2) so that n in [-150, 129] gives gradual underflow and overflow to inf without a
// branch. x above 89 is clamped to 89 (e^89 is above FLT_MAX: inf); below -104 (e^-104 is below half the
// smallest denormal) the result is 0, selected at the end, with x replaced by 0 for the arithmetic in between:
// computing 2^-150 would cost a denormal assist in every such lane (Softmax rows behind a causal mask are half
// -inf: 1.7 against 1.0 ns per value before this). NaN passes both selects and propagates.
namespace detail {
// e^x = 2^n·e^r as above: returns the polynomial e^r and sets n (x already in [-104, 89]).
inline float exp_reduced(float x, int32_t& n_out) {
  constexpr float kShifter = 12582912.f;  // 1.5·2^23: adding it rounds to an integer held in the low bits
  const float t = x * 1.44269504088896341f + kShifter;
  const float n = t - kShifter;
  n_out = std::bit_cast<int32_t>(t) - std::bit_cast<int32_t>(kShifter);
  const float r = (x - n * 0.693145751953125f) - n * 1.42860682030941723e-06f;
  float p = 1.f / 5040.f;
  p = std::fma(p, r, 1.f / 720.f);
  p = std::fma(p, r, 1.f / 120.f);
  p = std::fma(p, r, 1.f / 24.f);
  p = std::fma(p, r, 1.f / 6.f);
  p = std::fma(p, r, 0.5f);
  p = std::fma(p, r, 1.f);
  p = std::fma(p, r, 1.f);
  return p;
}
}  // namespace detail

inline float exp_approx(float x) {
  const bool underflow = x < -104.f;
  x = underflow ? 0.f : x;
  x = x > 89.f ? 89.f : x;
  int32_t n;
  const float p = detail::exp_reduced(x, n);
  const int32_t n1 = n >> 1, n2 = n - n1;
  const float y = p * std::bit_cast<float>((n1 + 127) << 23) * std::bit_cast<float>((n2 + 127) << 23);
  return underflow ? 0.f : y;
}

// e^x for x <= 0 (NaN propagates): exp_approx without the overflow clamp, which a non-positive x never reaches, so
// the same bits as exp_approx there (tested over every exponent). Softmax's exp(x - max): GCC if-converted
// exp_approx's two range selects into 4 compares and 5 blends per vector, 48 instructions against 36 here.
inline float exp_nonpositive(float x) {
  const bool underflow = x < -104.f;
  x = underflow ? 0.f : x;
  int32_t n;
  const float p = detail::exp_reduced(x, n);
  const int32_t n1 = n >> 1, n2 = n - n1;
  const float y = p * std::bit_cast<float>((n1 + 127) << 23) * std::bit_cast<float>((n2 + 127) << 23);
  return underflow ? 0.f : y;
}

// e^x for x in [-80, 80] (NaN propagates): exp_approx without its range selects and with 2^n as one factor,
// which gives exp_approx's bits wherever the result is a normal float (both scalings by powers of two are exact
// there). erf_approx's argument stays in [-19, 0.001]; 15 fewer instructions per vector there.
inline float exp_approx_normal(float x) {
  int32_t n;
  const float p = detail::exp_reduced(x, n);
  return p * std::bit_cast<float>((n + 127) << 23);
}

// erf(x) = sign(x)·erf(|x|). For |x| <= 0.921875: |x|·P(x²), P of degree 6; above: 1 - e^Q(|x|), Q of
// degree 7 approximating log(erfc(t)); from 3.925 on erf rounds to 1. Both polynomials are least-squares
// fits on Chebyshev nodes (relative error of P 5e-10, error of e^Q 5e-11, before float rounding).
inline float erf_approx(float x) {
  const uint32_t sign = std::bit_cast<uint32_t>(x) & 0x80000000u;
  float a = std::bit_cast<float>(std::bit_cast<uint32_t>(x) & 0x7fffffffu);
  const float s = a * a;
  float p = 8.41042056e-05f;
  p = std::fma(p, s, -0.000815361564f);
  p = std::fma(p, s, 0.00520215882f);
  p = std::fma(p, s, -0.0268599484f);
  p = std::fma(p, s, 0.112837084f);
  p = std::fma(p, s, -0.376126349f);
  p = std::fma(p, s, 1.12837923f);
  const float small = a * p;
  const float t = a > 3.925f ? 3.925f : a;
  float q = -2.13793155e-05f;
  q = std::fma(q, t, 0.000437634968f);
  q = std::fma(q, t, -0.00418589497f);
  q = std::fma(q, t, 0.025157107f);
  q = std::fma(q, t, -0.108336292f);
  q = std::fma(q, t, -0.633297622f);
  q = std::fma(q, t, -1.12953842f);
  q = std::fma(q, t, 0.000179402137f);
  float big = 1.f - exp_approx_normal(q);  // q in [-19, 0.001]
  big = a > 3.925f ? 1.f : big;
  a = a <= 0.921875f ? small : big;  // NaN: both comparisons fail, big is NaN
  return std::bit_cast<float>(std::bit_cast<uint32_t>(a) | sign);
}

// Array forms (multiversioned loops, compute_common.h's QTOOL_HOT_LOOP); y may alias x.
void exp_approx(const float* x, float* y, int64_t n);
void erf_approx(const float* x, float* y, int64_t n);
// The largest of x[0..n) ignoring NaN (-inf when there is none), with 32 partial maxima (four vectors: one was a
// chain of dependent maxima, 3 cycles per 8 values) so that it vectorises (Softmax's shift; a select, hence this
// file's -fno-trapping-math). Which of +0 and -0 it returns when both are the largest is unspecified.
float max_of(const float* x, int64_t n);
// y = exp(x - shift) for shift at least every x (Softmax's row maximum), returning the sum of y in a fixed order
// (softmax's numerator and denominator).
float exp_shifted_sum(const float* x, float shift, float* y, int64_t n);
// Softmax over `rows` contiguous rows of `len` values: the bits of max_of, exp_shifted_sum and a scale by 1/sum per
// row, in one multiversioned call for all the rows (digits-vit's rows are 17 long: four calls per row cost about as
// much as the row). y must not alias x.
void softmax_rows(const float* x, float* y, int64_t rows, int64_t len);
// y = x/2 · (1 + erf(x/√2)), Gelu's exact form
void gelu_approx(const float* x, float* y, int64_t n);
// y = x · 1/(1 + e^-x), SiLU (Sigmoid·x, the activation fusion folds into a MatMul or Conv): the formula of the
// unfused Sigmoid and Mul with exp_approx for std::exp, so within a few ulp of them.
void silu_approx(const float* x, float* y, int64_t n);

}  // namespace qtool::runtime::kernels::compute
