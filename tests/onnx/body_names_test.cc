// onnx/body_names.h: names that If branches define again (Optimum's merged decoder) get scoped names; the model
// computes the same, the main graph keeps its names, and a second pass renames nothing.
#include "onnx/body_names.h"

#include <onnx/onnx_pb.h>

#include <catch2/catch.hpp>
#include <map>
#include <set>
#include <string>

#include "core/tensor.h"
#include "onnx/tensor_proto.h"
#include "runtime/session.h"

// GCC 12 warns falsely (-Wrestrict, bug 105329) inside protobuf's generated setters called with literals.
#pragma GCC diagnostic ignored "-Wrestrict"

using namespace qtool;

namespace {

onnx::NodeProto* add_node(onnx::GraphProto& g, const std::string& op, std::vector<std::string> in,
                          std::vector<std::string> out) {
  auto* n = g.add_node();
  n->set_op_type(op);
  n->set_name(out[0] + "_node");
  for (auto& s : in) n->add_input(s);
  for (auto& s : out) n->add_output(s);
  return n;
}

void add_value(google::protobuf::RepeatedPtrField<onnx::ValueInfoProto>* list, const std::string& name) {
  auto* v = list->Add();
  v->set_name(name);
  v->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
}

// cond (bool), x [2] -> If(cond): then h = x + w_t, y = h * h; else h = x - w_e, y = h + h; z = Relu(y).
// Both branches define 'h' and 'y' ('y' is the If's own output too). Then-branch y also feeds a nested If that
// reads the branch's 'h' (a reference the rename must follow into the nested body).
onnx::ModelProto clashing_model() {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(17);
  auto& g = *m.mutable_graph();
  g.set_name("main");
  add_value(g.mutable_input(), "x");
  auto* c = g.add_input();
  c->set_name("cond");
  c->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::BOOL);
  add_value(g.mutable_output(), "z");
  onnxio::tensor_to_proto(Tensor::from_vector<float>({2}, {0.5f, -1.0f}), "w_t", *g.add_initializer());
  onnxio::tensor_to_proto(Tensor::from_vector<float>({2}, {2.0f, 3.0f}), "w_e", *g.add_initializer());

  onnx::GraphProto inner;
  inner.set_name("inner");
  add_node(inner, "Neg", {"h"}, {"n"});
  add_value(inner.mutable_output(), "n");

  onnx::GraphProto then_g;
  then_g.set_name("then");
  add_node(then_g, "Add", {"x", "w_t"}, {"h"});
  add_node(then_g, "Mul", {"h", "h"}, {"y0"});
  auto* nested = add_node(then_g, "If", {"cond"}, {"hn"});
  for (const char* attr : {"then_branch", "else_branch"}) {
    auto* a = nested->add_attribute();
    a->set_name(attr);
    a->set_type(onnx::AttributeProto::GRAPH);
    *a->mutable_g() = inner;
  }
  add_node(then_g, "Add", {"y0", "hn"}, {"y"});
  add_value(then_g.mutable_output(), "y");

  onnx::GraphProto else_g;
  else_g.set_name("else");
  add_node(else_g, "Sub", {"x", "w_e"}, {"h"});
  add_node(else_g, "Add", {"h", "h"}, {"y"});
  add_value(else_g.mutable_output(), "y");

  auto* iff = add_node(g, "If", {"cond"}, {"y"});
  iff->set_name("branch");
  auto* a = iff->add_attribute();
  a->set_name("then_branch");
  a->set_type(onnx::AttributeProto::GRAPH);
  *a->mutable_g() = then_g;
  a = iff->add_attribute();
  a->set_name("else_branch");
  a->set_type(onnx::AttributeProto::GRAPH);
  *a->mutable_g() = else_g;
  add_node(g, "Relu", {"y"}, {"z"});
  return m;
}

std::set<std::string> defined(const onnx::GraphProto& g) {
  std::set<std::string> s;
  for (const auto& n : g.node())
    for (const auto& o : n.output()) s.insert(o);
  return s;
}

}  // namespace

TEST_CASE("body names: clashing branch names get scoped ones, outputs unchanged, second pass a no-op") {
  const onnx::ModelProto before = clashing_model();
  onnx::ModelProto m = before;
  REQUIRE(onnxio::body_names_clash(m));
  // then: h, y (clash with else and main); inner bodies define n twice (the nested If's two branches); else: h, y.
  CHECK(onnxio::scope_body_names(m) == 6);
  CHECK_FALSE(onnxio::body_names_clash(m));
  CHECK(onnxio::scope_body_names(m) == 0);

  const auto& g = m.graph();
  CHECK(defined(g) == std::set<std::string>{"y", "z"});  // the main graph keeps its names
  const auto& then_g = g.node(0).attribute(0).g();
  const auto& else_g = g.node(0).attribute(1).g();
  CHECK(defined(then_g).count("branch/then_branch/h"));
  CHECK(defined(else_g).count("branch/else_branch/h"));
  CHECK(then_g.output(0).name() == "branch/then_branch/y");
  CHECK(else_g.output(0).name() == "branch/else_branch/y");
  // The nested If's bodies read the then-branch's renamed h.
  CHECK(then_g.node(2).attribute(0).g().node(0).input(0) == "branch/then_branch/h");
  CHECK(then_g.node(2).attribute(0).g().node(0).output(0) == "branch/then_branch/hn_node/then_branch/n");

  const Tensor x = Tensor::from_vector<float>({2}, {1.0f, 2.0f});
  for (bool c : {true, false}) {
    const std::byte flag{static_cast<unsigned char>(c)};
    const Tensor cond = Tensor::from_bytes(DType::Bool, {}, std::span<const std::byte>(&flag, 1));
    const std::map<std::string, Tensor> in{{"x", x}, {"cond", cond}};
    const Tensor a = runtime::Session(before).run(in).at("z");
    const Tensor b = runtime::Session(m).run(in).at("z");
    for (int i = 0; i < 2; ++i) CHECK(a.data<float>()[i] == b.data<float>()[i]);
  }
}
