// Folding a Conv's neighbours into it (runtime/fuse_conv.h): a zero Pad before it, and a constant per-channel
// Mul/Add/Sub/BatchNormalization after it. Fused graphs give the unfused numbers (the Pad exactly, the affine within
// float rounding) with fewer nodes, and an observed tensor or graph output stops the fold.
#include "runtime/fuse_conv.h"

#include <catch2/catch.hpp>
#include <set>
#include <string>

#include "model_builder.h"
#include "runtime/session.h"
#include "tensor_checks.h"

using qtool::DType;
using qtool::Tensor;
using qtool::runtime::RunOptions;
using qtool::runtime::Session;
using qtool::test::check_all_close;
using qtool::test::ModelBuilder;
using qtool::test::ramp;

namespace {

// y = fused(x) and y = plain(x) agree within `tol` (relative to the largest |y|).
void check_same(const Session& plain, const Session& fused, const Tensor& x, float tol) {
  const Tensor want = plain.run({{"x", x}}).at("y");
  float peak = 0;
  for (float v : want.span<float>()) peak = std::max(peak, std::abs(v));
  check_all_close(fused.run({{"x", x}}).at("y"), want, tol * peak);
}

std::set<std::string> tapped(const Session& s, const Tensor& x) {
  std::set<std::string> seen;
  RunOptions ro;
  ro.tap = [&](const std::string& name, const Tensor&) { seen.insert(name); };
  s.run({{"x", x}}, ro);
  return seen;
}

// x [1,4,7,7] -> Pad(bottom/right by 1, value `value`) -> p -> depthwise Conv 3x3 stride 2 (pads `conv_pads`) -> y:
// mobilenetv2's stride-2 blocks as TensorFlow exports them.
ModelBuilder pad_then_conv(float value, std::vector<int64_t> conv_pads) {
  ModelBuilder b(13);
  b.input("x", DType::Float32, {1, 4, 7, 7});
  b.initializer("pads", Tensor::from_vector<int64_t>({8}, {0, 0, 0, 0, 0, 0, 1, 1}));
  b.initializer("value", Tensor::from_vector<float>({}, {value}));
  b.initializer("w", ramp({4, 1, 3, 3}, 0.3f));
  b.initializer("b", ramp({4}, 0.6f));
  b.node("Pad", {"x", "pads", "value"}, {"p"}, "pad");
  auto& c = b.node("Conv", {"p", "w", "b"}, {"y"}, "conv");
  ModelBuilder::attr(c, "group", int64_t{4});
  ModelBuilder::attr(c, "strides", std::vector<int64_t>{2, 2});
  if (!conv_pads.empty()) ModelBuilder::attr(c, "pads", conv_pads);
  b.output("y");
  return b;
}

}  // namespace

TEST_CASE("a zero Pad folds into the Conv's pads and gives the same numbers") {
  const Tensor x = ramp({1, 4, 7, 7}, 0.2f);
  for (const auto& conv_pads : {std::vector<int64_t>{}, std::vector<int64_t>{1, 0, 0, 1}}) {
    const ModelBuilder b = pad_then_conv(0.f, conv_pads);
    const Session plain(b.model);
    const Session fused(b.model, {.observed = std::set<std::string>{}});
    CHECK(plain.graph().nodes.size() == 2);
    CHECK(fused.graph().nodes.size() == 1);
    check_same(plain, fused, x, 0.f);  // exact
  }
}

TEST_CASE("a Pad stays where its output is observed or it pads with another value") {
  const Tensor x = ramp({1, 4, 7, 7}, 0.2f);
  const Session observed(pad_then_conv(0.f, {}).model, {.observed = std::set<std::string>{"p"}});
  CHECK(observed.graph().nodes.size() == 2);
  CHECK(tapped(observed, x).count("p") == 1);
  const Session ones(pad_then_conv(1.f, {}).model, {.observed = std::set<std::string>{}});
  CHECK(ones.graph().nodes.size() == 2);
}

namespace {

// x [1,3,5,5] -> Conv 3x3 pad 1 (bias if `bias`) -> t -> Mul(t, s: one value, from a Constant node) -> m ->
// Add(h [1,6,1,1], m) -> a -> BatchNormalization -> n -> Sub(n, one value) -> r -> Relu -> y. The affine chain
// ppocrv4-det writes after each Conv, with every kind and operand order once.
ModelBuilder conv_then_affine(bool bias) {
  ModelBuilder b(13);
  b.input("x", DType::Float32, {1, 3, 5, 5});
  b.initializer("w", ramp({6, 3, 3, 3}, 0.1f));
  if (bias) b.initializer("b", ramp({6}, 0.9f));
  b.initializer("h", ramp({1, 6, 1, 1}, 0.5f));
  b.initializer("gamma", ramp({6}, 0.7f));
  b.initializer("beta", ramp({6}, 0.2f));
  b.initializer("mean", ramp({6}, 0.4f));
  b.initializer("var", Tensor::from_vector<float>({6}, {0.5f, 1.f, 2.f, 0.25f, 3.f, 1.5f}));
  b.initializer("d", Tensor::from_vector<float>({1}, {0.75f}));
  auto& k = b.node("Constant", {}, {"s"}, "scale");
  ModelBuilder::attr(k, "value", Tensor::from_vector<float>({1}, {1.3f}));
  auto& c = b.node("Conv", bias ? std::vector<std::string>{"x", "w", "b"} : std::vector<std::string>{"x", "w"}, {"t"},
                   "conv");
  ModelBuilder::attr(c, "pads", std::vector<int64_t>{1, 1, 1, 1});
  b.node("Mul", {"t", "s"}, {"m"}, "mul");
  b.node("Add", {"h", "m"}, {"a"}, "add");
  b.node("BatchNormalization", {"a", "gamma", "beta", "mean", "var"}, {"n"}, "bn");
  b.node("Sub", {"n", "d"}, {"r"}, "sub");
  b.node("Relu", {"r"}, {"y"}, "relu");
  b.output("y");
  return b;
}

}  // namespace

TEST_CASE("a per-channel affine after a Conv folds into its weights and bias") {
  const Tensor x = ramp({1, 3, 5, 5}, 0.3f);
  for (bool bias : {true, false}) {
    INFO("bias " << bias);
    const ModelBuilder b = conv_then_affine(bias);
    const Session plain(b.model);
    const Session fused(b.model, {.observed = std::set<std::string>{}});
    CHECK(plain.graph().nodes.size() == 6);
    CHECK(fused.graph().nodes.size() == 1);  // Conv with the affine in W and B, Relu as its activation
    check_same(plain, fused, x, 1e-6f);
  }
}

TEST_CASE("the affine fold stops at an observed tensor, a graph output and a non-channel constant") {
  const Tensor x = ramp({1, 3, 5, 5}, 0.3f);
  {
    const ModelBuilder b = conv_then_affine(true);
    const Session s(b.model, {.observed = std::set<std::string>{"a"}});  // Mul and Add fold; BN, Sub, Relu stay
    CHECK(s.graph().nodes.size() == 4);
    const auto seen = tapped(s, x);
    CHECK(seen.count("a") == 1);
    CHECK(seen.count("t") == 0);
    check_same(Session(b.model), s, x, 1e-6f);
  }
  {
    ModelBuilder b = conv_then_affine(true);
    b.output("t");  // the raw Conv output is a graph output: nothing folds into the Conv
    const Session s(b.model, {.observed = std::set<std::string>{}});
    CHECK(s.graph().nodes.size() == 6);
  }
  {
    ModelBuilder b(13);  // a constant varying along the width is not a per-channel affine
    b.input("x", DType::Float32, {1, 3, 5, 5});
    b.initializer("w", ramp({6, 3, 1, 1}, 0.1f));
    b.initializer("h", ramp({5}, 0.5f));
    b.node("Conv", {"x", "w"}, {"t"}, "conv");
    b.node("Add", {"t", "h"}, {"y"}, "add");
    b.output("y");
    CHECK(Session(b.model, {.observed = std::set<std::string>{}}).graph().nodes.size() == 2);
  }
}

namespace {

// x [1,3,6,6] -> Conv 3x3 pad 1 -> `act` -> then either ReLU6 as TensorFlow exports it with per-channel caps
// (Relu -> Min(C [1,8,1,1]) -> Relu, mobilenetv2) or a scalar affine (Mul(s) -> Add(h), ppocrv4-det), then
// Max(-0.5) -> y. Both operand orders once.
ModelBuilder conv_then_epilogue(const std::string& act, bool clamps) {
  ModelBuilder b(13);
  b.input("x", DType::Float32, {1, 3, 6, 6});
  b.initializer("w", ramp({8, 3, 3, 3}, 0.1f));
  b.initializer("b", ramp({8}, 0.3f));
  b.initializer("cap", Tensor::from_vector<float>({1, 8, 1, 1}, {0.5f, 1.f, 1.5f, 2.f, 2.5f, 3.f, 0.25f, 6.f}));
  b.initializer("s", Tensor::from_vector<float>({1}, {-1.7f}));
  b.initializer("h", Tensor::from_vector<float>({1}, {0.4f}));
  b.initializer("floor", Tensor::from_vector<float>({}, {-0.5f}));
  auto& c = b.node("Conv", {"x", "w", "b"}, {"t"}, "conv");
  ModelBuilder::attr(c, "pads", std::vector<int64_t>{1, 1, 1, 1});
  b.node(act, {"t"}, {"a"}, "act");
  if (clamps) {
    b.node("Min", {"cap", "a"}, {"m"}, "min");
    b.node("Relu", {"m"}, {"r"}, "relu");
  } else {
    b.node("Mul", {"a", "s"}, {"m"}, "mul");
    b.node("Add", {"h", "m"}, {"r"}, "add");
  }
  b.node("Max", {"r", "floor"}, {"y"}, "max");
  b.output("y");
  return b;
}

}  // namespace

TEST_CASE("clamps and a constant affine after a Conv's activation run in its epilogue") {
  const Tensor x = ramp({1, 3, 6, 6}, 0.6f);
  for (const std::string act : {"Relu", "HardSwish"})
    for (bool clamps : {true, false}) {
      INFO(act << (clamps ? " + clamps" : " + affine"));
      const ModelBuilder b = conv_then_epilogue(act, clamps);
      const Session plain(b.model);
      const Session fused(b.model, {.observed = std::set<std::string>{}});
      CHECK(plain.graph().nodes.size() == 5);
      // After an affine, Max ends the chain (a clamp after an affine is not clamp-then-affine).
      CHECK(fused.graph().nodes.size() == (clamps ? 1u : 2u));
      check_same(plain, fused, x, 1e-6f);
    }
}

TEST_CASE("the Conv epilogue stops at an observed tensor") {
  const Tensor x = ramp({1, 3, 6, 6}, 0.6f);
  const ModelBuilder b = conv_then_epilogue("Relu", true);
  const Session s(b.model, {.observed = std::set<std::string>{"m"}});
  CHECK(s.graph().nodes.size() == 3);  // Conv+Relu+Min, Relu, Max
  CHECK(tapped(s, x).count("m") == 1);
  check_same(Session(b.model), s, x, 1e-6f);
}
