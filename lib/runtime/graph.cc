#include "runtime/graph.h"

#include <onnx/onnx_pb.h>

#include <queue>
#include <set>
#include <unordered_set>

#include "onnx/float32_promotion.h"
#include "onnx/tensor_proto.h"
#include "runtime/conv_layout.h"
#include "runtime/fuse.h"
#include "runtime/fuse_conv.h"
#include "runtime/fuse_gelu.h"
#include "runtime/fuse_hardswish.h"
#include "runtime/fuse_matmul_epilogue.h"
#include "runtime/fuse_rmsnorm.h"

namespace qtool::runtime {
namespace {

// Names visible from a graph being prepared: its own definitions, then those of enclosing graphs.
struct Scope {
  const Scope* parent = nullptr;
  std::unordered_set<std::string> defined;
  std::unordered_map<std::string, const Tensor*> constants;

  bool visible(const std::string& n) const {
    for (const Scope* s = this; s; s = s->parent)
      if (s->defined.count(n)) return true;
    return false;
  }
  const Tensor* constant(const std::string& n) const {
    for (const Scope* s = this; s; s = s->parent) {
      if (s->defined.count(n)) {  // the innermost definition wins
        auto it = s->constants.find(n);
        return it == s->constants.end() ? nullptr : it->second;
      }
    }
    return nullptr;
  }
};

struct Unsupported {
  // "Op (domain, opset N)" -> node names
  std::map<std::string, std::vector<std::string>> ops;
};

std::string norm_domain(const std::string& d) { return d == "ai.onnx" ? std::string() : d; }

ValueDecl decl_from(const onnx::ValueInfoProto& vi) {
  ValueDecl d;
  d.name = vi.name();
  if (vi.has_type() && vi.type().has_sequence_type()) {
    const auto& elem = vi.type().sequence_type().elem_type();
    d.sequence_of = DType::Undefined;
    if (elem.has_tensor_type()) {
      if (const DTypeInfo* info = dtype_info_or_null(elem.tensor_type().elem_type()))
        d.sequence_of = info->dtype;
      else
        throw_unknown_dtype(elem.tensor_type().elem_type(), "value '" + vi.name() + "'");
    } else if (elem.value_case() != onnx::TypeProto::VALUE_NOT_SET) {
      throw UnsupportedError("value '" + vi.name() +
                             "' is a sequence of sequences, maps or optionals; qtool runs sequences of tensors only");
    }
    return d;
  }
  if (vi.has_type() && vi.type().has_tensor_type()) {
    const auto& tt = vi.type().tensor_type();
    if (const DTypeInfo* info = dtype_info_or_null(tt.elem_type()))
      d.dtype = info->dtype;
    else
      throw_unknown_dtype(tt.elem_type(), "value '" + vi.name() + "'");
    if (tt.has_shape()) {
      std::vector<DeclaredDim> dims;
      for (const auto& dim : tt.shape().dim()) {
        DeclaredDim dd;
        if (dim.has_dim_value()) dd.value = dim.dim_value();
        if (dim.has_dim_param()) dd.param = dim.dim_param();
        dims.push_back(dd);
      }
      d.shape = std::move(dims);
    }
  }
  return d;
}

class Builder {
 public:
  Builder(const std::map<std::string, int>& opsets, Unsupported& unsupported, const PrepareOptions& options)
      : opsets_(opsets), unsupported_(unsupported), options_(options) {}

  std::shared_ptr<Graph> build(const onnx::GraphProto& gp, const Scope* parent, bool is_main,
                               std::vector<std::string>* captured_out);

 private:
  Attribute decode_attr(const onnx::AttributeProto& ap, const NodeInfo& node, const Scope& scope,
                        std::vector<std::string>& node_captures);

  const std::map<std::string, int>& opsets_;
  Unsupported& unsupported_;
  const PrepareOptions& options_;
};

Attribute Builder::decode_attr(const onnx::AttributeProto& ap, const NodeInfo& node, const Scope& scope,
                               std::vector<std::string>& node_captures) {
  using AP = onnx::AttributeProto;
  Attribute a;
  auto type = ap.type();
  if (type == AP::UNDEFINED) {  // old exporters leave the type unset: infer it from the filled field
    if (ap.has_g())
      type = AP::GRAPH;
    else if (ap.has_t())
      type = AP::TENSOR;
    else if (ap.has_s())
      type = AP::STRING;
    else if (ap.has_f())
      type = AP::FLOAT;
    else if (ap.has_i())
      type = AP::INT;
    else if (ap.floats_size())
      type = AP::FLOATS;
    else if (ap.ints_size())
      type = AP::INTS;
    else if (ap.strings_size())
      type = AP::STRINGS;
  }
  switch (type) {
    case AP::FLOAT:
      a.kind = Attribute::Kind::Float;
      a.f = ap.f();
      break;
    case AP::INT:
      a.kind = Attribute::Kind::Int;
      a.i = ap.i();
      break;
    case AP::STRING:
      a.kind = Attribute::Kind::String;
      a.s = ap.s();
      break;
    case AP::FLOATS:
      a.kind = Attribute::Kind::Floats;
      a.floats.assign(ap.floats().begin(), ap.floats().end());
      break;
    case AP::INTS:
      a.kind = Attribute::Kind::Ints;
      a.ints.assign(ap.ints().begin(), ap.ints().end());
      break;
    case AP::STRINGS:
      a.kind = Attribute::Kind::Strings;
      a.strings.assign(ap.strings().begin(), ap.strings().end());
      break;
    case AP::TENSOR:
      a.kind = Attribute::Kind::Tensor;
      a.t = onnxio::tensor_from_proto(ap.t(), node.label() + " attribute '" + ap.name() + "'");
      break;
    case AP::GRAPH: {
      a.kind = Attribute::Kind::Graph;
      std::vector<std::string> caps;
      a.g = build(ap.g(), &scope, false, &caps);
      for (auto& c : caps) node_captures.push_back(std::move(c));
      break;
    }
    default:
      throw UnsupportedError(node.label() + ": attribute '" + ap.name() + "' has type " + AP::AttributeType_Name(type) +
                             ", which qtool does not support");
  }
  return a;
}

// Folds a Constant node into a tensor (value, value_float(s), value_int(s)).
Tensor constant_value(const onnx::NodeProto& np, const std::string& label) {
  for (const auto& ap : np.attribute()) {
    const std::string& n = ap.name();
    if (n == "value") return onnxio::tensor_from_proto(ap.t(), label + " value");
    if (n == "value_float") return Tensor::scalar<float>(ap.f());
    if (n == "value_int") return Tensor::scalar<int64_t>(ap.i());
    if (n == "value_floats") {
      std::vector<float> v(ap.floats().begin(), ap.floats().end());
      return Tensor::from_vector<float>({static_cast<int64_t>(v.size())}, v);
    }
    if (n == "value_ints") {
      std::vector<int64_t> v(ap.ints().begin(), ap.ints().end());
      return Tensor::from_vector<int64_t>({static_cast<int64_t>(v.size())}, v);
    }
    throw UnsupportedError(label + ": Constant attribute '" + n + "' (string or sparse constants) is not supported");
  }
  throw BadInputError(label + ": Constant node has no value attribute");
}

std::shared_ptr<Graph> Builder::build(const onnx::GraphProto& gp, const Scope* parent, bool is_main,
                                      std::vector<std::string>* captured_out) {
  auto g = std::make_shared<Graph>();
  g->name = gp.name();
  g->opsets = opsets_;
  auto intern = [&](const std::string& n) {
    auto [it, inserted] = g->value_ids.emplace(n, static_cast<int>(g->value_names.size()));
    if (inserted) g->value_names.push_back(n);
    return it->second;
  };

  Scope scope;
  scope.parent = parent;

  // Initializers.
  std::unordered_set<std::string> init_names;
  for (const auto& tp : gp.initializer()) {
    const int id = intern(tp.name());
    g->constants[id] = onnxio::tensor_from_proto(tp, "initializer '" + tp.name() + "'");
    init_names.insert(tp.name());
    scope.defined.insert(tp.name());
  }
  // Inputs.
  for (const auto& vi : gp.input()) {
    ValueDecl d = decl_from(vi);
    d.id = intern(d.name);
    scope.defined.insert(d.name);
    if (is_main && init_names.count(d.name))
      g->optional_inputs.push_back(std::move(d));
    else
      g->inputs.push_back(std::move(d));
  }

  // Node names, Constant folding, the set of names this graph defines.
  struct Pending {
    const onnx::NodeProto* proto;
    std::string name;
  };
  std::vector<Pending> pending;
  std::map<std::string, int> name_count;
  for (int i = 0; i < gp.node_size(); ++i) {
    const auto& np = gp.node(i);
    std::string name = np.name().empty() ? np.op_type() + "_" + std::to_string(i) : np.name();
    const std::string label = np.op_type() + " '" + name + "'";
    for (const auto& o : np.output())
      if (!o.empty()) {
        if (scope.defined.count(o) && !parent)
          throw BadInputError(label + ": output '" + o + "' is already defined by another node, input or initializer");
        scope.defined.insert(o);
      }
    if (np.op_type() == "Constant" && norm_domain(np.domain()).empty()) {
      if (np.output_size() != 1) throw BadInputError(label + ": Constant must have exactly one output");
      const int id = intern(np.output(0));
      g->constants[id] = constant_value(np, label);
      continue;
    }
    pending.push_back({&np, std::move(name)});
  }
  // Initializers also listed as inputs may be fed at run time: kernels must not treat them as constant.
  for (auto& [id, t] : g->constants) scope.constants[g->value_names[id]] = &t;
  for (const auto& d : g->optional_inputs) scope.constants.erase(d.name);

  // Decode nodes (subgraphs need the scope complete).
  struct Decoded {
    NodeInfo info;
    std::vector<std::string> captures;
  };
  std::vector<Decoded> decoded(pending.size());
  for (size_t k = 0; k < pending.size(); ++k) {
    const auto& np = *pending[k].proto;
    NodeInfo& info = decoded[k].info;
    info.name = pending[k].name;
    info.op_type = np.op_type();
    info.domain = norm_domain(np.domain());
    info.inputs.assign(np.input().begin(), np.input().end());
    info.outputs.assign(np.output().begin(), np.output().end());
    auto op = opsets_.find(info.domain);
    info.opset = op == opsets_.end() ? 0 : op->second;
    for (const auto& ap : np.attribute())
      info.attrs.values[ap.name()] = decode_attr(ap, info, scope, decoded[k].captures);
    for (const auto& in : info.inputs) {
      if (in.empty()) continue;
      if (!scope.visible(in))
        throw BadInputError(info.label() + ": input '" + in +
                            "' is not produced by any node, initializer or graph input");
    }
    for (const auto& in : info.inputs) info.const_inputs.push_back(in.empty() ? nullptr : scope.constant(in));
  }

  // Topological sort (stable: among ready nodes, the earliest in the file runs first).
  std::unordered_map<std::string, size_t> producer;
  for (size_t k = 0; k < decoded.size(); ++k)
    for (const auto& o : decoded[k].info.outputs)
      if (!o.empty()) producer[o] = k;
  std::vector<std::vector<size_t>> consumers(decoded.size());
  std::vector<int> indegree(decoded.size(), 0);
  for (size_t k = 0; k < decoded.size(); ++k) {
    std::set<size_t> deps;
    auto add = [&](const std::string& n) {
      auto it = producer.find(n);
      if (it != producer.end()) deps.insert(it->second);
    };
    for (const auto& in : decoded[k].info.inputs) add(in);
    for (const auto& c : decoded[k].captures) add(c);
    for (size_t d : deps) {
      consumers[d].push_back(k);
      ++indegree[k];
    }
  }
  std::priority_queue<size_t, std::vector<size_t>, std::greater<>> ready;
  for (size_t k = 0; k < decoded.size(); ++k)
    if (indegree[k] == 0) ready.push(k);
  std::vector<size_t> order;
  while (!ready.empty()) {
    const size_t k = ready.top();
    ready.pop();
    order.push_back(k);
    for (size_t c : consumers[k])
      if (--indegree[c] == 0) ready.push(c);
  }
  if (order.size() != decoded.size()) {
    for (size_t k = 0; k < decoded.size(); ++k)
      if (indegree[k] > 0)
        throw BadInputError("graph '" + gp.name() + "' has a cycle through node " + decoded[k].info.label());
  }

  // Value ids, captured names, kernels.
  std::unordered_set<std::string> captured_set;
  auto use = [&](const std::string& n) {
    const int id = intern(n);
    bool local = g->constants.count(id) || producer.count(n);
    if (!local)
      for (const auto& d : g->inputs) local = local || d.name == n;
    if (!local)
      for (const auto& d : g->optional_inputs) local = local || d.name == n;
    if (!local && captured_set.insert(n).second) g->captured.emplace_back(id, n);
    return id;
  };
  g->nodes.reserve(order.size());
  for (size_t k : order) {
    GraphNode node;
    node.info = std::move(decoded[k].info);
    for (const auto& in : node.info.inputs) node.inputs.push_back(in.empty() ? -1 : use(in));
    for (const auto& out : node.info.outputs) node.outputs.push_back(out.empty() ? -1 : intern(out));
    std::set<std::string> caps(decoded[k].captures.begin(), decoded[k].captures.end());
    for (const auto& c : caps) {
      if (!scope.visible(c))
        throw BadInputError(node.info.label() + ": its subgraph uses '" + c + "', which no enclosing scope defines");
      node.implicit_inputs.push_back(use(c));
    }
    g->nodes.push_back(std::move(node));
  }
  for (const auto& vi : gp.output()) {
    ValueDecl d = decl_from(vi);
    if (!scope.visible(d.name))
      throw BadInputError("graph output '" + d.name + "' is not produced by any node, initializer or input");
    d.id = use(d.name);
    g->outputs.push_back(std::move(d));
  }

  if (is_main && options_.fuse) {
    fuse_hard_swish(*g, options_.keep);  // first: a HardSwish it forms can then fold into the Conv before it
    fuse_gelu(*g, options_.keep);
    fuse_rmsnorm(*g, options_.keep);
    fold_pad_into_conv(*g, options_.keep);
    fold_conv_affine(*g, options_.keep);  // before the activation pass: an activation after the affine folds in too
    // The GPU MatMul (cuda_kernels.cu) has no scale or bias epilogue: only CPU sessions fold them.
    if (options_.device == device::DeviceKind::Cpu) fuse_matmul_epilogue(*g, options_.keep);
    // An activation after a fused bias folds in too.
    fuse_activations(*g, options_.keep, options_.device == device::DeviceKind::Cpu);
    // The GPU Conv has no per-channel epilogue either.
    if (options_.device == device::DeviceKind::Cpu) fuse_conv_epilogue(*g, options_.keep);
    // Last: it decides on the final nodes which tensors between oneDNN Convs stay in its blocked layout.
    if (options_.device == device::DeviceKind::Cpu) keep_conv_layout_blocked(*g, options_.keep);
  }

  g->use_counts.assign(g->value_names.size(), 0);
  g->is_output.assign(g->value_names.size(), false);
  for (const auto& n : g->nodes) {
    for (int id : n.inputs)
      if (id >= 0) ++g->use_counts[id];
    for (int id : n.implicit_inputs) ++g->use_counts[id];
  }
  for (const auto& o : g->outputs) g->is_output[o.id] = true;

  // Kernels, after the node vector is final (factories see a NodeInfo that stays put).
  for (auto& n : g->nodes) {
    const KernelDef* def = find_kernel(n.info.domain, n.info.op_type, n.info.opset, options_.device);
    if (def && options_.device == device::DeviceKind::Cuda && !is_gpu_row(def))
      log_cpu_fallback(n.info, "no GPU kernel");
    if (!def) {
      const std::string key = n.info.op_type +
                              (n.info.domain.empty() ? std::string() : " (domain " + n.info.domain + ")") +
                              (n.info.opset ? " at opset " + std::to_string(n.info.opset) : " (domain not imported)");
      unsupported_.ops[key].push_back(n.info.name);
      continue;
    }
    n.sequences = def->sequences;
    try {
      n.kernel = def->make(n.info);
    } catch (const Error& e) {
      const std::string what = e.what(), label = n.info.label();
      if (what.rfind(label, 0) == 0) throw;
      throw Error(e.kind(), label + ": " + what);
    }
  }
  if (captured_out)
    for (const auto& [id, name] : g->captured) captured_out->push_back(name);
  return g;
}

}  // namespace

int Graph::id_of(const std::string& value_name) const {
  auto it = value_ids.find(value_name);
  return it == value_ids.end() ? -1 : it->second;
}

size_t Graph::total_nodes() const {
  size_t n = nodes.size();
  for (const auto& node : nodes)
    for (const auto& [name, a] : node.info.attrs.values)
      if (a.kind == Attribute::Kind::Graph && a.g) n += a.g->total_nodes();
  return n;
}

std::shared_ptr<const Graph> Graph::from_model(const onnx::ModelProto& model, const PrepareOptions& options) {
  if (!model.has_graph()) throw BadInputError("the model has no graph");
  if (onnxio::needs_float32_promotion(model)) {  // runs as float32 behind casts (onnx/float32_promotion.h)
    onnx::ModelProto wide = model;
    onnxio::promote_to_float32(wide);
    return from_model(wide, options);
  }
  std::map<std::string, int> opsets;
  for (const auto& op : model.opset_import()) opsets[norm_domain(op.domain())] = static_cast<int>(op.version());
  if (model.opset_import_size() == 0) opsets[""] = 1;  // IR 1/2 models without opset_import
  Unsupported unsupported;
  Builder builder(opsets, unsupported, options);
  auto g = builder.build(model.graph(), nullptr, true, nullptr);
  if (!unsupported.ops.empty()) {
    std::string msg = "the model uses operators qtool's interpreter does not support:";
    size_t total = 0;
    for (const auto& [op, nodes] : unsupported.ops) {
      msg += " " + op + " (node" + (nodes.size() > 1 ? "s " : " ");
      for (size_t i = 0; i < nodes.size() && i < 3; ++i) msg += (i ? ", '" : "'") + nodes[i] + "'";
      if (nodes.size() > 3) msg += ", +" + std::to_string(nodes.size() - 3) + " more";
      msg += ");";
      total += nodes.size();
    }
    msg.back() = '.';
    msg += " " + std::to_string(total) + " node(s) in all";
    throw UnsupportedError(msg);
  }
  if (!g->captured.empty())
    throw BadInputError("the main graph uses '" + g->captured.front().second + "', which nothing defines");
  return g;
}

}  // namespace qtool::runtime
