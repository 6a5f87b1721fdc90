// GridSample (kernels/grid_sample.cc) beyond the ONNX 1.12 backend vectors (run by backend_conformance_test.cc):
// opset 20's mode names and cubic sampling with per-tap padding, pinned to ONNX Runtime 1.30's answers (model built
// with onnx.helper, run by scripts/ort/ort_run.mjs); hostile grid coordinates.
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>

#include "core/error.h"
#include "kernel_harness.h"

using namespace qtool;
using namespace qtool::test;

namespace {
Tensor image3x3() { return iota_tensor({1, 1, 3, 3}); }
runtime::NodeAttrs gs_attrs(const char* mode, const char* pad) {
  runtime::NodeAttrs a;
  a.values["mode"] = attr_str(mode);
  a.values["padding_mode"] = attr_str(pad);
  return a;
}
}  // namespace

TEST_CASE("GridSample opset 20 cubic pads each tap, as ONNX Runtime") {
  const Tensor grid = Tensor::from_vector<float>({1, 1, 4, 2}, {-1.3f, 0.2f, 0.9f, 1.4f, 0.1f, 0.1f, 2.5f, -3.f});
  const std::vector<std::pair<const char*, std::vector<float>>> cases = {
      {"border", {4.1659617f, 8.1109037f, 4.8358784f, 2.f}},
      {"reflection", {4.1321182f, 7.9448762f, 4.8358784f, 6.7539063f}},
      {"zeros", {0.1731217f, -0.3309302f, 5.0216355f, 0.f}},
  };
  for (const auto& [pad, want] : cases) {
    INFO("padding_mode " << pad);
    const Tensor y = run_kernel("GridSample", 20, gs_attrs("cubic", pad), {image3x3(), grid})[0];
    REQUIRE(y.shape() == Shape{1, 1, 1, 4});
    for (size_t i = 0; i < want.size(); ++i) CHECK(y.data<float>()[i] == Approx(want[i]).margin(1e-5));
  }
}

TEST_CASE("GridSample: hostile coordinates stay defined: mode names follow the opset") {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  const Tensor grid = Tensor::from_vector<float>({1, 1, 4, 2}, {1e30f, -1e30f, inf, 0.f, nan, 0.f, -3e9f, 7e12f});
  for (const char* mode : {"nearest", "linear", "cubic"})
    for (const char* pad : {"zeros", "border", "reflection"}) {
      INFO(mode << " " << pad);
      const Tensor y = run_kernel("GridSample", 20, gs_attrs(mode, pad), {image3x3(), grid})[0];
      const float* v = y.data<float>();
      CHECK(std::isnan(v[2]));
      if (std::string(pad) == "zeros") CHECK((v[0] == 0 && v[1] == 0 && v[3] == 0));
      if (std::string(pad) == "border") CHECK((std::isfinite(v[0]) && std::isfinite(v[1]) && std::isfinite(v[3])));
      if (std::string(pad) == "reflection") CHECK((std::isfinite(v[0]) && std::isfinite(v[3])));
    }
  const Tensor g1 = Tensor::from_vector<float>({1, 1, 1, 2}, {0, 0});
  CHECK_THROWS_AS(run_kernel("GridSample", 16, gs_attrs("linear", "zeros"), {image3x3(), g1}), BadInputError);
  CHECK_THROWS_AS(run_kernel("GridSample", 20, gs_attrs("bilinear", "zeros"), {image3x3(), g1}), BadInputError);
  CHECK_THROWS_AS(run_kernel("GridSample", 16, gs_attrs("bilinear", "wrap"), {image3x3(), g1}), BadInputError);
  CHECK(run_kernel("GridSample", 16, gs_attrs("bicubic", "zeros"), {image3x3(), g1})[0].data<float>()[0] ==
        Approx(4.f));
  CHECK_THROWS_AS(run_kernel("GridSample", 20, gs_attrs("linear", "zeros"),
                             {random_tensor({1, 1, 2, 2, 2}, 1), random_tensor({1, 1, 1, 1, 3}, 2)}),
                  UnsupportedError);
}

TEST_CASE("AffineGrid: identity and translation thetas, align_corners, a size-1 axis as ONNX Runtime") {
  runtime::NodeAttrs a;
  const Tensor identity = Tensor::from_vector<float>({1, 2, 3}, {1, 0, 0.5f, 0, 1, 0});  // x shifted by 0.5
  const Tensor size = Tensor::from_vector<int64_t>({4}, {1, 1, 2, 2});
  Tensor g = run_kernel("AffineGrid", 20, a, {identity, size})[0];
  REQUIRE(g.shape() == Shape{1, 2, 2, 2});
  // Pixel centres of a 2x2 image: ±0.5.
  CHECK(std::vector<float>(g.data<float>(), g.data<float>() + 8) ==
        std::vector<float>{0, -0.5f, 1, -0.5f, 0, 0.5f, 1, 0.5f});
  a.values["align_corners"] = attr_int(1);
  g = run_kernel("AffineGrid", 20, a, {identity, Tensor::from_vector<int64_t>({4}, {1, 1, 1, 2})})[0];
  // Corners ±1 on x; the single row sits at y = 1 (ORT 1.30; PyTorch would say 0).
  CHECK(std::vector<float>(g.data<float>(), g.data<float>() + 4) == std::vector<float>{-0.5f, 1, 1.5f, 1});
  CHECK_THROWS_AS(run_kernel("AffineGrid", 20, a, {identity, Tensor::from_vector<int64_t>({5}, {1, 1, 2, 2, 2})}),
                  BadInputError);
}
