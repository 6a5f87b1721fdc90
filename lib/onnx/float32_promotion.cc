#include "onnx/float32_promotion.h"

#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "core/tensor.h"
#include "onnx/model_walk.h"
#include "onnx/tensor_proto.h"

namespace qtool::onnxio {
namespace {

constexpr int32_t kFloat = onnx::TensorProto::FLOAT;

// The float types promoted to float32: the 16-bit ones (exact) and float64 (rounded to nearest).
bool promoted(int64_t t) {
  return t == onnx::TensorProto::FLOAT16 || t == onnx::TensorProto::BFLOAT16 || t == onnx::TensorProto::DOUBLE;
}

// The ONNX spelling of a promoted type, for the names of the Casts and tensors promotion adds.
std::string type_name(int64_t t) {
  return t == onnx::TensorProto::FLOAT16 ? "float16" : t == onnx::TensorProto::BFLOAT16 ? "bfloat16" : "double";
}

// The attribute naming an op's output element type, for the ops that have one (empty: none).
std::string_view type_attribute(const onnx::NodeProto& n) {
  if (!n.domain().empty() && n.domain() != "ai.onnx") return {};
  static const std::set<std::string_view> dtype_ops = {"EyeLike",          "RandomNormal", "RandomUniform",
                                                       "RandomNormalLike", "Bernoulli",    "RandomUniformLike",
                                                       "SequenceEmpty"};
  if (n.op_type() == "Cast") return "to";
  if (dtype_ops.count(n.op_type())) return "dtype";
  if (n.op_type() == "DequantizeLinear") return "output_dtype";  // opset 23
  if (n.op_type() == "QuantizeLinear") return "precision";       // opset 23: the dtype x / y_scale is computed in
  return {};
}

// Element types inside a (possibly nested) type: tensor, sequence, optional, map value.
template <class Fn>
void for_each_elem_type(onnx::TypeProto& t, Fn&& fn) {
  if (t.has_tensor_type()) fn(*t.mutable_tensor_type());
  if (t.has_sparse_tensor_type()) fn(*t.mutable_sparse_tensor_type());
  if (t.has_sequence_type()) for_each_elem_type(*t.mutable_sequence_type()->mutable_elem_type(), fn);
  if (t.has_optional_type()) for_each_elem_type(*t.mutable_optional_type()->mutable_elem_type(), fn);
  if (t.has_map_type()) for_each_elem_type(*t.mutable_map_type()->mutable_value_type(), fn);
}

// to_float32, with a finite value beyond float32's range (only float64 has them) kept at the largest finite float.
Tensor to_finite_float32(const Tensor& t) {
  Tensor f = to_float32(t);
  if (t.dtype() != DType::Float64) return f;
  const double* src = t.data<double>();
  float* dst = f.data<float>();
  for (int64_t i = 0; i < f.numel(); ++i)
    if (std::isinf(dst[i]) && std::isfinite(src[i])) dst[i] = std::copysign(std::numeric_limits<float>::max(), dst[i]);
  return f;
}

bool has_promoted(const onnx::TypeProto& t) {
  bool any = false;
  onnx::TypeProto copy = t;
  for_each_elem_type(copy, [&](auto& tt) { any = any || promoted(tt.elem_type()); });
  return any;
}

void retype(onnx::TypeProto& t) {
  for_each_elem_type(t, [](auto& tt) {
    if (promoted(tt.elem_type())) tt.set_elem_type(kFloat);
  });
}

void for_each_subgraph(onnx::NodeProto& n, const std::function<void(onnx::GraphProto&)>& fn) {
  for (auto& a : *n.mutable_attribute()) {
    if (a.has_g()) fn(*a.mutable_g());
    for (auto& g : *a.mutable_graphs()) fn(g);
  }
}

bool defines(const onnx::GraphProto& g, const std::string& name) {
  for (const auto& v : g.input())
    if (v.name() == name) return true;
  for (const auto& t : g.initializer())
    if (t.name() == name) return true;
  for (const auto& n : g.node())
    for (const auto& o : n.output())
      if (o == name) return true;
  return false;
}

// Reads of `from` in g's nodes (and in subgraphs that see it from outside) now read `to`.
void rename_uses(onnx::GraphProto& g, const std::string& from, const std::string& to) {
  for (auto& n : *g.mutable_node()) {
    for (auto& in : *n.mutable_input())
      if (in == from) in = to;
    for_each_subgraph(n, [&](onnx::GraphProto& sub) {
      if (defines(sub, from)) return;  // shadowed there
      rename_uses(sub, from, to);
      for (auto& o : *sub.mutable_output())
        if (o.name() == from) o.set_name(to);
    });
  }
}

// True when something other than a main-graph Cast reads `name` (a Cast reads any float type as it is).
bool read_by_non_cast(const onnx::GraphProto& g, const std::string& name, bool top = true) {
  for (const auto& n : g.node()) {
    for (const auto& in : n.input())
      if (in == name && !(top && n.op_type() == "Cast" && n.domain().empty())) return true;
    for (const auto& a : n.attribute()) {
      std::vector<const onnx::GraphProto*> subs;
      if (a.has_g()) subs.push_back(&a.g());
      for (const auto& sub : a.graphs()) subs.push_back(&sub);
      for (const auto* sub : subs) {
        if (defines(*sub, name)) continue;
        if (read_by_non_cast(*sub, name, false)) return true;
        for (const auto& o : sub->output())
          if (o.name() == name) return true;
      }
    }
  }
  return false;
}

// The Cast that produces main-graph output `name` when it may keep its target type: no node reads `name`.
const onnx::NodeProto* output_cast(const onnx::GraphProto& g, const std::string& name) {
  const onnx::NodeProto* cast = nullptr;
  for (const auto& n : g.node())
    for (const auto& o : n.output())
      if (o == name && n.op_type() == "Cast" && n.domain().empty()) cast = &n;
  if (!cast) return nullptr;
  for (const auto& n : g.node())
    for (const auto& in : n.input())
      if (in == name) return nullptr;
  return read_by_non_cast(g, name) ? nullptr : cast;
}

// Main-graph inputs and outputs of a promoted float type that need a Cast (inputs that only Casts read, and outputs a
// Cast writes, keep theirs as they are).
struct Boundary {
  std::vector<std::string> inputs, outputs;
  std::set<const onnx::NodeProto*> kept_casts;
};
Boundary boundary(const onnx::GraphProto& g) {
  Boundary b;
  std::set<std::string> initializers, inputs;
  for (const auto& t : g.initializer()) initializers.insert(t.name());
  for (const auto& v : g.input()) {
    inputs.insert(v.name());
    if (has_promoted(v.type()) && !initializers.count(v.name()) && read_by_non_cast(g, v.name())) b.inputs.push_back(v.name());
  }
  for (const auto& v : g.output()) {
    if (!has_promoted(v.type()) || inputs.count(v.name())) continue;  // an input passed through keeps its type
    if (const auto* c = output_cast(g, v.name())) {
      b.kept_casts.insert(c);
      continue;
    }
    b.outputs.push_back(v.name());
  }
  return b;
}

// A graph input or output holding float16/bfloat16/float64 in a sequence or map: no Cast converts it.
[[noreturn]] void refuse_non_tensor(const char* what, const std::string& name) {
  throw UnsupportedError(std::string(what) + " '" + name + "' is a sequence or map of float16, bfloat16 or " +
                         "float64 values: qtool runs such models in float32 and cannot cast such an " + what +
                         "; convert the model to float32 first");
}

class Promoter {
 public:
  explicit Promoter(onnx::ModelProto& m) : model_(m) {
    for_each_graph(m, [&](const onnx::GraphProto& g, int) {
      for (const auto& v : g.input()) names_.insert(v.name());
      for (const auto& t : g.initializer()) names_.insert(t.name());
      for (const auto& n : g.node()) {
        names_.insert(n.name());
        for (const auto& o : n.output()) names_.insert(o);
      }
    });
  }

  Float32Promotion run() {
    convert_inline_tensors();
    graph(*model_.mutable_graph(), true);
    return r_;
  }

 private:
  std::string unique(const std::string& base) {
    std::string name = base;
    for (int i = 1; names_.count(name); ++i) name = base + "_" + std::to_string(i);
    names_.insert(name);
    return name;
  }

  static onnx::NodeProto cast_node(const std::string& name, const std::string& in, const std::string& out, int64_t to) {
    onnx::NodeProto c;
    c.set_op_type("Cast");
    c.set_name(name);
    c.add_input(in);
    c.add_output(out);
    auto* a = c.add_attribute();
    a->set_name("to");
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(to);
    return c;
  }

  // Every promoted tensor held inline becomes float32 (exact from 16 bits; float64 rounds to nearest, and a
  // finite value beyond float32's range becomes the largest finite float32, so a -1e300 mask fill stays finite).
  void convert_inline_tensors() {
    for_each_tensor(model_, [&](onnx::TensorProto& t, const TensorSite& site) {
      if (!promoted(t.data_type()) || site.kind == TensorSiteKind::SparseIndices) return;
      if (t.data_location() == onnx::TensorProto::EXTERNAL) {
        if (site.kind != TensorSiteKind::Initializer)
          throw UnsupportedError(site.label +
                                 " is a " + type_name(t.data_type()) +
                                 " tensor in external data outside an initializer: convert the model's " +
                                 type_name(t.data_type()) + " tensors to float32 first");
        return;  // wrapped in a Cast by graph()
      }
      const std::string name = t.name();  // tensor_to_proto clears t first
      tensor_to_proto(to_finite_float32(tensor_from_proto(t, site.label)), name, t);
      ++r_.tensors;
    });
  }

  void graph(onnx::GraphProto& g, bool main) {
    const Boundary io = main ? boundary(g) : Boundary{};
    std::vector<onnx::NodeProto> front, back;
    // External promoted initializers: a Cast to float32 under the name the nodes read.
    for (auto& t : *g.mutable_initializer()) {
      if (!promoted(t.data_type()) || !read_by_non_cast(g, t.name())) continue;  // only Casts read it: as it is
      const std::string name = t.name(), narrow = unique(name + "_" + type_name(t.data_type()));
      t.set_name(narrow);
      front.push_back(cast_node(unique(name + "_to_float32"), narrow, name, kFloat));
      ++r_.tensors;
    }
    for (auto& n : *g.mutable_node()) {
      const std::string_view attr = type_attribute(n);
      if (!attr.empty() && !io.kept_casts.count(&n))
        for (auto& a : *n.mutable_attribute())
          if (a.name() == attr && a.type() == onnx::AttributeProto::INT && promoted(a.i())) {
            a.set_i(kFloat);
            ++r_.typed_nodes;
          }
      for_each_subgraph(n, [&](onnx::GraphProto& sub) { graph(sub, false); });
    }
    for (auto& v : *g.mutable_value_info()) retype(*v.mutable_type());
    if (!main) {
      for (auto& v : *g.mutable_input()) retype(*v.mutable_type());
      for (auto& v : *g.mutable_output()) retype(*v.mutable_type());
    }
    for (auto& v : *g.mutable_input()) {
      if (!main || !has_promoted(v.type())) continue;
      if (std::find(io.inputs.begin(), io.inputs.end(), v.name()) == io.inputs.end()) {
        bool weight = false;  // an initializer with a default (IR < 4): a float32 weight now
        for (const auto& t : g.initializer()) weight = weight || t.name() == v.name();
        if (weight) retype(*v.mutable_type());
        continue;
      }
      if (!v.type().has_tensor_type()) refuse_non_tensor("input", v.name());
      const std::string wide = unique(v.name() + "_float32");
      rename_uses(g, v.name(), wide);
      front.push_back(cast_node(unique(v.name() + "_to_float32"), v.name(), wide, kFloat));
      ++r_.inputs;
    }
    for (const auto& v : g.output()) {
      if (!main || std::find(io.outputs.begin(), io.outputs.end(), v.name()) == io.outputs.end()) continue;
      if (!v.type().has_tensor_type()) refuse_non_tensor("output", v.name());
      const std::string wide = unique(v.name() + "_float32");
      auto produce_wide = [&](onnx::NodeProto& n) {
        for (auto& o : *n.mutable_output())
          if (o == v.name()) o = wide;
      };
      for (auto& n : front) produce_wide(n);
      for (auto& n : *g.mutable_node()) produce_wide(n);
      for (auto& t : *g.mutable_initializer())
        if (t.name() == v.name()) t.set_name(wide);
      rename_uses(g, v.name(), wide);
      const int64_t type = v.type().tensor_type().elem_type();
      back.push_back(cast_node(unique(v.name() + "_to_" + type_name(type)), wide, v.name(), type));
      ++r_.outputs;
    }
    if (front.empty() && back.empty()) return;
    google::protobuf::RepeatedPtrField<onnx::NodeProto> nodes;
    for (auto& n : front) *nodes.Add() = std::move(n);
    for (auto& n : *g.mutable_node()) *nodes.Add() = std::move(n);
    for (auto& n : back) *nodes.Add() = std::move(n);
    g.mutable_node()->Swap(&nodes);
  }

  onnx::ModelProto& model_;
  std::set<std::string> names_;
  Float32Promotion r_;
};

int64_t default_opset(const onnx::ModelProto& m) {
  for (const auto& o : m.opset_import())
    if (o.domain().empty() || o.domain() == "ai.onnx") return o.version();
  return 1;
}

}  // namespace

std::string Float32Promotion::summary() const {
  auto part = [](int n, const char* what) { return std::to_string(n) + " " + what + (n == 1 ? "" : "s"); };
  return part(inputs, "input") + ", " + part(outputs, "output") + ", " + part(tensors, "tensor") + ", " +
         part(typed_nodes, "typed node");
}

bool needs_float32_promotion(const onnx::ModelProto& model) {
  bool any = false;
  // External initializers that only Casts read are as promote_to_float32 leaves them.
  for_each_tensor(model, [&](const onnx::TensorProto& t, const TensorSite& site) {
    const bool external = t.data_location() == onnx::TensorProto::EXTERNAL && site.kind == TensorSiteKind::Initializer;
    any = any || (promoted(t.data_type()) && site.kind != TensorSiteKind::SparseIndices && !external);
  });
  for_each_graph(model, [&](const onnx::GraphProto& g, int) {
    for (const auto& t : g.initializer()) any = any || (promoted(t.data_type()) && read_by_non_cast(g, t.name()));
  });
  if (any) return true;
  const Boundary io = boundary(model.graph());
  if (!io.inputs.empty() || !io.outputs.empty()) return true;
  for_each_node(model, [&](const onnx::NodeProto& n, int) {
    const std::string_view attr = type_attribute(n);
    if (attr.empty() || io.kept_casts.count(&n)) return;
    for (const auto& a : n.attribute())
      if (a.name() == attr && a.type() == onnx::AttributeProto::INT && promoted(a.i())) any = true;
  });
  for_each_graph(model, [&](const onnx::GraphProto& g, int depth) {
    for (const auto& v : g.value_info()) any = any || has_promoted(v.type());
    if (depth == 0) return;
    for (const auto& v : g.input()) any = any || has_promoted(v.type());
    for (const auto& v : g.output()) any = any || has_promoted(v.type());
  });
  return any;
}

Float32Promotion promote_to_float32(onnx::ModelProto& model) {
  if (!needs_float32_promotion(model)) return {};
  if (default_opset(model) < 6)
    throw UnsupportedError("the model computes in float16, bfloat16 or float64 at opset " +
                           std::to_string(default_opset(model)) +
                           " (< 6, where Cast's 'to' is a string): convert it to float32 or a newer opset first");
  return Promoter(model).run();
}

}  // namespace qtool::onnxio
