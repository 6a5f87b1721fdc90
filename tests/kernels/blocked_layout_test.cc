// The channel-blocked layout (runtime/kernels/blocked_layout.h) and the Conv kernel reading and writing it: on
// oneDNN (constant weights, builds with oneDNN) and through the own kernel with conversions around it (weights not
// constant, or no oneDNN), each equal to the plain NCHW Conv.
#include "runtime/kernels/blocked_layout.h"

#include <catch2/catch.hpp>
#include <string>

#include "kernel_harness.h"
#include "runtime/kernels/conv_dnnl.h"

using namespace qtool;
using namespace qtool::test;
using namespace qtool::runtime::kernels::compute;
using Kind = runtime::FusedActivation::Kind;

TEST_CASE("to_blocked stores X[n, c, h, w] at [n, c/8, h, w, c%8] and from_blocked inverts it") {
  const Tensor X = random_tensor({2, 16, 3, 5}, 7);
  for (int threads : {1, 2}) {
    const Tensor B = to_blocked(X, threads, 8);
    REQUIRE(B.shape() == Shape{2, 2, 3, 5, 8});
    for (int64_t n = 0; n < 2; ++n)
      for (int64_t c = 0; c < 16; ++c)
        for (int64_t p = 0; p < 15; ++p)
          CHECK(B.data<float>()[((n * 2 + c / 8) * 15 + p) * 8 + c % 8] == X.data<float>()[(n * 16 + c) * 15 + p]);
    CHECK(logical_nchw(B, "B") == Shape{2, 16, 3, 5});
    CHECK(max_abs_diff(from_blocked(B, threads), X) == 0.0);
  }
  CHECK_THROWS_AS(to_blocked(random_tensor({1, 12, 2, 2}, 1), 1, 8), BadInputError);  // not a multiple of 8
  CHECK_THROWS_AS(to_blocked(X, 1, 4), BadInputError);                                // neither 8 nor C
  CHECK_THROWS_AS(logical_nchw(X, "X"), BadInputError);
}

TEST_CASE("with one block of all channels the blocked layout is NHWC, for any channel count") {
  const Tensor X = random_tensor({2, 12, 3, 5}, 8);
  for (int threads : {1, 2}) {
    const Tensor B = to_blocked(X, threads, 12);
    REQUIRE(B.shape() == Shape{2, 1, 3, 5, 12});
    for (int64_t n = 0; n < 2; ++n)
      for (int64_t c = 0; c < 12; ++c)
        for (int64_t p = 0; p < 15; ++p)
          CHECK(B.data<float>()[(n * 15 + p) * 12 + c] == X.data<float>()[(n * 12 + c) * 15 + p]);
    CHECK(logical_nchw(B, "B") == Shape{2, 12, 3, 5});
    CHECK(max_abs_diff(from_blocked(B, threads), X) == 0.0);
  }
  CHECK_THROWS_AS(logical_nchw(Tensor(DType::Float32, {2, 3, 3, 5, 4}), "B"), BadInputError);  // blocks of 4
}

TEST_CASE("this process's blocked layout follows oneDNN's instruction set") {
  // NHWC where oneDNN runs AVX-512 kernels (ONEDNN_MAX_CPU_ISA=AVX2 turns it off), nChw8c otherwise.
  CHECK(blocked_layout_is_nhwc() == dnnl_conv_avx512());
  if (blocked_layout_is_nhwc()) {
    CHECK(channel_block(12) == 12);
    CHECK(channel_block(16) == 16);
    CHECK(std::string(blocked_layout_name()) == "nhwc");
  } else {
    CHECK(channel_block(12) == 0);
    CHECK(channel_block(16) == 8);
    CHECK(std::string(blocked_layout_name()) == "nChw8c");
  }
  CHECK(channel_block(0) == 0);
  CHECK(to_blocked(random_tensor({1, 16, 2, 2}, 1), 1).dim(4) == channel_block(16));
}

TEST_CASE("Conv with blocked input and output gives the plain Conv's values exactly") {
  struct Case {
    const char* what;
    Shape x, w;
    int64_t group;
    std::vector<int64_t> strides, pads;
  };
  const Case cases[] = {
      {"pointwise", {1, 16, 9, 7}, {24, 16, 1, 1}, 1, {1, 1}, {0, 0, 0, 0}},
      {"depthwise s2", {2, 16, 11, 10}, {16, 1, 3, 3}, 16, {2, 2}, {1, 0, 0, 1}},
      {"general 3x3", {1, 8, 10, 10}, {16, 8, 3, 3}, 1, {1, 1}, {1, 1, 1, 1}},
  };
  runtime::FusedActivation clamp{Kind::Relu};
  for (const auto& c : cases) {
    auto ch = std::make_shared<runtime::FusedActivation::Channels>();
    for (int64_t m = 0; m < c.w[0]; ++m) {  // a per-channel clamp and affine, as runtime/fuse_conv.h folds them
      ch->lo.push_back(-0.1f * static_cast<float>(m % 3));
      ch->hi.push_back(0.5f + 0.1f * static_cast<float>(m));
      ch->scale.push_back(1.f + 0.25f * static_cast<float>(m % 4));
      ch->shift.push_back(0.125f * static_cast<float>(m % 5));
    }
    clamp.channels = ch;
    for (const auto& act : {runtime::FusedActivation{Kind::None}, runtime::FusedActivation{Kind::HardSwish}, clamp})
      for (bool const_w : {true, false})
        for (int threads : {1, 2}) {
          DYNAMIC_SECTION(c.what << ", activation " << static_cast<int>(act.kind) << (act.channels ? "+channels" : "")
                                 << (const_w ? ", constant W" : ", W not constant") << ", " << threads << " threads") {
            KernelCall call;
            call.op = "Conv";
            call.attrs.values["group"] = attr_int(c.group);
            call.attrs.values["strides"] = attr_ints(c.strides);
            call.attrs.values["pads"] = attr_ints(c.pads);
            call.inputs = {random_tensor(c.x, 1, -2.f, 2.f), random_tensor(c.w, 2), random_tensor({c.w[0]}, 3)};
            call.constant = {false, const_w, true};
            call.activation = act;
            call.threads = threads;
            const Tensor plain = run_kernel(call)[0];
            const Tensor x = call.inputs[0];
            for (int mode = 1; mode < 4; ++mode) {  // blocked input, output, both
              INFO("blocked input " << (mode & 1) << ", output " << (mode >> 1));
              call.blocked_input = mode & 1;
              call.blocked_output = mode >> 1;
              call.inputs[0] = call.blocked_input ? to_blocked(x, 1) : x;
              const Tensor y = run_kernel(call)[0];
              CHECK(max_abs_diff(call.blocked_output ? from_blocked(y, 1) : y, plain) == 0.0);
            }
          }
        }
  }
}
