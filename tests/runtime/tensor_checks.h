// Element-wise comparison of two float tensors for the runtime tests (fused against plain sessions).
#pragma once

#include <catch2/catch.hpp>
#include <optional>

#include "core/tensor.h"

namespace qtool::test {

// Same shape, and every element of `got` within Approx(want).margin(margin), with Approx's default relative
// epsilon unless `epsilon` is given.
inline void check_all_close(const Tensor& got, const Tensor& want, double margin,
                            std::optional<double> epsilon = std::nullopt) {
  REQUIRE(got.shape() == want.shape());
  for (int64_t i = 0; i < want.numel(); ++i) {
    Approx expected = Approx(want.data<float>()[i]).margin(margin);
    if (epsilon) expected.epsilon(*epsilon);
    CHECK(got.data<float>()[i] == expected);
  }
}

}  // namespace qtool::test
