// Elementwise kernels: the broadcasting fast path against its reference twin, bitwise equality of
// 1- and 2-thread runs, and opset-dependent semantics (Clip-6 attributes, Squeeze-11, Split-18).
#include <catch2/catch.hpp>
#include <cmath>
#include <random>

#include "model_builder.h"
#include "runtime/kernels/broadcast.h"
#include "runtime/session.h"

using qtool::DType;
using qtool::Shape;
using qtool::Tensor;
using qtool::runtime::Session;
using qtool::test::ModelBuilder;
namespace k = qtool::runtime::kernels;

namespace {

Tensor random_f32(const Shape& shape, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-3.0f, 3.0f);
  Tensor t(DType::Float32, shape);
  for (auto& v : t.span<float>()) v = d(rng);
  return t;
}

qtool::runtime::NodeInfo dummy_node() {
  qtool::runtime::NodeInfo n;
  n.op_type = "Test";
  n.name = "t";
  return n;
}

}  // namespace

TEST_CASE("broadcast fast path equals the reference indexer bitwise") {
  const auto node = dummy_node();
  const std::vector<std::pair<Shape, Shape>> cases = {
      {{2, 3, 4}, {2, 3, 4}},    {{2, 3, 4}, {4}},   {{2, 3, 4}, {3, 1}},        {{1}, {5, 1, 7}},
      {{8, 1, 6, 1}, {7, 1, 5}}, {{}, {3, 3}},       {{64, 1, 33}, {1, 700, 1}}, {{3, 1, 1}, {1, 1, 1}},
      {{40, 50, 60}, {50, 1}},   {{2, 0, 3}, {1, 3}}};
  uint32_t seed = 1;
  for (const auto& [sa, sb] : cases) {
    const Tensor a = random_f32(sa, seed++), b = random_f32(sb, seed++);
    const k::BroadcastPlan p = k::plan_broadcast({&sa, &sb}, node);
    auto f = [](float x, float y) { return x * y + std::sin(x - y); };
    Tensor ref(DType::Float32, p.out_shape), one(DType::Float32, p.out_shape), two(DType::Float32, p.out_shape);
    k::broadcast_binary_reference(p, a.data<float>(), b.data<float>(), ref.data<float>(), f);
    k::broadcast_binary(p, a.data<float>(), b.data<float>(), one.data<float>(), 1, f);
    k::broadcast_binary(p, a.data<float>(), b.data<float>(), two.data<float>(), 2, f);
    INFO(qtool::shape_str(sa) << " x " << qtool::shape_str(sb));
    CHECK(one.same_as(ref));
    CHECK(two.same_as(ref));
  }
  // Three-way (Where-like).
  const Shape sc{1, 5, 1}, sx{4, 1, 6}, sy{6};
  const Tensor c = random_f32(sc, 7), x = random_f32(sx, 8), y = random_f32(sy, 9);
  const k::BroadcastPlan p = k::plan_broadcast({&sc, &sx, &sy}, node);
  auto g = [](float s, float u, float v) { return s > 0 ? u : v; };
  Tensor ref(DType::Float32, p.out_shape), fast(DType::Float32, p.out_shape);
  k::broadcast_ternary_reference(p, c.data<float>(), x.data<float>(), y.data<float>(), ref.data<float>(), g);
  k::broadcast_ternary(p, c.data<float>(), x.data<float>(), y.data<float>(), fast.data<float>(), 2, g);
  CHECK(fast.same_as(ref));
  const Shape bad_a{2, 3}, bad_b{4, 3};
  CHECK_THROWS_WITH(k::plan_broadcast({&bad_a, &bad_b}, node),
                    Catch::Contains("Test 't': shapes [2,3] and [4,3] cannot be broadcast together"));
}

TEST_CASE("1 and 2 threads give bitwise identical results for every tensor of an elementwise graph") {
  // Large enough (> kParallelGrain elements) that kernels really split work across threads.
  ModelBuilder b(13);
  b.input("x", DType::Float32, {1, 64, 64, 32});
  b.input("y", DType::Float32, {64, 1, 32});
  b.node("Add", {"x", "y"}, {"a"});
  b.node("Mul", {"a", "x"}, {"m"});
  b.node("Sigmoid", {"m"}, {"s"});
  b.node("Tanh", {"a"}, {"t"});
  b.node("Erf", {"t"}, {"e"});
  b.node("Div", {"e", "y"}, {"d"});
  b.node("Exp", {"d"}, {"ex"});
  b.node("Greater", {"s", "t"}, {"g"});
  b.node("Where", {"g", "ex", "y"}, {"w"});
  b.initializer("lo", Tensor::scalar<float>(-1.0f));
  b.initializer("hi", Tensor::scalar<float>(1.0f));
  b.node("Clip", {"w", "lo", "hi"}, {"c"});
  b.node("Cast", {"c"}, {"ci"});
  ModelBuilder::attr(b.graph().mutable_node(b.graph().node_size() - 1)[0], "to", int64_t{6});
  b.node("Transpose", {"c"}, {"tr"});
  ModelBuilder::attr(b.graph().mutable_node(b.graph().node_size() - 1)[0], "perm", std::vector<int64_t>{0, 3, 1, 2});
  b.node("Sum", {"tr", "tr", "tr"}, {"out"});
  b.output("out");
  b.output("ci", DType::Int32);
  const std::map<std::string, Tensor> in = {{"x", random_f32({1, 64, 64, 32}, 11)}, {"y", random_f32({64, 1, 32}, 12)}};
  auto collect = [&](int threads) {
    std::map<std::string, Tensor> all;
    qtool::runtime::RunOptions ro;
    ro.tap = [&](const std::string& n, const Tensor& v) { all[n] = v; };
    Session s(b.model, {.threads = threads});
    s.run(in, ro);
    return all;
  };
  const auto one = collect(1), two = collect(2);
  REQUIRE(one.size() == 15);
  for (const auto& [name, t] : one) {
    INFO(name);
    CHECK(t.same_as(two.at(name)));
  }
}

TEST_CASE("opset-dependent forms: Clip-6 attributes, Squeeze-11 axes attribute, Split-18 num_outputs") {
  {
    ModelBuilder b(6);
    b.input("x", DType::Float32, {4});
    auto& n = b.node("Clip", {"x"}, {"y"});
    ModelBuilder::attr(n, "min", -0.5f);
    ModelBuilder::attr(n, "max", 0.25f);
    b.output("y");
    const Tensor y = Session(b.model).run({{"x", Tensor::from_vector<float>({4}, {-2.f, -0.1f, 0.2f, 9.f})}}).at("y");
    CHECK(std::vector<float>(y.data<float>(), y.data<float>() + 4) == std::vector<float>{-0.5f, -0.1f, 0.2f, 0.25f});
  }
  {
    ModelBuilder b(11);
    b.input("x", DType::Float32, {1, 3, 1});
    auto& n = b.node("Squeeze", {"x"}, {"y"});
    ModelBuilder::attr(n, "axes", std::vector<int64_t>{-1});
    b.output("y");
    CHECK(Session(b.model).run({{"x", random_f32({1, 3, 1}, 3)}}).at("y").shape() == Shape{1, 3});
  }
  {
    ModelBuilder b(18);
    b.input("x", DType::Float32, {7});
    auto& n = b.node("Split", {"x"}, {"a", "b", "c"});
    ModelBuilder::attr(n, "num_outputs", int64_t{3});
    b.output("a");
    b.output("c");
    const auto out = Session(b.model).run({{"x", random_f32({7}, 4)}});
    CHECK(out.at("a").shape() == Shape{3});
    CHECK(out.at("c").shape() == Shape{1});
  }
  {
    // Mod: integer result takes the divisor's sign (fmod=0); Round: half to even.
    ModelBuilder b(13);
    b.input("a", DType::Int32, {4});
    b.input("d", DType::Int32, {4});
    b.input("r", DType::Float32, {4});
    b.node("Mod", {"a", "d"}, {"m"});
    b.node("Round", {"r"}, {"q"});
    b.output("m", DType::Int32);
    b.output("q");
    const auto out = Session(b.model).run({{"a", Tensor::from_vector<int32_t>({4}, {-7, 7, -7, 7})},
                                           {"d", Tensor::from_vector<int32_t>({4}, {3, -3, -3, 3})},
                                           {"r", Tensor::from_vector<float>({4}, {0.5f, 1.5f, 2.5f, -0.5f})}});
    CHECK(std::vector<int32_t>(out.at("m").data<int32_t>(), out.at("m").data<int32_t>() + 4) ==
          std::vector<int32_t>{2, -2, -1, 1});
    CHECK(std::vector<float>(out.at("q").data<float>(), out.at("q").data<float>() + 4) ==
          std::vector<float>{0.f, 2.f, 2.f, -0.f});
  }
}
