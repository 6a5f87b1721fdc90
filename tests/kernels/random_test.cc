// Random generators (kernels/random.cc): qtool's own documented draws (mt19937_64, Box–Muller), so the tests pin
// statistics, seeding and the exact cases (p = 0 and 1, a dominant class) rather than values.
#include <catch2/catch.hpp>
#include <cmath>

#include "core/error.h"
#include "kernel_harness.h"
#include "runtime/kernels/kernels.h"

using namespace qtool;
using namespace qtool::test;

namespace {
std::pair<double, double> mean_std(const Tensor& t) {
  double s = 0, q = 0;
  for (int64_t i = 0; i < t.numel(); ++i) s += t.data<float>()[i];
  const double m = s / t.numel();
  for (int64_t i = 0; i < t.numel(); ++i) q += (t.data<float>()[i] - m) * (t.data<float>()[i] - m);
  return {m, std::sqrt(q / t.numel())};
}
runtime::NodeAttrs shaped(std::vector<int64_t> shape) {
  runtime::NodeAttrs a;
  a.values["shape"] = attr_ints(std::move(shape));
  return a;
}
}  // namespace

TEST_CASE("RandomNormal / RandomUniform(Like): moments, bounds, dtype") {
  runtime::NodeAttrs a = shaped({200, 500});
  a.values["mean"] = attr_float(2.f);
  a.values["scale"] = attr_float(3.f);
  const auto [m, s] = mean_std(run_kernel("RandomNormal", 1, a, {})[0]);
  CHECK(m == Approx(2.0).margin(0.03));  // 100,000 draws: standard error 0.01
  CHECK(s == Approx(3.0).margin(0.03));

  runtime::NodeAttrs u;
  u.values["low"] = attr_float(-1.f);
  u.values["high"] = attr_float(3.f);
  const Tensor like = run_kernel("RandomUniformLike", 1, u, {Tensor(DType::Float32, {100, 1000})})[0];
  REQUIRE(like.shape() == Shape{100, 1000});
  float lo = 9, hi = -9;
  for (int64_t i = 0; i < like.numel(); ++i)
    lo = std::min(lo, like.data<float>()[i]), hi = std::max(hi, like.data<float>()[i]);
  CHECK(lo >= -1.f);
  CHECK(hi < 3.f);
  CHECK(mean_std(like).first == Approx(1.0).margin(0.02));

  u.values["dtype"] = attr_int(11);  // double
  CHECK(run_kernel("RandomUniformLike", 1, u, {Tensor(DType::Float32, {3})})[0].dtype() == DType::Float64);
  u.values["dtype"] = attr_int(6);  // int32: not a float type
  CHECK_THROWS_AS(run_kernel("RandomUniformLike", 1, u, {Tensor(DType::Float32, {3})}), BadInputError);
  CHECK_THROWS_AS(run_kernel("RandomNormal", 1, {}, {}), BadInputError);  // no shape
  CHECK_THROWS_AS(run_kernel("RandomNormal", 1, shaped({-1}), {}), BadInputError);
  CHECK_THROWS_AS(run_kernel("RandomNormal", 1, shaped({1 << 30, 1 << 30}), {}), BadInputError);  // memory limit
}

TEST_CASE("Random ops: the seed fixes the sequence: each run draws fresh values") {
  runtime::NodeAttrs a = shaped({16});
  a.values["seed"] = attr_float(7.f);
  const Tensor x1 = run_kernel("RandomNormal", 1, a, {})[0];
  CHECK(max_abs_diff(x1, run_kernel("RandomNormal", 1, a, {})[0]) == 0);  // a new node: the same first draw
  a.values["seed"] = attr_float(8.f);
  CHECK(max_abs_diff(x1, run_kernel("RandomNormal", 1, a, {})[0]) > 0);
  // One node run twice: the generator advances.
  runtime::NodeInfo info;
  info.name = "r";
  info.op_type = "RandomNormal";
  info.opset = 1;
  info.attrs = shaped({16});
  auto kernel = runtime::kernels::make_random(info);
  std::vector<Tensor> out(1);
  std::vector<const Tensor*> none;
  runtime::KernelContext ctx{info, none, out};
  kernel->run(ctx);
  const Tensor first = out[0];
  kernel->run(ctx);
  CHECK(max_abs_diff(first, out[0]) > 0);
}

TEST_CASE("Bernoulli and Multinomial: exact cases and frequencies") {
  const Tensor p = Tensor::from_vector<float>({4}, {0, 1, 0, 1});
  const Tensor b = run_kernel("Bernoulli", 15, {}, {p})[0];
  REQUIRE(b.dtype() == DType::Float32);
  CHECK(std::vector<float>(b.data<float>(), b.data<float>() + 4) == std::vector<float>{0, 1, 0, 1});
  const Tensor half =
      run_kernel("Bernoulli", 15, {}, {Tensor::from_vector<float>({10000}, std::vector<float>(10000, 0.3f))})[0];
  CHECK(mean_std(half).first == Approx(0.3).margin(0.02));

  runtime::NodeAttrs m;
  m.values["sample_size"] = attr_int(1000);
  m.values["dtype"] = attr_int(7);
  // Row 0: class 2 dominant (log-probabilities); row 1: classes 0 and 1 equally likely.
  const Tensor logits = Tensor::from_vector<float>({2, 3}, {-50, -50, 0, 0, 0, -50});
  const Tensor s = run_kernel("Multinomial", 7, m, {logits})[0];
  REQUIRE(s.shape() == Shape{2, 1000});
  int64_t twos = 0, ones = 0;
  for (int i = 0; i < 1000; ++i) twos += s.data<int64_t>()[i] == 2, ones += s.data<int64_t>()[1000 + i] == 1;
  CHECK(twos == 1000);
  CHECK(ones == Approx(500).margin(60));
}
