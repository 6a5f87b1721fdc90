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

TEST_CASE("a scalar input (Silero's sr, int64 []): one value for all samples or one each, and a batch shares one") {
  const auto dir = test::scratch_dir("calib_scalar");
  std::vector<InputSpec> specs = {spec("x", {std::nullopt, 2}, 0, "float [N,2]"), spec("sr", {}, 0, "int64 []")};
  specs[1].dtype = DType::Int64;
  tensorio::write_npy(dir / "x.npy", iota({4, 2}));
  tensorio::write_npy(dir / "sr0.npy", Tensor::scalar<int64_t>(16000));
  tensorio::write_npy(dir / "sr4.npy", Tensor::from_vector<int64_t>({4}, {16000, 16000, 8000, 8000}));
  auto one = open_array_files(specs, {{"x", dir / "x.npy"}, {"sr", dir / "sr0.npy"}});
  REQUIRE(one->samples() == 4);
  const auto b = one->batch(1, 3);
  CHECK(b.at("x").shape() == Shape{3, 2});
  CHECK(b.at("sr").shape().empty());
  CHECK(b.at("sr").data<int64_t>()[0] == 16000);
  auto each = open_array_files(specs, {{"x", dir / "x.npy"}, {"sr", dir / "sr4.npy"}});
  CHECK(each->batch(2, 2).at("sr").data<int64_t>()[0] == 8000);
  CHECK(each->batch(3, 1).at("sr").data<int64_t>()[0] == 8000);
  expect_bad_input([&] { each->batch(1, 2); }, "input 'sr' is a scalar (int64 []) and differs between the samples "
                                               "of one batch; use --batch-size 1");
  // One .npz per sample: equal scalars batch (this crashed: concat along the axis a scalar does not have).
  fs::create_directories(dir / "npz");
  for (int i = 0; i < 3; ++i)
    tensorio::write_npz(dir / "npz" / ("s" + std::to_string(i) + ".npz"),
                        {{"x", slice_axis(iota({4, 2}), 0, i, 1)}, {"sr", Tensor::scalar<int64_t>(16000)}});
  auto folder = open_data_dir(specs, dir / "npz");
  const auto fb = folder->batch(0, 3);
  CHECK(fb.at("x").shape() == Shape{3, 2});
  CHECK(fb.at("sr").shape().empty());
}

TEST_CASE("data folder: test_data_set_* folders may hold <input name>.npy, and a missing input names both layouts") {
  const auto dir = test::scratch_dir("calib_dir_npy");
  const Tensor chunk = tensorio::read_npy(test::shared_tensors() / "vad_chunk576_speech.npy");
  const Tensor state = tensorio::read_npy(test::shared_tensors() / "vad_state_zeros.npy");
  for (const char* i : {"0", "1"}) {
    const fs::path set = dir / (std::string("test_data_set_") + i);
    fs::create_directories(set);
    tensorio::write_npy(set / "input.npy", chunk);
    tensorio::write_npy(set / "state.npy", state);
  }
  auto src = open_data_dir(kVad, dir);
  REQUIRE(src->samples() == 2);
  const auto b = src->batch(0, 2);
  CHECK(b.at("input").shape() == Shape{2, 576});
  CHECK(b.at("state").shape() == Shape{2, 2, 128});
  fs::remove(dir / "test_data_set_1" / "state.npy");
  expect_bad_input([&] { src->batch(1, 1); },
                   "test_data_set_1: no value for input 'state': put it there as input_<i>.pb (i = its position, 1) "
                   "or as state.npy");
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

TEST_CASE("random samples: a float16 input gets the float32 draws rounded: an integer input is refused") {
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

#include <onnx/onnx_pb.h>

#include "calib/random_inputs.h"

namespace {

// A tiny language-model front end: ids -> Cast -> Gather(emb [50,8]), position_ids -> Gather(pos [32,8]),
// token_type_ids -> Gather(types [2,8]), attention_mask cast to float and subtracted, a key cache concatenated.
struct TinyLm {
  onnx::ModelProto model;
  std::vector<InputSpec> inputs;

  TinyLm() {
    model.set_ir_version(8);
    model.add_opset_import()->set_version(17);
    auto* g = model.mutable_graph();
    auto input = [&](const std::string& name, DType dt, int32_t onnx_type, std::vector<std::string> dims) {
      auto* vi = g->add_input();
      vi->set_name(name);
      vi->mutable_type()->mutable_tensor_type()->set_elem_type(onnx_type);
      InputSpec in = spec(name, {}, 0, name);
      in.dtype = dt;
      in.dims.emplace();
      for (const std::string& d : dims) {
        auto* dim = vi->mutable_type()->mutable_tensor_type()->mutable_shape()->add_dim();
        const bool fixed = std::isdigit(static_cast<unsigned char>(d[0]));
        if (fixed)
          dim->set_dim_value(std::stoll(d));
        else
          dim->set_dim_param(d);
        in.dims->push_back(fixed ? std::optional<int64_t>(std::stoll(d)) : std::nullopt);
        in.symbols.push_back(fixed ? "" : d);
      }
      inputs.push_back(in);
    };
    auto table = [&](const std::string& name, std::vector<int64_t> dims) {
      auto* t = g->add_initializer();
      t->set_name(name);
      t->set_data_type(onnx::TensorProto::FLOAT);
      int64_t n = 1;
      for (int64_t d : dims) t->add_dims(d), n *= d;
      t->set_raw_data(std::string(static_cast<size_t>(n) * 4, '\0'));
    };
    auto node = [&](const std::string& op, std::vector<std::string> in, const std::string& out, int64_t to = 0) {
      auto* n = g->add_node();
      n->set_op_type(op);
      n->set_name(out);
      for (const auto& i : in) n->add_input(i);
      n->add_output(out);
      if (to) {
        auto* a = n->add_attribute();
        a->set_name("to");
        a->set_type(onnx::AttributeProto::INT);
        a->set_i(to);
      }
    };
    input("input_ids", DType::Int64, onnx::TensorProto::INT64, {"batch", "seq"});
    input("attention_mask", DType::Int64, onnx::TensorProto::INT64, {"batch", "total"});
    input("position_ids", DType::Int64, onnx::TensorProto::INT64, {"batch", "seq"});
    input("token_type_ids", DType::Int64, onnx::TensorProto::INT64, {"batch", "seq"});
    input("past_key", DType::Float32, onnx::TensorProto::FLOAT, {"batch", "2", "past_len", "4"});
    table("emb", {50, 8});
    table("pos", {32, 8});
    table("types", {2, 8});
    table("one", {});
    node("Cast", {"input_ids"}, "ids32", onnx::TensorProto::INT32);
    node("Gather", {"emb", "ids32"}, "e");
    node("Gather", {"pos", "position_ids"}, "p");
    node("Gather", {"types", "token_type_ids"}, "t");
    node("Cast", {"attention_mask"}, "m", onnx::TensorProto::FLOAT);
    node("Sub", {"one", "m"}, "additive_mask");
    node("Concat", {"past_key", "past_key"}, "k");
  }
};

}  // namespace

TEST_CASE("random samples: token ids below the embedding's rows, masks, positions, type ids, an empty past") {
  const TinyLm lm;
  const RandomPlan plan = plan_random_inputs(lm.inputs, {}, &lm.model);
  const auto& ids = plan.inputs.at("input_ids");
  CHECK(ids.fill == RandomFill::TokenIds);
  CHECK(ids.bound == 50);            // through the Cast, the embedding's rows
  CHECK(ids.shape == Shape{1, 32});  // the default 64, lowered to the 32 rows of the position table
  CHECK(plan.inputs.at("attention_mask").fill == RandomFill::Ones);
  CHECK(plan.inputs.at("attention_mask").shape == Shape{1, 32});  // past 0 + sequence 32
  CHECK(plan.inputs.at("position_ids").fill == RandomFill::Positions);
  CHECK(plan.inputs.at("token_type_ids").fill == RandomFill::Zeros);
  CHECK(plan.inputs.at("past_key").fill == RandomFill::Normal);
  CHECK(plan.inputs.at("past_key").shape == Shape{1, 2, 0, 4});

  auto src = open_random(lm.inputs, 3, 5, {}, &lm.model);
  const auto all = src->batch(0, 3);
  const Tensor& t = all.at("input_ids");
  REQUIRE(t.shape() == Shape{3, 32});
  int64_t lo = 50, hi = -1;
  for (int64_t v : t.span<int64_t>()) lo = std::min(lo, v), hi = std::max(hi, v);
  CHECK(lo >= 0);
  CHECK(hi < 50);
  CHECK(hi > lo);
  CHECK(slice_axis(t, 0, 1, 2).same_as(src->batch(1, 2).at("input_ids")));  // independent of batching
  const Tensor& pos = all.at("position_ids");
  for (int64_t r = 0; r < 3; ++r)
    for (int64_t c = 0; c < 32; ++c) CHECK(pos.data<int64_t>()[r * 32 + c] == c);
  for (int64_t v : all.at("attention_mask").span<int64_t>()) CHECK(v == 1);
  for (int64_t v : all.at("token_type_ids").span<int64_t>()) CHECK(v == 0);

  // --shape by dim symbol: the sequence everywhere; a past of 3 shifts the positions and lengthens the mask.
  const RandomPlan shorter = plan_random_inputs(lm.inputs, {{"seq", {8}}, {"past_len", {3}}}, &lm.model);
  CHECK(shorter.inputs.at("input_ids").shape == Shape{1, 8});
  CHECK(shorter.inputs.at("attention_mask").shape == Shape{1, 11});
  CHECK(shorter.inputs.at("position_ids").offset == 3);
  CHECK(shorter.inputs.at("past_key").shape == Shape{1, 2, 3, 4});
  // A sequence past the position table is refused; so is a --shape naming nothing.
  CHECK_THROWS_AS(plan_random_inputs(lm.inputs, {{"seq", {40}}}, &lm.model), UsageError);
  expect_bad_input(
      [&] {
        plan_random_inputs(lm.inputs, {{"sequence", {8}}}, &lm.model);
      },
      "no input and no dim named 'sequence'");
}

TEST_CASE("random samples: an integer input with no table of known size is an error naming it and --data") {
  TinyLm lm;
  auto* g = lm.model.mutable_graph();
  auto* vi = g->add_input();  // flags: only added to a float, never an index
  vi->set_name("flags");
  vi->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::INT64);
  InputSpec flags = spec("flags", {std::nullopt, 3}, 0, "int64 [batch,3]");
  flags.dtype = DType::Int64;
  auto* n = g->add_node();
  n->set_op_type("Add");
  n->add_input("flags");
  n->add_input("flags");
  n->add_output("f2");
  std::vector<InputSpec> inputs = lm.inputs;
  inputs.push_back(flags);
  try {
    plan_random_inputs(inputs, {}, &lm.model);
    FAIL("no error");
  } catch (const UnsupportedError& e) {
    CHECK_THAT(e.what(), Catch::Contains("input 'flags'") && Catch::Contains("--data flags=FILE.npy"));
  }
  // Gather from a table whose rows the model leaves open: no bound, no guess.
  auto* gather = g->add_node();
  gather->set_op_type("Gather");
  gather->add_input("past_key");  // float [batch,2,past_len,4]: axis 0 is symbolic
  gather->add_input("flags");
  gather->add_output("g");
  try {
    plan_random_inputs(inputs, {}, &lm.model);
    FAIL("no error");
  } catch (const UnsupportedError& e) {
    CHECK_THAT(e.what(), Catch::Contains("'past_key'") && Catch::Contains("--data flags=FILE.npy"));
  }
}
