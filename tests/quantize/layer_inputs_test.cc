// GPTQ's layer-input Hessians held a bounded group at a time (lib/quantize/weights/layer_inputs.h): a small budget
// cuts the layer inputs into several groups, each computed from its own graph segment, and every Hessian, and so the
// quantized model, equals the one-pass result bit for bit.
#include "quantize/weights/layer_inputs.h"

#include <onnx/onnx_pb.h>

#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <random>
#include <sstream>

#include "onnx/tensor_proto.h"
#include "quantize/quantize.h"

using namespace qtool;
using namespace qtool::quantize;

namespace {

Tensor random_tensor(Shape shape, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<float> v(static_cast<size_t>(shape_numel(shape)));
  for (auto& x : v) x = u(rng);
  return Tensor::from_vector<float>(shape, v);
}

// x [2,16] -> MatMul w1 -> Relu -> MatMul w2 [16,24] -> Tanh -> Transpose -> Gemm(transA) w3 [24,8] -> (+ x w4) -> y.
// Layer inputs: x (read by two MatMuls, first and last: it crosses every cut), r (16), tt (24, Gemm transA).
onnx::ModelProto chain() {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(17);
  auto& g = *m.mutable_graph();
  g.set_name("chain");
  auto* x = g.add_input();
  x->set_name("x");
  x->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
  g.add_output()->set_name("y");
  const std::vector<std::pair<std::string, Shape>> ws{
      {"w1", {16, 16}}, {"w2", {16, 24}}, {"w3", {24, 8}}, {"w4", {16, 8}}};
  uint32_t seed = 1;
  for (const auto& [name, shape] : ws)
    onnxio::tensor_to_proto(random_tensor(shape, seed++), name, *g.add_initializer());
  auto node = [&](const std::string& op, std::vector<std::string> in, const std::string& out) -> onnx::NodeProto& {
    auto* n = g.add_node();
    n->set_op_type(op);
    n->set_name(out + "_node");
    for (auto& s : in) n->add_input(s);
    n->add_output(out);
    return *n;
  };
  node("MatMul", {"x", "w1"}, "a");
  node("Relu", {"a"}, "r");
  node("MatMul", {"r", "w2"}, "b");
  node("Tanh", {"b"}, "t");
  auto& tr = node("Transpose", {"t"}, "tt");
  auto* perm = tr.add_attribute();
  perm->set_name("perm"), perm->set_type(onnx::AttributeProto::INTS), perm->add_ints(1), perm->add_ints(0);
  auto& gemm = node("Gemm", {"tt", "w3"}, "c");
  auto* ta = gemm.add_attribute();
  ta->set_name("transA"), ta->set_type(onnx::AttributeProto::INT), ta->set_i(1);
  node("MatMul", {"x", "w4"}, "e");
  node("Add", {"c", "e"}, "y");
  return m;
}

std::vector<Sample> samples() {
  std::vector<Sample> s;
  for (uint32_t i = 0; i < 3; ++i) s.push_back({{"x", random_tensor({2, 16}, 100 + i)}});
  return s;
}

// Weight-only int4 with GPTQ on every MatMul / Gemm (blocks of 8).
QConfig gptq_int4() {
  return QConfig::parse(R"({"format": "qtool-qconfig", "version": 1,
    "global": {"activation": null, "bias": null,
               "weight": {"dtype": "int4", "symmetric": true, "granularity": "per_block", "block_size": 8,
                          "algorithm": "gptq"}},
    "op_types": {"*": null, "MatMul": {}, "Gemm": {}}})",
                        "gptq.json");
}

bool same(const LayerHessian& a, const LayerHessian& b) { return a.k == b.k && a.rows == b.rows && a.h == b.h; }

}  // namespace

TEST_CASE("gptq hessians: a small budget computes them in groups, one graph segment each, equal to one pass") {
  const onnx::ModelProto m = chain();
  const std::vector<Sample> s = samples();
  const std::vector<std::string> inputs{"x", "r", "tt"};
  const LayerHessians one = collect_hessians(m, inputs, s, 1);
  REQUIRE(one.size() == 3);
  CHECK(one.at("x").k == 16);
  CHECK(one.at("x").rows == 3 * 2);
  CHECK(one.at("tt").k == 24);  // transA: rows are the columns of tt [24, 2]
  CHECK(one.at("tt").rows == 3 * 2);

  // 16^2 * 8 = 2048 bytes per K=16 Hessian: a 3000-byte budget holds one of them, so three groups.
  LayerHessianSource source(m, inputs, s, 1, 3000);
  REQUIRE(source.groups() == 3);
  CHECK(source.segments_run() == 0);  // nothing computed before it is asked for
  for (const auto& name : inputs) {   // in graph order: each segment runs once
    const LayerHessian* h = source.find(name);
    REQUIRE(h != nullptr);
    CHECK(same(*h, one.at(name)));
  }
  CHECK(source.segments_run() == 3);
  // Asking for an earlier group again (the accuracy guard's later rewrites) starts over from the first segment.
  const LayerHessian* x = source.find("x");
  REQUIRE(x != nullptr);
  CHECK(same(*x, one.at("x")));
  CHECK(source.segments_run() == 4);
  CHECK(source.find("w1") == nullptr);  // not a layer input

  LayerHessianSource roomy(m, inputs, s, 1, int64_t{1} << 20);
  CHECK(roomy.groups() == 1);
  CHECK(roomy.segments_run() == 1);  // one pass up front
}

TEST_CASE("gptq hessians: a layer whose Hessian alone exceeds the budget is named in a warning, and held alone") {
  const onnx::ModelProto m = chain();
  const std::vector<Sample> s = samples();
  std::ostringstream log;
  const auto previous = spdlog::default_logger();
  auto capture = std::make_shared<spdlog::logger>("capture", std::make_shared<spdlog::sinks::ostream_sink_mt>(log));
  capture->set_pattern("%l: %v");
  spdlog::set_default_logger(capture);
  // 24^2 * 8 = 4608 bytes for tt's Hessian, 2048 for each K = 16 one: a 3000-byte budget fits those, not tt's.
  LayerHessianSource source(m, {"x", "r", "tt"}, s, 1, 3000);
  const LayerHessian* tt = source.find("tt");  // groups are cut on first use
  spdlog::set_default_logger(previous);
  const std::string text = log.str();
  INFO(text);
  CHECK(text.find("warning: GPTQ: the Hessian of 'tt' (24 x 24) needs 1 MiB, more than the 0 MiB budget") !=
        std::string::npos);
  CHECK(text.find("'x'") == std::string::npos);  // the layers that fit are not named
  CHECK(text.find("'r'") == std::string::npos);
  REQUIRE(tt != nullptr);  // still computed, alone, and equal to the one-pass result
  CHECK(same(*tt, collect_hessians(m, {"tt"}, s, 1).at("tt")));
}

TEST_CASE("gptq hessians: quantize_model writes the same bytes with a budget that forces one group per layer input") {
  const QConfig cfg = gptq_int4();
  auto quantized = [&](int64_t budget) {
    onnx::ModelProto m = chain();
    QuantizeOptions o;
    o.samples = samples();
    o.hessian_budget_bytes = budget;
    const QuantizeSummary summary = quantize_model(m, cfg, calib::CalibrationTable{}, o);
    CHECK(summary.qdq.weight_tensors.size() == 4);
    return m;
  };
  const onnx::ModelProto a = quantized(int64_t{1} << 30), b = quantized(1);
  REQUIRE(a.graph().initializer_size() == b.graph().initializer_size());
  int int4 = 0;
  for (int i = 0; i < a.graph().initializer_size(); ++i) {
    const auto &ta = a.graph().initializer(i), &tb = b.graph().initializer(i);
    CHECK(ta.name() == tb.name());
    const Tensor x = onnxio::tensor_from_proto(ta, ta.name()), y = onnxio::tensor_from_proto(tb, tb.name());
    REQUIRE(x.nbytes() == y.nbytes());
    CHECK(std::memcmp(x.raw(), y.raw(), x.nbytes()) == 0);
    int4 += x.dtype() == DType::Int4;
  }
  CHECK(int4 == 8);  // the 4 weights' codes and zero points
}

TEST_CASE("gptq: needs_layer_inputs sees a weight stored behind a Cast (float16 converters) before preparation") {
  // quantize decides whether to load the calibration samples before preparation folds Cast(w_fp16) into an
  // initializer: it had answered no, and quantize_model then refused ("needs calibration inputs") although --data
  // was given (tests/quantize/zoo.py mobilenetv3_fp16_weights_o13 under configs/int4-weight-only.json).
  const QConfig cfg = gptq_int4();
  onnx::ModelProto m = chain();
  CHECK(needs_layer_inputs(m, cfg));
  auto& g = *m.mutable_graph();
  for (auto& n : *g.mutable_node())  // every MatMul / Gemm weight w becomes Cast(w_h)
    if (n.op_type() == "MatMul" || n.op_type() == "Gemm") n.set_input(1, n.input(1) + "_cast");
  std::vector<onnx::NodeProto> casts;
  for (auto& t : *g.mutable_initializer()) {
    onnx::NodeProto c;
    c.set_op_type("Cast"), c.add_input(t.name() + "_h"), c.add_output(t.name() + "_cast");
    casts.push_back(c);
    t.set_name(t.name() + "_h");
  }
  const auto nodes = g.node();
  auto with_casts = [&] {
    g.clear_node();
    for (const auto& c : casts) *g.add_node() = c;
    for (const auto& n : nodes) *g.add_node() = n;
  };
  with_casts();
  CHECK(needs_layer_inputs(m, cfg));          // Cast of an initializer: a weight after constant folding
  for (auto& c : casts) c.set_input(0, "x");  // Cast of an activation: no weight
  with_casts();
  CHECK_FALSE(needs_layer_inputs(m, cfg));
}
