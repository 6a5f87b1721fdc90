// Calibration sample sources: array files, data folders, random samples; batching and input validation.
#include <catch2/catch.hpp>
#include <fstream>

#include "calib/calibration_data.h"
#include "core/error.h"
#include "core/float_formats.h"
#include "tensorio/tensorio.h"
#include "test_paths.h"

using namespace qtool;
using namespace qtool::calib;
namespace fs = std::filesystem;

namespace {

InputSpec spec(const std::string& name, std::vector<std::optional<int64_t>> dims, int64_t batch_axis,
               const std::string& declared) {
  InputSpec in;
  in.name = name;
  in.dims = std::move(dims);
  in.batch_axis = batch_axis;
  in.declared = declared;
  return in;
}

const std::vector<InputSpec> kMobilenet = {spec("input", {std::nullopt, 224, 224, 3}, 0, "float [N,224,224,3]")};
const std::vector<InputSpec> kVad = {spec("input", {std::nullopt, std::nullopt}, 0, "float [batch,sequence]"),
                                     spec("state", {2, std::nullopt, 128}, 1, "float [2,batch,128]")};

Tensor iota(Shape s) {
  Tensor t(DType::Float32, s);
  float k = 0;
  for (float& v : t.span<float>()) v = k++;
  return t;
}

template <class F>
void expect_bad_input(F&& f, const std::string& fragment) {
  try {
    f();
    FAIL("no error for " << fragment);
  } catch (const BadInputError& e) {
    CHECK_THAT(e.what(), Catch::Contains(fragment));
  }
}

}  // namespace

TEST_CASE("slice_axis and concat_axis along a middle axis") {
  const Tensor t = iota({2, 3, 4});
  const Tensor s = slice_axis(t, 1, 1, 2);
  REQUIRE(s.shape() == Shape{2, 2, 4});
  CHECK(s.span<float>()[0] == 4.0f);   // t[0,1,0]
  CHECK(s.span<float>()[8] == 16.0f);  // t[1,1,0]
  const Tensor back = concat_axis({slice_axis(t, 1, 0, 1), s}, 1);
  CHECK(back.same_as(t));
}

TEST_CASE("array files: samples along the batch axis, batches are slices") {
  const fs::path calib6 = test::shared_tensors() / "mobilenetv2_calib6.npy";
  auto src = open_array_files(kMobilenet, {{"input", calib6}});
  REQUIRE(src->samples() == 6);
  const Tensor all = tensorio::read_npy(calib6);
  const auto b = src->batch(2, 3);
  CHECK(b.at("input").same_as(slice_axis(all, 0, 2, 3)));
}

TEST_CASE("array files: a one-sample input is reused for every sample (RNN state on axis 1)") {
  const auto dir = test::scratch_dir("calib_vad");
  const Tensor chunk = tensorio::read_npy(test::shared_tensors() / "vad_chunk576_speech.npy");
  tensorio::write_npy(dir / "three.npy", concat_axis({chunk, chunk, chunk}, 0));
  auto src =
      open_array_files(kVad, {{"input", dir / "three.npy"}, {"state", test::shared_tensors() / "vad_state_zeros.npy"}});
  REQUIRE(src->samples() == 3);
  const auto b = src->batch(0, 2);
  CHECK(b.at("input").shape() == Shape{2, 576});
  CHECK(b.at("state").shape() == Shape{2, 2, 128});
}

TEST_CASE("array files: errors name the input, the file and the fix") {
  const fs::path calib6 = test::shared_tensors() / "mobilenetv2_calib6.npy";
  expect_bad_input([&] { open_array_files(kMobilenet, {{"images", calib6}}); }, "the model has no input 'images'");
  expect_bad_input(
      [&] {
        open_array_files(kVad, {{"input", test::shared_tensors() / "vad_chunk576_speech.npy"}});
      },
      "no data for input 'state'");
  const std::vector<InputSpec> nchw = {spec("input", {std::nullopt, 3, 224, 224}, 0, "float [N,3,224,224]")};
  expect_bad_input(
      [&] {
        open_array_files(nchw, {{"input", calib6}});
      },
      "mobilenetv2_calib6.npy: input 'input' has shape [6,224,224,3], the model wants float [N,3,224,224]");
  const auto dir = test::scratch_dir("calib_corrupt");
  {  // a real .npy cut short
    std::ifstream in(calib6, std::ios::binary);
    std::string head(5000, '\0');
    in.read(head.data(), 5000);
    std::ofstream(dir / "bad.npy", std::ios::binary) << head;
  }
  expect_bad_input([&] { open_array_files(kMobilenet, {{"input", dir / "bad.npy"}}); }, "bad.npy");
}

TEST_CASE("data folder: one .npz per sample, or test_data_set_* with .pb files") {
  const auto dir = test::scratch_dir("calib_dir");
  const Tensor all = tensorio::read_npy(test::shared_tensors() / "digits_calib_images.npy");
  const std::vector<InputSpec> digits = {spec("pixel_values", {std::nullopt, 1, 8, 8}, 0, "float [batch,1,8,8]")};
  fs::create_directories(dir / "npz");
  for (const char* i : {"0", "1", "2"}) {
    const int64_t row = std::atoi(i);
    tensorio::write_npz(dir / "npz" / (std::string("s") + i + ".npz"), {{"pixel_values", slice_axis(all, 0, row, 1)}});
    const fs::path set = dir / "pb" / (std::string("test_data_set_") + i);
    fs::create_directories(set);
    tensorio::write_pb(set / "input_0.pb", slice_axis(all, 0, row, 1), "");
  }
  for (const char* sub : {"npz", "pb"}) {
    auto src = open_data_dir(digits, dir / sub);
    REQUIRE(src->samples() == 3);
    CHECK(src->batch(1, 2).at("pixel_values").same_as(slice_axis(all, 0, 1, 2)));
  }
  fs::create_directories(dir / "empty");
  expect_bad_input([&] { open_data_dir(digits, dir / "empty"); }, "holds no test_data_set_* folders and no .npz files");
  tensorio::write_npz(dir / "npz" / "s9.npz", {{"pixels", slice_axis(all, 0, 0, 1)}});
  auto src = open_data_dir(digits, dir / "npz");
  expect_bad_input([&] { src->batch(3, 1); }, "key 'pixels' is not an input of the model");
}

TEST_CASE("random samples: seeded per sample, independent of batching") {
  const std::vector<InputSpec> det = {spec("x", {std::nullopt, 3, std::nullopt, std::nullopt}, 0, "float [N,3,?,?]")};
  CHECK_THROWS_AS(open_random(det, 4, 1, {}), UsageError);
  auto src = open_random(det, 4, 7, {{"x", {1, 3, 32, 64}}});
  const Tensor a = src->batch(0, 4).at("x"), b = src->batch(2, 2).at("x");
  CHECK(a.shape() == Shape{4, 3, 32, 64});
  CHECK(slice_axis(a, 0, 2, 2).same_as(b));
  auto other = open_random(det, 4, 8, {{"x", {1, 3, 32, 64}}});
  CHECK(!other->batch(0, 1).at("x").same_as(slice_axis(a, 0, 0, 1)));
}

TEST_CASE("random samples: a float16 input gets the float32 draws rounded; an integer input is refused") {
  InputSpec wide = spec("x", {std::nullopt, 4}, 0, "float [N,4]");
  InputSpec half = spec("x", {std::nullopt, 4}, 0, "float16 [N,4]");
  half.dtype = DType::Float16;
  InputSpec ids = spec("ids", {std::nullopt, 4}, 0, "int64 [N,4]");
  ids.dtype = DType::Int64;
  const Tensor f = open_random({wide}, 2, 3, {})->batch(0, 2).at("x");
  const Tensor h = open_random({half}, 2, 3, {})->batch(0, 2).at("x");
  REQUIRE(h.dtype() == DType::Float16);
  REQUIRE(h.shape() == f.shape());
  for (int64_t i = 0; i < f.numel(); ++i) CHECK(h.data<Float16>()[i].bits == float_to_float16(f.data<float>()[i]));
  CHECK_THROWS_AS(open_random({ids}, 2, 3, {}), UnsupportedError);
}

#include "calib/calibrate.h"

TEST_CASE("the target dtype comes from the QConfig's global.activation, loosely") {
  const auto dir = test::scratch_dir("calib_qconfig");
  std::ofstream(dir / "a.json")
      << R"({"format": "qtool-qconfig", "global": {"activation": {"dtype": "int8", "symmetric": true}}})";
  const QuantTarget t = target_from_qconfig(dir / "a.json");
  CHECK(t.dtype == DType::Int8);
  CHECK(t.symmetric);
  std::ofstream(dir / "b.json") << R"({"op_types": {}})";
  CHECK(target_from_qconfig(dir / "b.json").dtype == DType::UInt8);
  std::ofstream(dir / "c.json") << R"({"global": {"activation": {"dtype": "int9"}}})";
  expect_bad_input([&] { target_from_qconfig(dir / "c.json"); }, "global.activation.dtype");
  // The repository's default config, if present, parses.
  if (fs::exists(test::source_dir() / "configs/int8.json"))
    CHECK(target_from_qconfig(test::source_dir() / "configs/int8.json").dtype == DType::UInt8);
}
