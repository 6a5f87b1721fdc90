// Keeping the tensors between oneDNN Convs in the blocked layout (runtime/conv_layout.h): the same outputs as the
// unfused graph, the blocked tensors renamed "<name>/nChw8c" (or "<name>/nhwc" on AVX-512) for a tap, and every rule that keeps a tensor NCHW (an
// observed tensor, a channel count that is not a multiple of 8, a reader that is neither such a Conv nor an Add of
// two blocked tensors). Builds without oneDNN keep every tensor NCHW.
#include "runtime/conv_layout.h"

#include <catch2/catch.hpp>
#include <map>
#include <set>
#include <string>

#include "model_builder.h"
#include "runtime/kernels/blocked_layout.h"
#include "runtime/kernels/conv_dnnl.h"
#include "runtime/session.h"
#include "tensor_checks.h"

using qtool::DType;
using qtool::Shape;
using qtool::Tensor;
using qtool::runtime::RunOptions;
using qtool::runtime::Session;
using qtool::test::check_all_close;
using qtool::test::ModelBuilder;
using qtool::test::ramp;

namespace {

// x [1,8,9,9] -> Conv 1x1 (E out, Relu) -> a -> depthwise 3x3 (Relu, Min per channel, Relu: mobilenetv2's clamp)
// -> d -> Conv 1x1 (E out) -> p -> Add(p, a) -> s -> Conv 1x1 (8 out) -> y; with `side`, also y2 = Add(s, x2) where
// x2 is a graph input (NCHW): a reader that cannot take s blocked.
ModelBuilder chain(int64_t E, bool side) {
  ModelBuilder b(13);
  b.input("x", DType::Float32, {1, 8, 9, 9});
  b.initializer("w1", ramp({E, 8, 1, 1}, 0.1f));
  b.initializer("b1", ramp({E}, 0.2f));
  b.initializer("wd", ramp({E, 1, 3, 3}, 0.3f));
  b.initializer("bd", ramp({E}, 0.4f));
  Tensor cap = ramp({1, E, 1, 1}, 0.5f);
  for (float& v : cap.span<float>()) v = std::abs(v) * 4.f;
  b.initializer("cap", cap);
  b.initializer("w2", ramp({E, E, 1, 1}, 0.6f));
  b.initializer("w3", ramp({8, E, 1, 1}, 0.7f));
  b.node("Conv", {"x", "w1", "b1"}, {"c1"}, "expand");
  b.node("Relu", {"c1"}, {"a"}, "relu1");
  auto& dw = b.node("Conv", {"a", "wd", "bd"}, {"c2"}, "depthwise");
  ModelBuilder::attr(dw, "group", E);
  ModelBuilder::attr(dw, "pads", std::vector<int64_t>{1, 1, 1, 1});
  b.node("Relu", {"c2"}, {"r2"}, "relu2");
  b.node("Min", {"r2", "cap"}, {"m2"}, "min2");
  b.node("Relu", {"m2"}, {"d"}, "relu3");
  b.node("Conv", {"d", "w2"}, {"p"}, "project");
  b.node("Add", {"p", "a"}, {"s"}, "residual");
  b.node("Conv", {"s", "w3"}, {"y"}, "head");
  b.output("y");
  if (side) {
    b.input("x2", DType::Float32, {1, E, 9, 9});
    b.node("Add", {"s", "x2"}, {"y2"}, "side");
    b.output("y2");
  }
  return b;
}

std::map<std::string, Shape> tapped(const Session& s, const std::map<std::string, Tensor>& in) {
  std::map<std::string, Shape> seen;
  RunOptions ro;
  ro.tap = [&](const std::string& name, const Tensor& t) { seen[name] = t.shape(); };
  s.run(in, ro);
  return seen;
}

// Every output of the fused session equals the unfused one's (the same oneDNN primitives; only copies differ).
void check_same_outputs(const Session& plain, const Session& fused, const std::map<std::string, Tensor>& in) {
  const auto want = plain.run(in);
  const auto got = fused.run(in);
  for (const auto& [name, t] : want) check_all_close(got.at(name), t, 0.0);
}

const bool kDnnl = qtool::runtime::kernels::compute::dnnl_conv_available();
using qtool::runtime::kernels::compute::blocked_layout_is_nhwc;
using qtool::runtime::kernels::compute::channel_block;
// "/nChw8c", or "/nhwc" where oneDNN runs AVX-512 kernels (kernels/blocked_layout.h)
const std::string kSuffix = std::string("/") + qtool::runtime::kernels::compute::blocked_layout_name();

}  // namespace

TEST_CASE("tensors between oneDNN Convs stay blocked, renamed, with the unfused graph's outputs") {
  const ModelBuilder b = chain(16, false);
  const std::map<std::string, Tensor> in{{"x", ramp({1, 8, 9, 9}, 0.9f)}};
  const Session plain(b.model);
  for (int threads : {1, 2}) {
    const Session fused(b.model, {.threads = threads, .observed = std::set<std::string>{}});
    check_same_outputs(plain, fused, in);
    const auto seen = tapped(fused, in);
    if (!kDnnl) {
      CHECK(seen.count("a") == 1);
      continue;
    }
    // a, d, s blocked ([1, 16/8, 9, 9, 8] as nChw8c, [1, 1, 9, 9, 16] as NHWC); y, the graph output, NCHW.
    const int64_t B = channel_block(16);
    for (const char* name : {"a", "d", "p", "s"}) {
      INFO(name);
      CHECK(seen.count(name) == 0);
      REQUIRE(seen.count(std::string(name) + kSuffix) == 1);
      CHECK(seen.at(std::string(name) + kSuffix) == Shape{1, 16 / B, 9, 9, B});
    }
    CHECK(seen.at("y") == Shape{1, 8, 9, 9});
    int blocked_in = 0, blocked_out = 0;
    for (const auto& n : fused.graph().nodes) {
      blocked_in += n.info.blocked_input;
      blocked_out += n.info.blocked_output;
    }
    CHECK(blocked_in == 3);   // depthwise, project, head
    CHECK(blocked_out == 3);  // expand, depthwise, project
  }
}

TEST_CASE("an observed tensor, an odd channel count or an NCHW reader keeps tensors NCHW") {
  const std::map<std::string, Tensor> in{{"x", ramp({1, 8, 9, 9}, 0.9f)}};
  SECTION("observed") {
    const ModelBuilder b = chain(16, false);
    const Session fused(b.model, {.observed = std::set<std::string>{"a"}});
    check_same_outputs(Session(b.model), fused, in);
    const auto seen = tapped(fused, in);
    CHECK(seen.at("a") == Shape{1, 16, 9, 9});
    // s reads a, so it is not blocked either; d and p are between Convs only.
    CHECK(seen.count("s") == 1);
    CHECK(seen.count("d" + kSuffix) == static_cast<size_t>(kDnnl));
  }
  SECTION("12 channels") {  // nChw8c cannot store them; NHWC (on AVX-512) can
    const ModelBuilder b = chain(12, false);
    const Session fused(b.model, {.observed = std::set<std::string>{}});
    check_same_outputs(Session(b.model), fused, in);
    const auto seen = tapped(fused, in);
    const bool nhwc = kDnnl && blocked_layout_is_nhwc();
    for (const auto& [name, shape] : seen) {
      INFO(name);
      CHECK(shape.size() == (name.find("/nhwc") != std::string::npos ? 5u : 4u));
    }
    CHECK(seen.count("d/nhwc") == static_cast<size_t>(nhwc));
  }
  SECTION("an Add with a graph input") {
    const ModelBuilder b = chain(16, true);
    const std::map<std::string, Tensor> in2{{"x", in.at("x")}, {"x2", ramp({1, 16, 9, 9}, 0.4f)}};
    const Session fused(b.model, {.observed = std::set<std::string>{}});
    check_same_outputs(Session(b.model), fused, in2);
    const auto seen = tapped(fused, in2);
    CHECK(seen.at("s") == Shape{1, 16, 9, 9});  // read by the side Add
    CHECK(seen.count("a") == 1);                // the residual Add's other operand can no longer be blocked
    CHECK(seen.count("d" + kSuffix) == static_cast<size_t>(kDnnl));
  }
}

// An NHWC model input (TensorFlow exports: x [N, H, W, C] -> Transpose perm [0, 3, 1, 2] -> Conv): where the blocked
// layout is NHWC the Transpose is dropped and the Conv reads x in place; the outputs are the unfused graph's
// exactly. Not where the Transpose's output is observed, is read by another op too, or the perm is another one.
TEST_CASE("a Transpose from NHWC read only by oneDNN Convs is folded where the blocked layout is NHWC") {
  auto model = [](const std::vector<int64_t>& perm, bool side) {
    ModelBuilder b(13);
    b.input("x", DType::Float32, {1, 9, 7, 3});
    b.initializer("w1", ramp({16, 3, 3, 3}, 0.1f));
    b.initializer("b1", ramp({16}, 0.2f));
    b.initializer("w2", ramp({8, 16, 1, 1}, 0.3f));
    auto& tr = b.node("Transpose", {"x"}, {"t"}, "to_nchw");
    ModelBuilder::attr(tr, "perm", perm);
    auto& c1 = b.node("Conv", {"t", "w1", "b1"}, {"c1"}, "stem");
    ModelBuilder::attr(c1, "pads", std::vector<int64_t>{1, 1, 1, 1});
    ModelBuilder::attr(c1, "strides", std::vector<int64_t>{2, 2});
    b.node("Relu", {"c1"}, {"a"}, "relu");
    b.node("Conv", {"a", "w2"}, {"y"}, "head");
    b.output("y");
    if (side) {
      b.node("Sigmoid", {"t"}, {"s"}, "side");
      b.output("s");
    }
    return b;
  };
  auto transposes = [](const Session& s) {
    int n = 0;
    for (const auto& node : s.graph().nodes) n += node.info.op_type == "Transpose";
    return n;
  };
  const std::map<std::string, Tensor> in{{"x", ramp({1, 9, 7, 3}, 0.9f)}};
  const bool fold = kDnnl && blocked_layout_is_nhwc();
  for (int threads : {1, 2}) {
    INFO(threads << " threads");
    const ModelBuilder b = model({0, 3, 1, 2}, false);
    const Session plain(b.model);
    const Session fused(b.model, {.threads = threads, .observed = std::set<std::string>{}});
    check_same_outputs(plain, fused, in);
    CHECK(transposes(fused) == (fold ? 0 : 1));
    int nhwc = 0;
    for (const auto& n : fused.graph().nodes) nhwc += n.info.nhwc_input;
    CHECK(nhwc == (fold ? 1 : 0));
    // observed: the Transpose's output must exist
    const Session observed(b.model, {.threads = threads, .observed = std::set<std::string>{"t"}});
    check_same_outputs(plain, observed, in);
    CHECK(transposes(observed) == 1);
  }
  const ModelBuilder side = model({0, 3, 1, 2}, true);
  const Session side_fused(side.model, {.observed = std::set<std::string>{}});
  check_same_outputs(Session(side.model), side_fused, in);
  CHECK(transposes(side_fused) == 1);
  // perm [0, 3, 2, 1] gives [1, 3, 7, 9]: a valid Conv input, but not NHWC read as NCHW
  const ModelBuilder other = model({0, 3, 2, 1}, false);
  const Session other_fused(other.model, {.observed = std::set<std::string>{}});
  check_same_outputs(Session(other.model), other_fused, in);
  CHECK(transposes(other_fused) == 1);
}
