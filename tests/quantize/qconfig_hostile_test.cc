// Hostile QConfigs and calibration tables: RE2 regexes (linear time, compiled once, bad syntax named by rule),
// 10,000-level JSON, numbers beyond double, fixed scales that are no float and zero points outside the dtype,
// calibration tables of another model.
#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <string>

#include "calib/calibration_table.h"
#include "core/error.h"
#include "quantize/qconfig.h"
#include "qconfig_error.h"

using namespace qtool;
using namespace qtool::quantize;

namespace {

std::string wrap(const std::string& body) {
  return R"({"format": "qtool-qconfig", "version": 1, "global": {}, )" + body + "}";
}

using qconfig_testing::error_of;

std::string regex_rule(const std::string& pattern) {
  return wrap(R"("node_name_regex": [{"pattern": )" + pattern + R"(, "rule": null}])");
}

}  // namespace

TEST_CASE("qconfig hostile: nested quantifiers on a long name match in linear time") {
  const QConfig cfg = QConfig::parse(regex_rule(R"("(a+)+$")"), "config.json");
  const std::string name = std::string(100000, 'a') + "!";
  const auto t0 = std::chrono::steady_clock::now();
  const NodeQuant q = cfg.resolve(name, "Conv");  // std::regex: exponential backtracking, or a stack overflow
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  CHECK(q.quantized);  // no match: the rule (null) does not apply
  CHECK(s < 1.0);
  CHECK_FALSE(cfg.resolve(std::string(100000, 'a'), "Conv").quantized);  // matches: kept float
}

TEST_CASE("qconfig hostile: a pattern RE2 cannot compile names the rule") {
  CHECK_THAT(error_of(regex_rule(R"("(?<=a)b")")),
             Catch::Contains("config.json: $.node_name_regex[0].pattern: bad regular expression") &&
                 Catch::Contains("RE2 syntax"));
  CHECK_THAT(error_of(regex_rule(R"("(\\w)\\1")")), Catch::Contains("$.node_name_regex[0].pattern"));
  CHECK_THAT(error_of(regex_rule(R"("a{1,5000}")")), Catch::Contains("$.node_name_regex[0].pattern"));
}

TEST_CASE("qconfig hostile: deep nesting and out-of-range numbers are bad input naming the JSON path") {
  const std::string deep = std::string(10000, '[') + std::string(10000, ']');
  CHECK_THAT(error_of(deep), Catch::Contains("config.json: JSON nested more than 64 levels"));
  CHECK_THAT(error_of(wrap(R"("tensors": {"t": {"scale": 1e400, "zero_point": 0}})")),
             Catch::Contains("config.json: $.tensors.t.scale: number overflow parsing '1e400'"));
  CHECK_THAT(error_of(wrap(R"("op_types": {"Conv": {"weight": {"block_size": 18446744073709551615}}})")),
             Catch::Contains("$.op_types.Conv.weight.block_size: integer 18446744073709551615 is too large"));
  CHECK_THROWS_WITH(calib::calibration_from_json(deep, "calib.json"),
                    Catch::Contains("calib.json: JSON nested more than 64 levels"));
  CHECK_THROWS_WITH(
      calib::calibration_from_json(R"({"format": "qtool-calibration", "version": 1, "tensors": {"x": {"min": -1e999}}})",
                                   "calib.json"),
      Catch::Contains("calib.json: $.tensors.x.min: number overflow"));
}

TEST_CASE("qconfig hostile: fixed scales must be normal, finite floats and zero points fit the dtype") {
  auto scale = [](const std::string& s, const std::string& zp, const std::string& dtype = "") {
    return error_of(wrap(R"("op_types": {"Sigmoid": {"output": {)" + dtype + R"("scale": )" + s +
                         R"(, "zero_point": )" + zp + "}}}"));
  };
  CHECK_THAT(scale("1e-40", "0"), Catch::Contains("$.op_types.Sigmoid.output.scale: scale 1e-40 is below the smallest"));
  CHECK_THAT(scale("1e39", "0"), Catch::Contains("absurdly large"));
  CHECK_THAT(scale("0", "0"), Catch::Contains("must be positive"));
  CHECK_THAT(scale("0.1", "-1", R"("dtype": "uint8", )"),
             Catch::Contains("$.op_types.Sigmoid.output.zero_point: zero_point -1 is outside the range of uint8"));
  CHECK_THAT(scale("0.1", "100000"), Catch::Contains("fits no quantized dtype"));
  CHECK(scale("0.00390625", "0") == "(no error)");
  // A zero point valid for some dtype but not the one resolved on another level: named at resolution.
  const QConfig cfg = QConfig::parse(wrap(R"("op_types": {"Conv": {"activation": {"scale": 0.1, "zero_point": -5}}})"),
                                     "config.json");
  CHECK_THROWS_WITH(cfg.resolve("c1", "Conv"), Catch::Contains("$.op_types.Conv (node \"c1\"): zero_point -5 is "
                                                               "outside the range of uint8"));
}

TEST_CASE("qconfig hostile: a calibration table of another model is refused") {
  const std::filesystem::path model = std::filesystem::path(QTOOL_SOURCE_DIR) / "models" / "tiny_conv.onnx";
  calib::CalibrationTable t;
  t.model = "other.onnx";
  t.model_sha256 = std::string(64, '0');
  CHECK_THROWS_WITH(calib::check_calibration_model(t, model, "c.json"),
                    Catch::Contains("calibration file 'c.json' was made for model 'other.onnx'") &&
                        Catch::Contains("--allow-calib-mismatch"));
  t.model_sha256.clear();  // nothing recorded: nothing to compare
  CHECK_NOTHROW(calib::check_calibration_model(t, model, "c.json"));
}
