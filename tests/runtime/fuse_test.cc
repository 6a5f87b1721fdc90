// Activation fusion (runtime/fuse.h): a fused session gives the unfused session's numbers with fewer
// nodes, and never hides a graph output or an observed tensor.
#include "runtime/fuse.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <vector>

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

// x [1,4,6,6] -> Conv 3x3 pad 1 (+bias) -> `act` -> depthwise Conv 3x3 -> Sigmoid·x -> MatMul [.., 6] x [6, 5]
// -> Clip(0, 1.5): seven nodes, each fusible pattern once.
ModelBuilder chain(const std::string& act) {
  ModelBuilder b(13);
  b.input("x", DType::Float32, {1, 4, 6, 6});
  b.initializer("w1", ramp({8, 4, 3, 3}, 0.1f));
  b.initializer("b1", ramp({8}, 0.3f));
  b.initializer("w2", ramp({8, 1, 3, 3}, 0.7f));
  b.initializer("w3", ramp({6, 5}, 0.2f));
  b.initializer("lo", Tensor::from_vector<float>({}, {0.f}));
  b.initializer("hi", Tensor::from_vector<float>({}, {1.5f}));
  auto& c1 = b.node("Conv", {"x", "w1", "b1"}, {"t1"}, "conv1");
  ModelBuilder::attr(c1, "pads", std::vector<int64_t>{1, 1, 1, 1});
  if (act == "Clip")
    b.node("Clip", {"t1", "lo", "hi"}, {"a1"}, "act1");
  else
    b.node(act, {"t1"}, {"a1"}, "act1");
  auto& c2 = b.node("Conv", {"a1", "w2"}, {"t2"}, "conv2");  // depthwise
  ModelBuilder::attr(c2, "group", int64_t{8});
  ModelBuilder::attr(c2, "pads", std::vector<int64_t>{1, 1, 1, 1});
  b.node("Sigmoid", {"t2"}, {"s2"}, "sig2");
  b.node("Mul", {"s2", "t2"}, {"a2"}, "swish2");
  b.node("MatMul", {"a2", "w3"}, {"t3"}, "mm3");
  b.node("Clip", {"t3", "lo", "hi"}, {"y"}, "clip3");
  b.output("y");
  return b;
}

}  // namespace

TEST_CASE("fused activations give the unfused numbers with fewer nodes") {
  for (const std::string act : {"Relu", "Clip", "HardSigmoid", "HardSwish"}) {
    INFO(act);
    const ModelBuilder b = chain(act);
    const Session plain(b.model);
    const Session fused(b.model, {.observed = std::set<std::string>{}});
    CHECK(plain.graph().nodes.size() == 7);
    CHECK(fused.graph().nodes.size() == 3);  // conv1+act, conv2+swish, matmul+clip
    const Tensor x = ramp({1, 4, 6, 6}, 0.5f);
    check_all_close(fused.run({{"x", x}}).at("y"), plain.run({{"x", x}}).at("y"), 1e-6);
  }
}

TEST_CASE("fusion keeps observed tensors and graph outputs") {
  ModelBuilder b = chain("Relu");
  b.output("t1");  // conv1's raw output is also a graph output: conv1 and Relu stay apart
  const Session s(b.model, {.observed = std::set<std::string>{"s2"}});  // the sigmoid is observed: no SiLU fusion
  std::set<std::string> seen;
  RunOptions ro;
  ro.tap = [&](const std::string& name, const Tensor&) { seen.insert(name); };
  const auto out = s.run({{"x", ramp({1, 4, 6, 6}, 0.5f)}}, ro);
  CHECK(out.count("t1") == 1);
  CHECK(seen.count("t1") == 1);
  CHECK(seen.count("s2") == 1);
  CHECK(seen.count("t2") == 1);
  CHECK(seen.count("t3") == 0);        // folded into the MatMul
  CHECK(s.graph().nodes.size() == 6);  // only MatMul+Clip fused
}

TEST_CASE("sessions without an observed set fuse nothing") {
  const ModelBuilder b = chain("HardSwish");
  std::set<std::string> seen;
  RunOptions ro;
  ro.tap = [&](const std::string& name, const Tensor&) { seen.insert(name); };
  Session(b.model).run({{"x", ramp({1, 4, 6, 6}, 0.5f)}}, ro);
  for (const char* name : {"t1", "a1", "t2", "s2", "a2", "t3", "y"}) CHECK(seen.count(name) == 1);
}

namespace {

// x [1,3,4,5] -> Conv 1x1 -> t -> HardSwish written out (form "a": Div(Mul(t, Clip(t + 3, 0, 6)), 6), or "b":
// Mul(t, Clip(3 + t, 0, 6) * (1/6))) -> y. Clip takes its bounds as inputs (opset 13).
ModelBuilder written_out_hard_swish(char form) {
  ModelBuilder b(13);
  b.input("x", DType::Float32, {1, 3, 4, 5});
  b.initializer("w", ramp({6, 3, 1, 1}, 0.4f));
  b.initializer("three", Tensor::from_vector<float>({}, {3.f}));
  b.initializer("zero", Tensor::from_vector<float>({}, {0.f}));
  b.initializer("six", Tensor::from_vector<float>({}, {6.f}));
  b.initializer("sixth", Tensor::from_vector<float>({}, {1.f / 6.f}));
  b.node("Conv", {"x", "w"}, {"t"}, "conv");
  if (form == 'a') {
    b.node("Add", {"t", "three"}, {"a"}, "add");
    b.node("Clip", {"a", "zero", "six"}, {"c"}, "clip");
    b.node("Mul", {"t", "c"}, {"m"}, "mul");
    b.node("Div", {"m", "six"}, {"y"}, "div");
  } else {
    b.node("Add", {"three", "t"}, {"a"}, "add");
    b.node("Clip", {"a", "zero", "six"}, {"c"}, "clip");
    b.node("Mul", {"c", "sixth"}, {"m"}, "scale");
    b.node("Mul", {"m", "t"}, {"y"}, "mul");
  }
  b.output("y");
  return b;
}

}  // namespace

TEST_CASE("written-out HardSwish runs as one op and folds into the Conv before it") {
  for (const char form : {'a', 'b'}) {
    INFO(form);
    const ModelBuilder b = written_out_hard_swish(form);
    const Session plain(b.model);
    const Session fused(b.model, {.observed = std::set<std::string>{}});
    CHECK(plain.graph().nodes.size() == 5);
    REQUIRE(fused.graph().nodes.size() == 1);  // Conv with a HardSwish activation
    CHECK(fused.graph().nodes[0].info.activation.kind == qtool::runtime::FusedActivation::Kind::HardSwish);
    const Tensor x = ramp({1, 3, 4, 5}, 0.25f);
    check_all_close(fused.run({{"x", x}}).at("y"), plain.run({{"x", x}}).at("y"), 1e-6);
  }
}

TEST_CASE("written-out HardSwish stays apart where a tensor inside it must be seen or the constants differ") {
  {  // the Clip's output is observed: nothing changes (the Conv has two readers, so no activation folds either)
    const Session s(written_out_hard_swish('a').model, {.observed = std::set<std::string>{"c"}});
    CHECK(s.graph().nodes.size() == 5);
  }
  {  // the Conv's output is observed: HardSwish forms but stays its own node
    const Session s(written_out_hard_swish('a').model, {.observed = std::set<std::string>{"t"}});
    REQUIRE(s.graph().nodes.size() == 2);
    CHECK(s.graph().nodes[1].info.op_type == "HardSwish");
  }
  {  // Clip(0, 5) is not HardSwish's
    ModelBuilder b = written_out_hard_swish('a');
    b.initializer("five", Tensor::from_vector<float>({}, {5.f}));
    for (auto& n : *b.model.mutable_graph()->mutable_node())
      if (n.op_type() == "Clip") n.set_input(2, "five");
    const Session s(b.model, {.observed = std::set<std::string>{}});
    CHECK(s.graph().nodes.size() == 5);
  }
}

namespace {

// x [2,50,16] -> MatMul w [16,300] -> + bias [300] -> + r [2,50,300] -> Gelu -> y: the MLP's first half. 300 columns
// make the MatMul's epilogue blocks 24 rows (kernels/gemm.cc), so the 100 rows are four full blocks and a short one.
ModelBuilder matmul_gelu() {
  ModelBuilder b(20);
  b.input("x", DType::Float32, {2, 50, 16});
  b.initializer("w", ramp({16, 300}, 0.05f));
  b.initializer("bias", ramp({300}, 0.6f));
  b.input("r", DType::Float32, {2, 50, 300});
  b.node("MatMul", {"x", "w"}, {"t"}, "fc1");
  b.node("Add", {"bias", "t"}, {"tb"}, "fc1_bias");
  b.node("Add", {"tb", "r"}, {"tr"}, "residual");
  b.node("Gelu", {"tr"}, {"y"}, "gelu");
  b.output("y");
  return b;
}

}  // namespace

TEST_CASE("Gelu folds into the MatMul before it, applied block by block with the unfused numbers") {
  const std::map<std::string, Tensor> in = {{"x", ramp({2, 50, 16}, 0.3f)}, {"r", ramp({2, 50, 300}, 0.8f)}};
  const ModelBuilder b = matmul_gelu();
  const Session plain(b.model);
  const Session fused(b.model, {.observed = std::set<std::string>{}});
  REQUIRE(fused.graph().nodes.size() == 1);
  CHECK(fused.graph().nodes[0].info.activation.kind == qtool::runtime::FusedActivation::Kind::Gelu);
  const Tensor want = plain.run(in).at("y"), got = fused.run(in).at("y");
  // Only the order of the two additions differs (bias + r, then the product, against product + bias + r).
  check_all_close(got, want, 1e-5);
  // 1 and 2 threads cut the blocks between threads differently: the same bits (the packed weight against the weight
  // read in place: tests/kernels/gemm_direct_test.cc).
  const Session two(b.model, {.threads = 2, .observed = std::set<std::string>{}});
  const Tensor got_two = two.run(in).at("y");
  CHECK(std::memcmp(got.data<float>(), got_two.data<float>(), got.nbytes()) == 0);
  // An observed MatMul output keeps the whole epilogue apart; an observed Add output keeps the Gelu apart.
  CHECK(Session(b.model, {.observed = std::set<std::string>{"t"}}).graph().nodes.size() == 4);
  CHECK(Session(b.model, {.observed = std::set<std::string>{"tr"}}).graph().nodes.size() == 2);
}

namespace {

// Attention scores: q [2,3,6,4] x kt [2,3,4,6] · 0.5 + causal mask [6,6] (0 on and below the diagonal, -inf above)
// -> Cast to float -> Softmax (last axis) -> p; and x [10,4] x w [4,6] -> Softmax -> y2 (the blocked path with a
// constant B). `axis` is the Softmax's.
ModelBuilder scores_softmax(int64_t axis, int opset = 13) {
  ModelBuilder b(opset);
  b.input("q", DType::Float32, {2, 3, 6, 4});
  b.input("kt", DType::Float32, {2, 3, 4, 6});
  b.input("x", DType::Float32, {10, 4});
  std::vector<float> mask(36, 0.f);
  for (int i = 0; i < 6; ++i)
    for (int j = i + 1; j < 6; ++j) mask[i * 6 + j] = -INFINITY;
  b.initializer("mask", Tensor::from_vector<float>({6, 6}, mask));
  b.initializer("half", Tensor::from_vector<float>({}, {0.5f}));
  b.initializer("w", ramp({4, 6}, 0.3f));
  b.node("MatMul", {"q", "kt"}, {"s"}, "qk");
  b.node("Mul", {"s", "half"}, {"ss"}, "scale");
  b.node("Add", {"ss", "mask"}, {"sm"}, "add_mask");
  auto& cast = b.node("Cast", {"sm"}, {"c"}, "cast");
  ModelBuilder::attr(cast, "to", int64_t{1});
  auto& sm = b.node("Softmax", {"c"}, {"p"}, "softmax");
  ModelBuilder::attr(sm, "axis", axis);
  b.node("MatMul", {"x", "w"}, {"t2"}, "mm2");
  auto& sm2 = b.node("Softmax", {"t2"}, {"y2"}, "softmax2");
  ModelBuilder::attr(sm2, "axis", axis);
  b.output("p");
  b.output("y2");
  return b;
}

}  // namespace

TEST_CASE("Softmax over the last axis folds into the MatMul before it (through a float Cast) with the unfused numbers") {
  const std::map<std::string, Tensor> in = {
      {"q", ramp({2, 3, 6, 4}, 0.3f)}, {"kt", ramp({2, 3, 4, 6}, 0.7f)}, {"x", ramp({10, 4}, 0.2f)}};
  const ModelBuilder b = scores_softmax(-1);
  const Session plain(b.model);
  const Session fused(b.model, {.observed = std::set<std::string>{}});
  REQUIRE(fused.graph().nodes.size() == 2);  // qk with scale, mask and Softmax; mm2 with Softmax
  for (const auto& n : fused.graph().nodes)
    CHECK(n.info.activation.kind == qtool::runtime::FusedActivation::Kind::Softmax);
  const auto want = plain.run(in), got = fused.run(in);
  for (const char* o : {"p", "y2"}) {
    INFO(o);
    check_all_close(got.at(o), want.at(o), 1e-6);
  }
  const auto two = Session(b.model, {.threads = 2, .observed = std::set<std::string>{}}).run(in);
  CHECK(std::memcmp(two.at("p").data<float>(), got.at("p").data<float>(), got.at("p").nbytes()) == 0);
  // Another axis, a legacy (opset < 13) Softmax, or an observed Cast output stay apart.
  CHECK(Session(scores_softmax(2).model, {.observed = std::set<std::string>{}}).graph().nodes.size() == 5);
  CHECK(Session(scores_softmax(-1, 11).model, {.observed = std::set<std::string>{}}).graph().nodes.size() == 5);
  CHECK(Session(b.model, {.observed = std::set<std::string>{"c"}}).graph().nodes.size() == 4);
}
