// Min / Max: the vectorised select form keeps ONNX Runtime's NaN propagation (a NaN in either operand
// gives NaN) on every broadcast path (same shape, scalar right, scalar left).
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "kernel_harness.h"

using namespace qtool;
using namespace qtool::test;

TEST_CASE("Min and Max propagate NaN from either operand on every broadcast path") {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> av = {1.f, nan, 3.f, -2.f, nan, 0.5f, 7.f, -1.f, 2.f, 9.f, nan, 4.f};
  const std::vector<float> bv = {2.f, 1.f, nan, -3.f, nan, 0.25f, 8.f, -1.f, 6.f, 6.f, 1.f, nan};
  const Tensor a = Tensor::from_vector<float>({12}, av), b = Tensor::from_vector<float>({12}, bv);
  const Tensor six = Tensor::scalar<float>(6.f);
  for (const char* op : {"Min", "Max"}) {
    const bool is_min = std::string(op) == "Min";
    auto expect = [&](float x, float y) {
      if (std::isnan(x) || std::isnan(y)) return nan;
      return is_min ? std::min(x, y) : std::max(x, y);
    };
    auto check = [&](const Tensor& y, auto want) {
      for (int64_t i = 0; i < 12; ++i) {
        INFO(op << " element " << i);
        const float got = y.data<float>()[i], w = want(i);
        if (std::isnan(w))
          CHECK(std::isnan(got));
        else
          CHECK(got == w);
      }
    };
    check(run_kernel(op, 13, {}, {a, b})[0], [&](int64_t i) { return expect(av[i], bv[i]); });
    check(run_kernel(op, 13, {}, {a, six})[0], [&](int64_t i) { return expect(av[i], 6.f); });
    check(run_kernel(op, 13, {}, {six, b})[0], [&](int64_t i) { return expect(6.f, bv[i]); });
  }
}
