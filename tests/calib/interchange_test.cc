// Calibration tables between runs and tools: merging tables (calib/table_merge.h) and TensorRT calibration caches
// (calib/trt_cache.h). Tiny tensors built inline; the real-model checks are in tests/calib/merge_interchange.py.
#include <bit>
#include <catch2/catch.hpp>
#include <random>
#include <vector>

#include "calib/calibrator.h"
#include "calib/table_merge.h"
#include "calib/trt_cache.h"
#include "core/error.h"

using namespace qtool;
using namespace qtool::calib;

namespace {

Tensor values(std::vector<float> v) { return Tensor::from_vector<float>({static_cast<int64_t>(v.size())}, v); }

// Two batches of `name` per part; part 1 spans a much wider range (the merged grid coarsens).
std::vector<Tensor> part(int which) {
  std::mt19937 rng(static_cast<uint32_t>(which));
  std::normal_distribution<float> nd(0.3f, which == 0 ? 0.5f : 40.0f);
  std::vector<Tensor> out;
  for (int b = 0; b < 2; ++b) {
    std::vector<float> v(3000);
    for (float& x : v) x = nd(rng);
    out.push_back(values(v));
  }
  return out;
}

CalibrationTable calibrate(const std::vector<std::vector<Tensor>>& parts, const CalibratorOptions& o) {
  Calibrator c(o);
  for (const auto& p : parts)
    for (const Tensor& t : p) c.observe("x", t);
  CalibrationTable table = c.finish();
  table.model_sha256 = "abc";
  table.samples = 2 * static_cast<int64_t>(parts.size());
  return table;
}

}  // namespace

TEST_CASE("merging the tables of two parts gives the table of one run over both, byte for byte") {
  for (bool symmetric : {false, true}) {
    CalibratorOptions o;
    o.histogram_bins = 512;
    o.target = {symmetric ? DType::Int8 : DType::UInt8, symmetric};
    const auto a = part(0), b = part(1);
    const CalibrationTable merged = merge_calibrations({{"a", calibrate({a}, o)}, {"b", calibrate({b}, o)}});
    CHECK(calibration_to_json(merged) == calibration_to_json(calibrate({a, b}, o)));
    // Order of the parts changes nothing but the recorded shape (same here).
    CHECK(calibration_to_json(merge_calibrations({{"b", calibrate({b}, o)}, {"a", calibrate({a}, o)}})) ==
          calibration_to_json(merged));
  }
}

TEST_CASE("a table whose histogram is not on qtool's grid, or that records torch_histogram, does not merge") {
  CalibratorOptions o;
  o.histogram_bins = 512;
  CalibrationTable t = calibrate({part(0)}, o);
  CalibrationTable shifted = t;
  shifted.tensors["x"].histogram.lo += shifted.tensors["x"].histogram.width / 3;
  CHECK_THROWS_AS(merge_calibrations({{"a", t}, {"b", shifted}}), BadInputError);
  CalibrationTable other = t;
  other.model_sha256 = "def";
  CHECK_THROWS_AS(merge_calibrations({{"a", t}, {"b", other}}), BadInputError);
  o.methods.insert(RangeMethod::TorchHistogram);
  const CalibrationTable torch = calibrate({part(0)}, o);
  try {
    merge_calibrations({{"a", torch}, {"b", torch}});
    FAIL("merged torch_histogram tables");
  } catch (const UnsupportedError& e) {
    CHECK(std::string(e.what()).find("torch_histogram") != std::string::npos);
  }
}

TEST_CASE("TensorRT cache: scale = amax / 127 as float32 bits in hex, read back as ±amax for every method") {
  CalibrationTable t;
  t.settings.methods = {RangeMethod::MinMax, RangeMethod::Entropy};
  TensorCalibration& a = t.tensors["conv1: out"];  // a name holding ": " itself
  a.minmax = Range{-3.0f, 5.0f};
  a.ranges[RangeMethod::MinMax] = *a.minmax;
  a.ranges[RangeMethod::Entropy] = Range{-2.0f, 1.27f};
  t.tensors["never_finite"];  // no value seen: left out
  const std::string text = trt_cache_from_table(t);
  const float scale = 2.0f / 127.0f;
  char hex[16];
  std::snprintf(hex, sizeof hex, "%x", std::bit_cast<uint32_t>(scale));
  CHECK(text == "TRT-8601-EntropyCalibration2\nconv1: out: " + std::string(hex) + "\n");

  const CalibrationTable back = table_from_trt_cache(text, "x.cache");
  REQUIRE(back.tensors.size() == 1);
  const TensorCalibration& b = back.tensors.at("conv1: out");
  CHECK(b.ranges.at(RangeMethod::Mse).hi == scale * 127.0f);
  CHECK(b.ranges.at(RangeMethod::Entropy).lo == -scale * 127.0f);
  // Export of the import: the same file (scale -> amax -> scale is exact for these scales).
  CHECK(trt_cache_from_table(back) == text);

  t.settings.methods = {RangeMethod::MinMax};
  CHECK(trt_cache_from_table(t, 10140).rfind("TRT-10140-MinMaxCalibration\n", 0) == 0);
}

TEST_CASE("TensorRT cache: scale -> amax -> scale round-trips for scales over many decades") {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> exponent(-20.0f, 10.0f);
  int exact = 0;
  for (int i = 0; i < 10000; ++i) {
    const float scale = std::exp2(exponent(rng));
    CalibrationTable t;
    t.settings.methods = {RangeMethod::MinMax};
    t.tensors["x"].minmax = Range{-scale * 127.0f, scale * 127.0f};
    const CalibrationTable back = table_from_trt_cache(trt_cache_from_table(t), "x");
    exact += back.tensors.at("x").minmax->hi == t.tensors.at("x").minmax->hi;
  }
  CHECK(exact == 10000);
}

TEST_CASE("TensorRT cache: malformed lines are errors naming the line") {
  auto error_of = [](const std::string& text) {
    try {
      table_from_trt_cache(text, "c.cache");
    } catch (const BadInputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  CHECK(error_of("TRT-8601-EntropyCalibration2\nx: 3c0zz\n").find("line 2") != std::string::npos);
  CHECK(error_of("TRT-8601-EntropyCalibration2\nx 3c00f7e0\n").find("line 2") != std::string::npos);
  CHECK(error_of("TRT-8601-EntropyCalibration2\nx: 7f800000\n").find("finite") != std::string::npos);
  CHECK(error_of("TRT-8601-EntropyCalibration2\nx: 1\nx: 1\n").find("twice") != std::string::npos);
  CHECK(error_of("TRT-8601-EntropyCalibration2\n").find("no tensor") != std::string::npos);
  CHECK(error_of("hello\n").find("line 1") != std::string::npos);
}
