// The integer arithmetic of the quantized-operator kernels (runtime/kernels/quantized_ops.h): compute::int_gemm
// against its reference twin (tails, 1 and 3 threads bit for bit, int32 wrap-around past K = 33025), the
// requantization contract (ties to even, clamping around the zero point), and QLinearConv / ConvInteger /
// QLinearMatMul through the kernel registry against plain loops written here from the ONNX formulas.
#include "runtime/kernels/quantized_ops.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <random>

#include "kernel_harness.h"

using namespace qtool;
using namespace qtool::test;
using namespace qtool::runtime::kernels;

namespace {
std::vector<int16_t> random_codes(size_t n, int lo, int hi, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> d(lo, hi);
  std::vector<int16_t> v(n);
  for (auto& x : v) x = static_cast<int16_t>(d(rng));
  return v;
}

template <class T>
Tensor random_q(Shape shape, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> d(std::numeric_limits<T>::min(), std::numeric_limits<T>::max());
  Tensor t(dtype_of_v<T>, std::move(shape));
  for (auto& x : t.span<T>()) x = static_cast<T>(d(rng));
  return t;
}
}  // namespace

TEST_CASE("int_gemm matches int_gemm_ref, the same with 1 and 3 threads") {
  struct Case {
    int64_t M, N, K;
  };
  for (const Case c : {Case{1, 1, 1}, Case{7, 13, 29}, Case{64, 33, 300}, Case{3, 200, 17}, Case{100, 1, 64}}) {
    INFO("M " << c.M << " N " << c.N << " K " << c.K);
    const auto A = random_codes(static_cast<size_t>(c.M * c.K), -255, 255, 1);
    const auto B = random_codes(static_cast<size_t>(c.K * c.N), -255, 255, 2);
    std::vector<int32_t> C1(static_cast<size_t>(c.M * c.N)), C3(C1.size()), want(C1.size());
    compute::int_gemm(c.M, c.N, c.K, A.data(), c.K, B.data(), c.N, C1.data(), c.N, 1);
    compute::int_gemm(c.M, c.N, c.K, A.data(), c.K, B.data(), c.N, C3.data(), c.N, 3);
    compute::int_gemm_ref(c.M, c.N, c.K, A.data(), c.K, B.data(), c.N, want.data(), c.N);
    CHECK(C1 == want);
    CHECK(C3 == want);
  }
  // 40000 products of 255 * 255 exceed 2^31: both wrap modulo 2^32, as MLAS's int32 accumulators do.
  const int64_t K = 40000;
  const std::vector<int16_t> A(static_cast<size_t>(K), 255), B(static_cast<size_t>(K), 255);
  int32_t c = 0, r = 0;
  compute::int_gemm(1, 1, K, A.data(), K, B.data(), 1, &c, 1, 1);
  compute::int_gemm_ref(1, 1, K, A.data(), K, B.data(), 1, &r, 1);
  CHECK(c == r);
  CHECK(c == static_cast<int32_t>(static_cast<uint32_t>(uint64_t{40000} * 65025u)));
}

TEST_CASE("requantize rounds ties to even and clamps around the zero point") {
  CHECK(compute::requantize<uint8_t>(5, 0.5f, 0) == 2);    // 2.5 -> 2
  CHECK(compute::requantize<uint8_t>(7, 0.5f, 0) == 4);    // 3.5 -> 4
  CHECK(compute::requantize<uint8_t>(-5, 0.5f, 10) == 8);  // -2.5 -> -2, + 10
  CHECK(compute::requantize<uint8_t>(1000, 1.f, 128) == 255);
  CHECK(compute::requantize<uint8_t>(-1000, 1.f, 128) == 0);
  CHECK(compute::requantize<int8_t>(1000, 1.f, -3) == 127);
  CHECK(compute::requantize<int8_t>(-1000, 1.f, -3) == -128);
  // Beyond 2^24 float(acc) rounds to nearest even before the scale: 16777217 -> 16777216.
  CHECK(compute::requantize<uint8_t>(16777217, 1.f / 16777216.f, 0) == 1);
}

TEST_CASE("QLinearConv and ConvInteger equal the ONNX formulas computed with plain loops") {
  // x uint8 [1, 4, 6, 5], w int8 [6, 2, 3, 3] (group 2), per-channel w_scale, bias, pads 1, stride (1, 2).
  const Tensor X = random_q<uint8_t>({1, 4, 6, 5}, 3), W = random_q<int8_t>({6, 2, 3, 3}, 4);
  const Tensor xs = Tensor::scalar<float>(0.04f), xz = Tensor::scalar<uint8_t>(120);
  const Tensor ws = Tensor::from_vector<float>({6}, {0.01f, 0.02f, 0.005f, 0.015f, 0.03f, 0.008f});
  const Tensor wz = Tensor::from_vector<int8_t>({6}, {0, 0, 0, 0, 0, 0});
  const Tensor ys = Tensor::scalar<float>(0.5f), yz = Tensor::scalar<uint8_t>(100);
  const Tensor B = Tensor::from_vector<int32_t>({6}, {100, -200, 300, -400, 500, -600});
  runtime::NodeAttrs attrs;
  attrs.values["group"] = attr_int(2);
  attrs.values["pads"] = attr_ints({1, 1, 1, 1});
  attrs.values["strides"] = attr_ints({1, 2});
  const Tensor Y = run_kernel("QLinearConv", 10, attrs, {X, xs, xz, W, ws, wz, ys, yz, B}, 1, 2)[0];
  const Tensor Yi = run_kernel("ConvInteger", 10, attrs, {X, W, xz}, 1, 2)[0];
  REQUIRE(Y.shape() == Shape{1, 6, 6, 3});
  REQUIRE(Yi.shape() == Shape{1, 6, 6, 3});
  const uint8_t* x = X.data<uint8_t>();
  const int8_t* w = W.data<int8_t>();
  for (int64_t m = 0; m < 6; ++m)
    for (int64_t oh = 0; oh < 6; ++oh)
      for (int64_t ow = 0; ow < 3; ++ow) {
        int64_t acc = 0;
        for (int64_t c = 0; c < 2; ++c)
          for (int64_t kh = 0; kh < 3; ++kh)
            for (int64_t kw = 0; kw < 3; ++kw) {
              const int64_t ih = oh - 1 + kh, iw = ow * 2 - 1 + kw, ic = (m / 3) * 2 + c;
              if (ih < 0 || ih >= 6 || iw < 0 || iw >= 5) continue;
              acc += (int64_t{x[(ic * 6 + ih) * 5 + iw]} - 120) * w[((m * 2 + c) * 3 + kh) * 3 + kw];
            }
        const int64_t o = (m * 6 + oh) * 3 + ow;
        CHECK(Yi.data<int32_t>()[o] == acc);
        const float scale = 0.04f * ws.data<float>()[m] / 0.5f;
        const float v = static_cast<float>(acc + B.data<int32_t>()[m]) * scale;
        const long q = std::lrint(std::clamp(v, -100.f, 155.f)) + 100;
        CHECK(Y.data<uint8_t>()[o] == q);
      }
}

TEST_CASE("QLinearMatMul with per-column int8 weights equals the ONNX formula") {
  const Tensor A = random_q<uint8_t>({2, 3, 16}, 5), Bw = random_q<int8_t>({16, 4}, 6);
  const Tensor as = Tensor::scalar<float>(0.02f), az = Tensor::scalar<uint8_t>(128);
  const Tensor bs = Tensor::from_vector<float>({4}, {0.01f, 0.002f, 0.004f, 0.02f});
  const Tensor bz = Tensor::from_vector<int8_t>({4}, {0, 1, -1, 0});
  const Tensor ys = Tensor::scalar<float>(0.3f), yz = Tensor::scalar<uint8_t>(128);
  const Tensor Y = run_kernel("QLinearMatMul", 21, {}, {A, as, az, Bw, bs, bz, ys, yz})[0];
  REQUIRE(Y.shape() == Shape{2, 3, 4});
  for (int64_t r = 0; r < 6; ++r)
    for (int64_t n = 0; n < 4; ++n) {
      int64_t acc = 0;
      for (int64_t k = 0; k < 16; ++k)
        acc += (int64_t{A.data<uint8_t>()[r * 16 + k]} - 128) *
               (int64_t{Bw.data<int8_t>()[k * 4 + n]} - bz.data<int8_t>()[n]);
      const float v = static_cast<float>(acc) * (0.02f * bs.data<float>()[n] / 0.3f);
      CHECK(Y.data<uint8_t>()[r * 4 + n] == std::lrint(std::clamp(v, -128.f, 127.f)) + 128);
    }
}
