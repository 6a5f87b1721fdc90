// analysis::quantized_activations / keep_float on a small QDQ graph run by the interpreter.
#include "analysis/qdq_bypass.h"

#include <catch2/catch.hpp>

#include "runtime/model_builder.h"
#include "runtime/session.h"

using qtool::DType;
using qtool::Tensor;
using namespace qtool::analysis;

namespace {

// x -> Q/DQ (scale 0.5) -> Add(DQ(Q(w))) -> Relu -> r -> Q/DQ (scale 1) -> y. Activations x and r; w is a weight.
onnx::ModelProto qdq_model() {
  qtool::test::ModelBuilder b;
  b.input("x", DType::Float32, {1, 4});
  b.output("y");
  b.initializer("s_half", Tensor::scalar<float>(0.5f));
  b.initializer("s_one", Tensor::scalar<float>(1.0f));
  b.initializer("zp", Tensor::scalar<uint8_t>(0));
  b.initializer("w", Tensor::from_vector<float>({4}, {0.3f, -0.2f, 0.1f, 0.7f}));
  b.node("QuantizeLinear", {"x", "s_half", "zp"}, {"x_q"});
  b.node("DequantizeLinear", {"x_q", "s_half", "zp"}, {"x_dq"});
  b.node("QuantizeLinear", {"w", "s_half", "zp"}, {"w_q"});
  b.node("DequantizeLinear", {"w_q", "s_half", "zp"}, {"w_dq"});
  b.node("Add", {"x_dq", "w_dq"}, {"a"});
  b.node("Relu", {"a"}, {"r"});
  b.node("QuantizeLinear", {"r", "s_one", "zp"}, {"r_q"});
  b.node("DequantizeLinear", {"r_q", "s_one", "zp"}, {"y"});
  return b.model;
}

std::vector<float> run(const onnx::ModelProto& m) {
  const qtool::runtime::Session s(m);
  const auto out = s.run({{"x", Tensor::from_vector<float>({1, 4}, {1.26f, -0.4f, 0.74f, 2.0f})}});
  const auto v = out.at("y").span<float>();
  return {v.begin(), v.end()};
}

int count(const onnx::ModelProto& m, const std::string& op) {
  int n = 0;
  for (const auto& node : m.graph().node()) n += node.op_type() == op;
  return n;
}

}  // namespace

TEST_CASE("qdq_bypass: activations with Q/DQ are listed in node order, weights are not") {
  CHECK(quantized_activations(qdq_model()) == std::vector<std::string>{"x", "r"});
}

TEST_CASE("qdq_bypass: keep_float removes exactly that activation's Q/DQ") {
  const auto m = qdq_model();
  // x_dq = (1.5, 0, 0.5, 2), w_dq = (0.5, 0, 0, 0.5): r = (2, 0, 0.5, 2.5); Q with scale 1 rounds half to even.
  CHECK(run(m) == std::vector<float>{2, 0, 0, 2});
  const auto r_float = keep_float(m, "r");
  CHECK(run(r_float) == std::vector<float>{2, 0, 0.5f, 2.5f});
  CHECK(count(r_float, "QuantizeLinear") == 2);  // x's and w's
  CHECK(count(r_float, "Identity") == 1);
  CHECK(quantized_activations(r_float) == std::vector<std::string>{"x"});
  // x float: r = relu(x + w_dq) = (1.76, 0, 0.74, 2.5) -> Q/DQ with scale 1: (2, 0, 1, 2).
  CHECK(run(keep_float(m, "x")) == std::vector<float>{2, 0, 1, 2});
  CHECK(count(m, "QuantizeLinear") == 3);  // the original is untouched
}

TEST_CASE("qdq_bypass: a weight or an unknown tensor has no activation Q/DQ to remove") {
  CHECK_THROWS_AS(keep_float(qdq_model(), "w"), qtool::BadInputError);
  CHECK_THROWS_AS(keep_float(qdq_model(), "nope"), qtool::BadInputError);
}
