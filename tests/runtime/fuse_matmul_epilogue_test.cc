// MatMul epilogue fusion (runtime/fuse_matmul_epilogue.h): a fused session gives the unfused session's numbers
// with fewer nodes, folds a constant scalar scale, a constant [N] bias and an added tensor that exists before the
// MatMul, and never hides a graph output or an observed tensor.
#include "runtime/fuse_matmul_epilogue.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <set>
#include <string>

#include "model_builder.h"
#include "runtime/session.h"
#include "tensor_checks.h"

using qtool::DType;
using qtool::Tensor;
using qtool::runtime::Session;
using qtool::test::check_all_close;
using qtool::test::ModelBuilder;
using qtool::test::ramp;

namespace {

// Attention-like block: q [2,3,5,8] x k^T [2,3,8,5] / 2.5 -> Softmax -> x [2,3,5,8] x w [8,6] + b [6] -> Relu.
ModelBuilder block() {
  ModelBuilder b(13);
  b.input("q", DType::Float32, {2, 3, 5, 8});
  b.input("kt", DType::Float32, {2, 3, 8, 5});
  b.initializer("scale", Tensor::from_vector<float>({}, {2.5f}));
  b.initializer("w", ramp({8, 6}, 0.2f));
  b.initializer("bias", ramp({6}, 0.6f));
  b.initializer("v", ramp({2, 3, 5, 8}, 0.9f));
  b.node("MatMul", {"q", "kt"}, {"s"}, "qk");
  b.node("Div", {"s", "scale"}, {"ss"}, "scale_div");
  b.node("Softmax", {"ss"}, {"p"}, "softmax");
  b.node("MatMul", {"p", "v"}, {"o"}, "pv");
  b.node("MatMul", {"o", "w"}, {"t"}, "proj");
  b.node("Add", {"bias", "t"}, {"tb"}, "proj_bias");  // the bias as the first operand
  b.node("Relu", {"tb"}, {"y"}, "act");
  b.output("y");
  return b;
}

void check_close(const Session& got_s, const Session& want_s) {
  const std::map<std::string, Tensor> in = {{"q", ramp({2, 3, 5, 8}, 0.1f)}, {"kt", ramp({2, 3, 8, 5}, 0.4f)}};
  check_all_close(got_s.run(in).at("y"), want_s.run(in).at("y"), 1e-5);
}

}  // namespace

TEST_CASE("MatMul epilogue fusion: scale and bias fold into the MatMul with the unfused numbers") {
  const ModelBuilder b = block();
  const Session plain(b.model);
  const Session fused(b.model, {.observed = std::set<std::string>{}});
  CHECK(plain.graph().nodes.size() == 7);
  CHECK(fused.graph().nodes.size() == 3);  // qk/2.5 + softmax, pv, proj+bias+relu
  for (const auto& n : fused.graph().nodes)
    if (n.info.name == "qk") CHECK(n.info.matmul_alpha == 1.f / 2.5f);
  check_close(fused, plain);
}

TEST_CASE("MatMul epilogue fusion keeps observed tensors and graph outputs, and folds only what it can") {
  SECTION("an observed scaled score and a bias-add output that is a graph output stay") {
    ModelBuilder b = block();
    b.output("tb");
    const Session s(b.model, {.observed = std::set<std::string>{"s"}});
    // qk and its Div stay apart; the bias still folds (the fused MatMul writes tb), Relu(tb) does not.
    CHECK(s.graph().nodes.size() == 6);
    std::set<std::string> seen;
    s.run({{"q", ramp({2, 3, 5, 8}, 0.1f)}, {"kt", ramp({2, 3, 8, 5}, 0.4f)}},
          {.tap = [&](const std::string& name, const Tensor&) { seen.insert(name); }});
    CHECK(seen.count("s"));
    CHECK(seen.count("tb"));
    check_close(s, Session(b.model));
  }
  SECTION("a scale after the bias, a Mul by a tensor and a constant divided by the product stay") {
    ModelBuilder b(13);
    b.input("x", DType::Float32, {4, 8});
    b.initializer("w", ramp({8, 6}, 0.2f));
    b.initializer("row", ramp({4, 1}, 0.3f));  // not a [N] bias: folds as an addend
    b.initializer("bias", ramp({6}, 0.6f));
    b.initializer("two", Tensor::from_vector<float>({}, {2.f}));
    b.node("MatMul", {"x", "w"}, {"t1"}, "mm1");
    b.node("Add", {"t1", "row"}, {"y1"}, "add_row");
    b.node("MatMul", {"x", "w"}, {"t2"}, "mm2");
    b.node("Add", {"t2", "bias"}, {"t3"}, "add_bias");
    b.node("Mul", {"t3", "two"}, {"y2"}, "scale_after_bias");
    b.node("MatMul", {"x", "w"}, {"t4"}, "mm3");
    b.node("Mul", {"t4", "x4"}, {"y3"}, "mul_by_input");
    b.node("MatMul", {"x", "w"}, {"t5"}, "mm4");
    b.node("Div", {"two", "t5"}, {"y4"}, "two_over");
    b.input("x4", DType::Float32, {4, 6});
    b.output("y1");
    b.output("y2");
    b.output("y3");
    b.output("y4");
    const Session s(b.model, {.observed = std::set<std::string>{}});
    CHECK(s.graph().nodes.size() == 7);  // add_row folds into mm1, add_bias into mm2
    const Session plain(b.model);
    const std::map<std::string, Tensor> in = {{"x", ramp({4, 8}, 0.1f)}, {"x4", ramp({4, 6}, 0.7f)}};
    const auto want = plain.run(in);
    const auto got = s.run(in);
    for (const char* o : {"y1", "y2", "y3", "y4"}) check_all_close(got.at(o), want.at(o), 1e-5);
  }
}

TEST_CASE("MatMul epilogue fusion: an added tensor (residual, mask) folds into the MatMul with the unfused numbers") {
  ModelBuilder b(13);
  b.input("x", DType::Float32, {2, 5, 8});
  b.input("mask", DType::Float32, {5, 5});
  b.input("late", DType::Float32, {8});
  b.initializer("w", ramp({8, 8}, 0.2f));
  b.initializer("bias", ramp({8}, 0.6f));
  b.initializer("k", ramp({2, 8, 5}, 0.4f));
  b.initializer("big", ramp({3, 2, 5, 8}, 0.5f));
  // Residual block: r = Relu(x + (x·w + bias)); the Relu folds after the addend.
  b.node("MatMul", {"x", "w"}, {"h"}, "fc");
  b.node("Add", {"h", "bias"}, {"hb"}, "fc_bias");
  b.node("Add", {"x", "hb"}, {"res"}, "residual");
  b.node("Relu", {"res"}, {"r"}, "act");
  // Masked scores: (r·k)·0.5 + mask [5,5] broadcast over the batch.
  b.node("MatMul", {"r", "k"}, {"s"}, "qk");
  b.initializer("half", Tensor::from_vector<float>({}, {0.5f}));
  b.node("Mul", {"s", "half"}, {"ss"}, "scale");
  b.node("Add", {"ss", "mask"}, {"y1"}, "add_mask");
  // An addend that broadcasts the product up: [2,5,8] + [3,2,5,8] -> [3,2,5,8], added after the GEMM.
  b.node("MatMul", {"x", "w"}, {"t2"}, "mm_up");
  b.node("Add", {"big", "t2"}, {"y2"}, "add_big");
  // An addend computed after the MatMul stays a node of its own.
  b.node("MatMul", {"x", "w"}, {"t3"}, "mm_before");
  b.node("Neg", {"late"}, {"later"}, "after");
  b.node("Add", {"t3", "later"}, {"y3"}, "add_later");
  b.output("y1");
  b.output("y2");
  b.output("y3");
  const Session plain(b.model);
  const Session fused(b.model, {.observed = std::set<std::string>{}});
  CHECK(plain.graph().nodes.size() == 12);
  CHECK(fused.graph().nodes.size() == 6);  // fc, qk, mm_up, mm_before, after, add_later
  for (const auto& n : fused.graph().nodes)
    if (n.info.name == "fc") {
      REQUIRE(n.inputs.size() == 4);
      CHECK(n.info.inputs[2] == "bias");
      CHECK(n.info.inputs[3] == "x");
    }
  const std::map<std::string, Tensor> in = {
      {"x", ramp({2, 5, 8}, 0.1f)}, {"mask", ramp({5, 5}, 0.3f)}, {"late", ramp({8}, 0.7f)}};
  const auto want = plain.run(in);
  const auto got = fused.run(in);
  for (const char* o : {"y1", "y2", "y3"}) {
    INFO(o);
    check_all_close(got.at(o), want.at(o), 1e-5);
  }
  SECTION("an observed residual sum stays") {
    const Session s(b.model, {.observed = std::set<std::string>{"res"}});
    std::set<std::string> seen;
    s.run(in, {.tap = [&](const std::string& name, const Tensor&) { seen.insert(name); }});
    CHECK(seen.count("res"));
    CHECK_FALSE(seen.count("hb"));  // the bias still folds
  }
}
