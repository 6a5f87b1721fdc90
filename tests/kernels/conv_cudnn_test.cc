// The host side of the cuDNN Conv (runtime/kernels/conv_cudnn_plan.h) against the CPU Conv's conventions, and its
// device loops (conv_device.h) through the emulated launch grid. No GPU needed: cuDNN's convolution is modelled by
// its documented formula, the reference conv_ref with the plan's symmetric pads over the plan's (padded) input, so
// "pad step, cuDNN, bias and activation" is checked end to end against the CPU kernel with the same activation fused.
#include <catch2/catch.hpp>
#include <cstring>
#include <string>
#include <vector>

#include "core/error.h"
#include "device/emulate.h"
#include "kernel_harness.h"
#include "runtime/kernels/conv_cudnn_plan.h"
#include "runtime/kernels/conv_device.h"
#include "runtime/kernels/reference.h"

using namespace qtool;
using namespace qtool::test;
using namespace qtool::runtime::kernels;
using qtool::device::emulate_launch;
using qtool::device::ThreadCoord;
using Kind = qtool::runtime::FusedActivation::Kind;

namespace {

constexpr int64_t kBlocks = 3, kThreads = 32;  // fewer threads than values: grid-stride steps are exercised

struct Case {
  const char* what;
  Shape x, w;
  int64_t group = 1;
  std::vector<int64_t> strides, dilations, pads;  // empty: attribute absent
  const char* auto_pad = nullptr;
  bool pad_step = false;  // expected: ONNX pads cuDNN cannot take as they are
  runtime::FusedActivation act{};
  bool bias = true;
};

runtime::NodeAttrs attrs_of(const Case& c) {
  runtime::NodeAttrs a;
  a.values["group"] = attr_int(c.group);
  if (!c.strides.empty()) a.values["strides"] = attr_ints(c.strides);
  if (!c.dilations.empty()) a.values["dilations"] = attr_ints(c.dilations);
  if (!c.pads.empty()) a.values["pads"] = attr_ints(c.pads);
  if (c.auto_pad) a.values["auto_pad"] = attr_str(c.auto_pad);
  return a;
}

runtime::NodeInfo node_of(const Case& c) {
  runtime::NodeInfo n;
  n.name = "under_test";
  n.op_type = "Conv";
  n.opset = 11;
  n.attrs = attrs_of(c);
  n.activation = c.act;
  return n;
}

// What the GPU row computes for a plan, on the host: the pad step and the epilogue through the emulated grid,
// cuDNN's symmetric-pad cross-correlation as conv_ref.
Tensor gpu_model(const cudnn_conv::Plan& p, const Tensor& X, const Tensor& W, const Tensor* B,
                 const runtime::FusedActivation& act) {
  Tensor x = X.reshaped({p.x[0], p.x[1], p.in[0], p.in[1]});
  if (p.pad_step) {
    const device_conv::PadPlanes pp{int64_t{p.x[0]} * p.x[1], p.in[0],       p.in[1], p.x[2], p.x[3],
                                    p.pad_begin[0],           p.pad_begin[1]};
    Tensor padded(DType::Float32, {p.x[0], p.x[1], p.x[2], p.x[3]});
    std::fill_n(padded.data<float>(), padded.numel(), -7.f);  // every value must be written
    emulate_launch<char>(kBlocks, kThreads, 0, [&](ThreadCoord t, std::span<char>) {
      device_conv::pad_planes_loop(t, pp, x.data<float>(), padded.data<float>());
    });
    x = padded;
  }
  const Tensor w = W.reshaped({p.w[0], p.w[1], p.w[2], p.w[3]});
  Tensor y = compute::conv_ref(
      x, w, nullptr,
      {{p.stride[0], p.stride[1]}, {p.dilation[0], p.dilation[1]}, {p.pad[0], p.pad[1], p.pad[0], p.pad[1]}, p.groups});
  REQUIRE(y.shape() == Shape{p.y[0], p.y[1], p.y[2], p.y[3]});
  device_conv::BiasActivation e{B ? B->data<float>() : nullptr, p.y[1], int64_t{p.y[2]} * p.y[3]};
  e.has_act = device_elementwise::fused_unary(act, e.act);
  emulate_launch<char>(kBlocks, kThreads, 0, [&](ThreadCoord t, std::span<char>) {
    device_conv::bias_activation_loop(t, e, y.data<float>(), y.numel());
  });
  return y.reshaped(p.y_shape);
}

}  // namespace

TEST_CASE("cuDNN Conv plan (emulated launch grid): pad step, symmetric-pad conv and epilogue equal the CPU Conv") {
  const runtime::FusedActivation relu{Kind::Relu}, relu6{Kind::Clip, 0.f, 6.f}, hswish{Kind::HardSwish},
      hsig{Kind::HardSigmoid, 0.2f, 0.5f}, silu{Kind::Silu};
  // clang-format off
  const Case cases[] = {
      {"3x3 pads 1", {2, 5, 9, 11}, {7, 5, 3, 3}, 1, {1, 1}, {1, 1}, {1, 1, 1, 1}, nullptr, false, relu},
      {"no pads attribute, no bias", {1, 3, 6, 5}, {4, 3, 2, 3}, 1, {}, {}, {}, nullptr, false, {}, false},
      {"asymmetric pads", {1, 4, 10, 9}, {6, 4, 3, 3}, 1, {1, 1}, {1, 1}, {0, 1, 1, 2}, nullptr, true, relu6},
      {"begin pad larger than end", {1, 2, 7, 7}, {3, 2, 3, 3}, 1, {1, 1}, {1, 1}, {2, 2, 1, 1}, nullptr, true},
      {"end pad never read (stride 2)", {1, 3, 9, 9}, {4, 3, 3, 3}, 1, {2, 2}, {1, 1}, {0, 0, 1, 1}, nullptr, false},
      {"end pad read (stride 2)", {1, 3, 8, 8}, {4, 3, 3, 3}, 1, {2, 2}, {1, 1}, {0, 0, 1, 1}, nullptr, true},
      {"pads 1 stride 2 even input", {1, 3, 8, 8}, {4, 3, 3, 3}, 1, {2, 2}, {1, 1}, {1, 1, 1, 1}, nullptr, false},
      {"SAME_UPPER stride 2 even input", {1, 3, 8, 10}, {5, 3, 3, 3}, 1, {2, 2}, {}, {}, "SAME_UPPER", true, hswish},
      {"SAME_LOWER stride 2 even input", {1, 3, 8, 10}, {5, 3, 3, 3}, 1, {2, 2}, {}, {}, "SAME_LOWER", false},
      {"SAME_UPPER even kernel", {1, 2, 7, 6}, {3, 2, 2, 2}, 1, {1, 1}, {}, {}, "SAME_UPPER", true, hsig},
      {"SAME_LOWER even kernel", {1, 2, 7, 6}, {3, 2, 2, 2}, 1, {1, 1}, {}, {}, "SAME_LOWER", true},
      {"VALID ignores pads", {1, 2, 7, 6}, {3, 2, 3, 2}, 1, {1, 2}, {}, {}, "VALID", false, silu},
      {"strided dilated asymmetric", {2, 4, 13, 10}, {6, 4, 3, 2}, 1, {2, 3}, {2, 1}, {0, 2, 1, 1}, nullptr, true},
      {"grouped", {1, 6, 8, 8}, {9, 2, 3, 3}, 3, {1, 1}, {1, 1}, {1, 1, 1, 1}, nullptr, false, silu},
      {"depthwise 3x3 stride 2", {2, 8, 15, 16}, {8, 1, 3, 3}, 8, {2, 2}, {1, 1}, {1, 1, 1, 1}, nullptr, false, relu6},
      {"TF-style pads 0,0,1,1 stride 2 (mobilenetv2's first Conv)", {1, 3, 16, 16}, {8, 3, 3, 3}, 1, {2, 2}, {},
       {0, 0, 1, 1}, nullptr, true, relu6},
      {"depthwise, TF-style pads", {1, 8, 16, 16}, {8, 1, 3, 3}, 8, {2, 2}, {}, {0, 0, 1, 1}, nullptr, true, relu6},
      {"depthwise multiplier 2 dilated", {1, 3, 14, 14}, {6, 1, 3, 3}, 3, {3, 3}, {2, 2}, {2, 2, 2, 2}, nullptr, false},
      {"pointwise", {2, 16, 7, 5}, {12, 16, 1, 1}, 1, {}, {}, {}, nullptr, false, hswish},
      {"1-D", {2, 3, 20}, {4, 3, 5}, 1, {2}, {1}, {2, 2}, nullptr, false, relu},
      {"1-D asymmetric, shorter end never reached", {2, 3, 20}, {4, 3, 5}, 1, {2}, {1}, {2, 1}, nullptr, false},
      {"1-D asymmetric", {2, 3, 20}, {4, 3, 5}, 1, {2}, {1}, {1, 2}, nullptr, true},
      {"1-D depthwise SAME_UPPER", {1, 4, 20}, {4, 1, 4}, 4, {1}, {}, {}, "SAME_UPPER", true},
  };
  // clang-format on
  for (const Case& c : cases) {
    DYNAMIC_SECTION(c.what) {
      const Tensor X = random_tensor(c.x, 1, -2.f, 2.f), W = random_tensor(c.w, 2), B = random_tensor({c.w[0]}, 3);
      KernelCall call{"Conv", 11, attrs_of(c), {X, W}, {false, true}, 1, 1, c.act};
      if (c.bias) call.inputs.push_back(B), call.constant.push_back(true);
      const Tensor cpu = run_kernel(call).at(0);
      const Shape bshape{c.w[0]};
      const cudnn_conv::Decision d = cudnn_conv::plan_conv(node_of(c), c.x, c.w, c.bias ? &bshape : nullptr);
      INFO(d.cpu_reason);
      REQUIRE(d.plan);
      CHECK(d.plan->y_shape == cpu.shape());
      CHECK(d.plan->pad_step == c.pad_step);
      if (!c.pad_step) CHECK((d.plan->x[2] == d.plan->in[0] && d.plan->x[3] == d.plan->in[1]));
      const Tensor gpu = gpu_model(*d.plan, X, W, c.bias ? &B : nullptr, c.act);
      CHECK(max_abs_diff(gpu, cpu) < 1e-4);
    }
  }
}

TEST_CASE("cuDNN Conv plan: what runs on the CPU, and why") {
  auto reason = [](Shape x, Shape w, runtime::NodeAttrs attrs = {}, const Shape* b = nullptr) {
    runtime::NodeInfo n;
    n.name = "c";
    n.op_type = "Conv";
    n.opset = 11;
    n.attrs = std::move(attrs);
    const cudnn_conv::Decision d = cudnn_conv::plan_conv(n, x, w, b);
    CHECK_FALSE(d.plan);
    return d.cpu_reason;
  };
  CHECK(reason({1, 2, 4, 4, 4}, {3, 2, 1, 1, 1}) == "3-D Conv (the cuDNN path takes 1-D and 2-D)");
  CHECK(reason({1, 2, 4, 4}, {3, 2, 1}) == "X and W are not of one rank >= 3");
  // Channel mismatches stay with the CPU kernel, whose error names them.
  CHECK(reason({1, 4, 4, 4}, {3, 2, 1, 1}) == "the channels of X, W and B do not agree with group");
  runtime::NodeAttrs g2;
  g2.values["group"] = attr_int(2);
  CHECK(reason({1, 4, 4, 4}, {3, 2, 1, 1}, g2) == "the channels of X, W and B do not agree with group");
  const Shape b4{4};
  CHECK(reason({1, 2, 4, 4}, {3, 2, 1, 1}, {}, &b4) == "the channels of X, W and B do not agree with group");
  CHECK(reason({0, 2, 4, 4}, {3, 2, 1, 1}) == "empty tensor");
  CHECK(reason({1, 2, 70000, 70000}, {1, 2, 1, 1}) == "a tensor over 2^31 elements (cuDNN's int)");
  CHECK(reason({1, 1, 1, int64_t{3} << 30}, {1, 1, 1, 1}) == "a dimension over 2^31 (cuDNN's int)");
  runtime::NodeAttrs huge_pad;
  huge_pad.values["pads"] = attr_ints({0, int64_t{3} << 30, 0, 0});
  CHECK(reason({1, 1, 4, 4}, {1, 1, 1, 1}, huge_pad) == "a dimension over 2^31 (cuDNN's int)");
  // Malformed attributes are the CPU kernel's errors.
  runtime::NodeAttrs bad;
  bad.values["strides"] = attr_ints({1});
  runtime::NodeInfo n;
  n.name = "c";
  n.op_type = "Conv";
  n.attrs = bad;
  CHECK_THROWS_AS(cudnn_conv::plan_conv(n, {1, 2, 4, 4}, {3, 2, 1, 1}, nullptr), BadInputError);
}

TEST_CASE("cuDNN Conv algorithm: the first deterministic FP32 direct-sum algorithm of cuDNN's ranking") {
  using cudnn_conv::Algo;
  using C = cudnn_conv::AlgoCandidate;
  const size_t big = cudnn_conv::kMaxWorkspace + 1;
  const C ranked[] = {
      {Algo::Winograd, true, true, true, 0},                // transforms the operands
      {Algo::Fft, true, true, true, 1024},                  // likewise
      {Algo::ImplicitPrecompGemm, false, true, true, 0},    // failed
      {Algo::ImplicitPrecompGemm, true, false, true, 0},    // not deterministic
      {Algo::ImplicitPrecompGemm, true, true, false, 0},    // tensor-core (TF32) math
      {Algo::Gemm, true, true, true, big},                  // workspace over the limit
      {Algo::ImplicitPrecompGemm, true, true, true, 4096},  // the choice
      {Algo::ImplicitGemm, true, true, true, 0},
  };
  const C pick = cudnn_conv::choose_algo(ranked);
  CHECK(pick.algo == Algo::ImplicitPrecompGemm);
  CHECK(pick.workspace == 4096);
  CHECK(cudnn_conv::choose_algo(std::span(ranked, 6)).algo == Algo::ImplicitGemm);  // nothing qualifies
  CHECK(cudnn_conv::choose_algo(std::span(ranked, 6), big).algo == Algo::Gemm);
  CHECK(cudnn_conv::choose_algo({}).algo == Algo::ImplicitGemm);
  CHECK(cudnn_conv::algo_name(Algo::ImplicitPrecompGemm) == "implicit_precomp_gemm");
}
