// Conv / ConvTranspose fast paths (depthwise, pointwise, im2col+sgemm, col2im) against their
// reference twins, with 1 and 2 threads.
#include <catch2/catch.hpp>

#include "kernel_harness.h"
#include "runtime/kernels/blas.h"
#include "runtime/kernels/reference.h"

using namespace qtool;
using namespace qtool::test;
using namespace qtool::runtime::kernels::compute;

namespace {
struct ConvCase {
  const char* what;
  Shape x, w;
  int64_t group;
  std::vector<int64_t> strides, dilations, pads;
};

runtime::NodeAttrs conv_attrs(const ConvCase& c) {
  runtime::NodeAttrs a;
  a.values["group"] = attr_int(c.group);
  a.values["strides"] = attr_ints(c.strides);
  a.values["dilations"] = attr_ints(c.dilations);
  a.values["pads"] = attr_ints(c.pads);
  return a;
}
}  // namespace

TEST_CASE("Conv fast paths match the reference twin") {
  const ConvCase cases[] = {
      {"general 3x3 pad 1", {1, 5, 9, 11}, {7, 5, 3, 3}, 1, {1, 1}, {1, 1}, {1, 1, 1, 1}},
      {"general strided dilated asym pads", {2, 4, 13, 10}, {6, 4, 3, 2}, 1, {2, 3}, {2, 1}, {0, 2, 1, 1}},
      {"grouped", {1, 6, 8, 8}, {9, 2, 3, 3}, 3, {1, 1}, {1, 1}, {1, 1, 1, 1}},
      {"pointwise", {2, 16, 7, 5}, {12, 16, 1, 1}, 1, {1, 1}, {1, 1}, {0, 0, 0, 0}},
      {"pointwise strided", {1, 8, 9, 9}, {4, 8, 1, 1}, 1, {2, 2}, {1, 1}, {0, 0, 0, 0}},
      {"depthwise 3x3 s1", {1, 8, 17, 19}, {8, 1, 3, 3}, 8, {1, 1}, {1, 1}, {1, 1, 1, 1}},
      {"depthwise 3x3 s2", {2, 5, 16, 15}, {5, 1, 3, 3}, 5, {2, 2}, {1, 1}, {1, 1, 1, 1}},
      {"depthwise 5x5 s2 asym", {1, 3, 20, 21}, {3, 1, 5, 5}, 3, {2, 2}, {1, 1}, {1, 2, 2, 1}},
      {"depthwise multiplier 2 dilated s3", {1, 3, 14, 14}, {6, 1, 3, 3}, 3, {3, 3}, {2, 2}, {2, 2, 2, 2}},
      {"depthwise big pads", {1, 2, 4, 4}, {2, 1, 3, 3}, 2, {1, 1}, {1, 1}, {3, 3, 3, 3}},
      {"depthwise channel-blocked 7x7 tail", {2, 20, 7, 7}, {20, 1, 3, 3}, 20, {1, 1}, {1, 1}, {1, 1, 1, 1}},
      {"depthwise channel-blocked s2 dilated", {1, 11, 15, 13}, {11, 1, 3, 3}, 11, {2, 2}, {2, 1}, {0, 1, 2, 1}},
      {"depthwise wide plane (per-plane path)", {1, 3, 9, 70}, {3, 1, 3, 3}, 3, {1, 1}, {1, 1}, {1, 1, 1, 1}},
      {"depthwise wide plane s2", {1, 3, 9, 70}, {3, 1, 3, 3}, 3, {2, 2}, {1, 1}, {1, 1, 1, 1}},
      {"1-D", {2, 3, 20}, {4, 3, 5}, 1, {2}, {1}, {2, 1}},
      {"1-D depthwise", {1, 4, 20}, {4, 1, 3}, 4, {1}, {1}, {1, 1}},
      {"3-D", {1, 2, 5, 6, 7}, {3, 2, 2, 3, 2}, 1, {1, 2, 1}, {1, 1, 2}, {0, 1, 1, 1, 0, 0}},
  };
  for (const auto& c : cases) {
    DYNAMIC_SECTION(c.what) {
      Tensor X = random_tensor(c.x, 1), W = random_tensor(c.w, 2), B = random_tensor({c.w[0]}, 3);
      const Tensor want = conv_ref(X, W, &B, {c.strides, c.dilations, c.pads, c.group});
      for (int threads : {1, 2})
        for (bool constant : {false, true}) {
          KernelCall call{"Conv", 11, conv_attrs(c), {X, W, B}, {false, constant, constant}, 1, threads};
          auto y = run_kernel(call);
          INFO("threads " << threads << " const " << constant);
          CHECK(max_abs_diff(y[0], want) < 1e-4);
        }
      // Without bias.
      auto y = run_kernel("Conv", 11, conv_attrs(c), {X, W});
      CHECK(max_abs_diff(y[0], conv_ref(X, W, nullptr, {c.strides, c.dilations, c.pads, c.group})) < 1e-4);
    }
  }
}

TEST_CASE("Conv auto_pad SAME_UPPER / SAME_LOWER resolve pads as the spec says") {
  Tensor X = random_tensor({1, 2, 7, 8}, 4), W = random_tensor({3, 2, 4, 3}, 5);
  runtime::NodeAttrs a;
  a.values["strides"] = attr_ints({2, 2});
  a.values["auto_pad"] = attr_str("SAME_UPPER");
  auto up = run_kernel("Conv", 11, a, {X, W});
  // out = ceil(in/stride) = [4, 4]; total pad rows = 3*2+4-7 = 3 -> (1, 2); cols = 3*2+3-8 = 1 -> (0, 1)
  CHECK(up[0].shape() == Shape{1, 3, 4, 4});
  CHECK(max_abs_diff(up[0], conv_ref(X, W, nullptr, {{2, 2}, {1, 1}, {1, 0, 2, 1}, 1})) < 1e-5);
  a.values["auto_pad"] = attr_str("SAME_LOWER");
  auto lo = run_kernel("Conv", 11, a, {X, W});
  CHECK(max_abs_diff(lo[0], conv_ref(X, W, nullptr, {{2, 2}, {1, 1}, {2, 1, 1, 0}, 1})) < 1e-5);
}

TEST_CASE("Conv reports bad shapes as BadInputError naming the node") {
  runtime::NodeAttrs a;
  CHECK_THROWS_AS(run_kernel("Conv", 11, a, {random_tensor({1, 3, 5, 5}, 1), random_tensor({2, 4, 3, 3}, 2)}),
                  BadInputError);
  CHECK_THROWS_WITH(run_kernel("Conv", 11, a, {random_tensor({1, 3, 5, 5}, 1), random_tensor({2, 4, 3, 3}, 2)}),
                    Catch::Contains("under_test"));
}

TEST_CASE("ConvTranspose matches the reference twin") {
  struct Case {
    const char* what;
    Shape x, w;
    int64_t group;
    std::vector<int64_t> strides, dilations, pads, output_padding;
  };
  const Case cases[] = {
      {"stride 2 k2 (DB head)", {1, 6, 5, 7}, {6, 4, 2, 2}, 1, {2, 2}, {1, 1}, {0, 0, 0, 0}, {0, 0}},
      {"stride 2 k3 pads opad", {2, 3, 4, 5}, {3, 2, 3, 3}, 1, {2, 2}, {1, 1}, {1, 1, 1, 0}, {1, 0}},
      {"grouped dilated", {1, 4, 5, 5}, {4, 3, 3, 2}, 2, {1, 2}, {2, 1}, {0, 1, 1, 0}, {0, 1}},
      {"1-D", {1, 2, 6}, {2, 3, 4}, 1, {3}, {1}, {1, 2}, {0}},
  };
  for (const auto& c : cases) {
    DYNAMIC_SECTION(c.what) {
      Tensor X = random_tensor(c.x, 7), W = random_tensor(c.w, 8), B = random_tensor({c.w[1] * c.group}, 9);
      runtime::NodeAttrs a;
      a.values["group"] = attr_int(c.group);
      a.values["strides"] = attr_ints(c.strides);
      a.values["dilations"] = attr_ints(c.dilations);
      a.values["pads"] = attr_ints(c.pads);
      a.values["output_padding"] = attr_ints(c.output_padding);
      const size_t nd = c.strides.size();
      std::vector<int64_t> out(nd);
      for (size_t d = 0; d < nd; ++d)
        out[d] = c.strides[d] * (c.x[2 + d] - 1) + c.output_padding[d] + (c.w[2 + d] - 1) * c.dilations[d] + 1 -
                 c.pads[d] - c.pads[d + nd];
      const Tensor want = conv_transpose_ref(X, W, &B, {c.strides, c.dilations, c.pads, c.group}, out);
      for (int threads : {1, 2}) {
        auto y = run_kernel("ConvTranspose", 11, a, {X, W, B}, 1, threads);
        CHECK(max_abs_diff(y[0], want) < 1e-4);
      }
    }
  }
}

TEST_CASE("sgemm on OpenBLAS matches sgemm_ref for every transpose and thread count") {
  for (bool ta : {false, true})
    for (bool tb : {false, true})
      for (int threads : {1, 2}) {
        const int64_t M = 37, N = 150, K = 29;
        Tensor A = random_tensor(ta ? Shape{K, M} : Shape{M, K}, 11);
        Tensor B = random_tensor(tb ? Shape{N, K} : Shape{K, N}, 12);
        Tensor C1 = random_tensor({M, N}, 13), C2 = C1.clone();
        sgemm(ta, tb, M, N, K, 0.5f, A.data<float>(), A.dim(1), B.data<float>(), B.dim(1), 2.f, C1.data<float>(), N,
              threads);
        sgemm_ref(ta, tb, M, N, K, 0.5f, A.data<float>(), A.dim(1), B.data<float>(), B.dim(1), 2.f, C2.data<float>(),
                  N);
        CHECK(max_abs_diff(C1, C2) < 1e-4);
      }
  // Large enough to be split across threads: 1 and 2 threads give identical results.
  Tensor A = random_tensor({64, 300}, 14), B = random_tensor({300, 500}, 15);
  Tensor C1(DType::Float32, {64, 500}), C2(DType::Float32, {64, 500});
  sgemm(false, false, 64, 500, 300, 1.f, A.data<float>(), 300, B.data<float>(), 500, 0.f, C1.data<float>(), 500, 1);
  sgemm(false, false, 64, 500, 300, 1.f, A.data<float>(), 300, B.data<float>(), 500, 0.f, C2.data<float>(), 500, 2);
  CHECK(max_abs_diff(C1, C2) < 1e-5);
}
