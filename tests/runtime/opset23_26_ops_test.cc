// Ops and attributes of ai.onnx opsets 23-26 (docs/interpreter.md, "Opsets 22-26") against their formulas:
// RotaryEmbedding-23, Swish-24, DequantizeLinear-23 output_dtype under float32 promotion. tests/runtime/opsets_22_26.py
// checks the same ops against ONNX Runtime 1.30.
#include <catch2/catch.hpp>
#include <cmath>
#include <string>

#include "core/error.h"
#include "model_builder.h"
#include "runtime/session.h"

using qtool::DType;
using qtool::Tensor;
using qtool::runtime::Session;
using qtool::test::ModelBuilder;
using qtool::test::ramp;

TEST_CASE("RotaryEmbedding-23 rotates halves or interleaved pairs of the first rotary_embedding_dim values") {
  // X [1, 2 heads, 3 tokens, 6 values], rotary_embedding_dim 4 (values 4, 5 pass through), position ids 2, 0, 5.
  const int64_t H = 2, S = 3, D = 6, R = 4;
  const std::vector<int64_t> pos = {2, 0, 5};
  std::vector<float> cos_v(8 * 2), sin_v(8 * 2);
  for (int p = 0; p < 8; ++p)
    for (int i = 0; i < 2; ++i) {
      cos_v[p * 2 + i] = std::cos(0.3f * p * (i + 1));
      sin_v[p * 2 + i] = std::sin(0.3f * p * (i + 1));
    }
  for (int interleaved : {0, 1}) {
    INFO("interleaved " << interleaved);
    ModelBuilder b(23);
    b.input("x", DType::Float32, {1, H, S, D});
    b.initializer("cos", Tensor::from_vector<float>({8, 2}, cos_v));
    b.initializer("sin", Tensor::from_vector<float>({8, 2}, sin_v));
    b.initializer("pos", Tensor::from_vector<int64_t>({1, 3}, pos));
    auto& n = b.node("RotaryEmbedding", {"x", "cos", "sin", "pos"}, {"y"}, "rope");
    ModelBuilder::attr(n, "rotary_embedding_dim", R);
    ModelBuilder::attr(n, "interleaved", int64_t{interleaved});
    b.output("y");
    const Tensor x = ramp({1, H, S, D}, 0.7f);
    const Tensor y = Session(b.model).run({{"x", x}}).at("y");
    for (int64_t h = 0; h < H; ++h)
      for (int64_t s = 0; s < S; ++s) {
        const float* xv = x.data<float>() + (h * S + s) * D;
        const float* yv = y.data<float>() + (h * S + s) * D;
        for (int64_t i = 0; i < R / 2; ++i) {
          const int64_t i1 = interleaved ? 2 * i : i, i2 = interleaved ? 2 * i + 1 : i + R / 2;
          const double c = cos_v[pos[s] * 2 + i], sn = sin_v[pos[s] * 2 + i];
          CHECK(yv[i1] == Approx(c * xv[i1] - sn * xv[i2]).margin(1e-6));
          CHECK(yv[i2] == Approx(sn * xv[i1] + c * xv[i2]).margin(1e-6));
        }
        CHECK(yv[4] == xv[4]);
        CHECK(yv[5] == xv[5]);
      }
  }
}

TEST_CASE("RotaryEmbedding-23 refuses by name what its inputs cannot mean") {
  ModelBuilder b(23);
  b.input("x", DType::Float32, {1, 3, 8});  // 3-D X needs num_heads
  b.initializer("cos", Tensor::from_vector<float>({1, 3, 4}, std::vector<float>(12, 1.f)));
  b.initializer("sin", Tensor::from_vector<float>({1, 3, 4}, std::vector<float>(12, 0.f)));
  b.node("RotaryEmbedding", {"x", "cos", "sin"}, {"y"}, "rope3d");
  b.output("y");
  const Session s(b.model);
  CHECK_THROWS_WITH(s.run({{"x", ramp({1, 3, 8}, 0.1f)}}),
                    Catch::Contains("RotaryEmbedding 'rope3d'") && Catch::Contains("num_heads"));
}

TEST_CASE("Swish-24 is x * sigmoid(alpha * x)") {
  ModelBuilder b(24);
  b.input("x", DType::Float32, {2, 5});
  ModelBuilder::attr(b.node("Swish", {"x"}, {"y"}, "swish"), "alpha", 1.5f);
  b.output("y");
  const Tensor x = ramp({2, 5}, 0.3f);
  const Tensor y = Session(b.model).run({{"x", x}}).at("y");
  for (int i = 0; i < 10; ++i) {
    const double v = x.data<float>()[i];
    CHECK(y.data<float>()[i] == Approx(v / (1 + std::exp(-1.5 * v))).epsilon(1e-6).margin(1e-7));
  }
}

// qtool computes float16 in float32 (onnx/float32_promotion.h retargets output_dtype as it does Cast's `to`): y is the
// float32 product, not rounded to float16; before, the float16 output met its promoted neighbours as float16.
TEST_CASE("DequantizeLinear-23 output_dtype float16 runs in float32 as every float16 computation does") {
  ModelBuilder b(23);
  b.input("q", DType::Int8, {4});
  b.initializer("s", Tensor::from_vector<float>({}, {0.0123f}));
  ModelBuilder::attr(b.node("DequantizeLinear", {"q", "s"}, {"y16"}, "dq"), "output_dtype", int64_t{10});
  ModelBuilder::attr(b.node("Cast", {"y16"}, {"y"}, "back"), "to", int64_t{1});
  b.output("y");
  const std::vector<int8_t> qv = {-128, -3, 7, 127};
  const Tensor y = Session(b.model).run({{"q", Tensor::from_vector<int8_t>({4}, qv)}}).at("y");
  for (int i = 0; i < 4; ++i) CHECK(y.data<float>()[i] == static_cast<float>(qv[i]) * 0.0123f);
}
