// Builds small ONNX models inline for runtime tests.
#pragma once

#include <onnx/onnx_pb.h>

#include <cmath>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "onnx/tensor_proto.h"

namespace qtool::test {

class ModelBuilder {
 public:
  explicit ModelBuilder(int opset = 13) {
    model.set_ir_version(8);
    auto* op = model.add_opset_import();
    op->set_domain("");
    op->set_version(opset);
    model.mutable_graph()->set_name("test");
  }
  onnx::GraphProto& graph() { return *model.mutable_graph(); }

  onnx::NodeProto& node(const std::string& op, std::vector<std::string> inputs, std::vector<std::string> outputs,
                        const std::string& name = "") {
    auto* n = graph().add_node();
    n->set_op_type(op);
    n->set_name(name);
    for (auto& i : inputs) n->add_input(i);
    for (auto& o : outputs) n->add_output(o);
    return *n;
  }
  // dims: -1 = symbolic (named by `sym`), otherwise fixed. No dims vector at all = unknown rank.
  void input(const std::string& name, DType dt, std::vector<int64_t> dims, const std::string& sym = "N") {
    value(graph().add_input(), name, dt, dims, sym);
  }
  void output(const std::string& name, DType dt = DType::Float32) {
    auto* vi = graph().add_output();
    vi->set_name(name);
    vi->mutable_type()->mutable_tensor_type()->set_elem_type(static_cast<int>(dt));
  }
  void initializer(const std::string& name, const Tensor& t) {
    onnxio::tensor_to_proto(t, name, *graph().add_initializer());
  }

  static void attr(onnx::NodeProto& n, const std::string& name, int64_t v) {
    auto* a = n.add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(v);
  }
  static void attr(onnx::NodeProto& n, const std::string& name, float v) {
    auto* a = n.add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::FLOAT);
    a->set_f(v);
  }
  static void attr(onnx::NodeProto& n, const std::string& name, const std::vector<int64_t>& v) {
    auto* a = n.add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INTS);
    for (auto x : v) a->add_ints(x);
  }
  static void attr(onnx::NodeProto& n, const std::string& name, const Tensor& t) {
    auto* a = n.add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::TENSOR);
    onnxio::tensor_to_proto(t, "", *a->mutable_t());
  }
  static void attr(onnx::NodeProto& n, const std::string& name, const onnx::GraphProto& g) {
    auto* a = n.add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::GRAPH);
    *a->mutable_g() = g;
  }
  static void value(onnx::ValueInfoProto* vi, const std::string& name, DType dt, const std::vector<int64_t>& dims,
                    const std::string& sym = "N") {
    vi->set_name(name);
    auto* tt = vi->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(static_cast<int>(dt));
    auto* shape = tt->mutable_shape();
    for (auto d : dims) {
      auto* dim = shape->add_dim();
      if (d < 0)
        dim->set_dim_param(sym);
      else
        dim->set_dim_value(d);
    }
  }

  onnx::ModelProto model;
};

// Deterministic float values in [-2, 2) for fusion tests: 4 * frac(0.37 i + phase) - 2.
inline Tensor ramp(Shape shape, float phase) {
  Tensor t(DType::Float32, std::move(shape));
  for (int64_t i = 0; i < t.numel(); ++i)
    t.data<float>()[i] = 4.f * std::fmod(0.37f * static_cast<float>(i) + phase, 1.f) - 2.f;
  return t;
}

}  // namespace qtool::test
