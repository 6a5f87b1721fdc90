// quantize/share_body_initializers.h: an integer weight that both branches of an If hold (each quantized its own
// copy of an outer weight) is stored once, in the If's graph; outputs unchanged; a weight only one branch holds, or
// two that differ, stay where they are.
#include "quantize/share_body_initializers.h"

#include <onnx/onnx_pb.h>

#include <catch2/catch.hpp>
#include <map>
#include <string>

#include "core/tensor.h"
#include "onnx/tensor_proto.h"
#include "runtime/session.h"

// GCC 12 warns falsely (-Wrestrict, bug 105329) inside protobuf's generated setters called with literals.
#pragma GCC diagnostic ignored "-Wrestrict"

using namespace qtool;

namespace {

void node(onnx::GraphProto& g, const std::string& op, std::vector<std::string> in, const std::string& out) {
  auto* n = g.add_node();
  n->set_op_type(op);
  n->set_name(out + "_node");
  for (auto& s : in) n->add_input(s);
  n->add_output(out);
}

void float_value(google::protobuf::RepeatedPtrField<onnx::ValueInfoProto>* list, const std::string& name) {
  auto* v = list->Add();
  v->set_name(name);
  v->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
}

// A branch: y_<p> = x + DQ(wq_<p>; scale_<p>, zp_<p>) + DQ(own_<p>; ...): wq and the scale and zero point are the
// same in both branches (under different names), own_<p> differs.
onnx::GraphProto branch(const std::string& p, int8_t own) {
  onnx::GraphProto g;
  g.set_name(p);
  onnxio::tensor_to_proto(Tensor::from_vector<int8_t>({2}, {7, -3}), "wq_" + p, *g.add_initializer());
  onnxio::tensor_to_proto(Tensor::from_vector<int8_t>({2}, {own, 1}), "own_" + p, *g.add_initializer());
  onnxio::tensor_to_proto(Tensor::scalar<float>(0.25f), "scale_" + p, *g.add_initializer());
  onnxio::tensor_to_proto(Tensor::scalar<int8_t>(0), "zp_" + p, *g.add_initializer());
  node(g, "DequantizeLinear", {"wq_" + p, "scale_" + p, "zp_" + p}, "w_" + p);
  node(g, "DequantizeLinear", {"own_" + p, "scale_" + p, "zp_" + p}, "o_" + p);
  node(g, "Add", {"x", "w_" + p}, "a_" + p);
  node(g, "Add", {"a_" + p, "o_" + p}, "y_" + p);
  float_value(g.mutable_output(), "y_" + p);
  return g;
}

onnx::ModelProto if_model() {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(17);
  auto& g = *m.mutable_graph();
  g.set_name("main");
  float_value(g.mutable_input(), "x");
  auto* c = g.add_input();
  c->set_name("cond");
  c->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::BOOL);
  float_value(g.mutable_output(), "y");
  auto* n = g.add_node();
  n->set_op_type("If");
  n->set_name("branch");
  n->add_input("cond");
  n->add_output("y");
  auto* a = n->add_attribute();
  a->set_name("then_branch");
  a->set_type(onnx::AttributeProto::GRAPH);
  *a->mutable_g() = branch("t", 5);
  a = n->add_attribute();
  a->set_name("else_branch");
  a->set_type(onnx::AttributeProto::GRAPH);
  *a->mutable_g() = branch("e", -9);
  return m;
}

}  // namespace

TEST_CASE("share body initializers: both branches' identical integer weight is stored once in the If's graph") {
  const onnx::ModelProto before = if_model();
  onnx::ModelProto m = before;
  CHECK(quantize::share_body_initializers(m) == 1);  // DQ(wq, scale, zero point); DQ(own_t / own_e) differ
  const auto& g = m.graph();
  REQUIRE(g.initializer_size() == 3);
  CHECK(g.initializer(0).name() == "wq_t");
  const auto& t = g.node(0).attribute(0).g();
  const auto& e = g.node(0).attribute(1).g();
  REQUIRE(t.initializer_size() == 1);
  REQUIRE(e.initializer_size() == 1);
  CHECK(t.initializer(0).name() == "own_t");
  CHECK(e.initializer(0).name() == "own_e");
  CHECK(e.node(0).input(0) == "wq_t");
  CHECK(e.node(0).input(1) == "scale_t");
  CHECK(quantize::share_body_initializers(m) == 0);

  const Tensor x = Tensor::from_vector<float>({2}, {1.0f, 2.0f});
  for (bool c : {true, false}) {
    const std::byte flag{static_cast<unsigned char>(c)};
    const Tensor cond = Tensor::from_bytes(DType::Bool, {}, std::span<const std::byte>(&flag, 1));
    const std::map<std::string, Tensor> in{{"x", x}, {"cond", cond}};
    const Tensor y0 = runtime::Session(before).run(in).at("y");
    const Tensor y1 = runtime::Session(m).run(in).at("y");
    for (int i = 0; i < 2; ++i) CHECK(y0.data<float>()[i] == y1.data<float>()[i]);
  }
}
