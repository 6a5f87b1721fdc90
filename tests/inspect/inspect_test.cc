// qtool inspect --json against the facts listed in ../shared/models/README.md (op types, inputs, outputs),
// parameter counts computed independently with ONNX 1.12's Python API, and the bundled tiny models.
#include <sys/wait.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>

#include "test_paths.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

struct Run {
  int rc = -1;
  std::string out;
};

Run run(const std::string& args) {
  std::string cmd(1, '\'');  // appended, not "lit" + string&&: GCC 12 -Wrestrict false positive
  cmd.append(qtool::test::qtool_exe().string()).append("' ").append(args);
  Run r;
  FILE* p = ::popen(cmd.c_str(), "r");
  REQUIRE(p);
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) r.out.append(buf, n);
  const int status = ::pclose(p);
  r.rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

json inspect_json(const fs::path& model) {
  const Run r = run("inspect --json '" + model.string() + "'");
  INFO(r.out);
  REQUIRE(r.rc == 0);
  return json::parse(r.out);
}

// An expected input/output: dims are numbers, or symbol names as stored in the file.
struct IO {
  std::string name, dtype;
  json shape;
};

void check_io(const json& got, const std::vector<IO>& want) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    INFO(want[i].name);
    CHECK(got[i]["name"] == want[i].name);
    CHECK(got[i]["dtype"] == want[i].dtype);
    CHECK(got[i]["shape"] == want[i].shape);
  }
}

struct Expect {
  std::string file;
  int64_t ir, opset;
  std::vector<IO> inputs, outputs;
  std::map<std::string, int64_t> ops;  // exact counts, subgraphs included
  bool ops_complete = true;            // false: `ops` lists only some op types
  int64_t params;                      // initializers + Constant values (ONNX 1.12 Python, independently)
};

const json P0 = "p2o.DynamicDimension.0", P1 = "p2o.DynamicDimension.1", P2 = "p2o.DynamicDimension.2",
           P3 = "p2o.DynamicDimension.3", P4 = "p2o.DynamicDimension.4", P5 = "p2o.DynamicDimension.5";

// From ../shared/models/README.md. The README writes symbolic dims as N/H/W/B; the files name them (checked
// here by name). Where the README gives a size the file leaves symbolic (cls [N,3,48,192]: H and W are
// symbolic in the file; silero `input` [B,576]: "sequence"), the file's truth is asserted.
const std::vector<Expect> kShared = {
    {"mobilenetv2-1.0-224-fp32.onnx",
     7,
     13,
     {{"input", "float", {"N", 224, 224, 3}}},
     {{"probs", "float", {"N", 1000}}},
     {{"Conv", 52},
      {"Relu", 34},
      {"Clip", 18},
      {"Min", 17},
      {"Add", 11},
      {"Pad", 4},
      {"Transpose", 1},
      {"GlobalAveragePool", 1},
      {"Squeeze", 1},
      {"MatMul", 1},
      {"Softmax", 1}},
     true,
     3494964},
    {"ppocrv4-det.onnx",
     8,
     11,
     {{"x", "float", {P0, 3, P1, P2}}},
     {{"sigmoid_0.tmp_0", "float", {P3, 1, P4, P5}}},
     {{"Constant", 342},
      {"Add", 89},
      {"Mul", 86},
      {"Conv", 62},
      {"Clip", 24},
      {"Div", 24},
      {"Relu", 12},
      {"GlobalAveragePool", 10},
      {"HardSigmoid", 10},
      {"Resize", 6},
      {"BatchNormalization", 3},
      {"ConvTranspose", 2},
      {"Concat", 1},
      {"Sigmoid", 1}},
     true,
     1171841},
    {"ppocrv4-rec.onnx",
     8,
     9,
     {{"x", "float", {P0, 3, 48, P1}}},
     {{"softmax_11.tmp_0", "float", {P2, P3, 6625}}},
     {{"Constant", 325},
      {"Add", 107},
      {"Mul", 107},
      {"Conv", 38},
      {"Div", 33},
      {"Clip", 28},
      {"Cast", 23},
      {"MatMul", 13},
      {"ReduceMean", 10},
      {"Slice", 10},
      {"Transpose", 9},
      {"Concat", 7},
      {"Sigmoid", 7},
      {"Squeeze", 7},
      {"BatchNormalization", 6},
      {"Reshape", 6},
      {"Pow", 5},
      {"Sqrt", 5},
      {"Sub", 5},
      {"Shape", 4},
      {"Softmax", 3},
      {"GlobalAveragePool", 2},
      {"HardSigmoid", 2},
      {"Relu", 2},
      {"AveragePool", 1}},
     true,
     2690312},
    {"ppocr-mobile-v2-cls.onnx",
     8,
     9,
     {{"x", "float", {P0, 3, P1, P2}}},
     {{"softmax_0.tmp_0", "float", {P3, 2}}},
     {{"Constant", 250},
      {"Conv", 53},
      {"BatchNormalization", 35},
      {"Mul", 27},
      {"Add", 26},
      {"Clip", 18},
      {"Div", 18},
      {"Relu", 15},
      {"GlobalAveragePool", 10},
      {"HardSigmoid", 9},
      {"Cast", 3},
      {"Concat", 1},
      {"MatMul", 1},
      {"MaxPool", 1},
      {"Reshape", 1},
      {"Shape", 1},
      {"Slice", 1},
      {"Softmax", 1}},
     true,
     133665},
    {"silero-vad-16k-flat.onnx",
     10,
     18,
     {{"input", "float", {"batch", "sequence"}}, {"state", "float", {2, "batch", 128}}},
     {{"output", "float", {"batch", 1}}, {"stateN", "float", {2, "batch", 128}}},
     {{"Conv", 6},
      {"Relu", 5},
      {"Unsqueeze", 5},
      {"Sigmoid", 4},
      {"Add", 3},
      {"Gather", 3},
      {"Mul", 3},
      {"Gemm", 2},
      {"Pow", 2},
      {"Slice", 2},
      {"Tanh", 2},
      {"Concat", 1},
      {"Pad", 1},
      {"ReduceMean", 1},
      {"Split", 1},
      {"Sqrt", 1},
      {"Squeeze", 1}},
     true,
     309645},
    // IR 4: the 8 initializers are also graph inputs; they are parameters, not inputs.
    {"superres-espcn-3x.onnx",
     4,
     10,
     {{"input", "float", {"batch_size", 1, 224, 224}}},
     {{"output", "float", {"batch_size", 1, 672, 672}}},
     {{"Conv", 4}, {"Relu", 3}, {"Constant", 2}, {"Reshape", 2}, {"Transpose", 1}},
     true,
     59667},
    // The README lists digits-vit's shape bookkeeping only in part: the numbered counts, Expand and Where
    // (1 each) are exact; Transpose and Reshape are listed without a count and only checked present.
    {"digits-vit.onnx",
     8,
     17,
     {{"pixel_values", "float", {"batch", 1, 8, 8}}},
     {{"logits", "float", {"batch", 10}}},
     {{"MatMul", 32},
      {"LayerNormalization", 9},
      {"Softmax", 4},
      {"Erf", 4},
      {"Conv", 1},
      {"Gemm", 1},
      {"Concat", 19},
      {"Expand", 1},
      {"Where", 1}},
     false,
     202285},
    {"fastestdet-coco-352.onnx",
     6,
     11,
     {{"input.1", "float", {1, 3, 352, 352}}},
     {{"758", "float", {1, 85, 22, 22}}},
     {{"Conv", 70},
      {"Relu", 48},
      {"Gather", 26},
      {"Reshape", 26},
      {"Concat", 19},
      {"Transpose", 15},
      {"MaxPool", 1},
      {"AveragePool", 1},
      {"Pad", 1},
      {"Resize", 1},
      {"Add", 1},
      {"Sigmoid", 1},
      {"Softmax", 1}},
     true,
     240443},
    {"llama2c-aidreams-260k.onnx",
     7,
     14,
     {{"input_ids", "int64", {"batch", "seq"}}},
     {{"logits", "float", {"batch", "seq", 512}}},
     {{"Constant", 227}, {"Unsqueeze", 80}, {"Mul", 58}, {"Gather", 43}, {"Concat", 40}, {"MatMul", 37},
      {"Shape", 34},     {"Reshape", 32},   {"Add", 29}, {"Transpose", 16}, {"Div", 13}, {"Slice", 12},
      {"Pow", 9},        {"ReduceMean", 9}, {"Sqrt", 9}, {"Sub", 8},        {"Cast", 4}, {"Softmax", 4},
      {"Sigmoid", 4}},
     true,
     282403},  // the README's 231 k trained parameters plus the second copy of the tied embedding, mask and RoPE tables
    {"cifar10-resnet20.onnx",
     3,
     7,
     {{"input", "float", {1, 3, 32, 32}}},
     {{"output", "float", {1, 10}}},
     {{"Conv", 21}, {"Relu", 19}, {"Add", 9}, {"GlobalAveragePool", 1}, {"Reshape", 1}, {"Gemm", 1}},
     true,
     271692},
    {"ultraface-rfb-320.onnx",
     4,
     9,
     {{"input", "float", {1, 3, 240, 320}}},
     {{"scores", "float", {1, 4420, 2}}, {"boxes", "float", {1, 4420, 4}}},
     {{"Conv", 52},     {"Relu", 37},  {"BatchNormalization", 35}, {"Constant", 31}, {"Unsqueeze", 24},
      {"Concat", 13},   {"Gather", 8}, {"Reshape", 8},            {"Shape", 8},     {"Transpose", 8},
      {"Slice", 6},     {"Mul", 4},    {"Add", 3},                {"Div", 2},       {"Exp", 1},
      {"Sub", 1},       {"Softmax", 1}},
     true,
     307683},
    // Not in the README's op list: the classifier's ops plus 104 QuantizeLinear and 228 DequantizeLinear
    // (counted with ONNX 1.12's Python API).
    {"extra/mobilenetv2-1.0-224-int8-qdq-st.onnx",
     7,
     13,
     {{"serving_default_input_1:0", "uint8", {"unk__1590", 224, 224, 3}}},
     {{"StatefulPartitionedCall:0", "float", {"unk__1591", 1000}}},
     {{"Conv", 52},
      {"Relu", 34},
      {"Clip", 18},
      {"Min", 17},
      {"Add", 11},
      {"Pad", 4},
      {"Transpose", 1},
      {"GlobalAveragePool", 1},
      {"Squeeze", 1},
      {"MatMul", 1},
      {"Softmax", 1},
      {"QuantizeLinear", 104},
      {"DequantizeLinear", 228}},
     true,
     3495141},
};

}  // namespace

TEST_CASE("inspect --json matches the shared models' README: op counts, inputs, outputs") {
  // Every model in the folder is covered.
  std::vector<std::string> on_disk;
  for (const auto& dir : {qtool::test::shared_models(), qtool::test::shared_models() / "extra"})
    for (const auto& e : fs::directory_iterator(dir))
      if (e.path().extension() == ".onnx")
        on_disk.push_back(fs::relative(e.path(), qtool::test::shared_models()).string());
  std::vector<std::string> expected;
  for (const auto& e : kShared) expected.push_back(e.file);
  std::sort(on_disk.begin(), on_disk.end());
  std::sort(expected.begin(), expected.end());
  CHECK(on_disk == expected);

  for (const auto& e : kShared) {
    INFO(e.file);
    const json j = inspect_json(qtool::test::shared_models() / e.file);
    CHECK(j["ir_version"] == e.ir);
    CHECK(j["opset_imports"]["ai.onnx"] == e.opset);
    check_io(j["inputs"], e.inputs);
    check_io(j["outputs"], e.outputs);
    const auto got = j["op_counts"].get<std::map<std::string, int64_t>>();
    if (e.ops_complete) {
      CHECK(got == e.ops);
    } else {
      for (const auto& [op, n] : e.ops) {
        INFO(op);
        CHECK(got.count(op) == 1);
        if (got.count(op)) CHECK(got.at(op) == n);
      }
      CHECK(got.count("Transpose") == 1);
      CHECK(got.count("Reshape") == 1);
    }
    CHECK(j["parameters"]["count"] == e.params);
    int64_t by_dtype = 0;
    for (const auto& [dt, t] : j["parameters"]["by_dtype"].items()) by_dtype += t["count"].get<int64_t>();
    CHECK(by_dtype == e.params);
    CHECK(j["quantization"]["quantized"] == (e.ops.count("QuantizeLinear") > 0));
  }
}

TEST_CASE("inspect reports the vendor int8 model's quantization") {
  const json q =
      inspect_json(qtool::test::shared_models() / "extra" / "mobilenetv2-1.0-224-int8-qdq-st.onnx")["quantization"];
  CHECK(q["quantize_linear"] == 104);
  CHECK(q["dequantize_linear"] == 228);
  // int8 constants (weights) and int32 constants (biases) behind DequantizeLinear, all per-tensor (the
  // file is ST's per-tensor model); counted independently with ONNX 1.12's Python API.
  const json want = json::array({{{"dtype", "int8"}, {"granularity", "per-tensor"}, {"count", 70}},
                                 {{"dtype", "int32"}, {"granularity", "per-tensor"}, {"count", 53}}});
  CHECK(q["weights"] == want);
  CHECK(q["activations"] == json{{"int8", 104}});
}

TEST_CASE("inspect on the bundled tiny models: subgraphs, QDQ granularity, external data") {
  const fs::path models = qtool::test::source_dir() / "models";
  const json conv = inspect_json(models / "tiny_conv.onnx");
  CHECK(conv["op_counts"] ==
        json{{"Add", 1}, {"Conv", 2}, {"Flatten", 1}, {"Gemm", 1}, {"GlobalAveragePool", 1}, {"Relu", 1}});
  CHECK(conv["parameters"]["count"] == 8 * 27 + 8 + 8 * 72 + 8 + 10 * 8 + 10);
  CHECK(conv["parameters"]["bytes"] == 4 * (8 * 27 + 8 + 8 * 72 + 8 + 10 * 8 + 10));
  check_io(conv["inputs"], {{"input", "float", {"N", 3, 32, 32}}});

  // If: ops of both branches counted; the else branch's Constant weight is a parameter.
  const json iff = inspect_json(models / "tiny_if.onnx");
  CHECK(iff["op_counts"] ==
        json{{"Constant", 1}, {"Greater", 1}, {"If", 1}, {"MatMul", 2}, {"ReduceSum", 1}, {"Relu", 1}, {"Sigmoid", 1}});
  CHECK(iff["subgraphs"] == 2);
  CHECK(iff["parameters"]["count"] == 16 * 8 * 2 + 1);

  const json loop = inspect_json(models / "tiny_loop.onnx");
  CHECK(loop["op_counts"]["MatMul"] == 1);
  CHECK(loop["subgraphs"] == 1);
  CHECK(loop["parameters"]["by_dtype"]["float"]["count"] == 64);
  check_io(loop["inputs"], {{"x", "float", {"N", 8}}, {"steps", "int64", json::array()}});

  const json qdq = inspect_json(models / "tiny_qdq.onnx")["quantization"];
  CHECK(qdq["quantize_linear"] == 2);
  CHECK(qdq["dequantize_linear"] == 4);
  CHECK(qdq["weights"] ==
        json::array({{{"dtype", "int8"}, {"granularity", "per-channel"}, {"axis", 0}, {"count", 2}}}));
  CHECK(qdq["activations"] == json{{"uint8", 2}});
  // weight bytes by stored dtype (ONNX 1.12 numpy_helper nbytes): conv.weight.q 216 + fc.weight.q 80 as int8,
  // the two float biases 32 + 40; scales/zero points apart
  const json wb = inspect_json(models / "tiny_qdq.onnx")["weight_bytes"];
  CHECK(wb["weights"]["int8"] == json{{"bytes", 296}, {"tensors", 2}, {"nodes", 2}, {"ops", {{"Conv", 1}, {"Gemm", 1}}}});
  CHECK(wb["weights"]["float"]["bytes"] == 72);
  CHECK(wb["quantization_parameters"]["float"]["bytes"] == 4 + 32 + 40 + 4);
  CHECK(wb["quantization_parameters"]["int8"]["bytes"] == 8 + 10);

  const json ext = inspect_json(models / "tiny_external.onnx");
  CHECK(ext["parameters"]["count"] == 64 * 128 + 128 + 128 * 10 + 10);
  CHECK(ext["parameters"]["external_bytes"] == 4 * (64 * 128 + 128 * 10));
}

TEST_CASE("inspect prints an aligned text report") {
  const Run r = run("inspect '" + (qtool::test::source_dir() / "models" / "tiny_qdq.onnx").string() + "'");
  REQUIRE(r.rc == 0);
  CHECK_THAT(r.out, Catch::Contains("ir version  7\n") && Catch::Contains("opsets      ai.onnx 13\n"));
  CHECK_THAT(r.out, Catch::Contains("input   input   float  [N,3,16,16]\n"));
  CHECK_THAT(r.out, Catch::Contains("output  logits  float  [N,10]\n"));
  CHECK_THAT(r.out, Catch::Contains("  DequantizeLinear   4\n"));
  CHECK_THAT(r.out, Catch::Contains("quantization  QuantizeLinear 2, DequantizeLinear 4\n"));
  CHECK_THAT(r.out, Catch::Contains("weights      int8   per-channel (axis 0)  2 tensors"));
  CHECK_THAT(r.out, Catch::Contains("  weights              int8   296 B  2 tensors  2 nodes: Conv 1, Gemm 1\n"));
}
