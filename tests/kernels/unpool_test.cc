// MaxUnpool (kernels/pool.cc): with output_shape, indices are positions in that shape, as ONNX Runtime 1.30 and
// PyTorch read them (the ONNX 1.12 vector disagrees; see backend_conformance_test.cc); out-of-range indices.
#include <catch2/catch.hpp>

#include "core/error.h"
#include "kernel_harness.h"

using namespace qtool;
using namespace qtool::test;

TEST_CASE("MaxUnpool: output_shape positions as ONNX Runtime, bad indices are errors") {
  runtime::NodeAttrs a;
  a.values["kernel_shape"] = attr_ints({2, 2});
  a.values["strides"] = attr_ints({2, 2});
  const Tensor x = Tensor::from_vector<float>({1, 1, 2, 2}, {5, 6, 7, 8});
  const Tensor i = Tensor::from_vector<int64_t>({1, 1, 2, 2}, {5, 7, 13, 15});
  // ORT 1.30 on the ONNX vector's inputs: 5, 6, 7, 8 at flat positions 5, 7, 13, 15 of the 5x5 output.
  const Tensor y = run_kernel("MaxUnpool", 11, a, {x, i, Tensor::from_vector<int64_t>({4}, {1, 1, 5, 5})})[0];
  REQUIRE(y.shape() == Shape{1, 1, 5, 5});
  std::vector<float> want(25, 0.f);
  want[5] = 5, want[7] = 6, want[13] = 7, want[15] = 8;
  CHECK(std::vector<float>(y.data<float>(), y.data<float>() + 25) == want);
  // Without output_shape: the inferred 4x4.
  CHECK(run_kernel("MaxUnpool", 11, a, {x, i})[0].shape() == Shape{1, 1, 4, 4});
  CHECK_THROWS_AS(run_kernel("MaxUnpool", 11, a, {x, Tensor::from_vector<int64_t>({1, 1, 2, 2}, {0, 1, 2, 16})}),
                  BadInputError);
  CHECK_THROWS_AS(run_kernel("MaxUnpool", 11, a, {x, Tensor::from_vector<int64_t>({1, 1, 2, 2}, {0, 1, 2, -1})}),
                  BadInputError);
  CHECK_THROWS_AS(run_kernel("MaxUnpool", 11, a, {x, i, Tensor::from_vector<int64_t>({4}, {1, 2, 5, 5})}),
                  BadInputError);
}
