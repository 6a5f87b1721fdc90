// Shape arithmetic on hostile attributes and constants (issue 16): int64 overflow is a BadInputError, never UB;
// valid extremes (Slice with INT64_MIN steps, INT64_MIN / -1) give the right result; sizes are checked against
// --max-memory before anything is allocated.
#include <catch2/catch.hpp>
#include <cstdint>
#include <limits>

#include "core/error.h"
#include "core/limits.h"
#include "kernel_harness.h"

using namespace qtool;
using namespace qtool::test;

namespace {
constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
constexpr int64_t kMin = std::numeric_limits<int64_t>::min();

Tensor i64(std::vector<int64_t> v) { return Tensor::from_vector<int64_t>({static_cast<int64_t>(v.size())}, v); }

runtime::NodeAttrs attrs(std::initializer_list<std::pair<const char*, runtime::Attribute>> list) {
  runtime::NodeAttrs a;
  for (const auto& [k, v] : list) a.values[k] = v;
  return a;
}
}  // namespace

TEST_CASE("hostile shapes: Slice with INT64_MIN / INT64_MAX starts, ends and steps") {
  const Tensor x = Tensor::from_vector<float>({5}, {0, 1, 2, 3, 4});
  auto slice = [&](int64_t s, int64_t e, int64_t st) {
    return run_kernel("Slice", 13, {}, {x, i64({s}), i64({e}), i64({0}), i64({st})})[0];
  };
  CHECK(slice(kMin, kMax, 1).numel() == 5);
  const Tensor rev = slice(kMax, kMin, -1);
  REQUIRE(rev.numel() == 5);
  CHECK(rev.data<float>()[0] == 4.f);
  CHECK(slice(0, kMax, kMax).numel() == 1);
  const Tensor last = slice(kMax, kMin, kMin);
  REQUIRE(last.numel() == 1);
  CHECK(last.data<float>()[0] == 4.f);
  const Tensor first = slice(kMin, kMin, kMin);  // ONNX clamps start to [0, dim-1] and end to [-1, dim-1]
  REQUIRE(first.numel() == 1);
  CHECK(first.data<float>()[0] == 0.f);
  CHECK(slice(3, 3, kMax).numel() == 0);
}

TEST_CASE("hostile shapes: overflowing attributes are bad input") {
  const Tensor x = random_tensor({1, 2, 4, 4}, 1);
  const Tensor w = random_tensor({2, 2, 2, 2}, 2);
  CHECK_THROWS_WITH(run_kernel("Conv", 17, attrs({{"pads", attr_ints({kMax, 0, 0, 0})}}), {x, w}),
                    Catch::Contains("integer overflow"));
  CHECK_THROWS_WITH(run_kernel("Conv", 17, attrs({{"dilations", attr_ints({kMax, 1})}}), {x, w}),
                    Catch::Contains("integer overflow"));
  CHECK_THROWS_AS(run_kernel("MaxPool", 17, attrs({{"kernel_shape", attr_ints({2, 2})}, {"pads", attr_ints({kMax, 0, 1, 0})}}),
                             {x}),
                  BadInputError);
  CHECK_THROWS_WITH(run_kernel("Pad", 17, {}, {x, i64({0, 0, kMax, 0, 0, 0, 1, 0})}),
                    Catch::Contains("padded size: integer overflow"));
  CHECK_THROWS_WITH(run_kernel("Tile", 13, {}, {x, i64({1, 1, kMax, 2})}), Catch::Contains("integer overflow"));
  CHECK_THROWS_WITH(run_kernel("Range", 11, {}, {Tensor::scalar<int64_t>(kMin), Tensor::scalar<int64_t>(kMax),
                                                 Tensor::scalar<int64_t>(1)}),
                    Catch::Contains("does not fit a 64-bit integer"));
  CHECK_THROWS_AS(run_kernel("ConvTranspose", 17, attrs({{"strides", attr_ints({kMax, 1})}}), {x, w}), BadInputError);
}

TEST_CASE("hostile shapes: integer Div by zero is refused, INT64_MIN / -1 wraps") {
  CHECK_THROWS_WITH(run_kernel("Div", 14, {}, {i64({7, 8}), i64({1, 0})}), Catch::Contains("division by zero"));
  const Tensor q = run_kernel("Div", 14, {}, {i64({kMin, 9}), i64({-1, -3})})[0];
  CHECK(q.data<int64_t>()[0] == kMin);
  CHECK(q.data<int64_t>()[1] == -3);
}

TEST_CASE("hostile shapes: huge outputs are refused before allocation") {
  const Tensor one = Tensor::from_vector<float>({1}, {1.f});
  CHECK_THROWS_AS(run_kernel("Expand", 13, {}, {one, i64({65536, 65536, 4})}), LimitError);
  CHECK_THROWS_AS(run_kernel("ConstantOfShape", 9, {}, {i64({65536, 65536, 8})}), LimitError);
  CHECK_THROWS_AS(run_kernel("Range", 11, {}, {Tensor::scalar<float>(0), Tensor::scalar<float>(1e10f),
                                               Tensor::scalar<float>(1)}),
                  LimitError);
  CHECK_THROWS_AS(run_kernel("OneHot", 11, {}, {i64({1}), i64({int64_t{1} << 40}),
                                                Tensor::from_vector<float>({2}, {0.f, 1.f})}),
                  LimitError);
  const Tensor img = random_tensor({1, 1, 4, 4}, 3);
  CHECK_THROWS_AS(run_kernel("Resize", 13, attrs({{"mode", attr_str("nearest")}}),
                             {img, Tensor(), Tensor::from_vector<float>({4}, {1.f, 1.f, 1e6f, 1e6f})}),
                  LimitError);
  CHECK_THROWS_AS(run_kernel("ConvTranspose", 17, attrs({{"output_shape", attr_ints({1 << 20, 1 << 20})}}),
                             {img, random_tensor({1, 1, 1, 1}, 4)}),
                  LimitError);
}
