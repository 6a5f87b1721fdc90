// If / Loop / Scan with names from enclosing scopes, including a body nested two levels deep.
#include <catch2/catch.hpp>
#include <map>

#include "model_builder.h"
#include "runtime/session.h"

using qtool::DType;
using qtool::Tensor;
using qtool::runtime::Session;
using qtool::test::ModelBuilder;

namespace {

onnx::GraphProto graph(const std::string& name) {
  onnx::GraphProto g;
  g.set_name(name);
  return g;
}
void add_node(onnx::GraphProto& g, const std::string& op, std::vector<std::string> in, std::vector<std::string> out) {
  auto* n = g.add_node();
  n->set_op_type(op);
  for (auto& i : in) n->add_input(i);
  for (auto& o : out) n->add_output(o);
}

}  // namespace

// Loop over `steps`: acc = acc + If(i is even ? w : -w) where w is a main-graph initializer read
// from inside the If inside the Loop body; the scan output records acc after every iteration.
ModelBuilder loop_with_if() {
  ModelBuilder b(13);
  b.input("steps", DType::Int64, {});
  b.input("acc0", DType::Float32, {2});
  b.initializer("w", Tensor::from_vector<float>({2}, {1.0f, 10.0f}));
  b.initializer("two", Tensor::scalar<int64_t>(2));
  b.initializer("zero", Tensor::scalar<int64_t>(0));

  onnx::GraphProto then_g = graph("then"), else_g = graph("else");
  add_node(then_g, "Identity", {"w"}, {"t_out"});
  ModelBuilder::value(then_g.add_output(), "t_out", DType::Float32, {2});
  add_node(else_g, "Neg", {"w"}, {"e_out"});
  ModelBuilder::value(else_g.add_output(), "e_out", DType::Float32, {2});

  onnx::GraphProto body = graph("body");
  ModelBuilder::value(body.add_input(), "i", DType::Int64, {});
  ModelBuilder::value(body.add_input(), "cond_in", DType::Bool, {});
  ModelBuilder::value(body.add_input(), "acc_in", DType::Float32, {2});
  add_node(body, "Mod", {"i", "two"}, {"r"});
  add_node(body, "Equal", {"r", "zero"}, {"even"});
  add_node(body, "If", {"even"}, {"delta"});
  ModelBuilder::attr(*body.mutable_node(body.node_size() - 1), "then_branch", then_g);
  ModelBuilder::attr(*body.mutable_node(body.node_size() - 1), "else_branch", else_g);
  add_node(body, "Add", {"acc_in", "delta"}, {"acc_out"});
  add_node(body, "Identity", {"cond_in"}, {"cond_out"});
  add_node(body, "Identity", {"acc_out"}, {"scan_out"});
  ModelBuilder::value(body.add_output(), "cond_out", DType::Bool, {});
  ModelBuilder::value(body.add_output(), "acc_out", DType::Float32, {2});
  ModelBuilder::value(body.add_output(), "scan_out", DType::Float32, {2});

  auto& loop = b.node("Loop", {"steps", "", "acc0"}, {"acc", "history"}, "loop");
  ModelBuilder::attr(loop, "body", body);
  b.output("acc");
  b.output("history");
  return b;
}

TEST_CASE("Loop with a nested If reads outer-scope values and stacks scan outputs") {
  Session s(loop_with_if().model);
  const auto out =
      s.run({{"steps", Tensor::scalar<int64_t>(3)}, {"acc0", Tensor::from_vector<float>({2}, {0.5f, 0.5f})}});
  // i=0: +w, i=1: -w, i=2: +w  -> acc = 0.5 + w
  const Tensor& acc = out.at("acc");
  CHECK(acc.data<float>()[0] == 1.5f);
  CHECK(acc.data<float>()[1] == 10.5f);
  const Tensor& h = out.at("history");
  REQUIRE(h.shape() == qtool::Shape{3, 2});
  CHECK(std::vector<float>(h.data<float>(), h.data<float>() + 6) ==
        std::vector<float>{1.5f, 10.5f, 0.5f, 0.5f, 1.5f, 10.5f});
  // The Loop node keeps 'w', 'two' and 'zero' alive for its body.
  const auto& g = s.graph();
  CHECK(g.nodes.at(0).implicit_inputs.size() == 3);
}

// Calibration observes body tensors through the tap (RunOptions::tap_subgraphs): every execution of a body,
// every Loop iteration, reports its formal inputs and node outputs; without the flag only main-graph values.
TEST_CASE("the tap sees body values once per execution with tap_subgraphs") {
  Session s(loop_with_if().model);
  const std::map<std::string, Tensor> in = {{"steps", Tensor::scalar<int64_t>(3)},
                                            {"acc0", Tensor::from_vector<float>({2}, {0.5f, 0.5f})}};
  std::map<std::string, std::vector<float>> seen;
  qtool::runtime::RunOptions ro;
  ro.tap = [&](const std::string& n, const Tensor& v) {
    seen[n].push_back(v.dtype() == DType::Float32 ? v.data<float>()[0] : 0.0f);
  };
  s.run(in, ro);
  CHECK(seen.count("acc") == 1);
  CHECK(seen.count("acc_in") == 0);
  seen.clear();
  ro.tap_subgraphs = true;
  s.run(in, ro);
  CHECK(seen["acc_in"] == std::vector<float>{0.5f, 1.5f, 0.5f});   // the body's formal input, per iteration
  CHECK(seen["acc_out"] == std::vector<float>{1.5f, 0.5f, 1.5f});  // a body node output
  CHECK(seen["t_out"] == std::vector<float>{1.0f, 1.0f});          // then branch: iterations 0 and 2
  CHECK(seen["e_out"] == std::vector<float>{-1.0f});               // else branch: iteration 1
  CHECK(seen["acc"].size() == 1);
}

TEST_CASE("Scan accumulates a running sum in reverse along axis 1") {
  ModelBuilder b(11);
  b.input("init", DType::Float32, {2});
  b.input("xs", DType::Float32, {2, 3});
  onnx::GraphProto body = graph("body");
  ModelBuilder::value(body.add_input(), "s_in", DType::Float32, {2});
  ModelBuilder::value(body.add_input(), "x_t", DType::Float32, {2});
  add_node(body, "Add", {"s_in", "x_t"}, {"s_out"});
  add_node(body, "Identity", {"s_out"}, {"y_t"});
  ModelBuilder::value(body.add_output(), "s_out", DType::Float32, {2});
  ModelBuilder::value(body.add_output(), "y_t", DType::Float32, {2});
  auto& scan = b.node("Scan", {"init", "xs"}, {"final", "ys"});
  ModelBuilder::attr(scan, "body", body);
  ModelBuilder::attr(scan, "num_scan_inputs", int64_t{1});
  ModelBuilder::attr(scan, "scan_input_axes", std::vector<int64_t>{1});
  ModelBuilder::attr(scan, "scan_input_directions", std::vector<int64_t>{1});
  b.output("final");
  b.output("ys");
  const auto out = Session(b.model).run({{"init", Tensor::from_vector<float>({2}, {0, 100})},
                                         {"xs", Tensor::from_vector<float>({2, 3}, {1, 2, 3, 4, 5, 6})}});
  CHECK(std::vector<float>(out.at("final").data<float>(), out.at("final").data<float>() + 2) ==
        std::vector<float>{6, 115});
  // Iterations see columns 2, 1, 0: running sums [3,106], [5,111], [6,115].
  CHECK(std::vector<float>(out.at("ys").data<float>(), out.at("ys").data<float>() + 6) ==
        std::vector<float>{3, 106, 5, 111, 6, 115});
}

TEST_CASE("unsupported ops inside subgraphs are reported with the main graph's") {
  ModelBuilder b(13);
  b.input("c", DType::Bool, {});
  onnx::GraphProto then_g = graph("then"), else_g = graph("else");
  add_node(then_g, "Mystery", {"c"}, {"t"});
  ModelBuilder::value(then_g.add_output(), "t", DType::Float32, {});
  add_node(else_g, "Identity", {"c"}, {"e"});
  ModelBuilder::value(else_g.add_output(), "e", DType::Float32, {});
  auto& n = b.node("If", {"c"}, {"y"});
  ModelBuilder::attr(n, "then_branch", then_g);
  ModelBuilder::attr(n, "else_branch", else_g);
  b.output("y");
  CHECK_THROWS_AS(Session(b.model), qtool::UnsupportedError);
  CHECK_THROWS_WITH(Session(b.model), Catch::Contains("Mystery at opset 13 (node 'Mystery_0')"));
}
