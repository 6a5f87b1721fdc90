// Choosing scale and zero point: PyTorch golden values (scripts/golden/gen_torch_qparams.py, torch 1.13),
// the torch vs ONNX Runtime symmetric conventions, ranges, FP8 scales and degenerate tensors.
#include "numerics/qparams.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "numerics/qdq.h"
#include "test_paths.h"

using namespace qtool;
using namespace qtool::numerics;

namespace {
nlohmann::json golden() {
  std::ifstream in(test::source_dir() / "tests/numerics/golden/torch_qparams.json");
  REQUIRE(in.good());
  return nlohmann::json::parse(in);
}
DType dtype_of(const std::string& n) { return n == "int8" ? DType::Int8 : DType::UInt8; }
}  // namespace

TEST_CASE("observer qparams equal torch MinMaxObserver.calculate_qparams") {
  const auto g = golden();
  int checked = 0;
  for (const auto& o : g["observers"]) {
    QSpec spec;
    spec.dtype = dtype_of(o["dtype"]);
    spec.mapping = o["scheme"] == "symmetric" ? QMapping::Symmetric : QMapping::Asymmetric;
    if (o["custom_range"]) {
      spec.range = QRange::Explicit;
      spec.quant_min = o["quant_min"];
      spec.quant_max = o["quant_max"];
    } else {
      spec.range = o["reduce_range"] ? QRange::ReduceRange : QRange::Full;
    }
    spec.convention = SymmetricScaleConvention::TorchHalfRange;
    INFO(o.dump());
    const QBounds b = quant_bounds(spec);
    CHECK(b.qmin == o["quant_min"].get<int64_t>());
    CHECK(b.qmax == o["quant_max"].get<int64_t>());
    const QParams p = choose_qparams(o["min"].get<float>(), o["max"].get<float>(), spec);
    CHECK(p.scale == o["scale"].get<float>());
    CHECK(p.zero_point == o["zero_point"].get<int64_t>());
    ++checked;
  }
  CHECK(checked > 100);
}

TEST_CASE("per-channel qparams equal torch PerChannelMinMaxObserver") {
  const auto g = golden();  // kept alive for the loop (a temporary's element would dangle)
  for (const auto& o : g["per_channel_observers"]) {
    INFO(o["dtype"] << " " << o["scheme"]);
    const Shape shape = o["shape"].get<Shape>();
    const Tensor x = Tensor::from_vector<float>(shape, o["x"].get<std::vector<float>>());
    QSpec spec{.dtype = dtype_of(o["dtype"]),
               .mapping = o["scheme"] == "symmetric" ? QMapping::Symmetric : QMapping::Asymmetric};
    const QParamTensors p = choose_qparams(x, {.kind = Granularity::PerChannel, .axis = o["axis"]}, spec);
    REQUIRE(p.scale.shape() == Shape{shape[0]});
    const auto want_s = o["scale"].get<std::vector<float>>();
    const auto want_z = o["zero_point"].get<std::vector<int>>();
    for (size_t c = 0; c < want_s.size(); ++c) {
      CHECK(p.scale.data<float>()[c] == want_s[c]);
      CHECK(static_cast<int>(dtype_info(spec.dtype).load(p.zero_point.raw(), static_cast<int64_t>(c))) == want_z[c]);
    }
  }
}

TEST_CASE("quantize with MultiplyReciprocal equals torch quantize_per_tensor / quantize_per_channel") {
  const auto g = golden();
  for (const auto& c : g["quantize_per_tensor"]) {
    const auto xs = c["x"].get<std::vector<float>>();
    const Tensor x = Tensor::from_vector<float>({static_cast<int64_t>(xs.size())}, xs);
    const Tensor s = Tensor::scalar<float>(c["scale"].get<float>());
    const DType dt = dtype_of(c["dtype"]);
    Tensor zp = Tensor::zeros(dt, {});
    dtype_info(dt).store(zp.raw(), 0, c["zero_point"].get<float>(), false);
    const Tensor y = quantize_linear(x, s, &zp, {.scale_apply = ScaleApply::MultiplyReciprocal});
    const auto want = c["q"].get<std::vector<int>>();
    int diff = 0;
    for (int64_t i = 0; i < y.numel(); ++i)
      diff += static_cast<int>(dtype_info(dt).load(y.raw(), i)) != want[static_cast<size_t>(i)];
    CHECK(diff == 0);
  }
  for (const auto& c : g["quantize_per_channel"]) {
    const Shape shape = c["shape"].get<Shape>();
    const Tensor x = Tensor::from_vector<float>(shape, c["x"].get<std::vector<float>>());
    const Tensor s = Tensor::from_vector<float>({shape[0]}, c["scale"].get<std::vector<float>>());
    const DType dt = dtype_of(c["dtype"]);
    Tensor zp = Tensor::zeros(dt, {shape[0]});
    const auto zps = c["zero_point"].get<std::vector<float>>();
    for (size_t i = 0; i < zps.size(); ++i) dtype_info(dt).store(zp.raw(), static_cast<int64_t>(i), zps[i], false);
    const Tensor y = quantize_linear(x, s, &zp, {.axis = 0, .scale_apply = ScaleApply::MultiplyReciprocal});
    const auto want = c["q"].get<std::vector<int>>();
    int diff = 0;
    for (int64_t i = 0; i < y.numel(); ++i)
      diff += static_cast<int>(dtype_info(dt).load(y.raw(), i)) != want[static_cast<size_t>(i)];
    CHECK(diff == 0);
  }
}

TEST_CASE("symmetric conventions: torch amax/127.5 vs ONNX Runtime amax/127") {
  QSpec torch_spec{.dtype = DType::Int8, .mapping = QMapping::Symmetric};
  QSpec ort_spec = torch_spec;
  ort_spec.convention = SymmetricScaleConvention::OrtMaxQ;
  const QParams t = choose_qparams(-2.0f, 1.0f, torch_spec);
  const QParams o = choose_qparams(-2.0f, 1.0f, ort_spec);
  CHECK(t.scale == 2.0f / 127.5f);
  CHECK(o.scale == 2.0f / 127.0f);
  CHECK(t.zero_point == 0);
  CHECK(o.zero_point == 0);
  // Narrow range with torch's formula is the ORT scale too.
  torch_spec.range = QRange::Narrow;
  CHECK(quant_bounds(torch_spec).qmin == -127);
  CHECK(choose_qparams(-2.0f, 1.0f, torch_spec).scale == 2.0f / 127.0f);
  // Unsigned symmetric: the middle of the range (torch 128, ORT round-half-even(127.5) = 128).
  QSpec u{.dtype = DType::UInt8, .mapping = QMapping::Symmetric};
  CHECK(choose_qparams(-1.0f, 1.0f, u).zero_point == 128);
  u.convention = SymmetricScaleConvention::OrtMaxQ;
  CHECK(choose_qparams(-1.0f, 1.0f, u).zero_point == 128);
  CHECK(choose_qparams(-1.0f, 1.0f, u).scale == 1.0f / 127.5f);
  // int4 / int16 follow the same formulas.
  QSpec i4{.dtype = DType::Int4, .mapping = QMapping::Symmetric, .convention = SymmetricScaleConvention::OrtMaxQ};
  CHECK(choose_qparams(-3.5f, 0.0f, i4).scale == 0.5f);
  i4.convention = SymmetricScaleConvention::TorchHalfRange;
  CHECK(choose_qparams(-3.75f, 0.0f, i4).scale == 0.5f);
  CHECK(quant_bounds({.dtype = DType::Int16, .range = QRange::ReduceRange}).qmax == 16383);
}

TEST_CASE("degenerate ranges give a valid scale and FP8 scales use the format maximum") {
  for (QMapping m : {QMapping::Symmetric, QMapping::Asymmetric}) {
    for (float v : {0.0f, 1.5f, -2.5f, 1e-30f}) {
      const QParams p = choose_qparams(v, v, {.dtype = DType::UInt8, .mapping = m});
      CHECK(std::isfinite(p.scale));
      CHECK(p.scale > 0.0f);
      CHECK(p.scale >= std::numeric_limits<float>::epsilon());
      CHECK(p.zero_point >= 0);
      CHECK(p.zero_point <= 255);
    }
  }
  const Tensor zeros = Tensor::zeros(DType::Float32, {4, 5});
  const QParamTensors zq = choose_qparams(zeros, {.kind = Granularity::PerChannel, .axis = 1}, {});
  for (float s : zq.scale.span<float>()) CHECK(s == std::numeric_limits<float>::epsilon());
  CHECK(choose_qparams(-896.0f, 10.0f, {.dtype = DType::Float8E4M3FN, .mapping = QMapping::Symmetric}).scale == 2.0f);
  CHECK(choose_qparams(0.0f, 57344.0f, {.dtype = DType::Float8E5M2, .mapping = QMapping::Symmetric}).scale == 1.0f);
  CHECK_THROWS_AS(choose_qparams(0.0f, 1.0f, {.dtype = DType::Float8E4M3FN, .mapping = QMapping::Asymmetric}),
                  UsageError);
  CHECK_THROWS_AS(choose_qparams(NAN, 1.0f, {}), BadInputError);
  CHECK_THROWS_AS(choose_qparams(2.0f, 1.0f, {}), BadInputError);
  CHECK_THROWS_AS(quant_bounds({.range = QRange::Explicit, .quant_min = 5, .quant_max = 10}), UsageError);
}

TEST_CASE("per-block min/max and qparams feed quantize_linear directly") {
  Tensor x(DType::Float32, {3, 10});
  for (int64_t i = 0; i < 30; ++i) x.data<float>()[i] = static_cast<float>(i % 10) - 4.0f;
  x.data<float>()[25] = NAN;  // ignored by the statistics
  const QGranularity g{.kind = Granularity::PerBlock, .axis = 1, .block_size = 4};
  const MinMax mm = compute_minmax(x, g);
  CHECK(mm.shape == Shape{3, 3});
  CHECK(mm.min[0] == -4.0f);
  CHECK(mm.max[0] == -1.0f);
  CHECK(mm.min[2] == 4.0f);  // last, short block: 4, 5
  CHECK(mm.max[2] == 5.0f);
  CHECK(mm.min[7] == 0.0f);  // block [0, 1, NaN, 3] of row 2
  CHECK(mm.max[7] == 3.0f);
  const QSpec spec{.dtype = DType::Int8, .mapping = QMapping::Asymmetric};
  const QParamTensors p = qparams_from_minmax(mm, spec);
  const Tensor y = quantize_linear(x, p.scale, &p.zero_point, {.axis = 1, .block_size = 4});
  const Tensor back = dequantize_linear(y, p.scale, &p.zero_point, {.axis = 1, .block_size = 4});
  for (int64_t i = 0; i < 30; ++i) {
    if (i == 25) continue;
    const int64_t blk = (i / 10) * 3 + (i % 10) / 4;
    CHECK(std::fabs(back.data<float>()[i] - x.data<float>()[i]) <= p.scale.data<float>()[blk] / 2 + 1e-6f);
  }
  const MinMax pt = compute_minmax(x, {}, 2);
  CHECK(pt.min[0] == -4.0f);
  CHECK(pt.max[0] == 5.0f);
}

TEST_CASE("per-channel and per-block min/max split over threads equal a direct scan of every group") {
  // Shapes whose groups vary along the outer rows, the axis or the inner columns, so every way of splitting the
  // work is taken; large enough (>= 65536 elements) to run threaded. NaNs are skipped as in the serial pass.
  struct Case {
    Shape shape;
    QGranularity g;
  };
  const std::vector<Case> cases = {
      {{2048, 40}, {.kind = Granularity::PerBlock, .axis = 0, .block_size = 32}},     // axis blocks, inner columns
      {{3000, 64}, {.kind = Granularity::PerBlock, .axis = 1, .block_size = 32}},     // outer rows (embedding-like)
      {{96, 24, 3, 3}, {.kind = Granularity::PerChannel, .axis = 0}},                 // conv weight, per output channel
      {{300, 250}, {.kind = Granularity::PerChannel, .axis = 1}},                     // MatMul weight, per column
      {{5, 4000, 7}, {.kind = Granularity::PerBlock, .axis = 1, .block_size = 100}},  // all three dims
      {{70, 2500}, {.kind = Granularity::PerChannel, .axis = 1}},  // runs of 1024 columns, the last one short
      {{9, 4000, 2}, {.kind = Granularity::PerBlock, .axis = 1, .block_size = 16}},  // runs of 32 blocks
  };
  for (const auto& c : cases) {
    INFO(shape_str(c.shape) << " axis " << c.g.axis << " block " << c.g.block_size);
    Tensor x(DType::Float32, c.shape);
    float* v = x.data<float>();
    for (int64_t i = 0; i < x.numel(); ++i) v[i] = std::sin(static_cast<float>(i) * 0.37f) * static_cast<float>(i % 13);
    v[x.numel() / 3] = NAN;
    const MinMax one = compute_minmax(x, c.g, 1);
    for (int threads : {2, 3, 8}) {
      const MinMax many = compute_minmax(x, c.g, threads);
      CHECK(many.shape == one.shape);
      CHECK(many.min == one.min);
      CHECK(many.max == one.max);
    }
    // Against a scan of each element's group, written out from the definition.
    const int64_t rank = x.rank(), axis = c.g.axis;
    int64_t outer = 1, inner = 1;
    for (int64_t d = 0; d < axis; ++d) outer *= x.dim(d);
    for (int64_t d = axis + 1; d < rank; ++d) inner *= x.dim(d);
    const int64_t len = x.dim(axis), block = c.g.kind == Granularity::PerBlock ? c.g.block_size : len;
    const int64_t blocks = (len + block - 1) / block;
    std::vector<float> lo(one.min.size(), INFINITY), hi(one.min.size(), -INFINITY);
    for (int64_t m = 0; m < outer; ++m)
      for (int64_t k = 0; k < len; ++k)
        for (int64_t n = 0; n < inner; ++n) {
          const float e = v[(m * len + k) * inner + n];
          if (std::isnan(e)) continue;
          const size_t s = c.g.kind == Granularity::PerChannel
                               ? static_cast<size_t>(k)
                               : static_cast<size_t>((m * blocks + k / block) * inner + n);
          lo[s] = std::min(lo[s], e);
          hi[s] = std::max(hi[s], e);
        }
    CHECK(one.min == lo);
    CHECK(one.max == hi);
  }
}
