// Walking every graph and every tensor of a model, subgraphs included.
//
// A model keeps tensors in more places than graph.initializer: Constant nodes (`value`), any TENSOR /
// TENSORS / SPARSE_TENSOR attribute, sparse initializers, and the bodies of If/Loop/Scan (GRAPH and
// GRAPHS attributes), functions and training graphs, recursively. Code that must see every tensor (external
// data resolution, parameter counts) or every node (op counts) walks with these functions instead of
// looping over graph.initializer or graph.node.
#pragma once

#include <functional>
#include <set>
#include <string>

namespace onnx {
class ModelProto;
class GraphProto;
class NodeProto;
class TensorProto;
}  // namespace onnx

namespace qtool::onnxio {

enum class TensorSiteKind {
  Initializer,    // graph.initializer (of the main graph or a subgraph)
  Attribute,      // a node attribute of type TENSOR / TENSORS (e.g. Constant's `value`)
  SparseValues,   // values of a sparse initializer or SPARSE_TENSOR attribute
  SparseIndices,  // indices of a sparse initializer or SPARSE_TENSOR attribute
};
inline bool is_sparse(TensorSiteKind k) {
  return k == TensorSiteKind::SparseValues || k == TensorSiteKind::SparseIndices;
}

struct TensorSite {
  TensorSiteKind kind;
  const onnx::NodeProto* node = nullptr;  // the node owning the attribute (Attribute, sparse attributes)
  std::string label;                      // for messages: "initializer 'w'", "node 'c1' (Constant) attribute 'value'"
  int depth = 0;                          // 0 = main graph, 1 = inside one subgraph, ...
};

// Calls fn for every graph: the main graph first, then subgraphs depth-first in node order, then
// function bodies' subgraphs and training graphs. `depth` counts nesting (main graph = 0).
void for_each_graph(const onnx::ModelProto& model, const std::function<void(const onnx::GraphProto&, int depth)>& fn);

// Calls fn for every node of every graph (subgraphs and function bodies included), in a fixed order.
void for_each_node(const onnx::ModelProto& model, const std::function<void(const onnx::NodeProto&, int depth)>& fn);

// Calls fn for every TensorProto stored in the model, in a fixed, deterministic order.
void for_each_tensor(onnx::ModelProto& model, const std::function<void(onnx::TensorProto&, const TensorSite&)>& fn);
void for_each_tensor(const onnx::ModelProto& model,
                     const std::function<void(const onnx::TensorProto&, const TensorSite&)>& fn);

// Adds to `read` every name a node of g reads, in g's If/Loop/Scan bodies too (recursively).
void collect_reads(const onnx::GraphProto& g, std::set<std::string>& read);

}  // namespace qtool::onnxio
