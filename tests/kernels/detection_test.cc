// NonMaxSuppression and RoiAlign (kernels/detection.cc) beyond the ONNX 1.12 backend vectors (which the backend
// conformance test runs): RoiAlign's max mode and opset-16 half_pixel, pinned to ONNX Runtime 1.30's answers;
// hostile ROIs and attributes.
#include <catch2/catch.hpp>
#include <limits>

#include "core/error.h"
#include "kernel_harness.h"

using namespace qtool;
using namespace qtool::test;

namespace {
Tensor iota_map() { return iota_tensor({1, 1, 4, 4}); }
runtime::NodeAttrs roi_attrs(const char* mode) {
  runtime::NodeAttrs a;
  a.values["mode"] = attr_str(mode);
  a.values["output_height"] = attr_int(2);
  a.values["output_width"] = attr_int(2);
  a.values["sampling_ratio"] = attr_int(2);
  return a;
}
Tensor boxes(std::vector<float> v) { return Tensor::from_vector<float>({1, static_cast<int64_t>(v.size() / 4), 4}, v); }
}  // namespace

TEST_CASE("RoiAlign opset 16 max mode matches ONNX Runtime (max of the weighted corner terms)") {
  // ORT 1.30 on this input (model built with onnx.helper, run by scripts/ort/ort_run.mjs).
  const Tensor rois = Tensor::from_vector<float>({2, 4}, {0.5f, 0.5f, 3.2f, 2.9f, -2, -2, 1, 1});
  const Tensor bi = Tensor::from_vector<int64_t>({2}, {0, 0});
  auto y = run_kernel("RoiAlign", 16, roi_attrs("max"), {iota_map(), rois, bi})[0];
  REQUIRE(y.shape() == Shape{2, 1, 2, 2});
  const std::vector<float> want = {4.44375f, 3.7125f, 7.99875f, 6.1875f, 0, 0, 0, 0.5f};
  for (size_t i = 0; i < want.size(); ++i) CHECK(y.data<float>()[i] == Approx(want[i]).margin(1e-5));
}

TEST_CASE("RoiAlign: a huge ROI costs the samples over the map: bad attributes and inputs are errors") {
  const Tensor bi = Tensor::from_vector<int64_t>({1}, {0});
  runtime::NodeAttrs a = roi_attrs("avg");
  a.values["sampling_ratio"] = attr_int(0);  // adaptive grid: ~1e30 samples per bin if counted naively
  auto y = run_kernel("RoiAlign", 16, a,
                      {iota_map(), Tensor::from_vector<float>({1, 4}, {-1e30f, -1e30f, 1e30f, 1e30f}), bi})[0];
  REQUIRE(y.numel() == 4);
  for (int i = 0; i < 4; ++i) CHECK(y.data<float>()[i] == 0.f);  // every sample's share is below float's resolution

  const float inf = std::numeric_limits<float>::infinity();
  CHECK_THROWS_AS(run_kernel("RoiAlign", 16, roi_attrs("avg"),
                             {iota_map(), Tensor::from_vector<float>({1, 4}, {0, 0, inf, 1}), bi}),
                  BadInputError);
  CHECK_THROWS_AS(run_kernel("RoiAlign", 16, roi_attrs("avg"),
                             {iota_map(), Tensor::from_vector<float>({1, 4}, {0, 0, 1, 1}),
                              Tensor::from_vector<int64_t>({1}, {3})}),
                  BadInputError);
  runtime::NodeAttrs bad = roi_attrs("median");
  CHECK_THROWS_AS(run_kernel("RoiAlign", 16, bad, {iota_map(), Tensor::from_vector<float>({1, 4}, {0, 0, 1, 1}), bi}),
                  BadInputError);
  bad = roi_attrs("avg");
  bad.values["output_height"] = attr_int(0);
  CHECK_THROWS_AS(run_kernel("RoiAlign", 16, bad, {iota_map(), Tensor::from_vector<float>({1, 4}, {0, 0, 1, 1}), bi}),
                  BadInputError);
}

TEST_CASE("NonMaxSuppression: order, thresholds, a huge max_output_boxes_per_class and bad inputs") {
  // Three boxes: 0 and 1 overlap with IoU 0.6, 2 is apart. Scores 0.9, 0.8, 0.3 for class 0.
  const Tensor b = boxes({0, 0, 1, 1, 0, 0.25f, 1, 1.25f, 5, 5, 6, 6});
  const Tensor s = Tensor::from_vector<float>({1, 1, 3}, {0.9f, 0.8f, 0.3f});
  const Tensor many = Tensor::from_vector<int64_t>({1}, {std::numeric_limits<int64_t>::max()});
  auto nms = [&](float iou, float score) {
    return run_kernel(
        "NonMaxSuppression", 11, {},
        {b, s, many, Tensor::from_vector<float>({1}, {iou}), Tensor::from_vector<float>({1}, {score})})[0];
  };
  Tensor y = nms(0.5f, 0.f);  // 1 is suppressed by 0 (IoU 0.6 > 0.5)
  REQUIRE(y.shape() == Shape{2, 3});
  CHECK(std::vector<int64_t>(y.data<int64_t>(), y.data<int64_t>() + 6) == std::vector<int64_t>{0, 0, 0, 0, 0, 2});
  y = nms(0.6f, 0.f);  // IoU must exceed the threshold to suppress
  CHECK(y.dim(0) == 3);
  y = nms(0.5f, 0.3f);  // score 0.3 is not > 0.3
  CHECK(y.dim(0) == 1);
  // No max_output_boxes_per_class: nothing selected.
  CHECK(run_kernel("NonMaxSuppression", 11, {}, {b, s})[0].shape() == Shape{0, 3});
  CHECK_THROWS_AS(nms(1.5f, 0.f), BadInputError);
  CHECK_THROWS_AS(run_kernel("NonMaxSuppression", 11, {}, {b, Tensor::from_vector<float>({1, 1, 2}, {1, 2}), many}),
                  BadInputError);
  runtime::NodeAttrs a;
  a.values["center_point_box"] = attr_int(2);
  CHECK_THROWS_AS(run_kernel("NonMaxSuppression", 11, a, {b, s, many}), BadInputError);
}
