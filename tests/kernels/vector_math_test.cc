// compute::exp_approx / erf_approx (vector_math.h) against their reference twins std::exp / std::erf, and the
// kernels that use them (Softmax, Exp, Erf, Gelu) against plain formulas.
#include <catch2/catch.hpp>

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <utility>

#include "kernel_harness.h"
#include "runtime/kernels/compute_common.h"
#include "runtime/kernels/vector_math.h"

using namespace qtool;
using namespace qtool::test;
using namespace qtool::runtime::kernels::compute;

namespace {
// Distance in units in the last place between a float result and the exactly computed value rounded to float.
double ulps(float got, double exact) {
  const float want = static_cast<float>(exact);
  if (std::isnan(want) || std::isinf(want) || std::isnan(got) || std::isinf(got))
    return (std::isnan(want) && std::isnan(got)) || got == want ? 0 : std::numeric_limits<double>::infinity();
  const float a = std::fabs(want);
  const double ulp = a == 0.f ? std::numeric_limits<float>::denorm_min()
                              : std::nextafter(a, std::numeric_limits<float>::infinity()) - a;
  return std::fabs(static_cast<double>(got) - exact) / ulp;
}

// Every 4099th bit pattern: about a million floats covering every exponent, both signs.
template <class F>
void for_sampled_floats(F&& f) {
  for (uint64_t b = 0; b <= 0xffffffffull; b += 4099) {
    const float x = std::bit_cast<float>(static_cast<uint32_t>(b));
    if (!std::isnan(x)) f(x);
  }
}

// The largest ulps(approx(x), exact(x)) over the sampled floats, and where.
template <class A, class E>
std::pair<double, float> worst_ulps(A&& approx, E&& exact) {
  std::pair<double, float> worst{0, 0.f};
  for_sampled_floats([&](float x) {
    const double e = ulps(approx(x), exact(static_cast<double>(x)));
    if (e > worst.first) worst = {e, x};
  });
  return worst;
}

constexpr double kExpUlps = 2, kErfUlps = 3;  // the bounds vector_math.h promises
}  // namespace

TEST_CASE("exp_approx is within 2 ulp of exp over the float range, exact at its limits") {
  const auto [worst, at] = worst_ulps([](float x) { return exp_approx(x); }, [](double x) { return std::exp(x); });
  INFO("worst " << worst << " ulp at x = " << at);
  CHECK(worst <= kExpUlps);
  CHECK(exp_approx(0.f) == 1.f);
  CHECK(exp_approx(-std::numeric_limits<float>::infinity()) == 0.f);
  CHECK(std::isinf(exp_approx(std::numeric_limits<float>::infinity())));
  CHECK(std::isinf(exp_approx(89.f)));
  CHECK(exp_approx(-104.f) == 0.f);
  CHECK(exp_approx(-100.f) > 0.f);  // gradual underflow: e^-100 is a denormal, not 0
  CHECK(std::isnan(exp_approx(std::numeric_limits<float>::quiet_NaN())));
}

TEST_CASE("exp_nonpositive gives exp_approx's bits for every x <= 0 and NaN") {
  // Every 61st float bit pattern from -0 down to -inf (35 million values, every exponent), then the limits.
  for (uint32_t bits = 0x80000000u; bits <= 0xff800000u; bits += 61) {
    const float x = std::bit_cast<float>(bits);
    if (exp_nonpositive(x) != exp_approx(x)) FAIL("x = " << x);
  }
  CHECK(exp_nonpositive(0.f) == 1.f);
  CHECK(exp_nonpositive(-std::numeric_limits<float>::infinity()) == 0.f);
  CHECK(exp_nonpositive(-104.f) == 0.f);
  CHECK(exp_nonpositive(-100.f) == exp_approx(-100.f));
  CHECK(std::isnan(exp_nonpositive(std::numeric_limits<float>::quiet_NaN())));
}

TEST_CASE("erf_approx is within 3 ulp of erf over the float range, odd, exact at its limits") {
  const auto [worst, at] = worst_ulps([](float x) { return erf_approx(x); }, [](double x) { return std::erf(x); });
  for_sampled_floats([](float x) {
    if (erf_approx(-x) != -erf_approx(x)) FAIL("erf_approx is not odd at " << x);
  });
  INFO("worst " << worst << " ulp at x = " << at);
  CHECK(worst <= kErfUlps);
  CHECK(std::signbit(erf_approx(-0.f)));
  CHECK(erf_approx(std::numeric_limits<float>::infinity()) == 1.f);
  CHECK(erf_approx(-std::numeric_limits<float>::infinity()) == -1.f);
  CHECK(erf_approx(4.f) == 1.f);
  CHECK(std::isnan(erf_approx(std::numeric_limits<float>::quiet_NaN())));
}

TEST_CASE("silu_approx is within 4 ulp of the unfused Sigmoid·x over the float range") {
  float worst = 0, at = 0;
  for_sampled_floats([&](float x) {
    float y;
    silu_approx(&x, &y, 1);
    const float want = x * (1.f / (1.f + std::exp(-x)));  // the standalone Sigmoid's formula, then Mul
    // Below the smallest normal (x < -87) both lose bits to gradual underflow: they must agree there in
    // absolute terms, within that smallest normal.
    const double e = std::fabs(want) < std::numeric_limits<float>::min()
                         ? (std::fabs(y - want) <= std::numeric_limits<float>::min() ? 0 : INFINITY)
                         : ulps(y, want);
    if (e > worst) worst = static_cast<float>(e), at = x;
  });
  INFO("worst " << worst << " ulp at x = " << at);
  CHECK(worst <= 4);
  const float specials[] = {0.f, -0.f, std::numeric_limits<float>::infinity(), -200.f};
  float got[4];
  silu_approx(specials, got, 4);
  CHECK(got[0] == 0.f);
  CHECK(got[1] == 0.f);
  CHECK(std::isinf(got[2]));
  CHECK(got[3] == 0.f);  // -200 · 1/(1 + inf): -0, as the unfused Sigmoid and Mul give
}

TEST_CASE("the array forms equal the scalar forms bit for bit") {
  std::vector<float> x;
  for (int i = -3000; i <= 3000; ++i) x.push_back(static_cast<float>(i) * 0.00731f);
  std::vector<float> e(x.size()), r(x.size()), g(x.size()), s(x.size()), si(x.size());
  exp_approx(x.data(), e.data(), static_cast<int64_t>(x.size()));
  erf_approx(x.data(), r.data(), static_cast<int64_t>(x.size()));
  gelu_approx(x.data(), g.data(), static_cast<int64_t>(x.size()));
  const float shift = *std::max_element(x.begin(), x.end());
  exp_shifted_sum(x.data(), shift, s.data(), static_cast<int64_t>(x.size()));
  silu_approx(x.data(), si.data(), static_cast<int64_t>(x.size()));
  for (size_t i = 0; i < x.size(); ++i) {
    INFO("x = " << x[i]);
    REQUIRE(e[i] == exp_approx(x[i]));
    REQUIRE(r[i] == erf_approx(x[i]));
    REQUIRE(g[i] == 0.5f * x[i] * (1.f + erf_approx(x[i] * 0.70710678118654752440f)));
    REQUIRE(s[i] == exp_approx(x[i] - shift));
    REQUIRE(si[i] == x[i] * (1.f / (1.f + exp_approx(-x[i]))));
  }
}

TEST_CASE("softmax_rows equals max_of, exp_shifted_sum and the scale by 1/sum row by row, bit for bit") {
  for (const int64_t len : {1, 7, 17, 40, 128}) {
    const int64_t rows = 5;
    std::vector<float> x(static_cast<size_t>(rows * len)), got(x.size()), want(x.size());
    for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(static_cast<float>(i) * 0.37f) * 9.f;
    for (int64_t r = 1; r < rows; ++r)  // causal-mask style -inf tails
      for (int64_t j = len - r; j < len; ++j)
        if (j > 0) x[static_cast<size_t>(r * len + j)] = -std::numeric_limits<float>::infinity();
    softmax_rows(x.data(), got.data(), rows, len);
    for (int64_t r = 0; r < rows; ++r) {
      const float* xr = x.data() + r * len;
      float* wr = want.data() + r * len;
      const float sum = exp_shifted_sum(xr, max_of(xr, len), wr, len);
      scale_shift(wr, 1.f / sum, 0.f, wr, len);
    }
    INFO("len " << len);
    CHECK(got == want);
  }
}

TEST_CASE("Softmax, Exp, Erf and Gelu kernels agree with the libm formulas") {
  const Tensor x = random_tensor({3, 5, 67}, 11, -4.f, 4.f);  // rows of 67: vector body and tail
  const float* xv = x.data<float>();
  // 2-3 ulp for the functions; softmax adds the sum and the division
  auto close = [](float got, double want, double rel = 4e-7) { return std::fabs(got - want) <= rel * std::fabs(want); };
  for (int opset : {11, 13}) {  // the last axis, as a 2-D coercion (opset 11, axis 2) and as the axis (13)
    runtime::NodeAttrs a;
    a.values["axis"] = attr_int(2);
    const Tensor y = run_kernel("Softmax", opset, a, {x}).at(0);
    for (int64_t r = 0; r < 15; ++r) {
      double mx = -INFINITY, sum = 0;
      for (int64_t j = 0; j < 67; ++j) mx = std::max<double>(mx, xv[r * 67 + j]);
      for (int64_t j = 0; j < 67; ++j) sum += std::exp(xv[r * 67 + j] - mx);
      for (int64_t j = 0; j < 67; ++j) {
        INFO("opset " << opset << " row " << r << " col " << j);
        REQUIRE(close(y.data<float>()[r * 67 + j], std::exp(xv[r * 67 + j] - mx) / sum, 1e-6));
      }
    }
  }
  runtime::NodeAttrs axis1;  // softmax along a strided axis takes the scalar path
  axis1.values["axis"] = attr_int(1);
  const Tensor ys = run_kernel("Softmax", 13, axis1, {x}).at(0);
  for (int64_t o = 0; o < 3; ++o)
    for (int64_t i = 0; i < 67; ++i) {
      double sum = 0;
      for (int64_t j = 0; j < 5; ++j) sum += ys.data<float>()[(o * 5 + j) * 67 + i];
      REQUIRE(std::fabs(sum - 1) < 1e-6);
    }
  const Tensor e = run_kernel("Exp", 13, {}, {x}).at(0);
  const Tensor r = run_kernel("Erf", 13, {}, {x}).at(0);
  const Tensor g = run_kernel("Gelu", 20, {}, {x}).at(0);
  for (int64_t i = 0; i < x.numel(); ++i) {
    const double v = xv[i];
    INFO("x = " << v);
    REQUIRE(close(e.data<float>()[i], std::exp(v)));
    REQUIRE(close(r.data<float>()[i], std::erf(v)));
    REQUIRE(std::fabs(g.data<float>()[i] - 0.5 * v * (1 + std::erf(v / std::sqrt(2.0)))) <= 1e-6 * std::fabs(v) + 1e-30);
  }
}
