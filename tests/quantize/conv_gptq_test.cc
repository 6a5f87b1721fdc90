// GPTQ for Conv weights (lib/quantize/weights/conv_gptq.cc), checked against brute force: the patch Hessians must
// give exactly the energy of the conv's output for any weight (column order, groups, strides, pads, dilations),
// and the rounding must lower that output error below round to nearest's, reporting the error it really has.
#include "quantize/weights/conv_gptq.h"

#include <onnx/onnx_pb.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <random>

#include "quantize/qparams.h"
#include "runtime/model_builder.h"
#include "runtime/session.h"

using namespace qtool;
using namespace qtool::quantize;

namespace {

struct ConvCase {
  std::vector<int64_t> x_shape, w_shape, strides, pads, dilations;
  int64_t group = 1;
  std::string auto_pad;
};

onnx::ModelProto conv_model(const ConvCase& c, const Tensor& w) {
  test::ModelBuilder b;
  b.input("x", DType::Float32, c.x_shape);
  b.initializer("w", w);
  onnx::NodeProto& n = b.node("Conv", {"x", "w"}, {"y"}, "conv");
  test::ModelBuilder::attr(n, "group", c.group);
  if (!c.strides.empty()) test::ModelBuilder::attr(n, "strides", c.strides);
  if (!c.pads.empty()) test::ModelBuilder::attr(n, "pads", c.pads);
  if (!c.dilations.empty()) test::ModelBuilder::attr(n, "dilations", c.dilations);
  if (!c.auto_pad.empty()) {
    auto* a = n.add_attribute();
    a->set_name("auto_pad");
    a->set_type(onnx::AttributeProto::STRING);
    a->set_s(c.auto_pad);
  }
  b.output("y");
  return b.model;
}

// Inputs whose neighbouring pixels are correlated (a random walk along each row), as images are.
std::vector<std::map<std::string, Tensor>> smooth_inputs(const std::vector<int64_t>& shape, int count, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<std::map<std::string, Tensor>> out;
  for (int s = 0; s < count; ++s) {
    Tensor x = Tensor::zeros(DType::Float32, shape);
    float* d = x.data<float>();
    const int64_t row = shape.back();
    for (int64_t r = 0; r < x.numel() / row; ++r) {
      float v = nd(rng);
      for (int64_t j = 0; j < row; ++j) d[r * row + j] = v = 0.9f * v + 0.45f * nd(rng);
    }
    out.push_back({{"x", x}});
  }
  return out;
}

Tensor random_weight(const std::vector<int64_t>& shape, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, 0.3f);
  Tensor w = Tensor::zeros(DType::Float32, shape);
  for (int64_t i = 0; i < w.numel(); ++i) w.data<float>()[i] = nd(rng);
  return w;
}

// Brute force: sum over samples of the squared output of the conv with weight d.
double output_energy(const ConvCase& c, const Tensor& d, const std::vector<std::map<std::string, Tensor>>& xs) {
  const runtime::Session session(conv_model(c, d), {.threads = 1});
  double e = 0;
  for (const auto& x : xs) {
    const Tensor y = session.run(x).at("y");
    for (int64_t i = 0; i < y.numel(); ++i) e += double(y.data<float>()[i]) * y.data<float>()[i];
  }
  return e;
}

// The same from the Hessians: sum over groups and output channels of d_o^T H_g d_o.
double hessian_energy(const LayerHessian& h, const Tensor& d) {
  const int64_t O = d.dim(0), K = h.k, per = O / h.groups;
  double e = 0;
  for (int64_t o = 0; o < O; ++o) {
    const double* hg = h.h.data() + (o / per) * K * K;
    const float* v = d.data<float>() + o * K;
    for (int64_t a = 0; a < K; ++a)
      for (int64_t b = 0; b < K; ++b) e += v[a] * hg[a * K + b] * v[b];
  }
  return e;
}

Tensor minus_dequantized(const Tensor& w, const WeightResult& r) {
  const std::vector<float> s = r.params.scales();
  const int64_t per = w.numel() / w.dim(0);
  Tensor d = w.clone();
  for (int64_t i = 0; i < w.numel(); ++i)
    d.data<float>()[i] -= dtype_info(r.codes.dtype()).load(r.codes.raw(), i) * s[static_cast<size_t>(i / per)];
  return d;
}

}  // namespace

TEST_CASE("conv gptq: the patch Hessians give the conv's output energy for any weight") {
  const std::vector<ConvCase> cases = {
      {{2, 4, 7, 6}, {6, 2, 3, 3}, {2, 1}, {1, 0, 0, 1}, {1, 2}, 2, ""},  // groups, strides, uneven pads, dilation
      {{1, 3, 8, 9}, {3, 1, 3, 3}, {2, 2}, {}, {}, 3, "SAME_UPPER"},      // depthwise, auto_pad
      {{2, 5, 4, 4}, {7, 5, 1, 1}, {}, {}, {}, 1, ""},                    // pointwise
      {{1, 2, 6, 5}, {4, 2, 2, 3}, {}, {}, {}, 1, "SAME_LOWER"},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    INFO("case " << i);
    const ConvCase& c = cases[i];
    const auto xs = smooth_inputs(c.x_shape, 2, 7 + static_cast<unsigned>(i));
    const LayerHessians hs = collect_conv_hessians(conv_model(c, random_weight(c.w_shape, 1)), {"w"}, xs, 1);
    REQUIRE(hs.count("w") == 1);
    const LayerHessian& h = hs.at("w");
    CHECK(h.groups == c.group);
    CHECK(h.k == c.w_shape[1] * c.w_shape[2] * c.w_shape[3]);
    for (unsigned seed : {11u, 12u}) {
      const Tensor d = random_weight(c.w_shape, seed);
      CHECK(hessian_energy(h, d) == Approx(output_energy(c, d, xs)).epsilon(1e-5));
    }
  }
}

TEST_CASE("conv gptq: lower output error than round to nearest, FP8 and int8, grouped and depthwise") {
  const std::vector<ConvCase> cases = {
      {{3, 4, 24, 24}, {6, 2, 3, 3}, {}, {1, 1, 1, 1}, {}, 2, ""},
      {{3, 8, 24, 24}, {8, 1, 3, 3}, {}, {1, 1, 1, 1}, {}, 8, ""},
  };
  for (DType dt : {DType::Float8E4M3FN, DType::Int8})
    for (size_t i = 0; i < cases.size(); ++i) {
      INFO(dtype_name(dt) << " case " << i);
      const ConvCase& c = cases[i];
      const Tensor w = random_weight(c.w_shape, 21);
      const auto xs = smooth_inputs(c.x_shape, 3, 31);
      const LayerHessians hs = collect_conv_hessians(conv_model(c, w), {"w"}, xs, 1);
      const LayerHessian& h = hs.at("w");
      REQUIRE(h.rows >= kConvGptqRowsPerColumn * h.k);
      TensorSettings s;
      s.dtype = dt;
      s.symmetric = true;
      s.granularity = Granularity::PerChannel;
      s.algorithm = WeightAlgorithm::Rtn;
      const WeightResult rtn = quantize_weight_values(WeightInput{w, s, 0, 1, &h});
      s.algorithm = WeightAlgorithm::Gptq;
      const WeightResult gptq = quantize_weight_values(WeightInput{w, s, 0, 1, &h});
      CHECK(std::string(gptq.metric) == "output_sse");
      CHECK(gptq.codes.dtype() == dt);
      CHECK(gptq.params.scales() == rtn.params.scales());  // per-channel scales as RTN sets them
      const double e_rtn = output_energy(c, minus_dequantized(w, rtn), xs);
      const double e_gptq = output_energy(c, minus_dequantized(w, gptq), xs);
      CHECK(e_gptq < 0.8 * e_rtn);
      CHECK(gptq.error == Approx(e_gptq).epsilon(1e-4));  // the error it reports is the conv's, brute force
    }
}

TEST_CASE("conv gptq: a Hessian with too few rows per column rounds to nearest") {
  const ConvCase c{{1, 4, 5, 5}, {4, 4, 3, 3}, {}, {1, 1, 1, 1}, {}, 1, ""};  // 25 rows for 36 columns
  const Tensor w = random_weight(c.w_shape, 3);
  const LayerHessians hs = collect_conv_hessians(conv_model(c, w), {"w"}, smooth_inputs(c.x_shape, 1, 4), 1);
  TensorSettings s;
  s.dtype = DType::Float8E4M3FN;
  s.symmetric = true;
  s.granularity = Granularity::PerChannel;
  s.algorithm = WeightAlgorithm::Gptq;
  const WeightResult r = quantize_weight_values(WeightInput{w, s, 0, 1, &hs.at("w")});
  CHECK(std::string(r.metric) == "weight_sse");
  s.algorithm = WeightAlgorithm::Rtn;
  const WeightResult rtn = quantize_weight_values(WeightInput{w, s, 0, 1, &hs.at("w")});
  CHECK(r.error == rtn.error);
}
