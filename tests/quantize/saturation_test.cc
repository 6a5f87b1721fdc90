// saturation_safe int8 weights: the pairs ONNX Runtime's AVX2 u8s8 kernels add in int16 (quantize/saturation.h),
// and the scales weight_params chooses from them (quantize/qparams.h).
#include "quantize/saturation.h"

#include <catch2/catch.hpp>
#include <algorithm>
#include <cmath>

#include "quantize/qparams.h"

using namespace qtool;
using namespace qtool::quantize;

namespace {

onnx::NodeProto node(const std::string& op, int64_t group = 1) {
  onnx::NodeProto n;
  n.set_op_type(op);
  if (group != 1) {
    auto* a = n.add_attribute();
    a->set_name("group");
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(group);
  }
  return n;
}

TensorSettings int8_safe() {
  TensorSettings s;
  s.dtype = DType::Int8;
  s.symmetric = true;
  s.granularity = Granularity::PerChannel;
  s.saturation_safe = true;
  return s;
}

}  // namespace

TEST_CASE("saturation: MatMul pairs (2j, 2j+1) along K per output column, of the same sign") {
  // K = 4, N = 2. Column 0: 1, 1, 0, 0 -> pair (0,1) sums 2. Column 1: 1, 0, 1, 0 -> every pair sums 1.
  const Tensor w = Tensor::from_vector<float>({4, 2}, {1, 1, 1, 0, 0, 1, 0, 0});
  const auto sums = u8s8_pair_sums(node("MatMul"), w, 1);
  REQUIRE(sums);
  CHECK((*sums)[0] == 2.0);
  CHECK((*sums)[1] == 1.0);
  // Opposite signs never add up in the same direction.
  const Tensor mixed = Tensor::from_vector<float>({2, 1}, {1, -1});
  CHECK((*u8s8_pair_sums(node("MatMul"), mixed, 1))[0] == 1.0);
}

TEST_CASE("saturation: Conv pairs input channels of one tap, taps of a row for one input channel, nothing depthwise") {
  // [M=1, C=2, 1, 2]: channel 0 holds 1 at both taps, channel 1 is zero. Taps major, channels minor: pairs are
  // (c0, c1) at each tap -> 1. (A channel-major order would pair the two taps of channel 0 -> 2.)
  const Tensor w = Tensor::from_vector<float>({1, 2, 1, 2}, {1, 1, 0, 0});
  CHECK((*u8s8_pair_sums(node("Conv"), w, 0))[0] == 1.0);
  const Tensor single = Tensor::from_vector<float>({1, 1, 1, 2}, {1, 1});
  CHECK((*u8s8_pair_sums(node("Conv"), single, 0))[0] == 2.0);
  const Tensor dw = Tensor::from_vector<float>({2, 1, 1, 2}, {1, 1, 1, 1});
  CHECK((*u8s8_pair_sums(node("Conv", 2), dw, 0)) == std::vector<double>{0.0, 0.0});
  CHECK_FALSE(u8s8_pair_sums(node("ConvTranspose"), w, 0));  // unknown order: the caller assumes the worst
}

TEST_CASE("saturation: a channel whose pair could overflow gets a wider scale and no code pair exceeds 128") {
  // Column 0: neighbours 1 and 0.93 (same sign): int8 at amax/127 would code them 127 + 118. Column 1: 1 beside -0.47
  // (opposite signs never add up), 0.23 beside -0.13: its worst same-sign pair is 1 + 0.
  const Tensor w = Tensor::from_vector<float>({4, 2}, {1, 1, 0.93f, -0.47f, 0.37f, 0.23f, 0.11f, -0.13f});
  const TensorSettings s = int8_safe();
  const QParams p = weight_params(w, s, 1, u8s8_pair_sums(node("MatMul"), w, 1));
  const auto sc = p.scales();
  CHECK(sc[0] == Approx(1.93 / 126));
  CHECK(sc[1] == Approx(1.0 / 126));  // 126 codes: the margin for rounding (qparams.h), nothing more
  const Tensor q = quantize_tensor(w, p);
  const int8_t* c = q.data<int8_t>();
  for (int n = 0; n < 2; ++n)
    for (int k = 0; k < 4; k += 2) {  // 255 * (same-sign sum) <= 32767
      const int a = c[k * 2 + n], b = c[(k + 1) * 2 + n];
      CHECK(std::max(a, 0) + std::max(b, 0) <= 128);
      CHECK(std::max(-a, 0) + std::max(-b, 0) <= 128);
    }
}

TEST_CASE("saturation: weights already on an int8 grid keep it on every channel where it is safe") {
  // Grid step 1/127: column 0 = 127, 127 steps (a pair of 254 codes), column 1 = 100, 3 steps (103: safe).
  const float g = 1.0f / 127;
  const Tensor w = Tensor::from_vector<float>({2, 2}, {127 * g, 100 * g, 127 * g, 3 * g});
  const QParams p = weight_params(w, int8_safe(), 1, u8s8_pair_sums(node("MatMul"), w, 1));
  const auto sc = p.scales();
  CHECK(sc[0] == Approx(254 * g / 126));  // widened: the grid would overflow
  CHECK(sc[1] == g);                       // the grid, exactly: 100 + 3 codes fit
}
