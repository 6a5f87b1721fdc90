// RMSNorm fusion (runtime/fuse_rmsnorm.h): the written-out forms run as one RMSNormalization node with the unfused
// numbers, and nothing folds where an intermediate must be seen or the reduction is not over the last axis.
#include "runtime/fuse_rmsnorm.h"

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

// x [2,3,8] -> RMSNorm over the last axis. `form` 0: Pow, Div(1, s), Mul(x, r), Mul(n, w) (llama2c's export);
// 1: Mul(x, x), Add(eps, m), Div(x, s), no scale; 2: form 0 with ReduceMean over axis 1 (not an RMSNorm here).
ModelBuilder rmsnorm(int form) {
  ModelBuilder b(13);
  b.input("x", DType::Float32, {2, 3, 8});
  b.initializer("two", Tensor::from_vector<float>({}, {2.f}));
  b.initializer("eps", Tensor::from_vector<float>({}, {1e-5f}));
  b.initializer("one", Tensor::from_vector<float>({}, {1.f}));
  b.initializer("w", ramp({8}, 0.4f));
  if (form == 1)
    b.node("Mul", {"x", "x"}, {"p"}, "square");
  else
    b.node("Pow", {"x", "two"}, {"p"}, "pow");
  auto& mean = b.node("ReduceMean", {"p"}, {"m"}, "mean");
  ModelBuilder::attr(mean, "axes", std::vector<int64_t>{form == 2 ? 1 : -1});
  ModelBuilder::attr(mean, "keepdims", int64_t{1});
  b.node("Add", form == 1 ? std::vector<std::string>{"eps", "m"} : std::vector<std::string>{"m", "eps"}, {"a"}, "add");
  b.node("Sqrt", {"a"}, {"s"}, "sqrt");
  if (form == 1) {
    b.node("Div", {"x", "s"}, {"y"}, "div");
  } else {
    b.node("Div", {"one", "s"}, {"r"}, "recip");
    b.node("Mul", {"x", "r"}, {"n"}, "norm");
    b.node("Mul", {"n", "w"}, {"y"}, "scale");
  }
  b.output("y");
  return b;
}

const std::map<std::string, Tensor> kInputs = {{"x", ramp({2, 3, 8}, 0.2f)}};

void check_close(const Session& got_s, const Session& want_s) {
  check_all_close(got_s.run(kInputs).at("y"), want_s.run(kInputs).at("y"), 1e-7, 1e-6);
}

}  // namespace

TEST_CASE("written-out RMSNorm runs as one RMSNormalization with the unfused numbers") {
  for (int form : {0, 1}) {
    INFO("form " << form);
    const ModelBuilder b = rmsnorm(form);
    const Session plain(b.model);
    const Session fused(b.model, {.observed = std::set<std::string>{}});
    REQUIRE(fused.graph().nodes.size() == 1);
    CHECK(fused.graph().nodes[0].info.op_type == "RMSNormalization");
    check_close(fused, plain);
    // Against the formula in double: y = x / sqrt(mean(x²) + eps) · w.
    const Tensor y = fused.run(kInputs).at("y");
    const float* x = kInputs.at("x").data<float>();
    const Tensor w = ramp({8}, 0.4f);
    for (int64_t r = 0; r < 6; ++r) {
      double sq = 0;
      for (int j = 0; j < 8; ++j) sq += double(x[r * 8 + j]) * x[r * 8 + j];
      const double inv = 1 / std::sqrt(sq / 8 + 1e-5);
      for (int j = 0; j < 8; ++j) {
        const double want = x[r * 8 + j] * inv * (form == 0 ? w.data<float>()[j] : 1.f);
        CHECK(y.data<float>()[r * 8 + j] == Approx(want).epsilon(1e-6).margin(1e-7));
      }
    }
  }
}

TEST_CASE("written-out RMSNorm stays apart where an intermediate must be seen or the mean is over another axis") {
  SECTION("an observed mean of squares") {
    const ModelBuilder b = rmsnorm(0);
    const Session s(b.model, {.observed = std::set<std::string>{"m"}});
    CHECK(s.graph().nodes.size() == 7);
    check_close(s, Session(b.model));
  }
  SECTION("the normalised value before the scale is a graph output: the norm folds, the scale Mul stays") {
    ModelBuilder b = rmsnorm(0);
    b.output("n");
    const Session s(b.model, {.observed = std::set<std::string>{}});
    CHECK(s.graph().nodes.size() == 2);
    check_close(s, Session(b.model));
  }
  SECTION("ReduceMean over axis 1") {
    const ModelBuilder b = rmsnorm(2);
    const Session s(b.model, {.observed = std::set<std::string>{}});
    CHECK(s.graph().nodes.size() == 7);
    check_close(s, Session(b.model));
  }
}
