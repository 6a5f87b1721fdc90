// Every model in ../shared/models on its real inputs matches ONNX Runtime 1.30's outputs stored in
// ../shared/data/reference_outputs/<model>__<case>/: per output, max |qtool - ort| <= 1e-4 * max |ort| + 1e-5 (for a
// model already quantized, the effect of one rounding flip; see Case::flip_tol), and mobilenetv2's top-1 class is
// identical where ORT's top two are apart. Runs with 2 threads, as the references were made.
#include <catch2/catch.hpp>
#include <algorithm>
#include <cmath>
#include <functional>
#include <vector>

#include "onnx/model_io.h"
#include "runtime/session.h"
#include "tensorio/tensorio.h"
#include "test_paths.h"

namespace fs = std::filesystem;
using qtool::Tensor;

namespace {

struct Case {
  const char* model;                                        // under shared/models
  const char* reference;                                    // folder under shared/data/reference_outputs
  std::vector<std::pair<const char*, const char*>> inputs;  // input name -> file under shared/data/tensors
  // A model already quantized to QDQ: qtool evaluates DQ -> op -> Q in float, ORT in exact integers, so a sum
  // that lands within float rounding of a rounding boundary can round the other way (one step of that tensor).
  // The largest output change one such flip can cause (0: none allowed).
  double flip_tol = 0;
};

int64_t argmax_row(const float* p, int64_t n) { return std::max_element(p, p + n) - p; }

void check_case(const Case& c) {
  const fs::path model = qtool::test::shared_models() / c.model;
  const fs::path ref_dir = qtool::test::shared_dir() / "data" / "reference_outputs" / c.reference;
  if (!fs::exists(model)) {
    WARN("shared model missing: " << model);
    return;
  }
  qtool::runtime::Session session(qtool::onnxio::load_model(model), {.threads = 2});
  std::map<std::string, Tensor> inputs;
  for (const auto& [name, file] : c.inputs)
    inputs[name] = qtool::tensorio::read_npy(qtool::test::shared_tensors() / file);
  const auto outputs = session.run(inputs);
  for (const auto& decl : session.outputs()) {
    std::string stem = decl.name;
    for (char& ch : stem)
      if (!(std::isalnum(static_cast<unsigned char>(ch)) || ch == '_' || ch == '.' || ch == '-')) ch = '_';
    const Tensor ref = qtool::tensorio::read_npy(ref_dir / (stem + ".npy"));
    const Tensor& got = outputs.at(decl.name);
    INFO(c.reference << " output '" << decl.name << "'");
    REQUIRE(got.dtype() == qtool::DType::Float32);
    REQUIRE(got.shape() == ref.shape());
    double max_ref = 0, max_err = 0;
    for (int64_t i = 0; i < ref.numel(); ++i) {
      max_ref = std::max(max_ref, std::abs(static_cast<double>(ref.data<float>()[i])));
      max_err = std::max(max_err, std::abs(static_cast<double>(got.data<float>()[i]) - ref.data<float>()[i]));
    }
    const double tol = std::max(1e-4 * max_ref + 1e-5, c.flip_tol);
    INFO("max abs error " << max_err << ", tolerance " << tol);
    CHECK(max_err <= tol);
    if (std::string(c.model).find("mobilenetv2") != std::string::npos) {
      const int64_t classes = ref.shape().back();
      for (int64_t r = 0; r < ref.numel() / classes; ++r) {
        // top-1 must agree unless ORT's top two are within what the tolerance lets either side move
        std::vector<float> row(ref.data<float>() + r * classes, ref.data<float>() + (r + 1) * classes);
        std::partial_sort(row.begin(), row.begin() + 2, row.end(), std::greater<float>());
        if (row[0] - row[1] > 2 * tol)
          CHECK(argmax_row(got.data<float>() + r * classes, classes) ==
                argmax_row(ref.data<float>() + r * classes, classes));
      }
    }
  }
}

const char* kMobilenet = "mobilenetv2-1.0-224-fp32.onnx";

}  // namespace

TEST_CASE("mobilenetv2 matches ONNX Runtime on six photos and the batch of six") {
  for (const char* img : {"chelsea", "coffee", "astronaut", "rocket", "motorcycle_left", "bus"}) {
    const std::string ref = std::string("mobilenetv2-1.0-224-fp32__") + img;
    const std::string file = std::string("mobilenetv2_") + img + ".npy";
    check_case({kMobilenet, ref.c_str(), {{"input", file.c_str()}}});
  }
  check_case({kMobilenet, "mobilenetv2-1.0-224-fp32__calib6_batch", {{"input", "mobilenetv2_calib6.npy"}}});
}

TEST_CASE("vendor int8 QDQ mobilenetv2 matches ONNX Runtime") {
  // One flip of a logit (scale 0.106098) moves a softmax probability p by up to p(1 - p) * 0.106 <= 0.0265, and the
  // output's own rounding adds a step of 1/256. On the AVX-512 machine of 2026-11-25 (OpenBLAS's SkylakeX kernels
  // sum in another order than its Haswell ones) one logit rounds the other way: 5/256 on classes 282 and 285, which
  // ORT scores exactly tied (78/256 each).
  check_case({"extra/mobilenetv2-1.0-224-int8-qdq-st.onnx",
              "extra_mobilenetv2-1.0-224-int8-qdq-st__chelsea",
              {{"serving_default_input_1:0", "mobilenetv2int8_chelsea.npy"}},
              0.106098324 / 4 + 1.0 / 256});
}

TEST_CASE("ppocr text-line classifier matches ONNX Runtime") {
  check_case({"ppocr-mobile-v2-cls.onnx",
              "ppocr-mobile-v2-cls__line0_upright",
              {{"x", "ppocrcls_rendered_line0_upright.npy"}}});
  check_case(
      {"ppocr-mobile-v2-cls.onnx", "ppocr-mobile-v2-cls__line0_rot180", {{"x", "ppocrcls_rendered_line0_rot180.npy"}}});
}

TEST_CASE("ppocrv4 detector matches ONNX Runtime") {
  check_case({"ppocrv4-det.onnx", "ppocrv4-det__ocr_rendered", {{"x", "ppocrdet_ocr_rendered.npy"}}});
  check_case({"ppocrv4-det.onnx", "ppocrv4-det__ocr_en-01", {{"x", "ppocrdet_ocr_en-01.npy"}}});
}

TEST_CASE("ppocrv4 recognizer matches ONNX Runtime") {
  check_case({"ppocrv4-rec.onnx", "ppocrv4-rec__rendered_line0", {{"x", "ppocrrec_rendered_line0.npy"}}});
}

TEST_CASE("silero VAD matches ONNX Runtime on speech and silence") {
  for (const char* which : {"speech", "silence"}) {
    const std::string ref = std::string("silero-vad-16k-flat__chunk_") + which;
    const std::string file = std::string("vad_chunk576_") + which + ".npy";
    check_case({"silero-vad-16k-flat.onnx", ref.c_str(), {{"input", file.c_str()}, {"state", "vad_state_zeros.npy"}}});
  }
}

TEST_CASE("superres matches ONNX Runtime") {
  check_case({"superres-espcn-3x.onnx", "superres-espcn-3x__bus_lr", {{"input", "superres_bus_lr_y.npy"}}});
}

TEST_CASE("digits-vit matches ONNX Runtime") {
  check_case({"digits-vit.onnx", "digits-vit__test64", {{"pixel_values", "digits_test64.npy"}}});
}
