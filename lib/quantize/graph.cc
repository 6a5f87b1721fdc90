#include "quantize/graph.h"

#include <algorithm>

#include "core/error.h"
#include "onnx/model_walk.h"
#include "onnx/spill.h"
#include "onnx/tensor_proto.h"

namespace qtool::quantize {
namespace {

// Every name the graphs nested in `g` (not `g` itself) define or read: new names must not clash with them.
void collect_nested_names(const onnx::GraphProto& g, bool nested, std::set<std::string>& out) {
  if (nested) {
    for (const auto& t : g.initializer()) out.insert(t.name());
    for (const auto& v : g.input()) out.insert(v.name());
    for (const auto& v : g.output()) out.insert(v.name());
  }
  for (const auto& n : g.node()) {
    if (nested) {
      out.insert(n.name());
      for (const auto& o : n.output()) out.insert(o);
      for (const auto& in : n.input()) out.insert(in);
    }
    for (const auto& a : n.attribute()) {
      if (a.has_g()) collect_nested_names(a.g(), true, out);
      for (const auto& sg : a.graphs()) collect_nested_names(sg, true, out);
    }
  }
}

}  // namespace

Graph::Graph(onnx::ModelProto& model) : model_(model), graph_(*model.mutable_graph()) { reindex(); }

Graph::Graph(onnx::ModelProto& model, onnx::GraphProto& body, const Graph& outer)
    : model_(model), graph_(body), outer_(&outer) {
  reindex();
}

int64_t Graph::opset() const {
  for (const auto& o : model_.opset_import())
    if (o.domain().empty() || o.domain() == "ai.onnx") return o.version();
  return 1;
}

void Graph::set_opset(int64_t v) {
  for (auto& o : *model_.mutable_opset_import())
    if (o.domain().empty() || o.domain() == "ai.onnx") {
      o.set_version(v);
      return;
    }
  auto* o = model_.add_opset_import();
  o->set_domain("");
  o->set_version(v);
}

void Graph::reindex() {
  producer_.clear();
  consumers_.clear();
  initializers_.clear();
  graph_outputs_.clear();
  graph_inputs_.clear();
  subgraph_reads_.clear();
  used_names_.clear();
  next_suffix_.clear();  // names handed out but no longer in the graph are free again
  const auto& g = proto();
  for (int i = 0; i < g.initializer_size(); ++i) {
    initializers_[g.initializer(i).name()] = i;
    used_names_.insert(g.initializer(i).name());
  }
  for (const auto& o : g.output()) graph_outputs_.insert(o.name()), used_names_.insert(o.name());
  for (const auto& in : g.input()) graph_inputs_.insert(in.name()), used_names_.insert(in.name());
  for (int i = 0; i < g.node_size(); ++i) {
    const auto& n = g.node(i);
    used_names_.insert(n.name());
    if (removed_.count(i)) continue;
    for (const auto& o : n.output())
      if (!o.empty()) producer_[o] = i, used_names_.insert(o);
    for (const auto& in : n.input()) {
      if (in.empty()) continue;
      auto& c = consumers_[in];
      if (c.empty() || c.back() != i) c.push_back(i);
    }
    for (const auto& a : n.attribute()) {
      if (a.has_g()) onnxio::collect_reads(a.g(), subgraph_reads_);
      for (const auto& sg : a.graphs()) onnxio::collect_reads(sg, subgraph_reads_);
    }
  }
  // What a Cast turns into a graph output is the model's answer too (a float16 model's output behind the Cast
  // float32_promotion.h adds, a mixed-precision model's float32 output): it stays as unquantized as the output.
  for (int i = 0; i < g.node_size(); ++i) {
    const auto& n = g.node(i);
    if (!removed_.count(i) && n.op_type() == "Cast" && n.domain().empty() && n.input_size() == 1 &&
        n.output_size() == 1 && graph_outputs_.count(n.output(0)))
      graph_outputs_.insert(n.input(0));
  }
  for (const auto& s : subgraph_reads_) used_names_.insert(s);
  for (const auto& vi : g.value_info()) used_names_.insert(vi.name());
  // Names are unique across the model: those of every other scope are taken too (a model without subgraphs
  // adds nothing here).
  collect_nested_names(model_.graph(), &g != &model_.graph(), used_names_);
}

void Graph::index_node(int i) {
  const auto& n = node(i);
  used_names_.insert(n.name());
  for (const auto& o : n.output())
    if (!o.empty()) producer_[o] = i, used_names_.insert(o);
  for (const auto& in : n.input()) {
    if (in.empty()) continue;
    auto& c = consumers_[in];
    if (auto it = std::lower_bound(c.begin(), c.end(), i); it == c.end() || *it != i) c.insert(it, i);
  }
}

void Graph::unlink_input(int i, const std::string& tensor) {
  for (const auto& in : node(i).input())
    if (in == tensor) return;  // still read at another position
  auto it = consumers_.find(tensor);
  if (it == consumers_.end()) return;
  auto& c = it->second;
  if (auto at = std::lower_bound(c.begin(), c.end(), i); at != c.end() && *at == i) c.erase(at);
  if (c.empty()) consumers_.erase(it);
}

void Graph::unlink_output(int i, const std::string& tensor) {
  if (auto it = producer_.find(tensor); it != producer_.end() && it->second == i) producer_.erase(it);
}

void Graph::unindex_node(int i) {
  const auto& n = node(i);
  for (const auto& o : n.output()) unlink_output(i, o);
  for (const auto& in : n.input()) {
    auto it = consumers_.find(in);
    if (it == consumers_.end()) continue;
    auto& c = it->second;
    if (auto at = std::lower_bound(c.begin(), c.end(), i); at != c.end() && *at == i) c.erase(at);
    if (c.empty()) consumers_.erase(it);
  }
}

void Graph::set_input(int i, int k, const std::string& tensor) {
  auto& n = node(i);
  if (k == n.input_size()) {
    n.add_input(tensor);
  } else {
    const std::string old = n.input(k);
    n.set_input(k, tensor);
    if (!old.empty()) unlink_input(i, old);
  }
  index_node(i);
}

void Graph::set_inputs(int i, const std::vector<std::string>& tensors) {
  replace_names(i, *node(i).mutable_input(), tensors);
}

void Graph::set_output(int i, int k, const std::string& tensor) {
  auto& n = node(i);
  if (k == n.output_size()) {
    n.add_output(tensor);
  } else {
    unlink_output(i, n.output(k));
    n.set_output(k, tensor);
  }
  index_node(i);
}

void Graph::set_outputs(int i, const std::vector<std::string>& tensors) {
  replace_names(i, *node(i).mutable_output(), tensors);
}

void Graph::replace_names(int i, google::protobuf::RepeatedPtrField<std::string>& field,
                          const std::vector<std::string>& tensors) {
  unindex_node(i);
  field.Clear();
  for (const auto& t : tensors) *field.Add() = t;
  index_node(i);
}

void Graph::remove_node(int i) {
  unindex_node(i);
  removed_.insert(i);
}

int Graph::producer(const std::string& tensor) const {
  auto it = producer_.find(tensor);
  return it == producer_.end() ? -1 : it->second;
}

const std::vector<int>& Graph::consumers(const std::string& tensor) const {
  static const std::vector<int> kNone;
  auto it = consumers_.find(tensor);
  return it == consumers_.end() ? kNone : it->second;
}

const onnx::TensorProto* Graph::initializer(const std::string& name) const {
  auto it = initializers_.find(name);
  if (it != initializers_.end()) return &proto().initializer(it->second);
  if (producer_.count(name) || graph_inputs_.count(name)) return nullptr;  // defined here: shadows the outer one
  return outer_ ? outer_->initializer(name) : nullptr;
}

Tensor Graph::initializer_tensor(const std::string& name) const {
  const auto* t = initializer(name);
  if (!t) throw InternalError("no initializer named '" + name + "'");
  return onnxio::tensor_from_proto(*t, "initializer '" + name + "'");
}

std::optional<float> Graph::scalar_float_initializer(const std::string& name) const {
  if (!is_float_initializer(name)) return std::nullopt;
  const Tensor v = initializer_tensor(name);
  if (v.numel() != 1) return std::nullopt;
  return v.data<float>()[0];
}

void Graph::set_initializer(const std::string& name, const Tensor& t) {
  auto it = initializers_.find(name);
  onnx::TensorProto* p;
  if (it != initializers_.end()) {
    p = proto().mutable_initializer(it->second);
    p->Clear();
  } else {
    p = proto().add_initializer();
    initializers_[name] = proto().initializer_size() - 1;
  }
  if (auto* spill = onnxio::SpillFile::active(); spill && static_cast<int64_t>(t.nbytes()) >= onnxio::kSpillMinBytes)
    spill->store(t, name, *p);  // big models: the tensor waits on disk for save_model (onnx/spill.h)
  else
    onnxio::tensor_to_proto(t, name, *p);
  used_names_.insert(name);
}

void Graph::set_initializer(const std::string& name, onnx::TensorProto t) {
  t.set_name(name);
  if (auto it = initializers_.find(name); it != initializers_.end()) {
    proto().mutable_initializer(it->second)->Swap(&t);
  } else {
    proto().add_initializer()->Swap(&t);
    initializers_[name] = proto().initializer_size() - 1;
  }
  used_names_.insert(name);
}

void Graph::remove_initializers(const std::set<std::string>& names) {
  if (names.empty()) return;
  auto* inits = proto().mutable_initializer();
  int kept = 0;
  for (int i = 0; i < inits->size(); ++i) {
    if (names.count(inits->Get(i).name())) continue;
    if (kept != i) inits->SwapElements(kept, i);
    ++kept;
  }
  inits->DeleteSubrange(kept, inits->size() - kept);
  initializers_.clear();
  for (int i = 0; i < inits->size(); ++i) initializers_[inits->Get(i).name()] = i;
}

std::string Graph::unique_name(const std::string& base) {
  // Probing resumes after the last suffix handed out for this base (used_names_ only grows until the next
  // reindex(), which forgets these): asking 20,000 times for "c_reciprocal" probed c_reciprocal, c_reciprocal_1,
  // ... from the start each time (quadratic). Same names as probing from the start.
  int& k = next_suffix_[base];
  std::string name = k == 0 ? base : base + "_" + std::to_string(k);
  while (used_names_.count(name)) name = base + "_" + std::to_string(++k);
  ++k;
  used_names_.insert(name);
  return name;
}

void Graph::compact() {
  if (removed_.empty() && inserted_.empty()) return;
  auto* nodes = proto().mutable_node();
  google::protobuf::RepeatedPtrField<onnx::NodeProto> kept;
  for (int i = 0; i < nodes->size(); ++i) {
    if (auto it = inserted_.find(i); it != inserted_.end())
      for (auto& n : it->second) kept.Add()->Swap(&n);
    if (!removed_.count(i)) kept.Add()->Swap(nodes->Mutable(i));
  }
  if (auto it = inserted_.find(nodes->size()); it != inserted_.end())
    for (auto& n : it->second) kept.Add()->Swap(&n);
  nodes->Swap(&kept);
  removed_.clear();
  inserted_.clear();
  reindex();
}

const onnx::AttributeProto* find_attr(const onnx::NodeProto& n, const std::string& name) {
  for (const auto& a : n.attribute())
    if (a.name() == name) return &a;
  return nullptr;
}

int64_t attr_int(const onnx::NodeProto& n, const std::string& name, int64_t def) {
  const auto* a = find_attr(n, name);
  return a ? a->i() : def;
}

float attr_float(const onnx::NodeProto& n, const std::string& name, float def) {
  const auto* a = find_attr(n, name);
  return a ? a->f() : def;
}

std::vector<int64_t> attr_ints(const onnx::NodeProto& n, const std::string& name) {
  const auto* a = find_attr(n, name);
  if (!a) return {};
  return {a->ints().begin(), a->ints().end()};
}

std::string attr_string(const onnx::NodeProto& n, const std::string& name, const std::string& def) {
  const auto* a = find_attr(n, name);
  return a ? a->s() : def;
}

void set_attr_int(onnx::NodeProto& n, const std::string& name, int64_t v) {
  for (auto& a : *n.mutable_attribute())
    if (a.name() == name) {
      a.set_i(v);
      return;
    }
  auto* a = n.add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(v);
}

void remove_attr(onnx::NodeProto& n, const std::string& name) {
  auto* attrs = n.mutable_attribute();
  for (int i = 0; i < attrs->size(); ++i)
    if (attrs->Get(i).name() == name) {
      attrs->DeleteSubrange(i, 1);
      return;
    }
}

std::string describe(const onnx::NodeProto& n) {
  return n.op_type() + " '" + (n.name().empty() ? (n.output_size() ? n.output(0) : std::string("?")) : n.name()) + "'";
}

}  // namespace qtool::quantize
