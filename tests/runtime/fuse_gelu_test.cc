// Written-out Gelu (runtime/fuse_gelu.h): both export forms run as one Gelu with the unfused numbers, and the
// chain stays apart where a tensor inside it must be seen or a constant differs.
#include "runtime/fuse_gelu.h"

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

namespace {

Tensor ramp(qtool::Shape shape) {
  Tensor t(DType::Float32, shape);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = 0.173f * static_cast<float>(i) - 5.f;
  return t;
}

// x [3, 20] -> Relu -> written-out Gelu -> y; `form2` multiplies x by 0.5 first; `root2` is the divisor.
ModelBuilder gelu(bool form2, float root2 = std::sqrt(2.f)) {
  ModelBuilder b(13);
  b.input("x", DType::Float32, {3, 20});
  b.initializer("root2", Tensor::from_vector<float>({}, {root2}));
  b.initializer("one", Tensor::from_vector<float>({}, {1.f}));
  b.initializer("half", Tensor::from_vector<float>({}, {0.5f}));
  b.node("Relu", {"x"}, {"r"}, "relu");  // x of the chain is an intermediate, read by two nodes
  b.node("Div", {"r", "root2"}, {"d"}, "div");
  b.node("Erf", {"d"}, {"e"}, "erf");
  b.node("Add", {"one", "e"}, {"a"}, "add");
  if (form2) {
    b.node("Mul", {"half", "r"}, {"h"}, "half");
    b.node("Mul", {"a", "h"}, {"y"}, "gelu_out");
  } else {
    b.node("Mul", {"r", "a"}, {"m"}, "mul");
    b.node("Mul", {"m", "half"}, {"y"}, "gelu_out");
  }
  b.output("y");
  return b;
}

void check_close(const Session& got_s, const Session& want_s) {
  const Tensor x = ramp({3, 20});
  check_all_close(got_s.run({{"x", x}}).at("y"), want_s.run({{"x", x}}).at("y"), 1e-6);
}

}  // namespace

TEST_CASE("written-out Gelu runs as one Gelu in both export forms") {
  for (bool form2 : {false, true}) {
    INFO("form " << (form2 ? 2 : 1));
    const ModelBuilder b = gelu(form2);
    const Session plain(b.model), fused(b.model, {.observed = std::set<std::string>{}});
    CHECK(plain.graph().nodes.size() == 6);
    REQUIRE(fused.graph().nodes.size() == 2);
    CHECK(fused.graph().nodes[1].info.op_type == "Gelu");
    check_close(fused, plain);
  }
}

TEST_CASE("written-out Gelu stays apart where a tensor inside it must be seen or a constant differs") {
  const ModelBuilder b = gelu(false);
  const Session observed(b.model, {.observed = std::set<std::string>{"e"}});
  CHECK(observed.graph().nodes.size() == 6);
  ModelBuilder with_output = gelu(true);
  with_output.output("a");
  CHECK(Session(with_output.model, {.observed = std::set<std::string>{}}).graph().nodes.size() == 6);
  const ModelBuilder other = gelu(false, 1.5f);
  const Session s(other.model, {.observed = std::set<std::string>{}});
  CHECK(s.graph().nodes.size() == 6);
  check_close(s, Session(other.model));
}
