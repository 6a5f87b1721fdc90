// Graph preparation and the executor: numbers, topological order, constants, the tap, input checks
// and the unsupported-op report.
#include "runtime/session.h"

#include <catch2/catch.hpp>

#include "model_builder.h"

using qtool::DType;
using qtool::Tensor;
using qtool::runtime::RunOptions;
using qtool::runtime::Session;
using qtool::test::ModelBuilder;

namespace {

Tensor f32(qtool::Shape shape, std::vector<float> v) { return Tensor::from_vector<float>(std::move(shape), v); }

// y = Relu(x + b) * c with c a Constant node and the nodes stored out of order.
ModelBuilder small_model() {
  ModelBuilder b(13);
  b.input("x", DType::Float32, {-1, 3});
  b.initializer("b", f32({3}, {1.0f, -2.0f, 0.5f}));
  b.node("Mul", {"r", "c"}, {"y"}, "scale");
  b.node("Relu", {"s"}, {"r"});
  b.node("Add", {"x", "b"}, {"s"}, "bias");
  auto& c = b.node("Constant", {}, {"c"});
  ModelBuilder::attr(c, "value", f32({}, {2.0f}));
  b.output("y");
  return b;
}

}  // namespace

TEST_CASE("session runs a small graph with constants and unordered nodes") {
  Session s(small_model().model);
  auto out = s.run({{"x", f32({2, 3}, {0, 0, 0, -5, 4, 1})}});
  REQUIRE(out.size() == 1);
  const Tensor& y = out.at("y");
  REQUIRE(y.shape() == qtool::Shape{2, 3});
  const std::vector<float> want = {2, 0, 1, 0, 4, 3};
  for (int i = 0; i < 6; ++i) CHECK(y.data<float>()[i] == want[i]);
  // Nodes are sorted: Add, Relu, Mul; the unnamed Relu got "<op>_<index>".
  const auto& nodes = s.graph().nodes;
  REQUIRE(nodes.size() == 3);
  CHECK(nodes[0].info.name == "bias");
  CHECK(nodes[1].info.name == "Relu_1");
  CHECK(nodes[2].info.name == "scale");
  CHECK(nodes[2].info.const_inputs[1] != nullptr);  // the folded Constant
}

TEST_CASE("tap sees inputs then every node output in execution order") {
  Session s(small_model().model);
  std::vector<std::string> names;
  std::vector<float> first;
  RunOptions ro;
  ro.tap = [&](const std::string& n, const Tensor& v) {
    names.push_back(n);
    first.push_back(v.data<float>()[0]);
  };
  s.run({{"x", f32({1, 3}, {1, 1, 1})}}, ro);
  CHECK(names == std::vector<std::string>{"x", "s", "r", "y"});
  CHECK(first == std::vector<float>{1, 2, 2, 4});
}

TEST_CASE("intermediate values are released after their last use") {
  Session s(small_model().model);
  const auto& g = s.graph();
  CHECK(g.use_counts[g.id_of("s")] == 1);
  CHECK(g.use_counts[g.id_of("x")] == 1);
  CHECK(g.is_output[g.id_of("y")]);
  // Keep a copy of 's' from the tap: after the run only our copy holds it (the frame dropped its own).
  Tensor kept;
  RunOptions ro;
  ro.tap = [&](const std::string& n, const Tensor& v) {
    if (n == "s") kept = v;
  };
  s.run({{"x", f32({1, 3}, {1, 1, 1})}}, ro);
  CHECK(kept.data<float>()[0] == 2.0f);
}

TEST_CASE("peak live memory follows the live set, not the graph size") {
  // A chain of 12 Relu/Neg nodes over a 1 MiB tensor: at most the input, one producer's input and its
  // output are alive at once (~3 MiB), far below the 13 MiB all values would take.
  ModelBuilder b(13);
  b.input("x", DType::Float32, {256, 1024});
  std::string prev = "x";
  for (int i = 0; i < 12; ++i) {
    std::string out = "y";
    if (i < 11) out = std::string(1, static_cast<char>('a' + i));
    b.node(i % 2 ? "Neg" : "Relu", {prev}, {out});
    prev = out;
  }
  b.output("y");
  Session s(b.model);
  qtool::runtime::RunStats stats;
  RunOptions ro;
  ro.stats = &stats;
  s.run({{"x", Tensor::zeros(DType::Float32, {256, 1024})}}, ro);
  CHECK(stats.nodes_run == 12);
  const size_t mib = size_t{1} << 20;
  CHECK(stats.peak_live_bytes >= 2 * mib);
  CHECK(stats.peak_live_bytes <= 2 * mib);  // x is freed after the first node: input + output only
}

TEST_CASE("inputs are validated by name, dtype and shape") {
  Session s(small_model().model);
  auto msg = [&](std::map<std::string, Tensor> in) {
    try {
      s.run(in);
    } catch (const qtool::BadInputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  CHECK_THAT(msg({}), Catch::Contains("missing input 'x'") && Catch::Contains("float [N,3]"));
  CHECK_THAT(msg({{"x", f32({1, 3}, {1, 2, 3})}, {"z", f32({1}, {1})}}), Catch::Contains("unknown input 'z'"));
  CHECK_THAT(msg({{"x", Tensor::from_vector<int64_t>({1, 3}, {1, 2, 3})}}),
             Catch::Contains("input 'x' has dtype int64") && Catch::Contains("expects float"));
  CHECK_THAT(msg({{"x", f32({3}, {1, 2, 3})}}), Catch::Contains("input 'x' has shape [3] (rank 1)"));
  CHECK_THAT(msg({{"x", f32({1, 2}, {1, 2})}}), Catch::Contains("dimension 1 must be 3"));
}

TEST_CASE("unsupported ops are reported together, before running") {
  ModelBuilder b(13);
  b.input("x", DType::Float32, {2});
  b.node("FancyOp", {"x"}, {"a"}, "f1");
  b.node("Relu", {"a"}, {"r"});
  b.node("FancyOp", {"r"}, {"c"}, "f2");
  b.node("OtherOp", {"c"}, {"y"});
  b.output("y");
  try {
    Session s(b.model);
    FAIL("no error");
  } catch (const qtool::UnsupportedError& e) {
    const std::string m = e.what();
    CHECK_THAT(m, Catch::Contains("FancyOp at opset 13 (nodes 'f1', 'f2')"));
    CHECK_THAT(m, Catch::Contains("OtherOp at opset 13 (node 'OtherOp_3')"));
    CHECK_THAT(m, Catch::Contains("3 node(s)"));
  }
}

TEST_CASE("cycles and dangling inputs are errors naming the node") {
  ModelBuilder b(13);
  b.input("x", DType::Float32, {2});
  b.node("Add", {"x", "q"}, {"p"}, "n1");
  b.node("Relu", {"p"}, {"q"}, "n2");
  b.output("q");
  CHECK_THROWS_WITH(Session(b.model), Catch::Contains("cycle") && Catch::Contains("'n1'"));
  ModelBuilder d(13);
  d.input("x", DType::Float32, {2});
  d.node("Relu", {"nothing"}, {"y"}, "lost");
  d.output("y");
  CHECK_THROWS_WITH(Session(d.model), Catch::Contains("Relu 'lost': input 'nothing' is not produced"));
}

TEST_CASE("initializers listed as inputs keep their value unless fed") {
  ModelBuilder b(9);
  b.input("x", DType::Float32, {2});
  b.input("w", DType::Float32, {2});
  b.initializer("w", f32({2}, {10, 20}));
  b.node("Add", {"x", "w"}, {"y"});
  b.output("y");
  Session s(b.model);
  REQUIRE(s.inputs().size() == 1);
  REQUIRE(s.graph().optional_inputs.size() == 1);
  CHECK(s.graph().nodes[0].info.const_inputs[1] == nullptr);  // overridable: not a constant for kernels
  CHECK(s.run({{"x", f32({2}, {1, 2})}}).at("y").data<float>()[1] == 22.0f);
  CHECK(s.run({{"x", f32({2}, {1, 2})}, {"w", f32({2}, {0, 0})}}).at("y").data<float>()[1] == 2.0f);
}
