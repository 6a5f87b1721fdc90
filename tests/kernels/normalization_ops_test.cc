// GroupNormalization (opset 18 and 21) and LpNormalization: no vectors in ONNX 1.12, so pinned to ONNX Runtime
// 1.30's answers (models built with onnx.helper, run by scripts/ort/ort_run.mjs). MeanVarianceNormalization and Det
// run the backend vectors (backend_conformance_test.cc); MVN's constant group and Det's pivoting are pinned here.
#include <catch2/catch.hpp>

#include "core/error.h"
#include "kernel_harness.h"

using namespace qtool;
using namespace qtool::test;

namespace {
void check_values(const Tensor& y, const std::vector<float>& want) {
  REQUIRE(y.numel() == static_cast<int64_t>(want.size()));
  for (size_t i = 0; i < want.size(); ++i) {
    INFO("element " << i);
    CHECK(y.data<float>()[i] == Approx(want[i]).margin(1e-5));
  }
}
Tensor vec(std::vector<float> v) { return Tensor::from_vector<float>({static_cast<int64_t>(v.size())}, v); }
runtime::NodeAttrs groups(int64_t g) {
  runtime::NodeAttrs a;
  a.values["num_groups"] = attr_int(g);
  return a;
}
}  // namespace

TEST_CASE("GroupNormalization: opset 18 scales per group, opset 21 per channel, as ONNX Runtime") {
  const Tensor x = Tensor::from_vector<float>({1, 4, 2, 1}, {1, 2, 3, 5, -1, 0, 4, 4});
  check_values(run_kernel("GroupNormalization", 18, groups(2), {x, vec({2, -1}), vec({0.5f, 1})})[0],
               {-1.8664265f, -0.5141828f, 0.8380609f, 3.5425484f, 2.2074056f, 1.7683492f, 0.0121226f, 0.0121226f});
  check_values(run_kernel("GroupNormalization", 21, groups(2), {x, vec({1, 2, 3, 4}), vec({0, 0.5f, 1, -1})})[0],
               {-1.1832132f, -0.5070914f, 0.8380609f, 3.5425484f, -2.6222172f, -1.3050473f, 2.9515097f, 2.9515097f});
  // Results do not depend on the thread count.
  const Tensor big = random_tensor({2, 8, 16, 16}, 7);
  const Tensor s = random_tensor({8}, 8), b = random_tensor({8}, 9);
  CHECK(max_abs_diff(run_kernel("GroupNormalization", 21, groups(4), {big, s, b}, 1, 1)[0],
                     run_kernel("GroupNormalization", 21, groups(4), {big, s, b}, 1, 2)[0]) == 0);

  CHECK_THROWS_AS(run_kernel("GroupNormalization", 18, groups(3), {x, vec({1, 1, 1}), vec({0, 0, 0})}), BadInputError);
  CHECK_THROWS_AS(run_kernel("GroupNormalization", 21, groups(2), {x, vec({1, 1}), vec({0, 0})}), BadInputError);
  CHECK_THROWS_AS(run_kernel("GroupNormalization", 18, groups(0), {x, vec({}), vec({})}), BadInputError);
  CHECK_THROWS_AS(run_kernel("GroupNormalization", 18, {}, {x, vec({1, 1}), vec({0, 0})}), BadInputError);
}

TEST_CASE("LpNormalization p = 1 and 2: a zero row gives zeros, as ONNX Runtime") {
  const Tensor x = Tensor::from_vector<float>({2, 3}, {3, -4, 0, 0, 0, 0});
  runtime::NodeAttrs a;
  a.values["axis"] = attr_int(1);
  a.values["p"] = attr_int(1);
  check_values(run_kernel("LpNormalization", 1, a, {x})[0], {3.f / 7, -4.f / 7, 0, 0, 0, 0});
  a.values["p"] = attr_int(2);
  check_values(run_kernel("LpNormalization", 1, a, {x})[0], {0.6f, -0.8f, 0, 0, 0, 0});
  a.values["p"] = attr_int(3);
  CHECK_THROWS_AS(run_kernel("LpNormalization", 1, a, {x}), BadInputError);
}

TEST_CASE("MeanVarianceNormalization: a constant group gives 0 (the op's + 1e-9), repeated axes are an error") {
  // ONNX Runtime 1.30 answers NaN here; the op's function body divides by sqrt(var) + 1e-9 = 1e-9 and gives 0.
  const Tensor x = Tensor::from_vector<float>({1, 2, 1, 2}, {5, 5, 1, 3});
  runtime::NodeAttrs a;
  a.values["axes"] = attr_ints({2, 3});
  check_values(run_kernel("MeanVarianceNormalization", 13, a, {x})[0], {0, 0, -1, 1});
  a.values["axes"] = attr_ints({2, -1, 3});
  CHECK_THROWS_AS(run_kernel("MeanVarianceNormalization", 13, a, {x}), BadInputError);
}

TEST_CASE("Det: batches of matrices by pivoted LU: singular gives 0, row swaps flip the sign") {
  // [[0, 2], [3, 4]] needs a row swap: det = -6; [[1, 2], [2, 4]] is singular; a 3x3 with det 18 (ORT agrees within
  // 7e-7 on random 5x5 batches).
  const Tensor x = Tensor::from_vector<float>({2, 2, 2}, {0, 2, 3, 4, 1, 2, 2, 4});
  check_values(run_kernel("Det", 11, {}, {x})[0], {-6, 0});
  const Tensor m3 = Tensor::from_vector<double>({3, 3}, {2, 0, 1, 1, 3, 2, 1, 1, 4});
  const Tensor d = run_kernel("Det", 11, {}, {m3})[0];
  REQUIRE(d.dtype() == DType::Float64);
  CHECK(d.data<double>()[0] == Approx(2 * 10 - 0 + 1 * (1 - 3)));
  CHECK_THROWS_AS(run_kernel("Det", 11, {}, {random_tensor({2, 3}, 1)}), BadInputError);
}
