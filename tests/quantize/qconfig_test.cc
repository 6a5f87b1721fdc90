// QConfig parsing, resolution (field-by-field overrides across levels) and one test per error kind.
#include "quantize/qconfig.h"

#include <catch2/catch.hpp>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "qconfig_error.h"
#include "test_paths.h"

using namespace qtool;
using namespace qtool::quantize;

namespace {

std::string wrap(const std::string& body) { return R"({"format": "qtool-qconfig", "version": 1, )" + body + "}"; }

using qconfig_testing::error_of;

}  // namespace

TEST_CASE("qconfig: built-in default is configs/int8.json") {
  const QConfig builtin = QConfig::builtin_default();
  const QConfig file = QConfig::load(test::source_dir() / "configs" / "int8.json");
  CHECK(builtin.name() == "int8");
  CHECK(file.name() == "int8");
  for (const char* op : {"Conv", "MatMul", "Sigmoid", "LayerNormalization"}) {
    const NodeQuant a = builtin.resolve("n", op), b = file.resolve("n", op);
    CHECK(a.quantized == b.quantized);
    CHECK(a.applied == b.applied);
  }
  CHECK(builtin.required_opset() == 13);  // per-channel weights
}

TEST_CASE("qconfig: default int8 resolution") {
  const QConfig c = QConfig::builtin_default();
  const NodeQuant conv = c.resolve("conv1", "Conv");
  REQUIRE(conv.quantized);
  REQUIRE(conv.activation);
  CHECK(conv.activation->dtype == DType::UInt8);
  CHECK_FALSE(conv.activation->symmetric);
  REQUIRE(conv.weight);
  CHECK(conv.weight->dtype == DType::Int8);
  CHECK(conv.weight->symmetric);
  CHECK(conv.weight->granularity == Granularity::PerChannel);
  REQUIRE(conv.bias);
  CHECK(conv.bias->dtype == DType::Int32);
  CHECK(conv.applied == std::vector<std::string>{"$.global", "$.op_types.Conv"});

  const NodeQuant sig = c.resolve("s", "Sigmoid");
  REQUIRE(sig.output);
  CHECK(sig.output->scale == Approx(1.0 / 256));
  CHECK(sig.output->zero_point == 0);
  CHECK_FALSE(sig.activation->scale.has_value());  // input keeps calibrated params

  const NodeQuant ln = c.resolve("ln", "LayerNormalization");
  CHECK_FALSE(ln.quantized);
  CHECK(ln.applied.back() == "$.op_types.*");
}

TEST_CASE("qconfig: tensorrt profile keeps biases float and outputs unquantized") {
  const QConfig c = QConfig::load(test::source_dir() / "configs" / "int8-tensorrt.json");
  const NodeQuant conv = c.resolve("c", "Conv");
  REQUIRE(conv.quantized);
  CHECK(conv.activation->dtype == DType::Int8);
  CHECK(conv.activation->symmetric);
  CHECK_FALSE(conv.bias.has_value());
  CHECK_FALSE(conv.output.has_value());
  CHECK(conv.weight->narrow_range);
  CHECK_FALSE(c.resolve("a", "Add").quantized);
}

TEST_CASE("qconfig: levels override field by field, regex first match wins, null keeps float") {
  const QConfig c = QConfig::parse(wrap(R"(
    "global": {"activation": {"dtype": "uint8", "method": "minmax"}, "weight": {"dtype": "int8", "granularity": "per_channel"}},
    "op_types": {"Conv": {"weight": {"granularity": "per_tensor"}}, "Softmax": null},
    "node_name_regex": [
      {"pattern": "^head/", "rule": {"activation": {"method": "percentile"}}},
      {"pattern": "head", "rule": null}
    ],
    "node_names": {"head/conv": {"weight": {"narrow_range": true}}, "keep": null, "sm_special": {}},
    "tensors": {"x": {"range": [-1, 1]}, "y": null}
  )"),
                                   "t.json");
  const NodeQuant a = c.resolve("head/conv", "Conv");
  REQUIRE(a.quantized);
  CHECK(a.activation->method == RangeMethod::Percentile);  // regex
  CHECK(a.activation->dtype == DType::UInt8);              // global
  CHECK(a.weight->granularity == Granularity::PerTensor);  // op_types
  CHECK(a.weight->narrow_range);                           // node_names
  CHECK(a.weight->dtype == DType::Int8);                   // global
  CHECK(a.applied == std::vector<std::string>{"$.global", "$.op_types.Conv", "$.node_name_regex[0].rule",
                                              "$.node_names[\"head/conv\"]"});
  CHECK_FALSE(c.resolve("my_head", "Conv").quantized);  // second regex: null
  CHECK_FALSE(c.resolve("keep", "Conv").quantized);
  CHECK_FALSE(c.resolve("sm", "Softmax").quantized);
  CHECK(c.resolve("sm_special", "Softmax").quantized);  // a node-level object re-enables a null op type
  REQUIRE(c.tensor_override("x"));
  CHECK(c.tensor_override("x")->patch.range->second == 1.0);
  CHECK(c.tensor_override("y")->is_null);
  CHECK(c.tensor_override("z") == nullptr);
  CHECK_NOTHROW(c.check_names({"head/conv", "keep", "sm_special"}, {"x", "y"}));
  CHECK_THROWS_WITH(c.check_names({"head/conv", "sm_special"}, {"x", "y"}),
                    "t.json: $.node_names.keep: no node of the model is named \"keep\"");
  CHECK_THROWS_WITH(c.check_names({"head/conv", "keep", "sm_special"}, {"x"}),
                    "t.json: $.tensors.y: no tensor of the model is named \"y\"");
}

TEST_CASE("qconfig: regex that matches nothing is reported") {
  const QConfig c =
      QConfig::parse(wrap(R"("global": {}, "node_name_regex": [{"pattern": "^zzz", "rule": null}])"), "c.json");
  CHECK_THROWS_WITH(c.check_names({"conv"}, {}),
                    "c.json: $.node_name_regex[0].pattern: \"^zzz\" matches no node name of the model");
}

TEST_CASE("qconfig: opset needed by dtypes and granularities") {
  CHECK(QConfig::parse(wrap(R"("global": {"weight": {"granularity": "per_tensor"}})"), "c").required_opset() == 10);
  CHECK(QConfig::parse(wrap(R"("global": {"weight": {"dtype": "float8e4m3fn", "granularity": "per_tensor"}})"), "c")
            .required_opset() == 19);
  CHECK(QConfig::parse(wrap(R"("global": {"weight": {"dtype": "int4", "granularity": "per_block", "block_size": 32}})"),
                       "c")
            .required_opset() == 21);
}

TEST_CASE("qconfig: errors name the file and JSON path") {
  CHECK(error_of(wrap(R"("global": {}, "op_types": {"Conv": {"weight": {"granularity": "perchannel"}}})")) ==
        "config.json: $.op_types.Conv.weight.granularity: expected one of per_tensor, per_channel, per_block, got "
        "\"perchannel\"");
  CHECK(error_of(wrap(R"("global": {"activaton": {}})")) ==
        "config.json: $.global.activaton: unknown key (expected one of activation, weight, bias, output)");
  CHECK(error_of(wrap(R"("global": {}, "extra": 1)")).starts_with("config.json: $.extra: unknown key"));
  CHECK(error_of(wrap(R"("global": {"weight": {"symmetric": "yes"}})")) ==
        "config.json: $.global.weight.symmetric: expected true or false, got \"yes\"");
  CHECK(error_of(wrap(R"("global": {"weight": {"axis": 1.5}})")) ==
        "config.json: $.global.weight.axis: expected an integer, got 1.5");
  CHECK(error_of(wrap(R"("global": {"weight": {"dtype": "int9"}})")) ==
        "config.json: $.global.weight.dtype: unknown dtype \"int9\"");
  CHECK(error_of(wrap(R"("global": {"activation": {"dtype": "float"}})"))
            .starts_with("config.json: $.global.activation.dtype: expected one of int8, uint8"));
  CHECK(error_of(wrap(R"("global": {"bias": {"dtype": "int8"}})"))
            .starts_with("config.json: $.global.bias.dtype: bias dtype must be int32"));
  CHECK(error_of(wrap(R"("global": {"activation": {"dtype": "int4"}})")) ==
        "config.json: $.global.activation.dtype: 4-bit types are supported for weights only");
  CHECK(error_of(wrap(R"("global": {"activation": {"granularity": "per_channel"}})")) ==
        "config.json: $.global.activation.granularity: activations are quantized per_tensor only");
  CHECK(error_of(wrap(R"("global": {"weight": {"granularity": "per_block"}})")) ==
        "config.json: $.global.weight.granularity: per_block needs \"block_size\"");
  CHECK(error_of(wrap(R"("global": {"activation": {"method": "kl"}})")) ==
        "config.json: $.global.activation.method: expected one of minmax, percentile, entropy, mse, torch_histogram, "
        "got \"kl\"");
  CHECK(error_of(wrap(R"("global": {"activation": {"range": [2, 1]}})")) ==
        "config.json: $.global.activation.range: lo must not exceed hi, got [2,1]");
  CHECK(error_of(wrap(R"("global": {"activation": {"scale": 0.1}})")) ==
        "config.json: $.global.activation: \"scale\" and \"zero_point\" must be given together");
  CHECK(error_of(wrap(R"("global": {"activation": {"percentile": 20}})")) ==
        "config.json: $.global.activation.percentile: percentile must be in (50, 100], got 20");
  // Fields with no effect where they are written (the tensors a weight / bias / activation block governs).
  CHECK(error_of(wrap(R"("global": {"activation": {"method": "entropy", "percentile": 99.9}})")) ==
        "config.json: $.global.activation.percentile: applies to \"method\": \"percentile\", but this block's "
        "method is \"entropy\"");
  CHECK(error_of(wrap(R"("global": {"weight": {"granularity": "per_channel", "block_size": 32}})")) ==
        "config.json: $.global.weight.block_size: applies to \"granularity\": \"per_block\", but this block's "
        "granularity is \"per_channel\"");
  CHECK(error_of(wrap(R"("global": {"weight": {"range": [-1, 1]}})"))
            .starts_with("config.json: $.global.weight.range: weights are quantized from their own values"));
  CHECK(error_of(wrap(R"("global": {}, "op_types": {"Conv": {"weight": {"method": "mse"}}})"))
            .starts_with("config.json: $.op_types.Conv.weight.method: weights are quantized from their own values"));
  CHECK(error_of(wrap(R"("global": {"bias": {"dtype": "int32", "symmetric": true}})")) ==
        "config.json: $.global.bias.symmetric: a bias is int32 with scale s_input * s_weight and zero point 0: only "
        "\"dtype\" applies");
  CHECK(error_of(wrap(R"("global": {"output": {"axis": 1}})")) ==
        "config.json: $.global.output.axis: activations are quantized per_tensor; it applies to weights");
  CHECK(error_of(wrap(R"("global": {"weight": {"dtype": "int8"}}, "tensors": {"x": {"method": "entropy", "percentile": 99}})"))
            .starts_with("config.json: $.tensors.x.percentile: applies to \"method\": \"percentile\""));
  CHECK(error_of(wrap(R"("global": {}, "node_name_regex": [{"pattern": "([a-z", "rule": null}])"))
            .starts_with("config.json: $.node_name_regex[0].pattern: bad regular expression \"([a-z\""));
  CHECK(error_of(wrap(R"("global": {}, "node_name_regex": [{"pattern": "a"}])")) ==
        "config.json: $.node_name_regex[0].rule: missing (a rule object, or null to keep matches float)");
  CHECK(error_of(wrap(R"("global": {}, "node_names": {"conv 1": {"bias": 3}})")) ==
        "config.json: $.node_names[\"conv 1\"].bias: expected an object, got 3");
  CHECK(error_of(wrap(R"("op_types": {})")) ==
        "config.json: $.global: missing (a rule object, or null to quantize nothing by default)");
  CHECK(error_of(R"({"format": "qtool-qconfig", "version": 2, "global": {}})") ==
        "config.json: $.version: expected 1, got 2");
  CHECK(error_of(R"({"version": 1, "global": {}})") ==
        "config.json: $.format: expected \"qtool-qconfig\", got nothing");
  CHECK(error_of("{\"format\": ").starts_with("config.json: not valid JSON"));
  CHECK_THROWS_AS(QConfig::load("/nonexistent/q.json"), BadInputError);
}

TEST_CASE("qconfig: accuracy_guard is on in the default, off when absent or null, errors name the path") {
  const AccuracyGuardSettings d = QConfig::builtin_default().accuracy_guard();
  CHECK(d.enabled);
  CHECK(d.min_sqnr_db == 10);
  CHECK(d.state_min_sqnr_db == 55);
  CHECK(d.max_float_tensors == 64);
  CHECK_FALSE(QConfig::parse(wrap(R"("global": {})"), "c.json").accuracy_guard().enabled);
  CHECK_FALSE(QConfig::parse(wrap(R"("global": {}, "accuracy_guard": null)"), "c.json").accuracy_guard().enabled);
  const auto g = QConfig::parse(wrap(R"("global": {}, "accuracy_guard": {"min_sqnr_db": 12.5, "state_min_sqnr_db": 30,
                                        "max_float_tensors": 3})"),
                                "c.json")
                     .accuracy_guard();
  CHECK(g.enabled);
  CHECK(g.min_sqnr_db == 12.5);
  CHECK(g.state_min_sqnr_db == 30);
  CHECK(g.max_float_tensors == 3);
  CHECK(error_of(wrap(R"("global": {}, "accuracy_guard": {"min_sqnr_db": 5, "state_min_sqnr_db": 40})")) ==
        "config.json: $.accuracy_guard.max_float_tensors: missing");
  CHECK(
      error_of(wrap(
          R"("global": {}, "accuracy_guard": {"min_sqnr_db": 5, "state_min_sqnr_db": 40, "max_float_tensors": -1})")) ==
      "config.json: $.accuracy_guard.max_float_tensors: expected 0 or more");
  const auto st = QConfig::parse(wrap(R"("global": {}, "accuracy_guard": {"min_sqnr_db": 5, "state_min_sqnr_db": 45,
                                         "max_float_tensors": 64, "state": {"hn": "h0", "cn": "c0"}})"),
                                 "c.json")
                      .accuracy_guard();
  CHECK(st.state == std::map<std::string, std::string>{{"cn", "c0"}, {"hn", "h0"}});
  CHECK(error_of(wrap(R"("global": {}, "accuracy_guard": {"min_sqnr_db": 5, "state_min_sqnr_db": 45,
                         "max_float_tensors": 64, "state": {"hn": 1}})")) ==
        "config.json: $.accuracy_guard.state.hn: expected a string, got 1");
  CHECK(error_of(wrap(R"("global": {}, "accuracy_guard": {"min_sqnr": 5})"))
            .starts_with("config.json: $.accuracy_guard.min_sqnr: unknown key"));
  CHECK_FALSE(g.per_sample_sqnr);
  CHECK(QConfig::parse(wrap(R"("global": {}, "accuracy_guard": {"min_sqnr_db": 5, "state_min_sqnr_db": 45,
                               "max_float_tensors": 64, "per_sample_sqnr": true})"),
                       "c.json")
            .accuracy_guard()
            .per_sample_sqnr);
  CHECK(error_of(wrap(R"("global": {}, "accuracy_guard": {"min_sqnr_db": 5, "state_min_sqnr_db": 45,
                         "max_float_tensors": 64, "per_sample_sqnr": 1})"))
            .starts_with("config.json: $.accuracy_guard.per_sample_sqnr: expected"));
}

TEST_CASE("qconfig: every file in configs/ parses") {
  for (const auto& e : std::filesystem::recursive_directory_iterator(test::source_dir() / "configs"))
    if (e.path().extension() == ".json") {
      INFO(e.path());
      CHECK_NOTHROW(QConfig::load(e.path()));
    }
}

TEST_CASE("qconfig: target, and FP8 activations need a target that runs them") {
  CHECK(QConfig::parse(wrap(R"("global": {})"), "c").target() == Target::OrtCpu);
  const std::string fp8 = R"("global": {}, "op_types": {"MatMul": {"activation": {"dtype": "float8e4m3fn"}}})";
  CHECK(QConfig::parse(wrap(R"("target": "tensorrt", )" + fp8), "c").target() == Target::TensorRT);
  CHECK(error_of(wrap(R"("target": "gpu", "global": {})")) ==
        "config.json: $.target: expected one of ort-cpu, tensorrt, got \"gpu\"");
  CHECK(error_of(wrap(fp8)).starts_with(
      "config.json: $.op_types.MatMul.activation.dtype: float8 activations: ONNX Runtime's CPU provider cannot load"));
  CHECK(error_of(wrap(R"("global": {"output": {"dtype": "float8e5m2"}})"))
            .starts_with("config.json: $.global.output.dtype: float8 activations"));
  // FP8 weights alone load in ONNX Runtime's CPU provider: no target needed.
  CHECK_NOTHROW(QConfig::parse(wrap(R"("global": {"activation": null, "weight": {"dtype": "float8e4m3fn"}})"), "c"));
}

TEST_CASE("qconfig: weight \"algorithm\" is rtn by default, set per rule, weights only") {
  const QConfig c = QConfig::parse(
      wrap(R"("global": {"activation": null, "weight": {"dtype": "int4", "granularity": "per_block", "block_size": 32,
           "algorithm": "gptq"}}, "op_types": {"Gather": {"weight": {"algorithm": "clip_search"}}})"),
      "c");
  CHECK(c.resolve("m", "MatMul").weight->algorithm == WeightAlgorithm::Gptq);
  CHECK(c.resolve("g", "Gather").weight->algorithm == WeightAlgorithm::ClipSearch);
  CHECK(QConfig::builtin_default().resolve("c", "Conv").weight->algorithm == WeightAlgorithm::Rtn);
  CHECK(c.resolve("m", "MatMul").weight->algorithm != WeightAlgorithm::Awq);
  CHECK(QConfig::parse(wrap(R"("global": {"weight": {"algorithm": "awq"}})"), "c").resolve("m", "MatMul").weight->algorithm ==
        WeightAlgorithm::Awq);
  CHECK(error_of(wrap(R"("global": {"weight": {"algorithm": "omniquant"}})")) ==
        "config.json: $.global.weight.algorithm: expected one of rtn, clip_search, gptq, awq, got \"omniquant\"");
  CHECK(error_of(wrap(R"("global": {"activation": {"algorithm": "rtn"}})")) ==
        "config.json: $.global.activation.algorithm: algorithm applies to weights only");
}

TEST_CASE("qconfig: scale_bits double-quantizes block scales, 8 or 4 bits, weights only") {
  const QConfig c = QConfig::parse(
      wrap(R"("global": {"activation": null, "weight": {"dtype": "int4", "granularity": "per_block", "block_size": 32,
           "scale_bits": 8}}, "op_types": {"Gather": {"weight": {"scale_bits": 4, "scale_block_size": 16}}})"),
      "c");
  CHECK(c.resolve("m", "MatMul").weight->scale_bits == 8);
  CHECK(c.resolve("m", "MatMul").weight->scale_block_size == 256);
  CHECK(c.resolve("g", "Gather").weight->scale_bits == 4);
  CHECK(c.resolve("g", "Gather").weight->scale_block_size == 16);
  CHECK(QConfig::builtin_default().resolve("c", "Conv").weight->scale_bits == 0);
  CHECK(error_of(wrap(R"("global": {"weight": {"scale_bits": 6}})")) ==
        "config.json: $.global.weight.scale_bits: scale_bits must be 8 or 4, got 6");
  CHECK(error_of(wrap(R"("global": {"weight": {"scale_block_size": 0}})")) ==
        "config.json: $.global.weight.scale_block_size: scale_block_size must be at least 1, got 0");
  CHECK(error_of(wrap(R"("global": {"activation": {"scale_bits": 8}})")) ==
        "config.json: $.global.activation.scale_bits: scale_bits applies to weights only");
}

TEST_CASE("qconfig: weight_algorithms are booleans (smooth_quant_alpha a number in [0, 1]) with known names, off when absent") {
  const QConfig off = QConfig::parse(wrap(R"("global": {})"), "c");
  CHECK_FALSE(off.weight_algorithms().cross_layer_equalization);
  CHECK_FALSE(off.weight_algorithms().bias_correction);
  CHECK_FALSE(off.weight_algorithms().fold_scale_after_conv);
  const QConfig on = QConfig::parse(wrap(R"("global": {}, "weight_algorithms": {"cross_layer_equalization": true, )"
                                         R"("bias_correction": true, "fold_scale_after_conv": true})"),
                                    "c");
  CHECK(on.weight_algorithms().cross_layer_equalization);
  CHECK(on.weight_algorithms().bias_correction);
  CHECK(on.weight_algorithms().fold_scale_after_conv);
  CHECK(error_of(wrap(R"("global": {}, "weight_algorithms": {"bias_correction": 1})")) ==
        "config.json: $.weight_algorithms.bias_correction: expected true or false, got 1");
  CHECK(error_of(wrap(R"("global": {}, "weight_algorithms": {"cle": true})"))
            .starts_with("config.json: $.weight_algorithms.cle: unknown key"));
  CHECK(off.weight_algorithms().smooth_quant_alpha == 0);
  CHECK(QConfig::parse(wrap(R"("global": {}, "weight_algorithms": {"smooth_quant_alpha": 0.75})"), "c")
            .weight_algorithms()
            .smooth_quant_alpha == 0.75);
  CHECK(error_of(wrap(R"("global": {}, "weight_algorithms": {"smooth_quant_alpha": 1.5})")) ==
        "config.json: $.weight_algorithms.smooth_quant_alpha: expected a number from 0 (off) to 1, got 1.5");
  CHECK(error_of(wrap(R"("global": {}, "weight_algorithms": {"smooth_quant_alpha": true})"))
            .starts_with("config.json: $.weight_algorithms.smooth_quant_alpha: expected a number"));
}
