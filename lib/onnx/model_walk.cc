#include "onnx/model_walk.h"

#include <onnx/onnx_pb.h>

#include <type_traits>

namespace qtool::onnxio {
namespace {

// One traversal serves the const and the mutable walk: `M` is ModelProto or const ModelProto, and the
// other proto types follow its constness.
template <class M>
struct Walker {
  static constexpr bool kConst = std::is_const_v<M>;
  template <class T>
  using Q = std::conditional_t<kConst, const T, T>;
  using Graph = Q<onnx::GraphProto>;
  using Node = Q<onnx::NodeProto>;
  using Tensor = Q<onnx::TensorProto>;
  using Sparse = Q<onnx::SparseTensorProto>;

  std::function<void(Graph&, int)> on_graph;
  std::function<void(Node&, int)> on_node;
  std::function<void(Tensor&, const TensorSite&)> on_tensor;

  static std::string node_label(const onnx::NodeProto& n, const onnx::AttributeProto& a) {
    return "node '" + n.name() + "' (" + n.op_type() + ") attribute '" + a.name() + "'";
  }

  void sparse(Sparse& s, const TensorSite& site) {
    if (!on_tensor) return;
    TensorSite v = site, i = site;
    v.kind = TensorSiteKind::SparseValues;
    v.label += " (sparse values)";
    i.kind = TensorSiteKind::SparseIndices;
    i.label += " (sparse indices)";
    on_tensor(sparse_values(s), v);
    on_tensor(sparse_indices(s), i);
  }

  void nodes(Q<google::protobuf::RepeatedPtrField<onnx::NodeProto>>& list, int depth) {
    for (auto& n : list) {
      if (on_node) on_node(n, depth);
      for (auto& a : attrs(n)) {
        if (a.has_t() && on_tensor) on_tensor(tensor_t(a), {TensorSiteKind::Attribute, &n, node_label(n, a), depth});
        for (auto& t : tensors_of(a))
          if (on_tensor) on_tensor(t, {TensorSiteKind::Attribute, &n, node_label(n, a), depth});
        if (a.has_sparse_tensor()) sparse(sparse_t(a), {TensorSiteKind::SparseValues, &n, node_label(n, a), depth});
        for (auto& s : sparse_of(a)) sparse(s, {TensorSiteKind::SparseValues, &n, node_label(n, a), depth});
        if (a.has_g()) graph(graph_g(a), depth + 1);
        for (auto& g : graphs_of(a)) graph(g, depth + 1);
      }
    }
  }

  void graph(Graph& g, int depth) {
    if (on_graph) on_graph(g, depth);
    if (on_tensor) {
      for (auto& t : inits(g))
        on_tensor(t, {TensorSiteKind::Initializer, nullptr, "initializer '" + t.name() + "'", depth});
      for (auto& s : sparse_inits(g))
        sparse(s, {TensorSiteKind::SparseValues, nullptr, "sparse initializer '" + s.values().name() + "'", depth});
    }
    nodes(graph_nodes(g), depth);
  }

  void model(M& m) {
    if (m.has_graph()) graph(main_graph(m), 0);
    for (auto& f : functions(m)) nodes(graph_nodes(f), 1);
    for (auto& ti : training(m)) {
      if (ti.has_initialization()) graph(train_init(ti), 0);
      if (ti.has_algorithm()) graph(train_algo(ti), 0);
    }
  }

  // Field accessors: the const walk reads, the mutable walk uses mutable_*().
#define QTOOL_FIELD(fn, getter)     \
  template <class P>                \
  static decltype(auto) fn(P& p) {  \
    if constexpr (kConst)           \
      return p.getter();            \
    else                            \
      return *p.mutable_##getter(); \
  }
  QTOOL_FIELD(attrs, attribute)
  QTOOL_FIELD(tensor_t, t)
  QTOOL_FIELD(tensors_of, tensors)
  QTOOL_FIELD(sparse_t, sparse_tensor)
  QTOOL_FIELD(sparse_of, sparse_tensors)
  QTOOL_FIELD(graph_g, g)
  QTOOL_FIELD(graphs_of, graphs)
  QTOOL_FIELD(inits, initializer)
  QTOOL_FIELD(sparse_inits, sparse_initializer)
  QTOOL_FIELD(graph_nodes, node)
  QTOOL_FIELD(main_graph, graph)
  QTOOL_FIELD(functions, functions)
  QTOOL_FIELD(sparse_values, values)
  QTOOL_FIELD(sparse_indices, indices)
  QTOOL_FIELD(training, training_info)
  QTOOL_FIELD(train_init, initialization)
  QTOOL_FIELD(train_algo, algorithm)
#undef QTOOL_FIELD
};

}  // namespace

void for_each_graph(const onnx::ModelProto& model, const std::function<void(const onnx::GraphProto&, int)>& fn) {
  Walker<const onnx::ModelProto> w;
  w.on_graph = fn;
  w.model(model);
}

void for_each_node(const onnx::ModelProto& model, const std::function<void(const onnx::NodeProto&, int)>& fn) {
  Walker<const onnx::ModelProto> w;
  w.on_node = fn;
  w.model(model);
}

void for_each_tensor(onnx::ModelProto& model, const std::function<void(onnx::TensorProto&, const TensorSite&)>& fn) {
  Walker<onnx::ModelProto> w;
  w.on_tensor = fn;
  w.model(model);
}

void for_each_tensor(const onnx::ModelProto& model,
                     const std::function<void(const onnx::TensorProto&, const TensorSite&)>& fn) {
  Walker<const onnx::ModelProto> w;
  w.on_tensor = fn;
  w.model(model);
}

void collect_reads(const onnx::GraphProto& g, std::set<std::string>& read) {
  for (const auto& n : g.node()) {
    for (const auto& i : n.input()) read.insert(i);
    for (const auto& a : n.attribute()) {
      if (a.has_g()) collect_reads(a.g(), read);
      for (const auto& body : a.graphs()) collect_reads(body, read);
    }
  }
}

}  // namespace qtool::onnxio
