// Resize against ONNX Runtime 1.30: a table of nodes whose outputs must equal ORT's bit for bit (every mode,
// coordinate transformation, nearest_mode, opset 7-19 form and layout ORT runs; resize_ort_cases.inc, written by
// resize_ort_cases.py), then features newer than the ONNX 1.12 backend vectors (opset 18/19: axes,
// keep_aspect_ratio_policy, half_pixel_symmetric) on X = 1..16 as [1,1,4,4].
#include <catch2/catch.hpp>
#include <cstring>
#include <numeric>

#include "kernel_harness.h"

using namespace qtool;
using namespace qtool::test;

namespace {
Tensor x16() {
  std::vector<float> v(16);
  std::iota(v.begin(), v.end(), 1.f);
  return Tensor::from_vector<float>({1, 1, 4, 4}, v);
}
void check_values(const Tensor& y, const Shape& shape, const std::vector<float>& want) {
  REQUIRE(y.shape() == shape);
  for (size_t i = 0; i < want.size(); ++i) {
    INFO("element " << i);
    CHECK(y.data<float>()[i] == Approx(want[i]).margin(1e-4));
  }
}

// One node of resize_ort_cases.inc: X = random_tensor(x_shape, seed), Y = ONNX Runtime's output as float bits.
struct OrtCase {
  const char* name;
  const char* op;  // Resize or Upsample
  int opset;
  std::vector<std::pair<const char*, const char*>> str_attrs;
  std::vector<std::pair<const char*, float>> float_attrs;
  std::vector<std::pair<const char*, int64_t>> int_attrs;
  std::vector<int64_t> axes;
  Shape x_shape;
  uint32_t seed;
  std::vector<float> roi, scales;  // empty: not given
  std::vector<int64_t> sizes;
  Shape y_shape;
  std::vector<uint32_t> y;
};

const OrtCase kOrtCases[] = {
#include "resize_ort_cases.inc"
};

// The node's inputs in its opset's form: Upsample-7/8 take scales as an attribute, Upsample-9 and Resize-10 as
// input 1, Resize-11+ as (roi, scales, sizes).
std::vector<Tensor> ort_case_inputs(const OrtCase& c, runtime::NodeAttrs& attrs) {
  auto floats = [](const std::vector<float>& v) {
    return v.empty() ? Tensor() : Tensor::from_vector<float>({static_cast<int64_t>(v.size())}, v);
  };
  std::vector<Tensor> in{random_tensor(c.x_shape, c.seed)};
  if (std::string(c.op) == "Upsample" && c.opset < 9) {
    attrs.values["scales"] = attr_floats(c.scales);
  } else if (std::string(c.op) == "Upsample" || c.opset == 10) {
    in.push_back(floats(c.scales));
  } else {
    in.push_back(floats(c.roi));
    in.push_back(floats(c.scales));
    in.push_back(c.sizes.empty() ? Tensor()
                                 : Tensor::from_vector<int64_t>({static_cast<int64_t>(c.sizes.size())}, c.sizes));
  }
  return in;
}
}  // namespace

TEST_CASE("Resize equals ONNX Runtime 1.30 bit for bit on every mode, coordinate transformation and layout") {
  for (const OrtCase& c : kOrtCases) {
    DYNAMIC_SECTION(c.name) {
      runtime::NodeAttrs attrs;
      for (const auto& [k, v] : c.str_attrs) attrs.values[k] = attr_str(v);
      for (const auto& [k, v] : c.float_attrs) attrs.values[k] = attr_float(v);
      for (const auto& [k, v] : c.int_attrs) attrs.values[k] = attr_int(v);
      if (!c.axes.empty()) attrs.values["axes"] = attr_ints(c.axes);
      const std::vector<Tensor> in = ort_case_inputs(c, attrs);
      for (int threads : {1, 2}) {
        INFO(threads << " threads");
        const Tensor y = run_kernel(c.op, c.opset, attrs, in, 1, threads)[0];
        REQUIRE(y.shape() == c.y_shape);
        REQUIRE(static_cast<size_t>(y.numel()) == c.y.size());
        int64_t differ = 0, first = -1;
        for (int64_t i = 0; i < y.numel(); ++i) {
          uint32_t bits;
          std::memcpy(&bits, &y.data<float>()[i], sizeof bits);
          if (bits != c.y[i]) differ += 1, first = first < 0 ? i : first;
        }
        INFO(differ << " of " << y.numel() << " elements differ from ORT's bits, the first at " << first);
        CHECK(differ == 0);
      }
    }
  }
}

TEST_CASE("Resize opset 19 half_pixel_symmetric linear matches ONNX Runtime") {
  runtime::NodeAttrs a;
  a.values["mode"] = attr_str("linear");
  a.values["coordinate_transformation_mode"] = attr_str("half_pixel_symmetric");
  auto y = run_kernel("Resize", 19, a, {x16(), Tensor(), Tensor::from_vector<float>({4}, {1, 1, 0.6f, 1.7f})});
  check_values(y[0], {1, 1, 2, 6},
               {3.69608f, 4.28431f, 4.87255f, 5.46078f, 6.04902f, 6.63726f, 10.36275f, 10.95098f, 11.53922f, 12.12745f,
                12.71569f, 13.30392f});
}

TEST_CASE("Resize opset 18 axes with keep_aspect_ratio_policy matches ONNX Runtime") {
  runtime::NodeAttrs a;
  a.values["mode"] = attr_str("nearest");
  a.values["axes"] = attr_ints({2, 3});
  a.values["keep_aspect_ratio_policy"] = attr_str("not_larger");
  auto y = run_kernel("Resize", 18, a, {x16(), Tensor(), Tensor(), Tensor::from_vector<int64_t>({2}, {3, 7})});
  check_values(y[0], {1, 1, 3, 3}, {1, 2, 4, 5, 6, 8, 13, 14, 16});

  runtime::NodeAttrs b;
  b.values["mode"] = attr_str("linear");
  b.values["axes"] = attr_ints({3, 2});
  b.values["keep_aspect_ratio_policy"] = attr_str("not_smaller");
  y = run_kernel("Resize", 18, b, {x16(), Tensor(), Tensor(), Tensor::from_vector<int64_t>({2}, {6, 3})});
  check_values(y[0], {1, 1, 6, 6},
               {1.0f,      1.5f,     2.16667f, 2.83333f,  3.5f,      4.0f,      3.0f,      3.5f,     4.16667f,
                4.83333f,  5.5f,     6.0f,     5.66667f,  6.16667f,  6.83333f,  7.5f,      8.16667f, 8.66667f,
                8.33333f,  8.83333f, 9.5f,     10.16667f, 10.83333f, 11.33333f, 11.0f,     11.5f,    12.16667f,
                12.83333f, 13.5f,    14.0f,    13.0f,     13.5f,     14.16667f, 14.83333f, 15.5f,    16.0f});
}

TEST_CASE("Resize opset 10 nearest takes floor along an axis that grows and ceil along one that shrinks, as ORT") {
  // ONNX Runtime's "simple" nearest mode for Resize-10 / Upsample: rows 0 / 0.6 and 1 / 0.6 = 1.67 -> 0 and 2;
  // columns j / 1.5 -> 0 0 1 2 2 3.
  runtime::NodeAttrs a;
  a.values["mode"] = attr_str("nearest");
  auto y = run_kernel("Resize", 10, a, {x16(), Tensor::from_vector<float>({4}, {1, 1, 0.6f, 1.5f})});
  check_values(y[0], {1, 1, 2, 6}, {1, 1, 2, 3, 3, 4, 9, 9, 10, 11, 11, 12});
}

TEST_CASE("Resize opset 18 tf_crop_and_resize on one axis extrapolates outside the box") {
  runtime::NodeAttrs a;
  a.values["mode"] = attr_str("cubic");
  a.values["axes"] = attr_ints({3});
  a.values["coordinate_transformation_mode"] = attr_str("tf_crop_and_resize");
  a.values["extrapolation_value"] = attr_float(-1.f);
  auto y = run_kernel(
      "Resize", 18, a,
      {x16(), Tensor::from_vector<float>({2}, {0.1f, 1.2f}), Tensor(), Tensor::from_vector<int64_t>({1}, {5})});
  check_values(y[0], {1, 1, 4, 5},
               {1.23175f, 2.16602f,  2.92863f,  3.8284f,  -1.f, 5.23175f,  6.16602f,  6.92862f,  7.8284f,  -1.f,
                9.23175f, 10.16602f, 10.92862f, 11.8284f, -1.f, 13.23175f, 14.16602f, 14.92862f, 15.8284f, -1.f});
}

TEST_CASE("Resize rejects what it does not support with typed errors") {
  runtime::NodeAttrs a;
  a.values["mode"] = attr_str("linear");
  a.values["antialias"] = attr_int(1);
  CHECK_THROWS_AS(run_kernel("Resize", 18, a, {x16(), Tensor(), Tensor::from_vector<float>({4}, {1, 1, 0.5f, 0.5f})}),
                  UnsupportedError);
  runtime::NodeAttrs b;
  b.values["mode"] = attr_str("area");
  CHECK_THROWS_AS(run_kernel("Resize", 13, b, {x16(), Tensor(), Tensor::from_vector<float>({4}, {1, 1, 2, 2})}),
                  BadInputError);
  // Neither scales nor sizes.
  CHECK_THROWS_AS(run_kernel("Resize", 13, {}, {x16()}), BadInputError);
}
