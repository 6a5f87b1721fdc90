// QuantizeLinear / DequantizeLinear: ONNX spec examples, the fast paths against the reference twin on large
// random tensors (1, 2 and 4 threads), packing, scale dtypes and the errors kernels will surface.
#include "numerics/qdq.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <random>

#include "core/float_formats.h"

using namespace qtool;
using namespace qtool::numerics;

namespace {

template <class T>
std::vector<T> values(const Tensor& t) {
  return std::vector<T>(t.data<T>(), t.data<T>() + t.numel());
}

std::vector<int> int_values(const Tensor& t) {
  std::vector<int> v;
  for (int64_t i = 0; i < t.numel(); ++i) v.push_back(static_cast<int>(dtype_info(t.dtype()).load(t.raw(), i)));
  return v;
}

Tensor random_floats(Shape shape, uint32_t seed, float spread) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, spread);
  Tensor t(DType::Float32, std::move(shape));
  for (float& v : t.span<float>()) v = dist(rng);
  float* p = t.data<float>();
  const float specials[] = {NAN, INFINITY, -INFINITY, 0.0f, -0.0f, 1e-40f, 1e30f, -1e30f};
  for (size_t i = 0; i < std::size(specials) && static_cast<int64_t>(i * 97) < t.numel(); ++i) p[i * 97] = specials[i];
  return t;
}

Tensor scales_for(Shape shape, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(0.005f, 0.2f);
  Tensor t(DType::Float32, std::move(shape));
  for (float& v : t.span<float>()) v = (rng() & 1) ? dist(rng) : 0.0625f;
  return t;
}

Tensor zero_points_for(DType dt, Shape shape, uint32_t seed) {
  std::mt19937 rng(seed);
  const DTypeInfo& info = dtype_info(dt);
  Tensor t = Tensor::zeros(dt, std::move(shape));
  if (info.cls != DTypeClass::Integer) return t;
  const int64_t lo = std::max<int64_t>(info.qmin, -300), hi = std::min<int64_t>(info.qmax, 300);
  for (int64_t i = 0; i < t.numel(); ++i)
    info.store(t.raw(), i, static_cast<float>(lo + static_cast<int64_t>(rng() % static_cast<uint32_t>(hi - lo + 1))),
               false);
  return t;
}

}  // namespace

TEST_CASE("QuantizeLinear and DequantizeLinear reproduce the ONNX spec examples") {
  // Operators.md QuantizeLinear example: x / 2 + 128, saturated to uint8, ties to even.
  const Tensor x = Tensor::from_vector<float>({6}, {0, 2, 3, 1000, -254, -1000});
  const Tensor s = Tensor::scalar<float>(2.0f);
  const Tensor zp = Tensor::scalar<uint8_t>(128);
  const Tensor y = quantize_linear(x, s, &zp, {});
  CHECK(values<uint8_t>(y) == std::vector<uint8_t>{128, 129, 130, 255, 1, 0});
  // Per-axis example (axis 1 of [1, 3, 3, 2]).
  const Tensor xa = Tensor::from_vector<float>(
      {1, 3, 3, 2}, {-162, 10, -100, 232, -20, -50, -76, 0, 0, 252, 32, -44, 245, -485, -960, -270, -375, -470});
  const Tensor sa = Tensor::from_vector<float>({3}, {2, 4, 5});
  const Tensor za = Tensor::from_vector<uint8_t>({3}, {84, 24, 196});
  const Tensor ya = quantize_linear(xa, sa, &za, {.axis = 1});
  CHECK(values<uint8_t>(ya) ==
        std::vector<uint8_t>{3, 89, 34, 200, 74, 59, 5, 24, 24, 87, 32, 13, 245, 99, 4, 142, 121, 102});
  // DequantizeLinear example.
  const Tensor q = Tensor::from_vector<uint8_t>({4}, {0, 3, 128, 255});
  const Tensor dq = dequantize_linear(q, s, &zp, {});
  CHECK(values<float>(dq) == std::vector<float>{-256, -250, 0, 254});
  // Blocked (opset 21): x [2, 4], blocks of 2 along axis 1 -> scale [2, 2].
  const Tensor xb = Tensor::from_vector<float>({2, 4}, {1, 2, 3, 4, -1, -2, -3, -4});
  const Tensor sb = Tensor::from_vector<float>({2, 2}, {1, 2, 0.5f, 4});
  const Tensor zb = Tensor::from_vector<int8_t>({2, 2}, {0, 1, -1, 2});
  const Tensor yb = quantize_linear(xb, sb, &zb, {.axis = 1, .block_size = 2});
  CHECK(values<int8_t>(yb) == std::vector<int8_t>{1, 2, 3, 3, -3, -5, 1, 1});  // 3/2=1.5->2, 4/2=2; -3/4->-1+2
  CHECK(values<float>(dequantize_linear(yb, sb, &zb, {.axis = 1, .block_size = 2})) ==
        std::vector<float>{1, 2, 4, 4, -1, -2, -4, -4});
}

TEST_CASE("rounding is half to even, saturation clamps, NaN goes to qmin") {
  const Tensor x = Tensor::from_vector<float>({9}, {0.5f, 1.5f, 2.5f, -0.5f, -1.5f, 1000, -1000, NAN, -0.0f});
  const Tensor s = Tensor::scalar<float>(1.0f);
  const Tensor zp = Tensor::scalar<int8_t>(0);
  CHECK(int_values(quantize_linear(x, s, &zp, {})) == std::vector<int>{0, 2, 2, 0, -2, 127, -128, -128, 0});
  const Tensor zp4 = Tensor::zeros(DType::Int4, {});
  CHECK(int_values(quantize_linear(x, s, &zp4, {})) == std::vector<int>{0, 2, 2, 0, -2, 7, -8, -8, 0});
  // No zero point: output_dtype, or uint8 by default.
  CHECK(quantize_linear(x, s, nullptr, {.output_dtype = DType::Int16}).dtype() == DType::Int16);
  CHECK(quantize_linear(x, s, nullptr, {}).dtype() == DType::UInt8);
  // PyTorch multiplies by 1/scale: 0.3 / 0.1 and 0.3 * (1 / 0.1) round differently in float32.
  const Tensor x3 = Tensor::from_vector<float>({1}, {0.35f});
  const Tensor s3 = Tensor::scalar<float>(0.1f);
  CHECK(int_values(quantize_linear(x3, s3, &zp, {})) == int_values(quantize_linear_ref(x3, s3, &zp, {})));
  const int div = int_values(quantize_linear(x3, s3, &zp, {}))[0];
  const int mul = int_values(quantize_linear(x3, s3, &zp, {.scale_apply = ScaleApply::MultiplyReciprocal}))[0];
  CHECK(div == static_cast<int>(std::nearbyint(0.35f / 0.1f)));
  CHECK(mul == static_cast<int>(std::nearbyint(0.35f * (1.0f / 0.1f))));
}

TEST_CASE("fast paths equal the reference twin for every output dtype and granularity, on 1, 2 and 4 threads") {
  const DType out_types[] = {DType::Int8,           DType::UInt8,         DType::Int16,        DType::UInt16,
                             DType::Int4,           DType::UInt4,         DType::Float8E4M3FN, DType::Float8E5M2,
                             DType::Float8E4M3FNUZ, DType::Float8E5M2FNUZ};
  struct Gran {
    Shape x, scale;
    int64_t axis, block;
  };
  const Gran grans[] = {
      {{7, 33, 1001}, {}, 0, 0},           // per-tensor, odd element count
      {{5, 37, 523}, {37}, 1, 0},          // per-axis, middle axis
      {{129, 1031}, {1031}, -1, 0},        // per-axis, last axis (inner = 1)
      {{64, 1027}, {64, 33}, 1, 32},       // blocked along the last axis, ragged last block
      {{70, 9, 131}, {3, 9, 131}, 0, 32},  // blocked along the first axis
  };
  uint32_t seed = 1;
  for (const Gran& g : grans) {
    for (DType out : out_types) {
      INFO("out " << dtype_name(out) << " x " << shape_str(g.x) << " scale " << shape_str(g.scale));
      const bool fp8 = dtype_info(out).cls == DTypeClass::Float;
      const Tensor x = random_floats(g.x, seed++, fp8 ? 200.0f : 8.0f);
      const Tensor s = fp8 ? Tensor::from_vector<float>(
                                 g.scale, std::vector<float>(static_cast<size_t>(shape_numel(g.scale)), 0.75f))
                           : scales_for(g.scale, seed++);
      const Tensor zp = zero_points_for(out, g.scale, seed++);
      for (bool sat : {true, false}) {
        if (!fp8 && !sat) continue;
        const QdqAttrs a{.axis = g.axis, .block_size = g.block, .saturate = sat};
        const Tensor ref = quantize_linear_ref(x, s, &zp, a);
        for (int threads : {1, 2, 4}) CHECK(quantize_linear(x, s, &zp, a, threads).same_as(ref));
        const Tensor dref = dequantize_linear_ref(ref, s, &zp, a);
        for (int threads : {1, 2, 4}) CHECK(dequantize_linear(ref, s, &zp, a, threads).same_as(dref));
      }
    }
  }
}

TEST_CASE("float16 and bfloat16 inputs and scales") {
  const Tensor x = Tensor::from_vector<float>({5}, {-1.25f, 0.5f, 3.0f, 100.0f, -0.1f});
  Tensor x16(DType::Float16, {5}), xbf(DType::BFloat16, {5});
  for (int i = 0; i < 5; ++i) {
    x16.data<Float16>()[i].bits = float_to_float16(x.data<float>()[i]);
    xbf.data<BFloat16>()[i].bits = float_to_bfloat16(x.data<float>()[i]);
  }
  const Tensor s16 = Tensor::scalar<Float16>(Float16{float_to_float16(0.5f)});
  const Tensor zp = Tensor::scalar<int8_t>(-3);
  const Tensor y = quantize_linear(x16, s16, &zp, {});
  CHECK(int_values(y) == std::vector<int>{-5, -2, 3, 127, -3});
  CHECK(quantize_linear(xbf, s16, &zp, {}).same_as(quantize_linear_ref(xbf, s16, &zp, {})));
  const Tensor d = dequantize_linear(y, s16, &zp, {});
  CHECK(d.dtype() == DType::Float16);  // DequantizeLinear's output dtype is the scale's
  CHECK(float16_to_float(d.data<Float16>()[0].bits) == -1.0f);
  CHECK(d.same_as(dequantize_linear_ref(y, s16, &zp, {})));
}

TEST_CASE("4-bit outputs are packed two per byte, low nibble first") {
  const Tensor x = Tensor::from_vector<float>({5}, {1, -2, 3, -8, 7});
  const Tensor s = Tensor::scalar<float>(1.0f);
  const Tensor zp = Tensor::zeros(DType::Int4, {});
  const Tensor y = quantize_linear(x, s, &zp, {});
  REQUIRE(y.nbytes() == 3);
  CHECK(std::to_integer<int>(y.raw()[0]) == 0xE1);  // -2 = 0xE in the high nibble, 1 low
  CHECK(std::to_integer<int>(y.raw()[1]) == 0x83);
  CHECK(std::to_integer<int>(y.raw()[2]) == 0x07);  // last nibble's partner is 0
  CHECK(int_values(y) == std::vector<int>{1, -2, 3, -8, 7});
}

TEST_CASE("shape and dtype errors name the ONNX input") {
  const Tensor x = Tensor::from_vector<float>({2, 3}, {1, 2, 3, 4, 5, 6});
  const Tensor s3 = Tensor::from_vector<float>({3}, {1, 1, 1});
  const Tensor s2 = Tensor::from_vector<float>({2}, {1, 1});
  const Tensor zp2 = Tensor::from_vector<int8_t>({2}, {0, 0});
  using Catch::Matchers::Contains;
  CHECK_THROWS_WITH(quantize_linear(x, s3, nullptr, {.axis = 0}), Contains("y_scale") && Contains("axis 0"));
  CHECK_THROWS_WITH(quantize_linear(x, s2, &zp2, {.axis = 1}), Contains("y_scale has shape [2]"));
  CHECK_THROWS_WITH(quantize_linear(x, s3, &zp2, {.axis = 1}), Contains("y_zero_point has shape [2]"));
  CHECK_THROWS_WITH(dequantize_linear(Tensor::from_vector<int8_t>({2}, {1, 2}), s3, nullptr, {.axis = 0}),
                    Contains("x_scale"));
  CHECK_THROWS_WITH(quantize_linear(x, s3, nullptr, {.axis = 5}), Contains("axis 5 is out of range"));
  CHECK_THROWS_WITH(
      quantize_linear(x, Tensor::from_vector<float>({2, 1}, {1, 1}), nullptr, {.axis = 1, .block_size = 2}),
      Contains("needs shape [2,2]"));
  CHECK_THROWS_AS(quantize_linear(Tensor::from_vector<int8_t>({1}, {1}), s3, nullptr, {}), UnsupportedError);
  CHECK_THROWS_AS(quantize_linear(x, Tensor::scalar<int32_t>(1), nullptr, {}), UnsupportedError);
  CHECK_THROWS_WITH(quantize_linear(x, Tensor::scalar<float>(1), &zp2, {.output_dtype = DType::UInt8}),
                    Contains("output_dtype uint8 differs"));
  CHECK_THROWS_AS(quantize_linear(x, Tensor::scalar<float>(1), nullptr, {.output_dtype = DType::Int32}),
                  UnsupportedError);
  const Tensor zu = Tensor::from_vector<uint8_t>({2}, {0, 0});
  CHECK_THROWS_WITH(dequantize_linear(Tensor::from_vector<int8_t>({2}, {1, 2}), s2, &zu, {.axis = 0}),
                    Contains("x_zero_point has dtype uint8"));
}
